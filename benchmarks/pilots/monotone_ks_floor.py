"""Pilot (session 50): how much of the paper-scale row's KS is Monte Carlo noise, how much location?

The row ``single-model-paper-scale`` gives KS 0.139 against Table 2's <= 0.11 while its W1 meets
the target. This loads the row's fit and samplings from its run store (the first sampling, the
kernel refit, the warm-started re-sample: nothing is sampled if the store holds them) on
repetition REP, draws a 100,000-draw Gibbs reference and an independent 10,000-draw Gibbs run, and
prints the KS/W1 of
  - the row's draws against the benchmark's 5,000-draw reference and against the large one;
  - its two halves of chains against each other, and each half against the reference (how far
    the 100 chains' draws are from independent: 500 independent draws a half give about 0.055);
  - exact (Gibbs) samples of the same sizes (1,000 = 100 chains x 10, and 100), the noise floor;
  - the row's draws with their mean moved onto the exact posterior mean (location removed);
and the mean shift and SD ratio per coefficient, and the KS along the grid.

Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/monotone_ks_floor.py REP``
(about 5 min with the stored samplings; the fit's load needs about 3.6 GB).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import monotone as mb  # noqa: E402
from monotone_score_snapshots import SEEDS, load_fit  # noqa: E402

from scorebayes.metrics import ks_1d  # noqa: E402
from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.posterior import Posterior  # noqa: E402



def main(rep: int) -> None:
    torch.set_num_threads(1)
    model = get_model("monotone")
    x = model.observed(make_generator(0, "observed", rep))
    ref = mb.References(model, mb.SMALL["gibbs"], 0)(rep, x)
    big = model.reference_posterior(x, 100_000, make_generator(7, "gibbs-big", rep))
    exact = model.reference_posterior(x, 10_000, make_generator(9, "gibbs-10000", rep))
    seed = SEEDS[rep]
    paper = {**mb.FULL, "sampling": mb.PAPER_SCALE_SAMPLING}
    _, _, _, sl = load_fit(rep)
    first = mb._score_result(sl, paper, seed).posterior
    sl.refit_debiasing(first, bandwidth=mb.PAPER_SCALE_REFITS["bandwidth"])
    post = mb._score_result(sl, paper, seed, init=first).posterior

    def m(p, r):
        return {k: round(v, 4) for k, v in model.table2_metrics(p, r).items()}

    def P(d):
        return Posterior(d, model.parameter_names)

    d = torch.as_tensor(post.samples)  # [chains, draws, d]
    e = torch.as_tensor(exact.samples)
    half = d.shape[0] // 2
    print("draws", tuple(d.shape), {k: post.info.get(k) for k in ("relaxation_steps", "start_memory")})
    print("row vs 5,000-draw reference", m(post, ref), "| vs 100,000", m(post, big))
    print("half of the chains vs the other half", m(P(d[:half]), P(d[half:])))
    print("each half vs 100,000", m(P(d[:half]), big), m(P(d[half:]), big))
    print("exact 1,000 (100 chains x 10) vs 100,000", m(P(e[:, :10]), big))
    print("exact 100 vs 100,000", m(P(e[:, :1]), big))
    flat = d.reshape(-1, model.dim).double()
    g = torch.as_tensor(big.draws).reshape(-1, model.dim).double()
    print("mean shift / exact sd", [round(v, 2) for v in ((flat.mean(0) - g.mean(0)) / g.std(0)).tolist()])
    print("sd ratio", [round(v, 2) for v in (flat.std(0) / g.std(0)).tolist()])
    shifted = (flat - flat.mean(0) + g.mean(0)).clamp(model.low, model.high)
    print("mean moved onto the exact mean, vs 100,000", m(P(shifted.reshape(d.shape)), big))
    f = model.regression_function(d).reshape(-1, len(model.grid)).numpy()
    fr = model.regression_function(big.draws).reshape(-1, len(model.grid)).numpy()
    print("KS along the grid (every 10th x)", [round(ks_1d(f[:, j], fr[:, j]), 3) for j in range(0, f.shape[1], 10)])


if __name__ == "__main__":
    main(int(sys.argv[1]))
