"""Two runs sharing the machine against one alone (``scorebayes bench threads``).

One job is a default fit and ``sample(2000)`` of a suite model (``ScoreLangevin(prior,
simulator, threads=k)``, check included) in a fresh process. For each ``threads`` setting the
benchmark times, in rounds that alternate the layouts so that drift in the machine's speed hits
them alike:

- ``alone``: one job on the idle machine;
- ``side by side``: two jobs started together (each is timed from its own start to its end).

It reports each layout's median wall seconds and the slowdown ``side by side / alone`` of the same
setting: 2.0 is what two jobs that each need every core cost when they share the cores fairly; far
above 2 means the threads fight (spinning waits, oversubscription). ``threads=0`` is the default
(torch's thread count: the cores this process may use).

    scorebayes bench threads [--model exponential_rate] [--threads 0,1] [--rounds 3]

Writes ``benchmarks/results/threads.json`` (``--out`` elsewhere) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

from _suite_common import model_names, observed, write_json

from scorebayes.models.suite import SUITE


def job(model_name: str, threads: int) -> None:
    """One default fit and sample; prints ``{"seconds": ..., "threads": ..., "verdict": ...}`` as JSON."""
    from scorebayes import ScoreLangevin

    model = SUITE[model_name]()
    x_obs = observed(model, 0)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ScoreLangevin(model.prior, model.simulator, seed=0, progress=False, threads=threads or None)
        posterior = est.fit(x_obs).sample(2000)
    print(json.dumps({"seconds": time.perf_counter() - start, "threads": threads or "default",
                      "verdict": posterior.info["check"]["verdict"]}))


def launch(model_name: str, threads: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    return subprocess.Popen([sys.executable, __file__, "--job", model_name, str(threads)],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=Path(__file__).parent)


def timed(model_name: str, threads: int, copies: int) -> list[float]:
    """Start ``copies`` jobs together; their own wall seconds."""
    runs = [launch(model_name, threads) for _ in range(copies)]
    out = []
    for run in runs:
        stdout, _ = run.communicate()
        if run.returncode:
            raise RuntimeError(f"a job with threads={threads} failed (exit {run.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1])["seconds"])
    return out


def table(rows: list[dict]) -> str:
    lines = ["| threads | alone: median s (min-max) | side by side: median s (min-max) | slowdown |",
             "|---|---|---|---|"]
    for r in rows:
        a, b = r["alone"], r["side_by_side"]
        lines.append(f"| {r['threads'] or 'default (' + str(os.cpu_count()) + ')'} | "
                     f"{statistics.median(a):.1f} ({min(a):.1f}-{max(a):.1f}) | "
                     f"{statistics.median(b):.1f} ({min(b):.1f}-{max(b):.1f}) | {r['slowdown']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="exponential_rate", help="a suite model")
    parser.add_argument("--threads", default="0,1", help="comma-separated settings; 0: the default")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/threads.json")
    args = parser.parse_args(argv)
    (model_name,) = model_names(parser, args.model)
    settings = [int(t) for t in args.threads.split(",")]
    if any(t < 0 for t in settings) or args.rounds < 1:
        parser.error("--threads must be integers >= 0 and --rounds >= 1")
    times = {(t, layout): [] for t in settings for layout in ("alone", "side_by_side")}
    for round_ in range(args.rounds):
        for t in settings:
            times[t, "alone"] += timed(model_name, t, 1)
            times[t, "side_by_side"] += timed(model_name, t, 2)
            print(f"round {round_}: threads={t} alone {times[t, 'alone'][-1]:.1f} s, side by side "
                  f"{times[t, 'side_by_side'][-2]:.1f} / {times[t, 'side_by_side'][-1]:.1f} s", flush=True)
    rows = [{"threads": t, "alone": times[t, "alone"], "side_by_side": times[t, "side_by_side"],
             "slowdown": statistics.median(times[t, "side_by_side"]) / statistics.median(times[t, "alone"])}
            for t in settings]
    write_json(args.out, rows, model=model_name, rounds=args.rounds, cpus=os.cpu_count())
    print(table(rows))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--job":
        job(sys.argv[2], int(sys.argv[3]))
    else:
        main()
