"""smh-gev: Figs. 12-13 of Score-Based Metropolis-Hastings, GEV(0, 1, xi) over the tail index xi.

Fig. 12: ULA vs MALA (exact ratio), true score, step 0.1 (stated in the paper; our Langevin
step h with eps^2 = 2h = 0.1, i.e. h = 0.05), xi in {-0.2, 0, 0.2, 0.4, 0.6} (V.C9). MALA proposals
outside the support are rejected. Fig. 13: Score-MALA whose acceptance network was trained with the
true score and with an ISM-learnt score (both with the learnt score driving the proposal in the
second case) vs exact MALA. Chains start from exact draws; final states are compared with fresh
exact draws (W1 by POT, MMD^2 unbiased). Heavy tails (xi > 0) make the MH correction matter more.
"""

from __future__ import annotations

import time

import torch
from _smh_common import RESULTS, all_metrics, parser, pyplot, write_results

from scorebayes.samplers.acceptance import ExactRule, LearnedRule
from scorebayes.samplers.mh import build_kernel, run
from scorebayes.samplers.proposals import LangevinProposal
from scorebayes.scoremh import GEV, AcceptanceNet, fit_score
from scorebayes.scoremh.sbm import train_acceptance

XIS = [-0.2, 0.0, 0.2, 0.4, 0.6]
H = 0.05

if __name__ == "__main__":
    args = parser(__doc__.splitlines()[0]).parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    chains, steps, epochs = (10000, 1000, 2000) if args.full else (2000, 300, 300)
    g = torch.Generator().manual_seed(args.seed)
    rows = {}
    for xi in XIS:
        gev = GEV(xi)
        data = gev.sample(10000, generator=g)
        x0 = gev.sample(chains, generator=g)
        fresh = gev.sample(chains, generator=g).numpy()
        model = fit_score(data, method="ism", hidden=64, epochs=10, batch_size=128, lr=3e-3, generator=g)

        def learnt(x, model=model):
            return model(x.float()).double()

        kernels = {"ULA": build_kernel(LangevinProposal(gev.score, H), None),
                   "MALA": build_kernel(LangevinProposal(gev.score, H), ExactRule(gev.log_prob),
                                        support=gev.in_support)}
        for label, score in [("Score MALA (true score)", gev.score), ("Score MALA (learnt score)", learnt)]:
            prop = LangevinProposal(score, H)
            with torch.random.fork_rng():
                torch.manual_seed(args.seed)
                net = AcceptanceNet(1, 64, 3).double()
            train_acceptance(net.log_accept, net.parameters(), data, score=score, proposal=prop,
                             n_epochs=epochs, lr=1e-3, lam=1.0, generator=g)
            kernels[label] = build_kernel(prop, LearnedRule(net.log_accept), support=gev.in_support)
        rows[str(xi)] = {}
        for label, kernel in kernels.items():
            draws, stats = run(kernel, x0, steps, generator=g, keep=1)
            x = draws[:, -1].numpy()
            ok = torch.isfinite(draws[:, -1, 0]).numpy()
            m = all_metrics(x[ok], fresh, num=2000, reps=1)
            rows[str(xi)][label] = {"W1": m["W1"], "MMD": m["MMD"], "acceptance": stats["acceptance_rate"],
                                    "finite": float(ok.mean())}
            print(xi, label, rows[str(xi)][label], flush=True)
    labels = list(next(iter(rows.values())))
    md = ["| xi | " + " | ".join(f"{k} W1 | {k} MMD" for k in labels) + " |",
          "|---|" + "---|---|" * len(labels)]
    for xi, r in rows.items():
        md.append(f"| {xi} | " + " | ".join(f"{r[k]['W1']:.4f} | {r[k]['MMD']:.4f}" for k in labels) + " |")
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for label in labels:
        axes[0].plot(XIS, [rows[str(x)][label]["W1"] for x in XIS], "o-", label=label)
        axes[1].plot(XIS, [rows[str(x)][label]["MMD"] for x in XIS], "o-", label=label)
    axes[0].set_ylabel("W1")
    axes[1].set_ylabel("MMD^2")
    for ax in axes:
        ax.set_xlabel("xi")
        ax.set_yscale("symlog", linthresh=1e-3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "smh_gev.png", dpi=80)
    write_results("smh_gev", {"chains": chains, "steps": steps, "h": H, "rows": rows}, "\n".join(md), start)
    print("\n".join(md))
