"""Pilot (session 38): re-sample single-model-features' stored fits under other sampling choices.

The benchmark's ``single-model-features`` keeps each repetition's fitted nets in a run store
(``runs/bench/mg1-single-model-features-SEED``, carried in ``benchmarks/carried/``). This loads
those fits (no refitting: the store's config must match the benchmark's settings) and samples
them again:

- ``--no-cut``: without the support cut ``theta1 <= min x`` (``support_fn=None``): the chains are
  reflected only at the trained region's edge, as the paper's single-model, which relies on the
  noise smoothing (x~ = x + N(0, 0.25^2)) and does not truncate. Session 37's hypothesis: theta1
  is missed on 4 of 10 data sets because the truth 1.0 lies within 0.002 of the cut.

For each repetition it prints the CI95 widths, means and coverage (reported parameters), and the
chain means of theta2 (stuck chains sit far from the rest). - ``--mh K``: then MH-corrects the ULA chains (:func:`scorebayes.samplers.sbi_mh.mh_correct`, per
  noisy copy of the data, started at the ULA chains' last states): MALA moves and every 5th step
  a pCN jump (beta 0.9), both accepted by the path integral of the learned score (4 and 16
  Gauss-Legendre nodes), K steps. The jumps can move a chain stuck in a spurious region of the
  learned score to the main one, and weigh the two, which no unadjusted chain can do.
- ``--mh-no-cut``: the MH chains start from the cut ULA chains but move in the trained region
  only (no cut), so theta1 may cross min x where the smoothed model puts mass (session 39).

Samples are stored in the run store
under a name keyed by the sampling arguments and the chain box, so a rerun prints at once.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/mg1_resample_features.py 0,1,2 [--no-cut] [--mh 4000]``
[--fits 1m] (about 4-7 min of sampling a repetition; logs in benchmarks/results/mg1_pilot_logs/resample_*.log).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _sbi_common as common  # noqa: E402
import mg1 as bench  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import derive_seed, make_generator  # noqa: E402
from scorebayes.samplers.sbi_mh import mh_correct  # noqa: E402

#: --fits NAME -> the MH row (mg1.MH_ROWS) whose stored fits are loaded
FITS = {"200k": "single-model-features-mh", "1m": "single-model-features-1m-mh"}


def load_fit(model, rep: int, fits: str = "200k", base_seed: int = 0):
    """The benchmark's data set ``rep`` and its fitted estimator, loaded from the run store."""
    key, seed_method, store_method = bench.MH_ROWS[FITS[fits]]
    s = bench.SMALL[key]
    seed = derive_seed(base_seed, seed_method, rep)
    x_obs = model.observed(make_generator(base_seed, "observed", rep))
    name = f"{bench.NAME}-{store_method}-{seed}"
    if not any((root / name / "manifest.json").is_file() for root in (common.STORES, common.CARRIED)):
        raise SystemExit(f"no stored fit for repetition {rep} ({name}); run the benchmark first")
    store = bench.features_store(bench.SMALL, seed, key, store_method)
    est = bench.single_estimator(model, s, seed, store).fit(x_obs)
    return est, x_obs, s


def mh_corrected(est, post, steps: int):
    """``post``'s ULA chains MH-corrected (each on its noisy copy of the data, in the chain box)."""
    return mh_correct(est, post.samples.shape[0] * post.samples.shape[1], chains=post.samples.shape[0],
                      init=post, acceptance="quadrature", num_nodes=4, jump_every=5, jump_beta=0.9,
                      jump_nodes=16, max_steps=steps)


def report(model, rep: int, post, min_x: float) -> str:
    truth = model.to_reported(model.true_parameters).numpy()
    rec = common.repetition_record(model, post, truth)
    theta = model.to_reported(torch.as_tensor(post.samples.reshape(-1, post.samples.shape[-1]),
                                              dtype=torch.float64)).reshape(post.samples.shape).numpy()
    chain_means = np.sort(theta[:, :, 1].mean(1))
    return (f"rep {rep}: widths " + " / ".join(f"{w:.3f}" for w in rec["width"])
            + " means " + " / ".join(f"{m:.3f}" for m in rec["mean"])
            + " covers " + " / ".join(str(int(c)) for c in rec["covers"])
            + f"; edge {post.info.get('edge_fraction', float('nan')):.3f}"
            + f", start memory {post.info.get('start_memory', float('nan')):.2f}"
            + "; theta2 chain means, largest 5: " + ", ".join(f"{v:.2f}" for v in chain_means[-5:])
            + f"; theta1 97.5% quantile {np.quantile(theta[:, :, 0], 0.975):.4f}, min x {min_x:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reps", help="comma-separated repetitions")
    parser.add_argument("--no-cut", action="store_true", help="sample without support_fn (theta1 <= min x)")
    parser.add_argument("--fits", choices=sorted(FITS), default="200k",
                        help="whose fits: single-model-features (N = 200,000) or single-model-features-1m-mh's")
    parser.add_argument("--mh-no-cut", action="store_true",
                        help="MH-correct without the support cut (the trained region only), from the cut chains")
    parser.add_argument("--mh", type=int, default=0, help="then MH-correct the chains for this many steps")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one process per core (two threads each on 2 cores ran 3x slower)
    model = get_model(bench.NAME)
    for rep in (int(r) for r in args.reps.split(",")):
        start = time.perf_counter()
        est, x_obs, s = load_fit(model, rep, args.fits)
        if args.no_cut:
            est.support_fn = None
        post = est.sample(s["samples"], chains=s["chains"], max_steps=s["max_steps"])
        print(report(model, rep, post, float(x_obs.min())) + f" ({time.perf_counter() - start:.0f} s)", flush=True)
        if args.mh:
            start = time.perf_counter()
            if args.mh_no_cut:
                est.support_fn = None
            post = mh_corrected(est, post, args.mh)
            rates = "; ".join(f"{a:.2f}/{j:.3f}" for a, j in zip(post.info["acceptance_rate_per_copy"],
                                                                 post.info["jump_acceptance_rate_per_copy"]))
            print("  MH " + report(model, rep, post, float(x_obs.min()))
                  + f" (acceptance MALA/jump per copy {rates}; {time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
