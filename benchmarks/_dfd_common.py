"""Shared helpers of the DFD-Bayes benchmarks: arguments, timing, result files, plotting."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default: small scale)")
    parser.add_argument("--full", action="store_true", help="the paper's scale (slow)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    return args


def machine() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__, "platform": platform.platform(),
            "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()}


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


def write_results(name: str, args: argparse.Namespace, seconds: float, metrics: dict, notes: list[str],
                  figures: list[str]) -> None:
    """Write results/<name>.json and .md (command, machine, seconds, metrics, notes)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = "scorebayes bench " + name.replace("_", "-") + " " + " ".join(sys.argv[1:])
    record = {"benchmark": name, "command": command.strip(), "scale": "full" if args.full else "small",
              "seed": args.seed, "seconds": round(seconds, 2), "machine": machine(), "metrics": metrics,
              "notes": notes, "figures": figures}
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2, default=float))
    lines = [f"# {name}", "", f"Command: `{record['command']}`  ", f"Scale: {record['scale']}, seed {args.seed}, "
             f"total {seconds:.1f} s  ", f"Machine: {record['machine']}", "", "## Metrics", "", "```",
             json.dumps(metrics, indent=2, default=float), "```", "", "## Notes", ""]
    lines += [f"- {n}" for n in notes]
    lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
