"""Shared helpers of the score-based MH benchmarks (smh-*): metrics, timing, result files.

Metrics (METHODS.md V.C6): W1 and W2 by exact optimal transport (POT ``ot.emd2``) between
equal-size subsamples, averaged over a few draws; W2 is reported squared (the paper's scale)
and unsquared; MMD^2 with a Gaussian kernel, median-heuristic bandwidth, unbiased estimator.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

RESULTS = Path(__file__).resolve().parent / "results"


def wasserstein(x: np.ndarray, y: np.ndarray, *, num: int = 2000, reps: int = 3,
                seed: int = 0) -> dict[str, float]:
    """W1, W2^2 and W2 between samples ``x [n, d]`` and ``y [m, d]`` (subsamples of ``num``)."""
    import ot

    rng = np.random.default_rng(seed)
    w1, w2sq = [], []
    for _ in range(reps):
        a = x[rng.choice(len(x), size=min(num, len(x)), replace=False)]
        b = y[rng.choice(len(y), size=min(num, len(y)), replace=False)]
        cost = ot.dist(a, b, metric="euclidean")
        wa, wb = np.full(len(a), 1 / len(a)), np.full(len(b), 1 / len(b))
        w1.append(ot.emd2(wa, wb, cost, numItermax=2_000_000))
        w2sq.append(ot.emd2(wa, wb, cost**2, numItermax=2_000_000))
    return {"W1": float(np.mean(w1)), "W2sq": float(np.mean(w2sq)), "W2": float(np.sqrt(np.mean(w2sq)))}


def mmd2(x: np.ndarray, y: np.ndarray, *, num: int = 2000, seed: int = 0) -> float:
    """Unbiased MMD^2 with a Gaussian kernel, median-heuristic bandwidth (pooled sample)."""
    rng = np.random.default_rng(seed)
    a = torch.as_tensor(x[rng.choice(len(x), size=min(num, len(x)), replace=False)], dtype=torch.float64)
    b = torch.as_tensor(y[rng.choice(len(y), size=min(num, len(y)), replace=False)], dtype=torch.float64)
    pooled = torch.cat([a, b])
    d2 = torch.cdist(pooled, pooled) ** 2
    bandwidth2 = d2[d2 > 0].median()
    k = torch.exp(-d2 / bandwidth2)
    n, m = len(a), len(b)
    kxx, kyy, kxy = k[:n, :n], k[n:, n:], k[:n, n:]
    term = ((kxx.sum() - kxx.diag().sum()) / (n * (n - 1)) + (kyy.sum() - kyy.diag().sum()) / (m * (m - 1))
            - 2 * kxy.mean())
    return float(term)


def all_metrics(x: np.ndarray, y: np.ndarray, *, num: int = 2000, reps: int = 3) -> dict[str, float]:
    """W1, W2^2, W2 and MMD^2 between ``x`` and ``y``."""
    out = wasserstein(x, y, num=num, reps=reps)
    out["MMD"] = mmd2(x, y, num=num)
    return out


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--full", action="store_true", help="the paper's scale (slow)")
    p.add_argument("--reps", type=int, default=1, help="repetitions (different seeds)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    return p


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch thread(s), " \
           f"python {sys.version.split()[0]}, torch {torch.__version__}"


def write_results(name: str, payload: dict, markdown: str, start: float) -> None:
    """Write benchmarks/results/<name>.json and <name>.md (command, machine, seconds, metrics)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    seconds = round(time.perf_counter() - start, 1)
    command = "scorebayes bench " + name.removesuffix("_quick").replace("_", "-") + " " + " ".join(sys.argv[1:])
    meta = {"command": command.strip(), "machine": machine(), "seconds": seconds}
    with open(RESULTS / f"{name}.json", "w") as fh:
        json.dump({**meta, **payload}, fh, indent=2)
    with open(RESULTS / f"{name}.md", "w") as fh:
        fh.write(f"# {name}\n\n- command: `{meta['command']}`\n- machine: {meta['machine']}\n"
                 f"- seconds: {seconds}\n\n{markdown}\n")


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
