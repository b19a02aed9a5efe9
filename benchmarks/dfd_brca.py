"""DFD-Bayes paper, Section 4.3, Figure 5: Poisson and CMP graphical models of gene expression.

Data: ``brca_10.npy`` (878 patients x 10 genes, floor(log(x + 1)) counts). Models: Poisson
graphical model (55 parameters) and CMP graphical model (65), squared reparametrisation and the
priors of METHODS.md V.B8; beta* with B = 100 bootstrap minimisers; NUTS on the generalised
posterior; posterior predictive by Gibbs sampling of the model at posterior draws; stability of
beta* against Lyddon's beta over bootstrap realisations of the data set (paper: beta* = 0.2150
for the PGM and 0.9971 for the CMP-GM; Lyddon's beta unstable, sometimes negative; total time
1,896 s).

Small scale (default): NUTS with 2 chains x (150 warm-up + 150 draws), 20 predictive draws,
3 data realisations for the stability study. ``--full``: 4 chains x (5000 + 5000) thinned to
100, 100 predictive draws, 10 realisations.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from _dfd_common import Timer, parse_args, pyplot, write_results

from scorebayes.discrete import (
    CalibrationError, CMPGraphicalModel, DFDLoss, PoissonGraphicalModel, calibrate_beta, generalised_bayes,
    lyddon_beta, sample_graphical,
)
from scorebayes.parallel import make_generator

args = parse_args(__doc__)
start = time.perf_counter()
x = np.load(Path("/work/shared/data/brca_10.npy")).astype(np.float64)
n, d = x.shape
nuts = dict(num_chains=4, num_samples=100, burn_in=5000, thin=50) if args.full else \
    dict(num_chains=2, num_samples=150, burn_in=150, thin=1)
num_predictive = 100 if args.full else 20
realisations = args.reps or (10 if args.full else 3)
metrics: dict = {"n": n, "d": d}
plt = pyplot()
fig, axes = plt.subplots(2, 3, figsize=(13, 7))
for row, model in enumerate((PoissonGraphicalModel(d), CMPGraphicalModel(d))):
    name = type(model).__name__
    prior = model.default_prior()
    loss = DFDLoss(model, x)
    entry: dict = {"num_params": model.num_params}
    with Timer() as t_total:
        beta, tries = None, []
        for attempt in range(3):  # beta* is undefined when the numerator of eq. (10) is negative
            try:
                cal = calibrate_beta(loss, prior, num_bootstrap=100, seed=args.seed + attempt)
                beta = cal.beta
                tries.append({"seed": args.seed + attempt, "beta": beta})
                break
            except CalibrationError as err:
                tries.append({"seed": args.seed + attempt, "error": str(err)})
        entry["calibration_attempts"] = tries
        entry["lyddon_beta"] = lyddon_beta(loss, cal.minimiser) if beta is not None else None
        if beta is None:
            beta = 1.0
            entry["note"] = "beta* undefined for all calibration seeds; sampled with beta = 1"
        post = generalised_bayes(loss, prior, beta=beta, names=model.names, sampler="nuts", seed=args.seed, **nuts)
    rows = post.summary()
    entry.update({"beta": beta, "total_seconds": t_total.seconds, "nuts": nuts,
                  "max_rhat": max((r["rhat"] or 0) for r in rows), "min_ess": min((r["ess"] or 0) for r in rows),
                  "divergences": post.info["divergences"]})
    # posterior predictive: Gibbs draws of n points at each of num_predictive posterior draws
    idx = torch.randperm(post.draws.shape[0], generator=make_generator(args.seed, "pp"))[:num_predictive]
    sims = sample_graphical(model, post.draws[idx], n, burn_in=200, thin=2,
                            generator=make_generator(args.seed, "gibbs", row))  # [S, n, d]
    for col, gene in enumerate((0, 4, 9)):
        ax = axes[row, col]
        grid = np.arange(int(x[:, gene].max()) + 4)
        obs = np.array([(x[:, gene] == v).mean() for v in grid])
        freq = np.stack([(sims[:, :, gene] == v).to(torch.float64).mean(-1).numpy() for v in grid], -1)
        ax.bar(grid, obs, color="0.8", label="observed")
        ax.errorbar(grid, freq.mean(0), yerr=freq.std(0), fmt="o", ms=3, capsize=2, label="posterior predictive")
        ax.set(title=f"{name}, gene {gene + 1}", xlabel="floor(log(count + 1))")
        if col == 0:
            ax.legend(fontsize=8)
    entry["predictive_mean_var"] = {"observed_mean": x.mean(0).tolist(), "observed_var": x.var(0).tolist(),
                                    "predictive_mean": sims.mean((0, 1)).tolist(),
                                    "predictive_var": sims.var(1).mean(0).tolist()}
    metrics[name] = entry
    if not args.quiet:
        print(name, {k: entry[k] for k in ("beta", "lyddon_beta", "total_seconds", "max_rhat")})
fig.tight_layout()
fig.savefig("benchmarks/results/dfd_brca_predictive.png", dpi=120)

# stability of beta* vs Lyddon's beta over bootstrap realisations of the data (CMP-GM)
model = CMPGraphicalModel(d)
prior = model.default_prior()
stab = {"beta_star": [], "lyddon": [], "failures": 0}
for r in range(realisations):
    idx = torch.randint(0, n, (n,), generator=make_generator(args.seed, "realisation", r))
    loss = DFDLoss(model, x[idx.numpy()])
    try:
        cal = calibrate_beta(loss, prior, num_bootstrap=100, seed=r)
        stab["beta_star"].append(cal.beta)
        stab["lyddon"].append(lyddon_beta(loss, cal.minimiser))
    except CalibrationError:
        stab["failures"] += 1
metrics["stability_cmp_gm"] = stab
fig, ax = plt.subplots(figsize=(5, 4))
ax.boxplot([stab["lyddon"], stab["beta_star"]])
ax.set_xticks([1, 2], ["Lyddon et al.", "beta* (eq. 10)"])
ax.axhline(0, color="k", lw=0.5)
ax.set(title=f"CMP-GM: beta over {realisations} data realisations", ylabel="beta")
fig.tight_layout()
fig.savefig("benchmarks/results/dfd_brca_beta.png", dpi=120)

notes = [
    "Paper: beta* = 0.2150 (PGM) and 0.9971 (CMP-GM); Lyddon's beta unstable and sometimes negative, beta* within "
    "(0, 3.5); total time 1,896 s.",
    "Bootstrap minimisers by saddle-free damped Newton (exact local minima; the squared parametrisation makes "
    "theta_ij = 0 a saddle that Adam and plain Newton leave only slowly). With exact minimisers several bootstrap "
    "replicates activate interactions that the full-data fit sets to zero; their term grad D . grad log pi is "
    "strongly negative under the tight N(0, 1/45^2) prior, which makes eq. (10) heavy-tailed and its numerator can "
    "be negative (then beta* is undefined: recorded above, next seed tried).",
    "Posterior predictive: systematic-scan Gibbs (exact Poisson / truncated-CMP full conditionals) at posterior "
    "draws, n = 878 points each (METHODS.md V.B15), instead of the reference code's folded random walk.",
    "NUTS through pyro, sequential chains; small-scale chains are short, so R-hat is only indicative.",
]
write_results("dfd_brca", args, time.perf_counter() - start, metrics, notes,
              ["dfd_brca_predictive.png", "dfd_brca_beta.png"])
print(f"dfd_brca done in {time.perf_counter() - start:.1f} s")
