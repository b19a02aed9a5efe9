"""mg1-mc-debias: is the fitted debiasing net what keeps mg1's single-model wide? (diagnostic)

One repetition (rep 0's observed data and seed) of mg1's small-scale single-model (see mg1.py):
fit once, then sample twice, with the fitted debiasing net h_psi(theta) (the paper's method) and
with a Monte Carlo h in its place,

    h_M(theta) = (1/M) sum_j s_phi(theta, f(theta, xi_j) + eps_j),

where the latents xi_j of the reparametrised simulator f and the smoothing noise eps_j are drawn
once and reused at every theta (common random numbers: h_M is a smooth function of theta, with
error O(sd(s)/sqrt(M)) against E_theta[s_phi]). This costs M simulations per chain and step,
far above the paper's budget: a diagnostic, not a method. The MC chains run 10,000 steps.

Usage: scorebayes bench mg1-mc-debias [--num 2000]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mg1 as mg1_bench  # noqa: E402
from _smh_common import parser, write_results  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import derive_seed, make_generator  # noqa: E402
from scorebayes.sbi import ScoreLangevin  # noqa: E402

PAPER_WIDTHS = [0.149, 0.247, 0.033]


class MonteCarloDebias(nn.Module):
    """``u [C, d] -> h_M(T(u)) [C, d]`` with fixed latents and noise (see the module docstring)."""

    def __init__(self, est: ScoreLangevin, num: int, seed: int, chunk: int = 8):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.est, self.chunk = est, chunk
        self.latents = est.simulator.latent(1, num, g)
        self.noise = est.noise_sd * torch.randn(1, num, 5, generator=g, dtype=torch.float64)

    def forward(self, u: Tensor) -> Tensor:
        theta = self.est.space.to_constrained(u.double())
        out = []
        for a in range(0, len(u), self.chunk):
            th = theta[a:a + self.chunk]
            z = tuple(t.expand(len(th), *t.shape[1:]) for t in self.latents)
            x = self.est.simulator.transform(th, z) + self.noise
            view = self.est._with_features(x).float()  # any data_features, as the tables saw them
            out.append(self.est.score_net_(u[a:a + self.chunk, None, :], view).mean(1))
        return torch.cat(out)


def summary(model, post, truth: np.ndarray) -> dict:
    draws = model.to_reported(torch.as_tensor(post.draws.reshape(-1, post.draws.shape[-1]), dtype=torch.float64))
    low, high = np.quantile(draws.numpy(), 0.025, 0), np.quantile(draws.numpy(), 0.975, 0)
    return {"mean": draws.mean(0).tolist(), "width": (high - low).tolist(),
            "covers": ((low <= truth) & (truth <= high)).astype(int).tolist(),
            "edge_fraction": float(post.info.get("edge_fraction", float("nan")))}


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--num", type=int, default=2000, help="M, simulated observations in h_M")
    args = p.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    model, s, rep = get_model("mg1"), mg1_bench.SMALL["single"], 0
    x_obs = model.observed(make_generator(args.seed, "observed", rep))
    est = mg1_bench.single_estimator(model, s, derive_seed(args.seed, "single-model", rep)).fit(x_obs)
    truth = model.to_reported(model.true_parameters).numpy()
    rows = {"fitted h (paper)": summary(model, est.sample(s["samples"], chains=s["chains"],
                                                          max_steps=s["max_steps"], remedy=False), truth)}
    est.likelihood_.mean_net = MonteCarloDebias(est, args.num, args.seed)
    rows[f"Monte Carlo h, M = {args.num}"] = summary(
        model, est.sample(s["samples"], chains=s["chains"], max_steps=10_000, remedy=False), truth)
    md = ["| h | widths (theta1, theta2, theta3) | covers | mean | draws at the region's edge |", "|---|---|---|---|---|"]
    md += [f"| {k} | {' / '.join(f'{w:.3f}' for w in v['width'])} | {v['covers']} | "
           f"{' / '.join(f'{m:.3f}' for m in v['mean'])} | {v['edge_fraction']:.2f} |" for k, v in rows.items()]
    md += [f"| paper's single-model | {' / '.join(map(str, PAPER_WIDTHS))} | | | |", "",
           f"Truth {truth.tolist()}. If the fitted h were the only limit, the Monte Carlo h would bring the widths "
           "near the paper's; see mg1.md for the reading of this run."]
    write_results("mg1_mc_debias", {"rows": rows, "num": args.num, "paper_widths": PAPER_WIDTHS}, "\n".join(md), start)
    print("\n".join(md))
