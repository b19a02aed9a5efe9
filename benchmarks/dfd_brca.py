r"""DFD-Bayes paper, Section 4.3, Figure 5: Poisson and CMP graphical models of gene expression.

Data: ``brca_10.npy`` (878 patients x 10 genes, floor(log(x + 1)) counts). Models: Poisson
graphical model (55 parameters) and CMP graphical model (65), squared reparametrisation and the
priors of METHODS.md V.B8; beta* with B = 100 bootstrap minimisers; NUTS on the generalised
posterior; posterior predictive by Gibbs sampling of the model at posterior draws; stability of
beta* against Lyddon's beta over bootstrap realisations of the data set (paper: beta* = 0.2150
for the PGM and 0.9971 for the CMP-GM; Lyddon's beta unstable, sometimes negative; total time
1,896 s).

NUTS is preconditioned by the Laplace approximation at the mode of the generalised posterior
(a dense mass matrix, fixed; pyro still adapts a diagonal one on top), target acceptance 0.85,
and every chain starts from a draw of that Laplace approximation. The squared parametrisation
makes the posterior symmetric under flipping the sign of any squared parameter: chains started
from prior draws sit in different mirror copies (R-hat 1.9 in the first run), and chains started
in the orthant of the mode still cross into a mirror copy where a squared parameter's posterior
reaches 0 (the CMP-GM dispersion of gene 8), where the whitening has the wrong correlations
(divergences). So the squared parameters whose mode is away from 0 are sampled sign-folded,
:math:`w = \log\tilde\theta^2` (``FOLD``, see :func:`laplace_nuts`). R-hat and ESS are reported
for the raw draws and for the identified parameters (absolute values of the squared parameters,
the paper's convention).

Small scale (default): 4 chains x (150 warm-up + 150 draws), 20 predictive draws, 10 data
realisations for the stability study (each calibrated from the full data's minimiser).
``--full``: 4 chains x (5000 + 5000) thinned to 100, 100 predictive draws, and beta* (CMP-GM,
full data) for 10 more bootstrap seeds.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from _dfd_common import Timer, parse_args, pyplot, write_results

from scorebayes.diagnostics import ess, rhat
from scorebayes.discrete import (
    CalibrationError, CMPGraphicalModel, DFDLoss, PoissonGraphicalModel, calibrate_beta, lyddon_beta, minimise,
    sample_graphical,
)
from scorebayes.discrete.posterior import GeneralisedPosterior
from scorebayes.parallel import make_generator
from scorebayes.posterior import Posterior
from scorebayes.priors import ParameterSpace
from scorebayes.samplers.folded import FoldedSquares
from scorebayes.samplers.nuts import sample_nuts

CALIBRATION_FAILURES = (CalibrationError, FloatingPointError)
TARGET_ACCEPT = 0.85
FOLD = "mode"  # fold the squared parameters with a non-zero mode (laplace_nuts)


def laplace_nuts(loss, prior, beta: float, theta_hat: torch.Tensor, names: list[str], *, num_chains: int,
                 num_samples: int, warmup: int, thin: int, seed: int, squared: torch.Tensor | None = None,
                 fold: str = "none") -> Posterior:
    r"""NUTS on :math:`\pi(\theta)e^{-\beta D_n(\theta)}` in whitened coordinates :math:`u = m + Lz`.

    ``u`` is :math:`\theta` itself (``fold="none"``) or, for the squared parameters ``squared``
    (indices), the sign-folded :math:`w = \log\tilde\theta^2` of
    :class:`~scorebayes.samplers.folded.FoldedSquares` (identified :math:`|\tilde\theta|`, the mirror
    copies of the posterior folded together; log-density plus its log-Jacobian): all of them
    (``fold="all"``) or those whose posterior mode in :math:`\tilde\theta` is away from 0
    (``fold="mode"``; a mode at 0 is a single symmetric one that the whitening fits, while
    :math:`w` would have an exponential left tail there).
    :math:`m` is the posterior mode in ``u`` (damped Newton from the DFD minimiser ``theta_hat [k]``)
    and :math:`LL^\top = H^{-1}` with :math:`H` the negative Hessian of the log posterior of ``u`` at
    :math:`m` (eigenvalues floored), so that NUTS sees a roughly isotropic target (a dense mass matrix).
    Chains start from :math:`z \sim N(0, I)`. Returns ``Posterior [C, S, k]`` in the model's parameters.
    """
    if fold not in ("none", "all", "mode"):
        raise ValueError(f"fold must be 'none', 'all' or 'mode', got {fold!r}")
    target = GeneralisedPosterior(loss, prior, beta)
    space = ParameterSpace(prior)  # the identity here: every prior marginal is normal
    to_theta, log_prob = (lambda u: u), target.log_prob
    mode = minimise(lambda t: -target.log_prob(t), theta_hat.reshape(1, -1), space)[0]
    folded: list[int] = []
    if fold != "none":
        folded = [int(i) for i in squared if fold == "all" or abs(float(mode[i])) > 1e-6]
    if folded:
        fs = FoldedSquares(space, folded)
        to_theta = fs.to_constrained
        log_prob = lambda u: target.log_prob(fs.to_constrained(u)) + fs.log_abs_det_jacobian(u)  # noqa: E731
        start = mode.reshape(1, -1).clone()
        start[:, folded] = start[:, folded].abs().clamp(min=1e-3)  # exact zeros of the mode: w = -inf
        mode = minimise(lambda u: -log_prob(u), fs.to_unconstrained(start), space)[0]
    hess = -torch.autograd.functional.hessian(lambda u: log_prob(u[None])[0], mode)
    evals, evecs = torch.linalg.eigh(0.5 * (hess + hess.T))
    scale = evecs / evals.clamp(min=1e-8 * float(evals.max())).sqrt()  # [k, k], columns: principal axes
    z0 = torch.randn(num_chains, mode.numel(), generator=make_generator(seed, "laplace-init"), dtype=torch.float64)
    post = sample_nuts(lambda z: log_prob(mode + z @ scale.T), z0, num_samples, warmup=warmup, thin=thin,
                       target_accept=TARGET_ACCEPT, generator=make_generator(seed, "nuts"))
    info = {**post.info, "beta": beta, "mode": to_theta(mode[None])[0].tolist(), "folded": folded,
            "laplace_eigen_range": [float(evals.min()), float(evals.max())]}
    return Posterior(to_theta(mode + post.samples @ scale.T).detach(), names, info=info)


def diagnostics(post: Posterior, num_plain: int) -> dict:
    """Max R-hat / min bulk ESS of the raw parameters and of the identified ones (|squared parameters|)."""
    theta = post.samples.numpy()
    ident = np.concatenate([theta[..., :num_plain], np.abs(theta[..., num_plain:])], axis=-1)
    out = {}
    for label, arr in (("raw", theta), ("identified", ident)):
        r = [rhat(arr[:, :, j]) for j in range(arr.shape[-1])]
        e = [ess(arr[:, :, j]) for j in range(arr.shape[-1])]
        out[f"max_rhat_{label}"] = float(np.nanmax(r))
        out[f"min_ess_{label}"] = float(np.nanmin(e))
    return out


# Issue 4 investigation of the CMP-GM beta* gap (ours ~3.8 vs paper 0.9971); numbers from one-off scripts
# (not re-run by this benchmark: ~1 h CPU), full data, seed 0 unless stated.
GAP_NOTES = [
    "beta* gap, CMP-GM (ours 3.82 vs paper 0.9971): EXPLAINED. Replaying the reference script's RNG stream "
    "(torch.manual_seed(0); float32 prior draw; 100 x torch.randint bootstrap indices) and its optimiser (float32 "
    "Adam, lr 1e-3 constant, 50,000 full-data steps from the prior draw, 10,000 warm-started steps per replicate) "
    "gives beta* = 0.9956 (paper 0.9971). On the same 100 resamples, exact (Newton) minimisers give 2.70 after "
    "dropping 3 runaway replicates (or 1.06 keeping the one that lands in a distant finite basin).",
    "Reproducible replay: `scorebayes bench dfd-brca-replay` (benchmarks/results/dfd_brca_replay.{json,md}, ~15 "
    "min on one core) replays the reference run as above (CMP-GM 0.9956, PGM 0.2163, to all printed digits) and "
    "minimises the same resamples exactly as calibrate_beta does (Newton steps of at most 1, replicates moving "
    "more than 20 flagged): CMP-GM flags 57 and 83 (runaways in theta_6) and keeps 82 (a distant finite basin, "
    "theta_6 0.78 -> 11.3, 62% of the denominator), beta* = 1.055; PGM: beta* undefined (numerator -1.7e6: the "
    "prior term sum_b grad D_n . grad log pi = -2.0e7 outweighs the Hessian trace 1.8e7; 94% of that prior term "
    "comes from the 8 non-zero interactions of the minimiser, |theta~| up to 0.25 = 11 sd of their N(0, 1/45^2) "
    "prior).",
    "Mechanism: the DFD loss of the CMP is unbounded below as a dispersion theta0_j -> infinity (profile loss "
    "-(sum (x+1)^nu)^2 / sum x^(2 nu) -> -infinity, driven by the largest count; for brca_10 the barrier is at "
    "nu ~ 10-20 and the loss passes the local minimum by nu ~ 40), so the full-data minimiser is a local one. In "
    "4 of the paper's 100 resamples (57, 62, 82, 83) gene 6 (2 patients at its maximum 13) escapes: Adam walks "
    "theta_6 from 0.78 to 8.2-9.9 (capped by lr x steps = 10) and the full-data gradients there make 75% of the "
    "denominator of eq. (10) (41%, 19%, 9%, 6%). Without replicates 57, 82, 83 (those Newton runs away on) Adam "
    "gives 2.76 and Newton 2.70; without all 4, Adam gives 3.63. "
    "The paper's beta* therefore reflects where a truncated Adam run stops, not the local bootstrap spread.",
    "Spread of exact beta* (B = 100) over our bootstrap seeds 0..3: 3.82, 3.30, 2.53, 1.77 (the top-5 replicates "
    "make 21-58% of the denominator); seed 4: Newton diverges on a runaway replicate (FloatingPointError).",
    "Hypothesis a (coordinates), exact minimisers, B = 20 (ours 3.36): our tilde coordinates are already the "
    "paper's (the reference code optimises and differentiates w.r.t. tilde theta with the same N(0,1), "
    "N(0,1/45^2), N(0,1) priors). Other coordinates: natural theta with the main-text half-normal priors 0.123; "
    "natural theta with the pushforward prior undefined (-2e106: 42 of 45 interactions sit at 0); log theta for "
    "all squared parameters 1.87; log theta0 only 3.10 (pushforward prior) / 3.09 (half-normal(1/sqrt2)); the "
    "main-text theta0 prior transported to tilde 3.36. None gives ~1.0 for the right reason.",
    "Hypothesis b (optimiser) on our resamples, B = 20: exact 3.360; paper's Adam schedule in float64 from a "
    "prior draw 3.357 (full-data minimiser within 0.1 of the exact one up to sign, loss gap 3e-5); Adam bootstrap "
    "from the exact minimiser 3.351; the whole schedule in float32 3.613 (float32 or float64 evaluation of eq. 10 "
    "agree). Jitter of N(0, delta^2) on the exact bootstrap minimisers: delta = 1e-3 -> 2.99, 3e-3 -> 2.67. "
    "The optimiser matters only through the runaway replicates above (none among these 20).",
    "Hypothesis c (data): the reference code reads the same brca_10.npy (n = 878, d = 10, floor(log(x + 1))); its "
    "star convention (x_j - 1 kept at 0, ratio 1) changes D_n by a constant only; same parameter layout (65) and "
    "priors. No data-handling difference.",
    "PGM (ours 0.172, seed 0, vs paper 0.2150): the same replay of the reference PGM script gives 0.2163, so the "
    "replay is faithful. The PGM has no dispersion parameters, hence no unbounded direction; the rest of the "
    "difference (0.172 exact on our draw vs 0.216) is bootstrap draw plus optimiser and was not decomposed.",
]


args = parse_args(__doc__)
start = time.perf_counter()
x = np.load(Path("/work/shared/data/brca_10.npy")).astype(np.float64)
n, d = x.shape
nuts = dict(num_chains=4, num_samples=100, warmup=5000, thin=50) if args.full else \
    dict(num_chains=4, num_samples=150, warmup=150, thin=1)
num_predictive = 100 if args.full else 20
realisations = args.reps or 10  # the paper's stability study
beta_seeds = 10 if args.full else 0
metrics: dict = {"n": n, "d": d}
full_minimiser: dict = {}  # per model: where the stability study's realisations start
plt = pyplot()
fig, axes = plt.subplots(2, 3, figsize=(13, 7))
for row, model in enumerate((PoissonGraphicalModel(d), CMPGraphicalModel(d))):
    name = type(model).__name__
    prior = model.default_prior()
    loss = DFDLoss(model, x)
    entry: dict = {"num_params": model.num_params}
    with Timer() as t_total:
        cal, tries = None, []
        for attempt in range(3):  # beta* is undefined when the numerator of eq. (10) is negative
            try:
                cal = calibrate_beta(loss, prior, num_bootstrap=100, seed=args.seed + attempt)
                tries.append({"seed": args.seed + attempt, "beta": cal.beta})
                break
            except CALIBRATION_FAILURES as err:
                tries.append({"seed": args.seed + attempt, "error": f"{type(err).__name__}: {err}"})
        entry["calibration_attempts"] = tries
        if cal is None:
            beta, theta_hat = 1.0, minimise(loss, torch.zeros(1, model.num_params, dtype=torch.float64) + 0.1,
                                            ParameterSpace(prior))[0]
            entry["note"] = "beta* undefined for all calibration seeds; sampled with beta = 1"
        else:
            beta, theta_hat = cal.beta, cal.minimiser
        full_minimiser[name] = theta_hat
        entry["lyddon_beta"] = lyddon_beta(loss, theta_hat)
        with Timer() as t_nuts:
            post = laplace_nuts(loss, prior, beta, theta_hat, model.names, seed=args.seed,
                                squared=model.squared_indices(), fold=FOLD, **nuts)
    entry.update({"beta": beta, "total_seconds": t_total.seconds, "nuts_seconds": t_nuts.seconds,
                  "nuts": {**nuts, "target_accept": TARGET_ACCEPT, "preconditioner": "Laplace at the posterior mode",
                           "init": "Laplace draws (sign orthant of the DFD minimiser)",
                           "fold": FOLD, "folded": [model.names[i] for i in post.info["folded"]]},
                  **diagnostics(post, d),  # parameters d.. are squared in the model
                  "step_size": post.info["step_size"], "divergences": post.info["divergences"]})
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
        print(name, {k: entry[k] for k in ("beta", "lyddon_beta", "total_seconds", "max_rhat_raw",
                                           "max_rhat_identified", "min_ess_identified")})
fig.tight_layout()
fig.savefig("benchmarks/results/dfd_brca_predictive.png", dpi=120)

# Monte Carlo spread of beta* (B = 100) over bootstrap seeds, full data, CMP-GM (the gap to 0.9971)
model = CMPGraphicalModel(d)
prior = model.default_prior()
loss = DFDLoss(model, x)
spread: dict = {"seeds": [], "beta_star": [], "failures": []}  # --full only
for s in range(1, beta_seeds + 1):  # seed 0 is above
    try:
        spread["beta_star"].append(calibrate_beta(loss, prior, num_bootstrap=100, seed=args.seed + 100 + s).beta)
        spread["seeds"].append(args.seed + 100 + s)
    except CALIBRATION_FAILURES as err:
        spread["failures"].append({"seed": args.seed + 100 + s, "error": f"{type(err).__name__}: {err}"})
metrics["beta_star_over_bootstrap_seeds_cmp_gm"] = spread

# stability of beta* vs Lyddon's beta over bootstrap realisations of the data (CMP-GM)
stab: dict = {"beta_star": [], "lyddon": [], "failures": 0}
for r in range(realisations):
    idx = torch.randint(0, n, (n,), generator=make_generator(args.seed, "realisation", r))
    loss = DFDLoss(model, x[idx.numpy()])
    try:
        # start in the full data's basin: the CMP loss is unbounded below, and from a prior draw the
        # full-data minimisation of a realisation can run away (2 of 10 did)
        cal = calibrate_beta(loss, prior, num_bootstrap=100, seed=r, theta_init=full_minimiser[type(model).__name__])
        stab["beta_star"].append(cal.beta)
        stab["lyddon"].append(lyddon_beta(loss, cal.minimiser))
    except CALIBRATION_FAILURES:
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
    "theta_ij = 0 a saddle that Adam and plain Newton leave only slowly). Calibration seeds whose Newton run "
    "diverges (FloatingPointError) or whose numerator is negative are recorded and the next seed is tried.",
    "Posterior predictive: systematic-scan Gibbs (exact Poisson / truncated-CMP full conditionals) at posterior "
    "draws, n = 878 points each (METHODS.md V.B15), instead of the reference code's folded random walk.",
    "NUTS through pyro, chains sequential, preconditioned by the Laplace approximation at the posterior mode and "
    "started from Laplace draws (see the module docstring); 'identified' diagnostics use |theta~| for the squared "
    "parameters (the paper's convention), 'raw' the sampled theta~.",
    "NUTS variant tried (target acceptance 0.9, 300 warm-up, same draws): CMP-GM 27 divergences, step sizes "
    "0.10-0.18, identified R-hat 1.055 / min ESS 66, 1,073 s in total; not better than the default (0.85, "
    "150 warm-up), so the default stays.",
    "Sign folding (issue 4; CMP-GM, seed-0 calibration beta* = 3.8208, same NUTS settings and seeds; one-off runs, "
    "machine shared, so seconds are only indicative): the unfolded whitened sampler had 17 divergences (committed "
    "run; 5 in a rerun, all in one chain, 12-16 Laplace SDs out, where gene 8's dispersion theta0_8 crossed 0 "
    "into the mirror copy of the posterior), identified R-hat 1.034, min ESS 162, 257 s. Folding all 55 squared "
    "parameters (fold='all'): 0 divergences, but step sizes 0.13-0.17, R-hat 1.045, min ESS 91, 1,078 s (the 42 "
    "interactions and 2 dispersions whose mode is 0 get a log-chi^2-like law in w with an exponential left tail, "
    "poorly fitted by the Laplace whitening). Folding the 11 with a non-zero mode (fold='mode', the default "
    "here, the CMPGraphicalModel entry above): 1 divergence (the first draw after warm-up of chain 2, within 3.3 "
    "posterior SDs, in gene 6's theta_6/theta0_6, no mirror crossing), step sizes 0.24-0.40, R-hat 1.039, min ESS "
    "167; the "
    "same run took 577 s under the load of the fold='all' one, so fold='all' costs about twice as much. PGM: no "
    "interaction has a non-zero mode, so nothing is folded and its sampler is the unfolded one (its R-hat/ESS "
    "differ from the previous run only because beta* differs in the 14th digit).",
]
notes += GAP_NOTES
write_results("dfd_brca", args, time.perf_counter() - start, metrics, notes,
              ["dfd_brca_predictive.png", "dfd_brca_beta.png"])
print(f"dfd_brca done in {time.perf_counter() - start:.1f} s")
