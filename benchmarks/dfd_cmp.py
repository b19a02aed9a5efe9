"""DFD-Bayes paper, Section 4.1, Figures 1-2: the Conway-Maxwell-Poisson model.

(1) n = 2000, theta* = (4, 0.75) and (4, 1.25): standard Bayes (truncated Z, beta = 1) vs
KSD-Bayes vs DFD-Bayes (both calibrated, B = 100), random-walk MH on log theta, 10 chains,
burn-in 5000, 5000 iterations thinned to 500 (paper beta*: DFD 1.91 / 0.46, KSD 5.04 / 2.51).
(2) beta* (and Lyddon's beta) across data realisations for n in {250, 500, 1000, 2000, 4000}.
(3) coverage: fraction of the 100 bootstrap minimisers inside the DFD 95% HPD region (KDE).
(4) run time of one loss evaluation against n without compression (DFD O(n), KSD O(n^2)).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _dfd_common import Timer, parse_args, pyplot, write_results
from scipy.stats import gaussian_kde

from scorebayes.discrete import (
    CMPModel, DFDLoss, KSDLoss, TruncatedLikelihoodLoss, calibrate_beta, generalised_bayes, lyddon_beta, sample_cmp,
)
from scorebayes.parallel import make_generator

args = parse_args(__doc__)
start = time.perf_counter()
model = CMPModel()
prior = model.default_prior()
reps = args.reps or (20 if args.full else 5)
mcmc = dict(num_chains=10, num_samples=500, burn_in=5000, thin=10)
metrics: dict = {"fig1": {}, "beta_study": {}, "beta_vs_n": {}, "coverage": {}, "runtime": {}}
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, theta2 in zip(axes, (0.75, 1.25), strict=True):
    truth = torch.tensor([4.0, theta2])
    x = sample_cmp(truth, 2000, generator=make_generator(args.seed, "cmp", theta2))
    losses = {"standard": TruncatedLikelihoodLoss(model, x), "ksd": KSDLoss(model, x), "dfd": DFDLoss(model, x)}
    res = {}
    for name, loss in losses.items():
        with Timer() as t:
            post = generalised_bayes(loss, prior, beta=1.0 if name == "standard" else None, names=model.names,
                                     seed=args.seed, **mcmc)
        rows = post.summary()
        res[name] = {"beta": post.info["beta"], "seconds": t.seconds,
                     "mean": [r["mean"] for r in rows], "sd": [r["sd"] for r in rows],
                     "rhat": [r["rhat"] for r in rows], "ess": [r["ess"] for r in rows]}
        if name == "dfd":
            draws = post.draws.numpy()
            boot = np.array(post.info["calibration"]["bootstrap"])
            kde = gaussian_kde(draws.T)
            level = np.quantile(kde(draws.T), 0.05)  # 95% HPD region of the posterior
            inside = float(np.mean(kde(boot.T) >= level))
            metrics["coverage"][f"theta2={theta2}"] = {"bootstrap_inside_dfd_95_hpd": inside}
        sel = post.draws[torch.randperm(post.draws.shape[0], generator=torch.Generator().manual_seed(0))[:1500]]
        ax.scatter(sel[:, 0], sel[:, 1], s=2, alpha=0.3, label=f"{name} (beta={post.info['beta']:.2f})")
    ax.plot(*truth.tolist(), "k*", ms=12)
    ax.set(title=f"theta* = (4, {theta2})", xlabel="theta1", ylabel="theta2")
    ax.legend(markerscale=5, fontsize=8)
    metrics["fig1"][f"theta2={theta2}"] = res
fig.tight_layout()
fig.savefig("benchmarks/results/dfd_cmp_fig1.png", dpi=120)

# Why our beta* differs from the paper's: on the Fig. 1 data, beta* over bootstrap seeds with exact
# (Newton) minimisers, and with the paper's optimiser (Adam at a constant lr 0.1, 5,000 warm-started
# steps) on the same bootstrap draws.
boot_seeds = 10 if args.full else 5
paper_adam = dict(method="adam", init_steps=5000, init_lr=0.1, steps=5000, lr=0.1, final_lr_ratio=1.0, tol=0.0)
for theta2 in (0.75, 1.25):
    x = sample_cmp(torch.tensor([4.0, theta2]), 2000, generator=make_generator(args.seed, "cmp", theta2))
    study = {}
    for name, loss in (("dfd", DFDLoss(model, x)), ("ksd", KSDLoss(model, x))):
        exact = [calibrate_beta(loss, prior, seed=s) for s in range(boot_seeds)]
        adam = [calibrate_beta(loss, prior, seed=s, theta_init=exact[s].minimiser, **paper_adam)
                for s in range(min(3, boot_seeds))]
        ratio = [a.beta / e.beta for a, e in zip(adam, exact)]
        study[name] = {"exact_minimisers": {"median": float(np.median([c.beta for c in exact])),
                                            "min": min(c.beta for c in exact), "max": max(c.beta for c in exact),
                                            "bootstrap_seeds": boot_seeds},
                       "paper_adam_constant_lr": [a.beta for a in adam],
                       "ratio_adam_to_exact_same_bootstrap": ratio}
    metrics["beta_study"][f"theta2={theta2}"] = study

# beta* across data realisations and n (theta2 = 0.75)
ns = [250, 500, 1000, 2000, 4000]
fig, ax = plt.subplots(1, 3, figsize=(14, 4))
box = {"dfd": [], "ksd": [], "dfd_lyddon": [], "ksd_lyddon": []}
for n in ns:
    vals = {k: [] for k in box}
    for r in range(reps):
        x = sample_cmp(torch.tensor([4.0, 0.75]), n, generator=make_generator(args.seed, "rep", n, r))
        for name, loss in (("dfd", DFDLoss(model, x)), ("ksd", KSDLoss(model, x))):
            cal = calibrate_beta(loss, prior, seed=r)
            vals[name].append(cal.beta)
            vals[name + "_lyddon"].append(lyddon_beta(loss, cal.minimiser))
    for k in box:
        box[k].append(vals[k])
    metrics["beta_vs_n"][n] = {k: {"median": float(np.median(v)), "min": float(np.min(v)), "max": float(np.max(v))}
                               for k, v in vals.items()}
for k, offset in zip(box, (-0.3, -0.1, 0.1, 0.3), strict=True):
    ax[0].boxplot(box[k], positions=np.arange(len(ns)) + offset, widths=0.18, patch_artist=True,
                  boxprops={"facecolor": f"C{list(box).index(k)}"})
ax[0].set_xticks(range(len(ns)), ns)
ax[0].set(xlabel="n", ylabel="beta", yscale="log", title=f"beta* over {reps} data sets (C0 DFD, C1 KSD, C2/C3 Lyddon)")

# coverage picture for theta2 = 0.75
x = sample_cmp(torch.tensor([4.0, 0.75]), 2000, generator=make_generator(args.seed, "cmp", 0.75))
post = generalised_bayes(DFDLoss(model, x), prior, names=model.names, seed=args.seed, **mcmc)
boot = np.array(post.info["calibration"]["bootstrap"])
ax[1].scatter(post.draws[:, 0], post.draws[:, 1], s=1, alpha=0.2, label="DFD posterior")
ax[1].scatter(boot[:, 0], boot[:, 1], s=8, c="r", label="bootstrap minimisers")
ax[1].set(xlabel="theta1", ylabel="theta2", title="credible region vs bootstrap")
ax[1].legend(markerscale=4)

# run time per loss evaluation (10 parameters, no compression) against n
for n in ns:
    x = sample_cmp(torch.tensor([4.0, 0.75]), n, generator=make_generator(args.seed, "time", n))
    th = torch.tensor([[4.0, 0.75]], dtype=torch.float64).expand(10, -1)
    row = {}
    for name, loss in (("dfd", DFDLoss(model, x, compress=False)), ("ksd", KSDLoss(model, x, compress=False)),
                       ("dfd_compressed", DFDLoss(model, x)), ("ksd_compressed", KSDLoss(model, x))):
        loss(th)
        reps_t = 20
        t0 = time.perf_counter()
        for _ in range(reps_t):
            loss(th)
        row[name] = (time.perf_counter() - t0) / reps_t
    metrics["runtime"][n] = row
for name in ("dfd", "ksd", "dfd_compressed", "ksd_compressed"):
    ax[2].loglog(ns, [metrics["runtime"][n][name] for n in ns], "o-", label=name)
ax[2].set(xlabel="n", ylabel="seconds per evaluation (10 chains)", title="cost of one loss evaluation")
ax[2].legend()
fig.tight_layout()
fig.savefig("benchmarks/results/dfd_cmp_fig2.png", dpi=120)

notes = [
    "Paper beta*: DFD 1.91 (theta2=0.75) and 0.46 (1.25); KSD 5.04 and 2.51 (one data set each).",
    "Bootstrap minimisers by damped Newton (not the paper's Adam); data by exact inverse-CDF sampling.",
    "beta_study: beta* on the Fig. 1 data over several bootstrap seeds (B = 100 each) with exact minimisers, "
    "and with the paper's optimiser (Adam, constant lr 0.1, 5,000 warm-started steps) on the same bootstrap "
    "draws. Two findings: (1) beta* has a sizeable bootstrap Monte Carlo error at B = 100 (see min/max); "
    "(2) Adam at a constant lr run for a fixed number of steps (no stopping rule) does not stay at the "
    "minimum: once the gradients shrink, its second-moment average decays and the normalised steps grow back "
    "to about lr, so the bootstrap 'minimisers' jitter around the exact ones. That enlarges the loss gradients "
    "in the denominator of eq. (10) and lowers beta* (ratio_adam_to_exact_same_bootstrap, same bootstrap "
    "draws). With a stopping rule (our default tol) the same Adam run lands on the Newton minimisers to 1e-8. "
    "This is our explanation of the gap to the paper's over-dispersed values (DFD 1.91, KSD 5.04): its beta* "
    "carries optimiser noise; the under-dispersed values (0.46, 2.51) agree with ours.",
    "Coverage: fraction of the bootstrap minimisers inside the 95% HPD region of a KDE of the DFD posterior "
    "draws (about 0.95 means the credible region matches the bootstrap distribution).",
    "Run time: one evaluation of the loss for 10 parameter values without compression (DFD O(n), KSD O(n^2)); "
    "with the default compression of repeated values both cost O(#distinct values).",
    f"beta* across {reps} data realisations per n; Lyddon's beta at the full-data minimiser for comparison.",
]
write_results("dfd_cmp", args, time.perf_counter() - start, metrics, notes,
              ["dfd_cmp_fig1.png", "dfd_cmp_fig2.png"])
print(f"dfd_cmp done in {time.perf_counter() - start:.1f} s")
