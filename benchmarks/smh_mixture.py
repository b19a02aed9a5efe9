"""smh-mixture: Fig. 1 of Score-Based Metropolis-Hastings, mode weights of 0.8 N((5,5), I) + 0.2 N((-5,-5), I).

True scores throughout. ULA, RW and MALA with the exact MH ratio, and Score-RW / Score-MALA whose
acceptance networks were trained by score balance matching from the true score (on 10,000
exact samples). Chains start from N(0, 3^2 I) (symmetric between the modes); the mode weights
are the fractions of final states nearest to each mean. Paper: ULA (0.52, 0.48), RW and MALA
(0.79, 0.21), truth (0.8, 0.2). Step sizes are not given in the paper: RW sigma = 4 (jumps between
the modes are possible), Langevin h = 0.5 for ULA and MALA.
"""

from __future__ import annotations

import time

import torch
from _smh_common import RESULTS, parser, pyplot, write_results

from scorebayes.samplers.acceptance import ExactRule, LearnedRule
from scorebayes.samplers.mh import build_kernel, run
from scorebayes.samplers.proposals import LangevinProposal, RandomWalkProposal
from scorebayes.scoremh import AcceptanceNet, GaussianMixture
from scorebayes.scoremh.sbm import train_acceptance

if __name__ == "__main__":
    args = parser(__doc__.splitlines()[0]).parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    chains, steps, epochs = (10000, 2000, 3000) if args.full else (2000, 1000, 800)
    g = torch.Generator().manual_seed(args.seed)
    mix = GaussianMixture.paper()
    data = mix.sample(10000, generator=g)
    x0 = 3.0 * torch.randn(chains, 2, generator=g, dtype=torch.float64)
    proposals = {"RW": RandomWalkProposal(4.0), "MALA": LangevinProposal(mix.score, 0.5)}
    kernels = {"ULA": build_kernel(LangevinProposal(mix.score, 0.5), None)}
    for label, prop in proposals.items():
        kernels[label] = build_kernel(prop, ExactRule(mix.log_prob))
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            net = AcceptanceNet(2, 128, 3).double()
        train_acceptance(net.log_accept, net.parameters(), data, score=mix.score, proposal=prop,
                         n_epochs=epochs, lr=1e-3, lam=2.0, clip=None, generator=g)
        kernels[f"Score {label}"] = build_kernel(prop, LearnedRule(net.log_accept), score=mix.score)
    rows, finals = {}, {}
    for label, kernel in kernels.items():
        draws, stats = run(kernel, x0, steps, generator=g, keep=1)
        finals[label] = draws[:, -1]
        w = mix.mode_weights(draws[:, -1])
        rows[label] = {"weights": [round(float(v), 3) for v in w], "acceptance": round(stats["acceptance_rate"], 3)}
        print(label, rows[label], flush=True)
    paper = {"ULA": [0.52, 0.48], "RW": [0.79, 0.21], "MALA": [0.79, 0.21]}
    md = ["| method | weight (5,5) | weight (-5,-5) | acceptance | paper |", "|---|---|---|---|---|"]
    md += [f"| {k} | {v['weights'][0]} | {v['weights'][1]} | {v['acceptance']} | {paper.get(k, '')} |"
           for k, v in rows.items()]
    md.append("| truth | 0.8 | 0.2 | | |")
    plt = pyplot()
    fig, axes = plt.subplots(1, len(finals), figsize=(3.2 * len(finals), 3))
    for ax, (label, x) in zip(axes, finals.items(), strict=True):
        ax.scatter(x[:, 0], x[:, 1], s=1)
        ax.set_title(label)
    fig.tight_layout()
    fig.savefig(RESULTS / "smh_mixture.png", dpi=80)
    write_results("smh_mixture", {"chains": chains, "steps": steps, "rows": rows}, "\n".join(md), start)
    print("\n".join(md))
