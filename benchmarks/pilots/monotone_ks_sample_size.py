"""Pilot (session 53): how a row's KS depends on how many draws it is measured with.

KS between finite samples is biased upwards. Table 2's paper rows use 10,000 draws (1,000 chains
x 10); the paper-scale rows here draw 1,000 (100 chains x 10) and are measured against the
benchmark's 5,000-draw Gibbs reference. This measures, per repetition, the KS/W1 of random subsets
of a row's recorded chains (25, 50 and all 100 chains: 250, 500, 1,000 draws) against a
100,000-draw Gibbs reference, and of exact Gibbs draws of 250 to 10,000 (the floor of each size),
so the trend with sample size can be read off. Nothing is extrapolated here; see the notes.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/monotone_ks_sample_size.py [METHOD]``
(default METHOD single-model-paper-scale-design; about 10 min).
"""
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from monotone_pooled_rows import recorded_draws  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.posterior import Posterior  # noqa: E402

SUBSETS = 8  # random subsets of chains per size


def main(method: str) -> None:
    torch.set_num_threads(1)
    model = get_model("monotone")
    rng = np.random.default_rng(0)
    for rep in (0, 1):
        x = model.observed(make_generator(0, "observed", rep))
        big = model.reference_posterior(x, 100_000, make_generator(7, "gibbs-big", rep))
        exact = torch.as_tensor(model.reference_posterior(x, 10_000, make_generator(9, "gibbs-10000", rep)).draws)
        exact = exact.reshape(-1, model.dim)
        draws = recorded_draws(method, rep)  # [chains, 10, d]

        def metrics(d):
            return model.table2_metrics(Posterior(d, model.parameter_names), big)

        for chains in (25, 50, 100):
            runs = [metrics(draws[rng.choice(len(draws), chains, replace=False)])
                    for _ in range(SUBSETS if chains < len(draws) else 1)]
            ks = [float(r["ks"]) for r in runs]
            print(f"rep {rep} {method} {chains * draws.shape[1]:6d} draws: KS {np.mean(ks):.4f} "
                  f"(sd over subsets {np.std(ks):.4f}), W1 {np.mean([float(r['w1']) for r in runs]):.5f}", flush=True)
        for size in (250, 500, 1000, 10_000):
            runs = [metrics(exact[rng.choice(len(exact), size, replace=False)][:, None])
                    for _ in range(SUBSETS if size < len(exact) else 1)]
            print(f"rep {rep} exact Gibbs {size:6d} draws: KS {np.mean([float(r['ks']) for r in runs]):.4f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "single-model-paper-scale-design")
