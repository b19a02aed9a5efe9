"""smh-toy-paper-size: smh-toy's main rows evaluated at the paper's size, 10,000 against 10,000 points.

smh-toy compares 2,000-point subsamples (3 pairs), whose W1 floor is far above the paper's values.
Here, per data set: the same score fit as smh-toy (same seed and settings), then ULA, Score MALA
(learned acceptance) and MALA with the quadrature rule (k = 3) with 10,000 chains of 1,000 steps
from N(0, I), and the exact W1 (POT ``ot.emd2``, Euclidean cost) between the 10,000 final states
and 10,000 held-out points; the "data floor" row puts the 10,000 training points in place of the
chains. One OT problem per row (about 25 s each at this size).

Usage: scorebayes bench smh-toy-paper-size [--datasets moons,swiss-roll]
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _smh_common import parser, write_results
from smh_toy import LAMBDA, PAPER, learned, sample, settings

from scorebayes.samplers.acceptance import QuadratureRule
from scorebayes.samplers.mh import build_kernel
from scorebayes.scoremh import fit_score, make_proposal, make_toy

SIZE = 10_000
STEP = 0.003  # smh-toy's step on the standardised scale


def exact_w1(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W1 between two equal-size samples ``x, y [n, d]``."""
    import ot

    w = np.full(len(x), 1 / len(x))
    return float(ot.emd2(w, w, ot.dist(x, y, metric="euclidean"), numItermax=20_000_000))


NOTES = ("Notes: at 10,000 points the exact-OT floor is 0.017 / 0.041 / 0.080 / 0.66; the paper's best W1 for "
         "the pinwheel and s-curve lie below it and moons' is at it, so only the swiss roll can be compared. "
         "There MALA with the quadrature rule (1.307) is below the paper's best Score MALA (1.399), and ULA "
         "(1.467) is not. The learned acceptance varies between trainings: the same data, score net and "
         "settings gave the learned Score MALA an acceptance of 0.079 and W1 1.49 (2,000 points) in smh-toy, "
         "0.046 and 1.63 here, where only the random draws after the score fit differ.")


def table(name: str, out: dict) -> str:
    lines = [f"### {name} ({out['seconds']} s)", "", "| method | W1 (10,000 vs 10,000) | acceptance |",
             "|---|---|---|"]
    for label, row in out["rows"].items():
        acc = "" if row["acc"] is None else f"{row['acc']:.3f}"
        lines.append(f"| {label} | {row['W1']:.4f} | {acc} |")
    lines.append(f"| paper's best ({PAPER[name][0]}) | {PAPER[name][1]} | |")
    return "\n".join(lines)


def run_dataset(name: str, seed: int) -> dict:
    cfg = {**settings(False), "chains": SIZE}
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    data, test = make_toy(name, SIZE, generator=g), make_toy(name, SIZE, generator=g)
    model = fit_score(data, method="ism", hidden=cfg["score_hidden"], epochs=cfg["score_epochs"],
                      batch_size=cfg["score_batch"], lr=3e-3, generator=g)
    score, z = model.score_standardized, model.standardize(data.float())
    test_np = test.numpy()
    rows = {"data floor": {"W1": exact_w1(data.numpy(), test_np), "acc": None}}
    specs = [("Score MALA", lambda: learned(score, make_proposal("mala", score, STEP), z, LAMBDA[name], cfg, g)[0]),
             ("MALA + quadrature k=3", lambda: build_kernel(make_proposal("mala", score, STEP),
                                                             QuadratureRule(score, 3))),
             ("ULA", lambda: build_kernel(make_proposal("ula", score, STEP), None))]
    for label, build in specs:
        zs, acc = sample(build(), z.shape[1], cfg, g)
        w1 = exact_w1(model.unstandardize(zs).double().numpy(), test_np) if torch.isfinite(zs).all() else float("nan")
        rows[label] = {"W1": w1, "acc": acc}
    return {"rows": rows, "seconds": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--datasets", default="moons,pinwheel,s-curve,swiss-roll")
    args = p.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    results, md = {}, []
    for name in args.datasets.split(","):
        results[name] = run_dataset(name, args.seed)
        md.append(table(name, results[name]))
        print(md[-1], flush=True)
        write_results("smh_toy_paper_size", {"size": SIZE, "results": results}, "\n\n".join([*md, NOTES]), start)
