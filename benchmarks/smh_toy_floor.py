"""smh-toy-floor: the sampling floor of W1 for the smh-toy data sets, against the evaluation size.

Exact W1 (POT ``ot.emd2``, Euclidean cost) between two independent samples of the *true* data
distribution, each of n points, for n = 2,000 / 5,000 / 10,000. No sampler can score below this
floor with samples of that size. The paper's Table 1 does not give its evaluation size; its best
W1 values for pinwheel (0.012) and s-curve (0.046) lie below the floor of two 10,000-point
samples and moons' (0.018) is at it, so they cannot be compared with exact-OT values at our sizes
(the paper used more points or another estimator). One pair of samples per size: the floor itself
varies between pairs (moons at 10,000: 0.017 here, 0.021 with another pair).

Usage: scorebayes bench smh-toy-floor [--datasets moons,pinwheel]
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _smh_common import parser, write_results

from scorebayes.scoremh.datasets import TOY_DATASETS, make_toy

PAPER_BEST_W1 = {"moons": 0.018, "pinwheel": 0.012, "s-curve": 0.046, "swiss-roll": 1.399}
SIZES = (2000, 5000, 10000)


def floor(name: str, seed: int) -> dict[int, float]:
    import ot

    g = torch.Generator().manual_seed(seed)
    a, b = make_toy(name, SIZES[-1], generator=g).numpy(), make_toy(name, SIZES[-1], generator=g).numpy()
    out = {}
    for n in SIZES:
        w = np.full(n, 1 / n)
        out[n] = float(ot.emd2(w, w, ot.dist(a[:n], b[:n], metric="euclidean"), numItermax=10_000_000))
    return out


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(TOY_DATASETS))
    args = p.parse_args()
    start = time.perf_counter()
    floors = {}
    md = ["| data set | " + " | ".join(f"floor n = {n:,}" for n in SIZES) + " | paper's best W1 |",
          "|---" * (len(SIZES) + 2) + "|"]
    for name in args.datasets.split(","):
        floors[name] = floor(name, args.seed)
        md.append(f"| {name} | " + " | ".join(f"{floors[name][n]:.4f}" for n in SIZES)
                  + f" | {PAPER_BEST_W1[name]} |")
        print(md[-1], flush=True)
    write_results("smh_toy_floor", {"sizes": list(SIZES), "floors": floors, "paper_best_w1": PAPER_BEST_W1},
                  "\n".join(md), start)
