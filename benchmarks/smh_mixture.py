"""smh-mixture: Fig. 1 of Score-Based Metropolis-Hastings, mode weights of 0.8 N((5,5), I) + 0.2 N((-5,-5), I).

True scores throughout. The paper gives neither the chains' start nor the step sizes. Two studies:

1. **Fig. 1 (start from the target's samples).** Chains start at exact draws of the mixture, as
   when the target is known through samples. Langevin step h = 1.8 (ULA's stationary variance per
   mode is 1 / (1 - h/2) = 10, so ULA hops between the modes without weighing them), RW sigma = 4.
   ULA, RW and MALA with the exact MH ratio, and Score-RW / Score-MALA whose acceptance networks
   were trained by score balance matching from the true score on 10,000 exact samples. This
   reproduces the paper's weights: ULA about (0.5, 0.5), RW and MALA about (0.8, 0.2).
2. **Beyond the paper (symmetric start N(0, 3^2 I)).** Which sampler *recovers* the weights when
   the chains start evenly between the modes? Exact RW with sigma = 8 does. So does an MH rule that
   knows only the score, the path-integral (Gauss-Lobatto quadrature) rule along x -> x', once it
   has enough nodes to resolve the sharp switch of the score between the modes (the table gives the
   weights against the number of nodes k). ULA, MALA and the learned acceptance do not.

Mode weights are the fractions of final states nearest to each mean; their Monte Carlo standard
error is sqrt(w (1 - w) / chains). Paper: ULA (0.52, 0.48), RW and MALA (0.79, 0.21), truth (0.8, 0.2).
"""

from __future__ import annotations

import math
import time

import torch
from _smh_common import RESULTS, parser, pyplot, write_results

from scorebayes.samplers.acceptance import ExactRule, LearnedRule, QuadratureRule
from scorebayes.samplers.mh import build_kernel, run
from scorebayes.samplers.proposals import LangevinProposal, RandomWalkProposal
from scorebayes.scoremh import AcceptanceNet, GaussianMixture
from scorebayes.scoremh.sbm import train_acceptance

PAPER = {"ULA": [0.52, 0.48], "RW": [0.79, 0.21], "MALA": [0.79, 0.21]}


def learned_rule(proposal, mix, data, epochs, seed, g):
    """Acceptance network trained by score balance matching (eq. 7) from the true score."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = AcceptanceNet(2, 128, 3).double()
    train_acceptance(net.log_accept, net.parameters(), data, score=mix.score, proposal=proposal,
                     n_epochs=epochs, lr=1e-3, lam=2.0, clip=None, generator=g)
    return LearnedRule(net.log_accept)


def weights_of(kernel, x0, steps, mix, g):
    draws, stats = run(kernel, x0, steps, generator=g, keep=1)
    w = mix.mode_weights(draws[:, -1])
    return draws[:, -1], {"weights": [round(float(v), 3) for v in w], "acceptance": round(stats["acceptance_rate"], 3)}


def table(rows: dict, chains: int, with_paper: bool) -> list[str]:
    se = math.sqrt(0.8 * 0.2 / chains)
    head = "| method | weight (5,5) | weight (-5,-5) | (w - 0.8) / se | acceptance |" + (" paper |" if with_paper else "")
    md = [head, "|---" * (6 if with_paper else 5) + "|"]
    for k, v in rows.items():
        z = (v["weights"][0] - 0.8) / se
        md.append(f"| {k} | {v['weights'][0]} | {v['weights'][1]} | {z:+.1f} | {v['acceptance']} |"
                  + (f" {PAPER.get(k, '')} |" if with_paper else ""))
    md.append("| truth | 0.8 | 0.2 | 0 | |" + (" |" if with_paper else ""))
    return md


if __name__ == "__main__":
    args = parser(__doc__.splitlines()[0]).parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    chains, steps, epochs = (10000, 2000, 3000) if args.full else (2000, 1000, 800)
    g = torch.Generator().manual_seed(args.seed)
    mix = GaussianMixture.paper()
    data = mix.sample(10000, generator=g)

    # 1. Fig. 1: chains start at target samples.
    x0 = mix.sample(chains, generator=g).double()
    h = 1.8
    kernels = {"ULA": build_kernel(LangevinProposal(mix.score, h), None)}
    for label, prop in {"RW": RandomWalkProposal(4.0), "MALA": LangevinProposal(mix.score, h)}.items():
        kernels[label] = build_kernel(prop, ExactRule(mix.log_prob))
        kernels[f"Score {label}"] = build_kernel(prop, learned_rule(prop, mix, data, epochs, args.seed, g),
                                                 score=mix.score)
    fig1, finals = {}, {}
    for label, kernel in kernels.items():
        finals[label], fig1[label] = weights_of(kernel, x0, steps, mix, g)
        print("fig1", label, fig1[label], flush=True)

    # 2. Symmetric start: which rules recover the weights?
    x0 = 3.0 * torch.randn(chains, 2, generator=g, dtype=torch.float64)
    wide = RandomWalkProposal(8.0)
    sym_kernels = {"ULA (h = 1.8)": kernels["ULA"], "MALA (h = 1.8)": kernels["MALA"],
                   "RW sigma = 8, exact ratio": build_kernel(wide, ExactRule(mix.log_prob)),
                   "Score RW sigma = 8, learned": build_kernel(
                       wide, learned_rule(wide, mix, data, epochs, args.seed, g), score=mix.score)}
    nodes = (8, 32, 64, 128) if args.full else (8, 32, 64)
    for k in nodes:
        sym_kernels[f"RW sigma = 8, quadrature k = {k}"] = build_kernel(wide, QuadratureRule(mix.score, k))
    symmetric = {}
    for label, kernel in sym_kernels.items():
        _, symmetric[label] = weights_of(kernel, x0, steps, mix, g)
        print("symmetric", label, symmetric[label], flush=True)

    md = [f"{chains} chains x {steps} steps; standard error of a weight near 0.8: "
          f"{math.sqrt(0.16 / chains):.4f}.", "",
          "### Fig. 1: chains start at samples of the target (h = 1.8, RW sigma = 4)", ""]
    md += table(fig1, chains, with_paper=True)
    md += ["", "### Beyond the paper: chains start from N(0, 3^2 I), symmetric between the modes", ""]
    md += table(symmetric, chains, with_paper=False)
    md += ["", "The quadrature rule integrates the true score along the straight segment x -> x' "
           "(Gauss-Lobatto, k nodes). Between the modes the score switches from one component's to the "
           "other's within about 0.3 units (the log-odds of the components change by 14 per unit along the diagonal), so a jump of about 14 units needs k of order 64 before the "
           "integrated log-ratio, and hence the weights, are right. The learned acceptance network sees "
           "only the score and pairs near the data, so it cannot weigh the modes either."]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(finals), figsize=(3.2 * len(finals), 3))
    for ax, (label, x) in zip(axes, finals.items(), strict=True):
        ax.scatter(x[:, 0], x[:, 1], s=1)
        ax.set_title(f"{label}: {fig1[label]['weights'][0]:.2f} / {fig1[label]['weights'][1]:.2f}")
    fig.tight_layout()
    fig.savefig(RESULTS / "smh_mixture.png", dpi=80)
    write_results("smh_mixture", {"chains": chains, "steps": steps, "step_size": h, "fig1": fig1,
                                  "symmetric_start": symmetric, "paper": PAPER}, "\n".join(md), start)
    print("\n".join(md))
