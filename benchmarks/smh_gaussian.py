"""smh-gaussian: Fig. 14 sanity check on N(3, 2) (variance 2).

RW with the exact MH ratio, Score-RW with an acceptance network trained from the true score,
and Score-RW trained from a score learnt by ISM on 10,000 samples. Chains start from N(0, 1),
final states are compared with exact draws (mean, variance, W1). RW sigma = 1.5.
"""

from __future__ import annotations

import time

import torch
from _smh_common import RESULTS, parser, pyplot, wasserstein, write_results

from scorebayes.samplers.acceptance import ExactRule, LearnedRule
from scorebayes.samplers.mh import build_kernel, run
from scorebayes.samplers.proposals import RandomWalkProposal
from scorebayes.scoremh import AcceptanceNet, fit_score, gaussian_target
from scorebayes.scoremh.sbm import train_acceptance

if __name__ == "__main__":
    args = parser(__doc__.splitlines()[0]).parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    chains, steps, epochs = (10000, 1000, 2000) if args.full else (4000, 300, 600)
    g = torch.Generator().manual_seed(args.seed)
    target = gaussian_target(3.0, 2.0)
    data = target.sample(10000, generator=g)
    prop = RandomWalkProposal(1.5)
    learned_score = fit_score(data, method="ism", hidden=64, epochs=30, batch_size=128, lr=3e-3, generator=g)

    def learned_score_fn(x):
        return learned_score(x.float()).double()

    kernels = {"RW (exact ratio)": build_kernel(prop, ExactRule(target.log_prob))}
    for label, score in [("Score RW (true score)", target.score), ("Score RW (learned score)", learned_score_fn)]:
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            net = AcceptanceNet(1, 64, 3).double()
        train_acceptance(net.log_accept, net.parameters(), data, score=score, proposal=prop,
                         n_epochs=epochs, lr=1e-3, lam=1.0, generator=g)
        kernels[label] = build_kernel(prop, LearnedRule(net.log_accept))
    exact = target.sample(chains, generator=g).numpy()
    rows, finals = {}, {}
    x0 = torch.randn(chains, 1, generator=g, dtype=torch.float64)
    for label, kernel in kernels.items():
        draws, stats = run(kernel, x0, steps, generator=g, keep=1)
        x = draws[:, -1].numpy()
        finals[label] = x
        rows[label] = {"mean": float(x.mean()), "var": float(x.var()), "W1": wasserstein(x, exact)["W1"],
                       "acceptance": stats["acceptance_rate"]}
        print(label, rows[label], flush=True)
    md = ["| method | mean (3) | variance (2) | W1 vs exact | acceptance |", "|---|---|---|---|---|"]
    md += [f"| {k} | {v['mean']:.3f} | {v['var']:.3f} | {v['W1']:.4f} | {v['acceptance']:.3f} |" for k, v in rows.items()]
    md.append(f"| exact draws (floor) | | | {wasserstein(target.sample(chains, generator=g).numpy(), exact)['W1']:.4f} | |")
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    for ax, (label, x) in zip(axes, finals.items(), strict=True):
        ax.hist(x[:, 0], bins=60, density=True, alpha=0.6)
        grid = torch.linspace(-3, 9, 200, dtype=torch.float64)[:, None]
        ax.plot(grid[:, 0], (target.log_prob(grid) - 0.5 * torch.log(torch.tensor(4 * torch.pi))).exp())
        ax.set_title(label, fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "smh_gaussian.png", dpi=80)
    write_results("smh_gaussian", {"chains": chains, "steps": steps, "rows": rows}, "\n".join(md), start)
    print("\n".join(md))
