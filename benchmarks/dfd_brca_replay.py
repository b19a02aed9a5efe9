r"""Replay of the DFD-Bayes paper's :math:`\beta_*` run on brca_10 (Section 4.3), and exact minimisers on it.

The reference script seeds ``torch.manual_seed(0)``, draws the starting point from the prior in
float32 (the main effects :math:`N(0, 1)^{d}`, then the interactions :math:`|N(0, 1/45^2)|^{45}`,
then, for the CMP graphical model, the dispersions :math:`|N(0, 1)|^{d}`), then draws ``B = 100``
bootstrap index vectors ``torch.randint(n, (n,))``; its optimiser is float32 Adam at a constant
rate 1e-3: 50,000 full-data steps from the prior draw, then 10,000 steps per replicate warm-started
at the full-data result. :func:`reference_stream` replays that stream with a private generator
(same draws as the global one: checked by ``tests/benchmarks/test_dfd_brca_replay.py``), so the
very resamples of the paper's run are known. For each model this benchmark then reports

1. :math:`\beta_*` (eq. 10, full-data loss) at the replayed Adam bootstrap "minimisers" (paper:
   0.9971 CMP-GM, 0.2150 PGM);
2. :math:`\beta_*` at exact minimisers of the *same* resamples, computed as
   :func:`~scorebayes.discrete.calibrate_beta` does (saddle-free Newton from the same prior draw,
   then bootstrap Newton steps of at most ``max_step`` warm-started at it, replicates moving more
   than ``max_distance`` flagged as escaped and left out of eq. 10; the library's defaults), with
   the flagged replicates;
3. for both, the replicates with the largest share of eq. (10)'s denominator
   :math:`\sum_b\|\nabla D_n(\theta^{(b)})\|^2` (how far they moved from the full-data point:
   largest unconstrained coordinate change), and the wall-clock seconds.

Default: the full replay (B = 100, 50,000 + 10,000 Adam steps; about 15 min on one core, 90% of it Adam).
``--quick``: B = 10 and 2,000 + 500 Adam steps, a smoke check (numbers meaningless).

References:
    | Generalised Bayesian Inference for Discrete Intractable Likelihood
    | (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.3, Theorem 2
    | https://arxiv.org/abs/2206.08420 (seed file 003_6360ec15413368be.txt)
"""

from __future__ import annotations

import argparse
import inspect
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from scorebayes.discrete import (
    CalibrationError, CMPGraphicalModel, DFDLoss, PoissonGraphicalModel, beta_star, calibrate_beta, minimise,
)
from scorebayes.discrete.minimisers import CONVERGED, ESCAPED, NON_FINITE, NOT_CONVERGED
from scorebayes.priors import ParameterSpace

__all__ = ["reference_stream", "resample_weights", "reference_adam", "denominator_shares", "main"]

DATA = Path("/work/shared/data/brca_10.npy")
PAPER = {"PoissonGraphicalModel": 0.2150, "CMPGraphicalModel": 0.9971}
NUM_TOP = 6  # replicates listed by share of the denominator
FAR = 5.0  # Adam replicates moving further than this (unconstrained) are listed


def reference_stream(d: int, n: int, num_bootstrap: int, *, cmp: bool, seed: int = 0) -> tuple[Tensor, Tensor]:
    r"""The reference script's draws: starting point ``[1, k]`` (float64 copy of the float32 draw,
    in this package's layout: main effects, dispersions (CMP), interactions row by row) and the
    bootstrap indices ``[B, n]`` (int64).

    Uses a private ``torch.Generator`` seeded like the reference's ``torch.manual_seed(seed)``
    (the CPU generators are the same Mersenne twister), in the reference's order of draws.
    """
    g = torch.Generator().manual_seed(seed)
    pairs = d * (d - 1) // 2
    main = torch.normal(torch.zeros(d), torch.ones(d), generator=g)
    inter = torch.normal(torch.zeros(pairs), torch.full((pairs,), 1.0 / pairs), generator=g).abs()
    disp = torch.normal(torch.zeros(d), torch.ones(d), generator=g).abs() if cmp else None
    indices = torch.stack([torch.randint(n, (n,), generator=g) for _ in range(num_bootstrap)])
    init = torch.cat([main] + ([disp] if cmp else []) + [inter]).to(torch.float64)[None]
    return init, indices


def resample_weights(loss: DFDLoss, x: np.ndarray, indices: Tensor) -> Tensor:
    """Counts ``[B, m]`` of the distinct data rows of ``loss`` (``loss.rows [m, d]``) in each resample."""
    rows, inverse = torch.unique(torch.as_tensor(x, dtype=torch.float64), dim=0, return_inverse=True)
    if not torch.equal(rows, loss.rows):
        raise RuntimeError("the loss's distinct rows are not torch.unique's (sorted) rows")
    return torch.stack([torch.bincount(inverse[i], minlength=rows.shape[0]).to(torch.float64) for i in indices])


def reference_adam(objective, theta0: Tensor, steps: int, lr: float = 1e-3) -> Tensor:
    """The reference optimiser: float32 Adam at a constant ``lr`` on ``theta0 [B, k]``, ``steps`` steps."""
    p = theta0.detach().clone().float().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        objective(p).sum().backward()
        opt.step()
    return p.detach()


def denominator_shares(loss: DFDLoss, theta: Tensor) -> Tensor:
    r"""Per-replicate shares ``[B]`` of :math:`\sum_b\|\nabla D_n(\theta^{(b)})\|^2` (``theta [B, k]``)."""
    with torch.enable_grad():
        t = theta.detach().to(torch.float64).clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss(t).sum(), t)  # rows are separate problems
    sq = (grad**2).sum(-1)
    return sq / sq.sum()


def _top(loss: DFDLoss, theta: Tensor, theta_full: Tensor, kept: Tensor | None = None) -> list[dict]:
    """The ``NUM_TOP`` replicates with the largest share of the denominator (over ``kept``)."""
    idx = torch.arange(theta.shape[0]) if kept is None else torch.nonzero(kept).flatten()
    shares = denominator_shares(loss, theta[idx])
    move = (theta[idx] - theta_full).abs()
    order = torch.argsort(shares, descending=True)[:NUM_TOP]
    return [{"replicate": int(idx[o]), "share": round(float(shares[o]), 4),
             "max_move": round(float(move[o].max()), 3), "coordinate": int(move[o].argmax())} for o in order]


def _beta(loss, prior, theta: Tensor) -> float | str:
    try:
        return beta_star(loss, prior, theta)[0]
    except CalibrationError as err:
        return f"CalibrationError: {err}"


def replay_model(model, x: np.ndarray, *, num_bootstrap: int, full_steps: int, boot_steps: int,
                 seed: int, progress: bool) -> dict:
    """Both runs (replayed Adam, exact minimisers) for one graphical model on brca_10 ``x [n, d]``."""
    n, d = x.shape
    loss, prior = DFDLoss(model, x), model.default_prior()
    space = ParameterSpace(prior)
    init, indices = reference_stream(d, n, num_bootstrap, cmp=isinstance(model, CMPGraphicalModel), seed=seed)
    w = resample_weights(loss, x, indices)
    entry: dict = {"num_params": model.num_params, "paper_beta": PAPER[type(model).__name__],
                   "first_indices": indices[0, :5].tolist()}

    t = time.perf_counter()  # (1) the paper's run
    full_adam = reference_adam(loss, init, full_steps)
    boot_adam = reference_adam(loss.reweighted(w), full_adam.expand(num_bootstrap, -1), boot_steps).double()
    entry["adam"] = {"beta": _beta(loss, prior, boot_adam), "top": _top(loss, boot_adam, full_adam.double()),
                     "loss_at_full": float(loss(full_adam.double())), "full_steps": full_steps,
                     "boot_steps": boot_steps, "seconds": round(time.perf_counter() - t, 1)}

    t = time.perf_counter()  # (2) exact minimisers on the same resamples, as calibrate_beta computes them
    opts = {k: p.default for k, p in inspect.signature(calibrate_beta).parameters.items()
            if k in ("init_steps", "steps", "tol", "max_step", "max_distance", "max_flagged")}
    full, full_status = minimise(loss, init, space, num_steps=opts["init_steps"], tol=opts["tol"],
                                 return_status=True)
    boot, status = minimise(loss.reweighted(w), full.expand(num_bootstrap, -1), space, num_steps=opts["steps"],
                            tol=opts["tol"], max_step=opts["max_step"], max_distance=opts["max_distance"],
                            return_status=True)
    kept = status < NON_FINITE
    flagged = torch.nonzero(~kept).flatten().tolist()
    exact = {"options": opts, "full_converged": int(full_status[0]) == CONVERGED,
             "loss_at_full": float(loss(full)), "beta": _beta(loss, prior, boot[kept]),
             "escaped": torch.nonzero(status == ESCAPED).flatten().tolist(),
             "non_finite": torch.nonzero(status == NON_FINITE).flatten().tolist(),
             "not_converged": torch.nonzero(status == NOT_CONVERGED).flatten().tolist(),
             "too_many_flagged": len(flagged) > opts["max_flagged"] * num_bootstrap,
             "top": _top(loss, boot, full[0], kept),
             "full_vs_adam_max_abs_diff": float((full[0].abs() - full_adam[0].double().abs()).abs().max())}
    move = (boot - full).abs()
    exact["flagged_moves"] = [{"replicate": b, "max_move": round(float(move[b].max()), 3),
                               "coordinate": int(move[b].argmax())} for b in flagged]
    far = torch.nonzero((boot_adam - full_adam.double()).abs().max(-1).values > FAR).flatten().tolist()
    entry["adam"][f"moved_beyond_{FAR:g}"] = far
    for label, drop in (("beta_without_exact_flagged", flagged), (f"beta_without_moved_beyond_{FAR:g}", far)):
        if drop:  # the Adam run without these replicates
            keep_adam = torch.ones(num_bootstrap, dtype=torch.bool)
            keep_adam[drop] = False
            entry["adam"][label] = _beta(loss, prior, boot_adam[keep_adam])
    exact["seconds"] = round(time.perf_counter() - t, 1)
    entry["exact"] = exact
    if progress:
        print(type(model).__name__, {"adam": entry["adam"]["beta"], "exact": exact["beta"],
                                     "flagged": flagged}, flush=True)
    return entry


NOTES = [
    "adam.beta: eq. (10) at the replayed reference run (float32 Adam, lr 1e-3, 50,000 full-data + 10,000 "
    "warm-started steps; the reference's torch.manual_seed stream for the prior draw and the 100 "
    "torch.randint resamples). exact.beta: the same resamples, exact minimisers as calibrate_beta computes "
    "them (its default options, in exact.options), escaped / non-finite replicates excluded.",
    "top: replicates with the largest share of the denominator sum_b |grad D_n(theta_b)|^2 of eq. (10) "
    "(exact: among the kept replicates), with their largest unconstrained move from the full-data point and "
    "its coordinate (CMP-GM layout: 0-9 main effects theta_j (gene j+1), 10-19 dispersions theta0_j, 20-64 "
    "interactions; PGM: 0-9 main effects, 10-54 interactions).",
    "adam.beta_without_exact_flagged: the Adam run without the replicates the exact path flags; "
    "adam.moved_beyond_5 / beta_without_moved_beyond_5: Adam replicates that moved more than 5 in some "
    "unconstrained coordinate from the full-data point, and eq. (10) without them. exact.flagged_moves: "
    "where the flagged replicates were frozen.",
]


def _fmt(beta: float | str) -> str:
    return f"{beta:.4f}" if isinstance(beta, float) else beta


def summary_notes(metrics: dict) -> list[str]:
    """One line per model: the replayed and exact beta*, the flagged replicates, the dominant shares."""
    out = []
    for name in ("CMPGraphicalModel", "PoissonGraphicalModel"):
        e = metrics[name]
        adam, exact = e["adam"], e["exact"]
        lead = adam["top"][:4]
        line = (f"{name}: replayed Adam beta* = {_fmt(adam['beta'])} (paper {e['paper_beta']}); its top "
                f"{len(lead)} replicates {[t['replicate'] for t in lead]} hold "
                f"{sum(t['share'] for t in lead):.0%} of the denominator. Exact minimisers on the same resamples "
                f"(calibrate_beta's path): beta* = {_fmt(exact['beta'])}, flagged (excluded) "
                f"{exact['escaped'] + exact['non_finite']}")
        if "beta_without_exact_flagged" in adam:
            line += f"; Adam without those: {_fmt(adam['beta_without_exact_flagged'])}"
        out.append(line + ".")
    return out


def main(argv: list[str] | None = None) -> None:
    from _dfd_common import write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="B = 10, 2,000 + 500 Adam steps (smoke check)")
    parser.add_argument("--full", action="store_true", help="the default (the paper's scale); accepted for uniformity")
    parser.add_argument("--seed", type=int, default=0, help="the reference's torch.manual_seed (paper: 0)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    scale = dict(num_bootstrap=10, full_steps=2000, boot_steps=500) if args.quick else \
        dict(num_bootstrap=100, full_steps=50000, boot_steps=10000)
    args.full = not args.quick  # what write_results records as the scale
    start = time.perf_counter()
    x = np.load(DATA).astype(np.float64)
    metrics: dict = {"n": x.shape[0], "d": x.shape[1], **scale}
    for model in (CMPGraphicalModel(x.shape[1]), PoissonGraphicalModel(x.shape[1])):
        metrics[type(model).__name__] = replay_model(model, x, seed=args.seed, progress=not args.quiet, **scale)
    notes = summary_notes(metrics) + NOTES
    write_results("dfd_brca_replay", args, time.perf_counter() - start, metrics, notes, [])
    print(f"dfd_brca_replay done in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
