"""Benchmark smh-sbi: MH-corrected Langevin for the score-based SBI posterior (issue 5).

    scorebayes bench smh-sbi [--full] [--seed S] [--refit] [--quiet] [--skip-monotone | --skip-bimodal]

(i) Monotone regression (``get_model("monotone")``, n = 1000, d = 11; exact Gibbs reference),
across step sizes :math:`\\kappa = h\\lambda_{\\max}` (``lambda_max``: largest curvature of
:math:`-\\log\\pi` at 16 start states, in whitened unconstrained coordinates): ULA vs MH with the
path-integral (3-node Gauss-Lobatto) acceptance vs MH with a learned (SBM) acceptance network, all
with the same MALA proposal, initial states and step. Three scores: the model's exact likelihood
score (``true score``, :class:`ExactScore`, the main evidence), the exact score plus a known
constant error of ``BIAS_SD`` posterior SDs on :math:`\\theta_0` (``perturbed score``; its exact
target, a tilted truncated normal, is sampled by Gibbs), and the small-scale ScoreLangevin fit
(``learned score``; cached in ``benchmarks/results/smh_sbi_monotone_<scale>_s<seed>.pt``,
``--refit`` ignores the cache). All chains start at exact Gibbs draws (independent of the
reference) and are preconditioned by their covariance, so the rows measure each sampler's
stationary bias at a fixed score, not convergence from the localized proposal. Metrics: KS and W1
of the regression-function posterior on the 101-point grid against Gibbs (Table 2 of the SBI
paper), 95% band coverage and width, per-parameter mean error and SD ratio (in reference SDs),
acceptance, mean squared jump (frozen chains would look exact) and the fraction of draws
outside the reference's envelope (instability).

(ii) A bimodal posterior: theta ~ N(0.5, 1), x_i ~ N(theta^2, 1), n = 20, theta* = 1.5 (sign
identifiable only through the prior); exact posterior by quadrature on a grid. Mode weight
P(theta > 0 | x) recovered by ULA, MH without jumps, and MH with pCN jumps (quadrature and learned
acceptance).

Default (small) scale: ~20k simulations for the monotone fit, 1000 draws per cell, 5 step sizes
(learned score at 2, learned acceptance on the true score at 2). ``--full``: 200k simulations,
4000 draws, 10 step sizes, every sampler at every step size.
"""

from __future__ import annotations

import math
import pickle
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.distributions import Normal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _smh_common import RESULTS, parser, pyplot, write_results  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.models.monotone_gibbs import gibbs_truncated_normal  # noqa: E402
from scorebayes.posterior import Posterior  # noqa: E402
from scorebayes.priors import independent  # noqa: E402
from scorebayes.samplers.sbi_mh import mh_correct, posterior_score  # noqa: E402
from scorebayes.sbi import ScoreLangevin, TrainingSchedule  # noqa: E402
from scorebayes.simulators import Simulator  # noqa: E402

NAME = "smh_sbi"


# ------------------------------------------------------------------ monotone
def fit_monotone(model, x_obs, *, full: bool, seed: int, refit: bool, progress: bool) -> ScoreLangevin:
    """The fitted single-model ScoreLangevin, from the cache when possible."""
    scale = "full" if full else "small"
    cache = RESULTS / f"{NAME}_monotone_{scale}_s{seed}.pt"
    sizes = (dict(table_size=200_000, num_groups=5000, group_size=1000,
                  schedule=TrainingSchedule(epochs=100, penalty_epochs=50, batch_size=1000),
                  localization={"replicates": 100, "iterations": 500})  # localize()'s 500 steps, as before
             if full else
             dict(table_size=20_000, num_groups=500, group_size=200,
                  schedule=TrainingSchedule(epochs=60, penalty_epochs=10),
                  mean_schedule=TrainingSchedule(epochs=60, penalty_epochs=10, batch_size=32),
                  localization={"replicates": 20, "iterations": 200}))
    est = ScoreLangevin.from_options(model.prior, model.simulator, preset="paper", curvature_penalties=(1e-3,),
                        mean_penalties=(1e-3,), parameter_names=model.parameter_names, seed=seed,
                        progress=progress, **sizes)
    if cache.exists() and not refit:
        try:
            fitted = torch.load(cache, pickle_module=pickle, weights_only=False)
            # attributes added to ScoreLangevin since the cache was written keep their defaults
            est.__dict__.update({k: v for k, v in fitted.__dict__.items() if k.endswith("_")})
            return est
        except Exception as err:  # noqa: BLE001 - stale cache (class layout changed): refit
            print(f"cache {cache.name} unusable ({type(err).__name__}); refitting", file=sys.stderr)
    est.fit(x_obs)
    RESULTS.mkdir(parents=True, exist_ok=True)
    torch.save(est, cache, pickle_module=pickle)
    return est


class ExactScore:
    r"""The attributes sbi_mh uses, with a known likelihood score pushed to ``u``; differentiable in ``u``.

    .. math:: s_u(u) = J_T(u)^\top s_\theta(T(u)), \qquad u\ [C, d] \to [C, d].

    The vector-Jacobian product keeps its graph whenever the caller differentiates in ``u``
    (``curvature_step_size``, the curvature preconditioner, SBM's MALA gradients), so
    :math:`\nabla_u s_u` contains the likelihood's curvature and not only the prior's. (An earlier
    version went through ``ParameterSpace.pushforward_score``, which detaches ``u``: the automatic
    step then came from the prior's curvature alone.)

    Arguments:
        est: the fitted estimator; its ``space``, ``proposal_``, ``parameter_names`` and ``seed``
            are borrowed.
        score_theta: :math:`s_\theta` ``theta [C, d] -> [C, d]``, differentiable.
        region: ``(low [d], high [d])`` box in ``u`` the chains are restricted to; ``None`` (the
            default): the whole space, as the exact score is valid everywhere.
    """

    def __init__(self, est, score_theta, *, region=None):
        self.space, self.proposal_, self.training_region_ = est.space, est.proposal_, region
        self.parameter_names, self.seed = est.parameter_names, est.seed
        self.score_theta = score_theta

    def likelihood_score(self, u: torch.Tensor) -> torch.Tensor:
        keep = torch.is_grad_enabled() and u.requires_grad
        with torch.enable_grad():
            leaf = u.double() if keep else u.detach().double().requires_grad_(True)
            theta = self.space.to_constrained(leaf)
            (grad,) = torch.autograd.grad(theta, leaf, grad_outputs=self.score_theta(theta), create_graph=keep)
        return grad if keep else grad.detach()


def monotone_scores(model, x_obs: torch.Tensor, bias_sd: float, sd0: float) -> dict:
    r"""Exact and perturbed likelihood scores of the monotone model, ``theta [C, d] -> [C, d]``.

    Exact: :math:`s(\theta) = b - Q\theta` with :math:`Q = D^\top D/\sigma^2`,
    :math:`b = D^\top y/\sigma^2` (``model.posterior_parameters``; equal to ``model.true_score``
    summed over the data, without the ``n x d`` design at every call). Perturbed: :math:`s(\theta) +
    (c/s_0) e_0` with :math:`s_0` = ``sd0`` the posterior SD of :math:`\theta_0`: a constant score
    error of ``c`` posterior SDs, which tilts the posterior by :math:`e^{c\theta_0/s_0}` (for a
    Gaussian posterior: :math:`\theta_0` moves by :math:`c` SDs). The error is conservative, so its path
    integral is an exact log-ratio, but of the wrong density; the tilted posterior is again a
    truncated normal (linear term ``b + bias``), sampled exactly by :func:`tilted_reference`.

    Returns:
        ``{"exact": fn, "perturbed": fn, "bias": [d]}``.
    """
    Q, b = model.posterior_parameters(x_obs)
    bias = torch.zeros_like(b)
    bias[0] = bias_sd / sd0

    def exact(theta: torch.Tensor) -> torch.Tensor:
        return b.to(theta) - theta @ Q.to(theta)

    def perturbed(theta: torch.Tensor) -> torch.Tensor:
        return exact(theta) + bias.to(theta)

    return {"exact": exact, "perturbed": perturbed, "bias": bias}


def tilted_reference(model, x_obs: torch.Tensor, bias: torch.Tensor, num: int, generator: torch.Generator):
    """Exact Gibbs draws ``[100, num/100, d]`` of the posterior whose score is ``b - Q theta + bias``."""
    Q, b = model.posterior_parameters(x_obs)
    init = model.posterior_mode(x_obs).expand(100, -1).clone()
    draws = gibbs_truncated_normal(Q, b + bias, model.low, model.high, init=init, num_samples=-(-num // 100),
                                   burn_in=2000, thin=10, generator=generator)
    return Posterior(draws, model.parameter_names, info={"method": "gibbs (tilted)"})


def parameter_errors(posterior, reference) -> dict[str, float]:
    """Mean over parameters of |mean error| / sd_ref and |sd / sd_ref - 1|; theta_0's signed mean error / sd_ref."""
    a, b = posterior.draws.double(), reference.draws.double()
    sd_ref = b.std(0)
    shift = (a.mean(0) - b.mean(0)) / sd_ref
    return {"mean_err_sd": float(shift.abs().mean()), "sd_ratio_err": float((a.std(0) / sd_ref - 1).abs().mean()),
            "theta0_shift_sd": float(shift[0])}


class Whitener:
    r"""Whitened unconstrained coordinates of the reference: :math:`w = L^{-1}(u - \bar u)`, ``LL^T = cov(u)``.

    ``escaped``: fraction of draws farther (Mahalanobis) from the reference mean than every
    reference draw (about ``1/N_ref`` for an exact sampler; non-finite draws count as escaped).
    ``jump``: mean squared jump between successive kept draws of a chain over ``2d`` (about 1
    for independent draws, 0 for chains that do not move: starting at exact draws, frozen chains
    would otherwise look exact).
    """

    def __init__(self, space, reference):
        self.space = space
        u = space.to_unconstrained(reference.draws.double())
        self.mean, self.chol = u.mean(0), torch.linalg.cholesky(torch.cov(u.T))
        self.radius = float(self.radius_of(u).max())

    def whiten(self, theta: torch.Tensor) -> torch.Tensor:
        u = self.space.to_unconstrained(theta.double())
        flat = u.reshape(-1, u.shape[-1])
        w = torch.linalg.solve_triangular(self.chol, (flat - self.mean).T, upper=False).T
        return w.reshape(u.shape)

    def radius_of(self, u: torch.Tensor) -> torch.Tensor:
        return torch.linalg.solve_triangular(self.chol, (u - self.mean).T, upper=False).T.norm(dim=-1)

    def stats(self, posterior) -> dict[str, float]:
        w = self.whiten(posterior.samples)  # [C, S, d]
        r = w.reshape(-1, w.shape[-1]).norm(dim=-1)
        escaped = float((~torch.isfinite(r) | (r > self.radius)).double().mean())
        steps = (w[:, 1:] - w[:, :-1]).pow(2).sum(-1)
        steps = steps[torch.isfinite(steps)]
        jump = float(steps.mean() / (2 * w.shape[-1])) if len(steps) else math.nan
        return {"escaped": escaped, "jump": jump}


def curvature_profile(target, whitener: Whitener, reference, num: int = 200) -> dict[str, float]:
    r"""Quantiles of the largest and smallest curvature of :math:`-\log\pi` at ``num`` reference draws.

    In the reference-whitened coordinates ``w`` (where the posterior has unit covariance), from the
    Jacobian of the posterior score :math:`L^\top s_u(\bar u + L w)`.
    """
    score = posterior_score(target)
    L, m = whitener.chol, whitener.mean
    w = whitener.whiten(reference.draws[:num].double())
    top, bottom = [], []
    for point in w:
        jac = torch.autograd.functional.jacobian(lambda v: score((m + L @ v)[None])[0] @ L, point)
        eig = torch.linalg.eigvalsh(-0.5 * (jac + jac.T))
        top.append(float(eig[-1]))
        bottom.append(float(eig[0]))
    q = np.quantile(top, [0.1, 0.5, 0.9])
    qb = np.quantile(bottom, [0.1, 0.5, 0.9])
    return {"top_q10": q[0], "top_q50": q[1], "top_q90": q[2], "top_max": max(top),
            "bottom_q10": qb[0], "bottom_q50": qb[1], "bottom_q90": qb[2]}


def run_row(target, model, reference, whitener, *, acceptance: str, kappa: float, common: dict,
            extra: dict) -> dict:
    """One (score, kappa, sampler) cell: run ``mh_correct`` and compute the metrics."""
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            post = mh_correct(target, acceptance=acceptance, step_size_factor=kappa, num_nodes=3,
                              quadrature="lobatto", **common, **extra)
        row = {"acceptance_rate": post.info["acceptance_rate"], "step_size": post.info["step_size"],
               "max_curvature": post.info["max_curvature"], **whitener.stats(post)}
        finite = torch.isfinite(post.samples).all()
        row.update({**model.table2_metrics(post, reference), **parameter_errors(post, reference)} if finite
                   else {k: math.nan for k in ("ks", "w1", "cover95", "ci95_width", "mean_err_sd", "sd_ratio_err",
                                           "theta0_shift_sd")})
        row["unstable"] = bool(not finite or row["escaped"] > UNSTABLE_ESCAPED)
    except Exception as err:  # noqa: BLE001 - a failing chain is a result, not a crash
        row = {"error": f"{type(err).__name__}: {err}"[:200], "unstable": True}
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


#: a row is "unstable" when more than this fraction of its draws left the reference's envelope
UNSTABLE_ESCAPED = 0.01


def monotone_study(args, log) -> dict:
    model = get_model("monotone")
    x_obs = model.observed(torch.Generator().manual_seed(args.seed + 1))
    start = time.perf_counter()
    est = fit_monotone(model, x_obs, full=args.full, seed=args.seed, refit=args.refit, progress=not args.quiet)
    fit_seconds = time.perf_counter() - start
    log(f"monotone fit/load: {fit_seconds:.0f} s")
    num = 4000 if args.full else 1000
    reference = model.reference_posterior(x_obs, 20_000 if args.full else 5000,
                                          torch.Generator().manual_seed(args.seed + 2))
    whitener = Whitener(est.space, reference)
    # noise floor: an independent exact sample of the same size as the samplers' output
    floor = model.reference_posterior(x_obs, num, torch.Generator().manual_seed(args.seed + 4))
    floor_row = {**model.table2_metrics(floor, reference), **parameter_errors(floor, reference),
                 **whitener.stats(floor)}
    log({"independent Gibbs draws (noise floor)": floor_row})
    kappas = [0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 40.0] if args.full else [0.5, 1.0, 3.0, 8.0, 20.0]
    perturbed_name = f"perturbed score (+{BIAS_SD:g} SD)"
    families = {  # score -> (kappas, kappas with the learned acceptance)
        "true score": (kappas, kappas if args.full else [3.0, 8.0]),
        perturbed_name: (kappas, []),
        "learned score": (kappas, kappas) if args.full else ([1.0, 3.0], []),
    }
    # chains start at exact (Gibbs) draws independent of the reference (the last of 10 per chain;
    # all 10 precondition the chains and train the learned acceptance): the rows measure the
    # samplers' stationary bias at a fixed score, not their convergence from the localized proposal
    start_draws = model.reference_posterior(x_obs, 1000, torch.Generator().manual_seed(args.seed + 3))
    common = dict(num_samples=num, burn_in=400 if args.full else 200, thin=2, seed=args.seed, init=start_draws)
    learned_extra = {"true score": dict(acceptance_epochs=1000, acceptance_batch=256),
                     "learned score": dict(acceptance_epochs=400, acceptance_batch=128)}
    sd0 = float(reference.draws[:, 0].double().std())
    scores = monotone_scores(model, x_obs, BIAS_SD, sd0)
    targets = {"true score": ExactScore(est, scores["exact"]), perturbed_name: ExactScore(est, scores["perturbed"]),
               "learned score": est}
    # what an exact sampler of the perturbed score converges to
    tilted = tilted_reference(model, x_obs, scores["bias"], num, torch.Generator().manual_seed(args.seed + 6))
    tilted_row = {**model.table2_metrics(tilted, reference), **parameter_errors(tilted, reference),
                  **whitener.stats(tilted)}
    log({"exact perturbed target (tilted Gibbs)": tilted_row})
    curvature = curvature_profile(targets["true score"], whitener, reference)
    rows = []
    for score_name, (grid, learned_grid) in families.items():
        for kappa in grid:
            for acc in ["none", "quadrature"] + (["learned"] if kappa in learned_grid else []):
                row = run_row(targets[score_name], model, reference, whitener, acceptance=acc, kappa=kappa,
                              common=common, extra=learned_extra[score_name] if acc == "learned" else {})
                row = {"score": score_name, "kappa": kappa, "sampler": SAMPLER_LABELS[acc], **row}
                # leaving the envelope is the sampler's instability only when the score is (nearly) exact
                row["unstable"] = row["unstable"] and score_name != "learned score"
                rows.append(row)
                log(row)
    curvature["lambda_max"] = next((r["max_curvature"] for r in rows if r["score"] == "true score"
                                    and "max_curvature" in r), math.nan)
    t0 = time.perf_counter()
    ula_auto = est.sample(num, chains=100, seed=args.seed, burn_in=1000, thin=1, remedy=False)
    baseline = {**model.table2_metrics(ula_auto, reference), **parameter_errors(ula_auto, reference),
                "step_size_u": ula_auto.info["step_size"], "seconds": round(time.perf_counter() - t0, 1)}
    log({"ScoreLangevin.sample (auto step, kappa=0.1 in u)": baseline})
    return {"fit_seconds": fit_seconds, "n_obs": model.n_obs, "draws": num, "rows": rows,
            "noise_floor": floor_row, "perturbed_target": tilted_row, "curvature": curvature,
            "bias_sd": BIAS_SD, "sd_theta0": sd0, "reference_radius": whitener.radius,
            "reference_draws": int(reference.draws.shape[0]), "score_langevin_sample": baseline}


#: the perturbed score's constant bias on theta_0, in posterior SDs of theta_0
BIAS_SD = 2.0
SAMPLER_LABELS = {"none": "ULA", "quadrature": "MH-quadrature", "learned": "MH-learned"}


# ------------------------------------------------------------------ bimodal
@dataclass(frozen=True)
class SquareMean:
    """x_i = theta^2 + e_i, e_i ~ N(0, 1): ``theta [B, 1] -> x [B, n, 1]``."""

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> torch.Tensor:
        return torch.randn(B, n, 1, generator=generator, dtype=torch.float64)

    def transform(self, theta: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        return theta[:, None, :] ** 2 + e


class BimodalExactScore:
    """The attributes sbi_mh uses, with the exact likelihood score sum_i 2 theta (x_i - theta^2)."""

    def __init__(self, est: ScoreLangevin, x_obs: torch.Tensor):
        self.space, self.proposal_, self.training_region_ = est.space, est.proposal_, est.training_region_
        self.parameter_names, self.seed, self.x = est.parameter_names, est.seed, x_obs.double()[:, 0]

    def likelihood_score(self, u: torch.Tensor) -> torch.Tensor:  # identity transform: u = theta
        return (2 * u * (self.x[None, :] - u**2)).sum(1, keepdim=True)


def exact_bimodal(x_obs: torch.Tensor, prior_mean: float) -> tuple[np.ndarray, np.ndarray]:
    """Grid ``t [G]`` and posterior CDF ``[G]`` by quadrature."""
    t = np.linspace(-4.0, 4.0, 40_001)
    x = x_obs.double().numpy().reshape(-1)
    logp = -0.5 * (t - prior_mean) ** 2 - 0.5 * ((x[None, :] - t[:, None] ** 2) ** 2).sum(1)
    w = np.exp(logp - logp.max())
    cdf = np.cumsum(w)
    return t, cdf / cdf[-1]


def w1_to_grid(draws: np.ndarray, t: np.ndarray, cdf: np.ndarray) -> float:
    emp = np.searchsorted(np.sort(draws), t, side="right") / len(draws)
    return float(np.abs(emp - cdf).sum() * (t[1] - t[0]))


def bimodal_study(args, log) -> dict:
    prior_mean, n, theta_star = 0.5, 20, 1.5
    sim = Simulator(latent=SquareMean().latent, transform=SquareMean().transform, obs_dim=1)
    x_obs = sim(torch.tensor([[theta_star]], dtype=torch.float64), n, torch.Generator().manual_seed(args.seed + 5))[0]
    t, cdf = exact_bimodal(x_obs, prior_mean)
    exact_weight = float(1 - np.interp(0.0, t, cdf))
    est = ScoreLangevin.from_options(independent([Normal(prior_mean, 1.0)]), sim, preset="paper", localize=False,
                        table_size=100_000 if args.full else 20_000, num_groups=1000, group_size=100,
                        schedule=TrainingSchedule(epochs=60, penalty_epochs=10),
                        mean_schedule=TrainingSchedule(epochs=60, penalty_epochs=10, batch_size=32),
                        curvature_penalties=(1e-3,), mean_penalties=(1e-3,), seed=args.seed,
                        progress=not args.quiet)
    t0 = time.perf_counter()
    est.fit(x_obs)
    log(f"bimodal fit: {time.perf_counter() - t0:.0f} s")
    num = 8000 if args.full else 4000
    common = dict(num_samples=num, chains=200, step_size_factor=0.5, burn_in=500, thin=2, seed=args.seed,
                  precondition="proposal")
    jumps = dict(jump_every=5, jump_beta=0.95, jump_nodes=16)
    learned = dict(acceptance_epochs=400, acceptance_batch=256, pilot_steps=100)
    runs = {"ULA": dict(acceptance="none"),
            "MH-quadrature (MALA only)": dict(acceptance="quadrature"),
            "MH-quadrature + pCN jumps": dict(acceptance="quadrature", **jumps),
            "MH-learned + pCN jumps": dict(acceptance="learned", **jumps, **learned)}
    rows, draws = {}, {}
    targets = {"learned score": est, "true score": BimodalExactScore(est, x_obs)}
    for (score_name, target), (sampler, options) in [(t, r) for t in targets.items() for r in runs.items()]:
        label = f"{sampler} [{score_name}]"
        t0 = time.perf_counter()
        post = mh_correct(target, **common, **options)
        d = post.draws[:, 0].double().numpy()
        draws[label] = d
        rows[label] = {"mode_weight": float((d > 0).mean()), "w1": w1_to_grid(d, t, cdf),
                       "acceptance_rate": post.info["acceptance_rate"],
                       "jump_acceptance_rate": post.info["jump_acceptance_rate"],
                       "seconds": round(time.perf_counter() - t0, 1)}
        log({label: rows[label]})
    return {"exact_mode_weight": exact_weight, "n_obs": n, "theta_star": theta_star, "prior_mean": prior_mean,
            "rows": rows, "_draws": draws, "_grid": (t, cdf)}


# ------------------------------------------------------------------ output
def monotone_figure(mono: dict) -> None:
    """KS, W1, acceptance and relative jump against kappa, per score family and sampler."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(19, 5.4))
    colors = {"ULA": "tab:red", "MH-quadrature": "tab:blue", "MH-learned": "tab:green"}
    dashes = {}
    for score_name in dict.fromkeys(r["score"] for r in mono["rows"]):
        dashes[score_name] = ("-" if score_name.startswith("true") else "--" if score_name.startswith("perturbed")
                              else ":")
    for score_name, dash in dashes.items():
        for sampler, color in colors.items():
            rs = [r for r in mono["rows"] if r["score"] == score_name and r["sampler"] == sampler and "ks" in r]
            if not rs:
                continue
            k = [r["kappa"] for r in rs]
            for ax, key in zip(axes, ("ks", "w1", "acceptance_rate", "jump")):
                ax.plot(k, [r[key] for r in rs], dash, color=color, marker="o", ms=4,
                        label=f"{sampler} ({score_name})")
                bad = [(r["kappa"], r[key]) for r in rs if r["unstable"]]
                if bad:
                    ax.plot(*zip(*bad), "x", color="k", ms=9, mew=2)
    floor, tilted = mono["noise_floor"], mono["perturbed_target"]
    for ax, key in zip(axes[:2], ("ks", "w1")):
        ax.axhline(floor[key], color="grey", lw=1, label="independent Gibbs draws (noise floor)")
        ax.axhline(tilted[key], color="grey", lw=1, ls="--", label="exact draws of the perturbed target")
    titles = ("KS of B_M(x) vs Gibbs (grid mean)", "W1 of B_M(x) vs Gibbs", "MALA acceptance rate",
              "mean sq. jump / 2d (whitened u)")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_xlabel("kappa = h * lambda_max (lambda_max at 16 start states)")
        ax.set_title(title, fontsize=10)
    for ax in (axes[0], axes[1], axes[3]):
        ax.set_yscale("log")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle("monotone regression: ULA vs MH-corrected Langevin across step sizes "
                 "(x: unstable = >1% of draws outside the reference's envelope)")
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.savefig(RESULTS / f"{NAME}_monotone.png", dpi=110)
    plt.close(fig)


def bimodal_figure(bim: dict) -> None:
    plt = pyplot()
    t, cdf = bim["_grid"]
    dens = np.gradient(cdf, t)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, dens, "k-", lw=2, label=f"exact (P(theta>0) = {bim['exact_mode_weight']:.3f})")
    for label, d in bim["_draws"].items():
        ax.hist(d, bins=200, range=(-2.5, 2.5), density=True, histtype="step",
                label=f"{label} ({bim['rows'][label]['mode_weight']:.3f})")
    ax.set_xlim(-2.2, 2.2)
    ax.set_xlabel("theta")
    ax.set_title("bimodal posterior: x ~ N(theta^2, 1), theta ~ N(0.5, 1)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{NAME}_bimodal.png", dpi=110)
    plt.close(fig)


def _fmt(r: dict, key: str, spec: str) -> str:
    v = r.get(key, math.nan)
    return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def largest_accurate_kappa(rows: list[dict], ks_max: float, score: str = "true score") -> dict[str, str]:
    """Per sampler: the largest kappa such that every row up to it is stable with KS <= ``ks_max``."""
    out = {}
    for sampler in dict.fromkeys(r["sampler"] for r in rows if r["score"] == score):
        best = "none"
        for r in sorted((r for r in rows if r["score"] == score and r["sampler"] == sampler), key=lambda r: r["kappa"]):
            if r.get("unstable") or not r.get("ks", math.inf) <= ks_max:
                break
            best = f"{r['kappa']:g}"
        grid = "/".join(f"{r['kappa']:g}" for r in rows if r["score"] == score and r["sampler"] == sampler)
        out[sampler] = f"{best} (of {grid})"
    return out


def monotone_markdown(mono: dict) -> list[str]:
    f, t, c = mono["noise_floor"], mono["perturbed_target"], mono["curvature"]
    lines = ["## (i) Monotone regression across step sizes", "",
             f"n = {mono['n_obs']}, d = 11, {mono['draws']} draws per cell (100 chains, burn-in 200, thin 2), "
             f"reference: {mono['reference_draws']} exact Gibbs draws. Every chain starts at its own exact Gibbs "
             "draw (independent of the reference) and runs on u whitened by the covariance of 1000 such draws; "
             "the rows therefore measure each sampler's *stationary* bias at a fixed score, not convergence "
             "from the localized proposal.",
             "",
             "- `kappa` = h * lambda_max, with lambda_max the largest curvature of -log pi in the whitened "
             "coordinates over 16 start states (`h` is the MALA/ULA step there; lambda_max = "
             f"{c['lambda_max']:.0f} for the true score). The posterior in u is far from Gaussian (the near-zero "
             "theta_k are logit-transformed: their curvature grows without bound in the right tails and vanishes "
             "in the left), so lambda_max is a tail value: the top curvature at reference draws has quantiles "
             f"10/50/90% = {c['top_q10']:.0f}/{c['top_q50']:.0f}/{c['top_q90']:.0f} (max {c['top_max']:.0f}), the "
             f"smallest {c['bottom_q10']:.2g}/{c['bottom_q50']:.2g}/{c['bottom_q90']:.2g}. Hence ULA's stability "
             "limit is not kappa = 2 exactly (see `escaped`), and at a fixed run length the flat directions barely "
             "move (see `jump`).",
             "- scores: **true score** = exact likelihood score b - Q theta pushed to u (differentiable in u; "
             "no training-region restriction); "
             f"**perturbed score** = true score + the constant c/sd(theta_0) on theta_0, c = {mono['bias_sd']:g}: "
             "the posterior tilted by exp(c theta_0/sd(theta_0)) - a conservative error, so the path integral "
             "is an exact log-ratio of the *wrong* density, whose exact draws (Gibbs, `perturbed target` "
             "below) are what any exact sampler of this score converges to; "
             "**learned score** = the small-scale ScoreLangevin fit (cached; its accuracy is an issue-3 problem, "
             "KS ~0.85-0.9 whatever the sampler, so sampler effects are invisible behind it; its chains are "
             "restricted to its training region, which its proposals mostly leave: the `accept` < 1 of its ULA "
             "rows are these region rejections).",
             "- samplers: same MALA proposal, start and step; ULA accepts everything; MH-quadrature: path-integral "
             "log-ratio (3-node Gauss-Lobatto); MH-learned: acceptance network trained by score balance matching "
             "on the 1000 exact start draws (stand-in for long ULA chains' states); true score: 1000 Adam steps of "
             "256 pairs, learned score (`--full` only): 400 steps of 128.",
             "- metrics on B_M(x) over the 101-point grid vs Gibbs: KS (grid mean), W1, 95% band coverage of "
             "tanh(4x+2) and width; per parameter: `mean_err` = mean |mean error| in reference SDs, `sd_err` = "
             "mean |sd/sd_ref - 1|; `jump` = mean squared jump between successive kept draws / 2d in whitened u "
             "(~1: independent draws; ~0: frozen chains, which look exact here because they sit on exact draws); "
             f"`escaped` = fraction of draws farther (Mahalanobis, in u) than all {mono['reference_draws']} reference "
             f"draws (exact: ~{1 / mono['reference_draws']:.4f}); **unstable** = escaped > {UNSTABLE_ESCAPED:g} or "
             "non-finite draws, for the true and perturbed scores (for the learned score, escaping is the "
             "score's fault, not the sampler's: not flagged).",
             "",
             f"Noise floor (independent exact Gibbs sample of {mono['draws']} draws vs the reference): "
             f"KS {f['ks']:.3f}, W1 {f['w1']:.5f}, cover95 {f['cover95']:.3f}, CI width {f['ci95_width']:.4f}, "
             f"mean_err {f['mean_err_sd']:.3f}, sd_err {f['sd_ratio_err']:.3f}, jump {f['jump']:.2f}.",
             "",
             f"Perturbed target (exact Gibbs draws of the tilted posterior, {mono['draws']} draws, vs the "
             f"untilted reference): KS {t['ks']:.3f}, W1 {t['w1']:.5f}, cover95 {t['cover95']:.3f}, "
             f"mean_err {t['mean_err_sd']:.3f}, theta_0 shift {t['theta0_shift_sd']:+.2f} SD: the floor of "
             "every perturbed-score row.",
             "",
             "| score | kappa | sampler | h | accept | KS | W1 | cover95 | CI width | mean_err | sd_err | theta0 shift | "
             "jump | escaped | s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in mono["rows"]:
        sampler = r["sampler"] + (" (unstable)" if r.get("unstable") else "")
        if "error" in r:
            lines.append(f"| {r['score']} | {r['kappa']:g} | {sampler} | failed: {r['error']} ||||||||||| {r['seconds']} |")
            continue
        lines.append(
            f"| {r['score']} | {r['kappa']:g} | {sampler} | {_fmt(r, 'step_size', '.4f')} | "
            f"{_fmt(r, 'acceptance_rate', '.3f')} | {_fmt(r, 'ks', '.3f')} | {_fmt(r, 'w1', '.5f')} | "
            f"{_fmt(r, 'cover95', '.3f')} | {_fmt(r, 'ci95_width', '.4f')} | {_fmt(r, 'mean_err_sd', '.2f')} | "
            f"{_fmt(r, 'sd_ratio_err', '.2f')} | {_fmt(r, 'theta0_shift_sd', '+.2f')} | {_fmt(r, 'jump', '.3f')} | "
            f"{_fmt(r, 'escaped', '.3f')} | "
            f"{r['seconds']} |")
    lines += ["", "Largest kappa of the grid up to which each sampler stays stable and within 2x the noise-floor KS "
              f"(true score; {2 * f['ks']:.3f}): "
              + ", ".join(f"{k} {v}" for k, v in largest_accurate_kappa(mono["rows"], 2 * f["ks"]).items()) + "."]
    b = mono["score_langevin_sample"]
    lines += ["", f"ScoreLangevin.sample on the learned score (its own ULA, auto step kappa = 0.1 in u, burn-in 1000): "
              f"KS {b['ks']:.3f}, W1 {b['w1']:.4f}, cover95 {b['cover95']:.3f}, mean_err {b['mean_err_sd']:.2f}, "
              f"sd_err {b['sd_ratio_err']:.2f}.", "", f"![monotone]({NAME}_monotone.png)", ""]
    return lines


def bimodal_markdown(bim: dict) -> list[str]:
    lines = ["## (ii) Bimodal posterior (sign-symmetric parameter)", "",
             f"x_i ~ N(theta^2, 1), n = {bim['n_obs']}, theta* = {bim['theta_star']}, prior N({bim['prior_mean']}, 1). "
             f"Exact P(theta > 0 | x) = **{bim['exact_mode_weight']:.3f}** (quadrature).", "",
             "| sampler | P(theta>0) | W1 to exact | MALA accept | jump accept | s |", "|---|---|---|---|---|---|"]
    for label, r in bim["rows"].items():
        ja = "-" if r["jump_acceptance_rate"] is None else f"{r['jump_acceptance_rate']:.3f}"
        lines.append(f"| {label} | {r['mode_weight']:.3f} | {r['w1']:.4f} | {r['acceptance_rate']:.3f} | {ja} | {r['seconds']} |")
    lines += ["", f"![bimodal]({NAME}_bimodal.png)"]
    return lines


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--refit", action="store_true", help="ignore the cached monotone fit")
    p.add_argument("--skip-monotone", action="store_true", help="only the bimodal study")
    p.add_argument("--skip-bimodal", action="store_true", help="only the monotone study")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()

    def log(msg) -> None:
        if not args.quiet:
            print(msg, flush=True)

    bim = None if args.skip_bimodal else bimodal_study(args, log)
    mono = None if args.skip_monotone else monotone_study(args, log)
    lines = []
    if mono is not None:
        monotone_figure(mono)
        lines += monotone_markdown(mono)
    if bim is not None:
        bimodal_figure(bim)
        lines += bimodal_markdown(bim)
    payload = {"name": "smh-sbi", "scale": "full" if args.full else "small", "seed": args.seed,
               "monotone": mono,
               "bimodal": None if bim is None else {k: v for k, v in bim.items() if not k.startswith("_")}}
    write_results(NAME if not (args.skip_bimodal or args.skip_monotone) else f"{NAME}_partial", payload,
                  "\n".join(lines), start)
    return payload


if __name__ == "__main__":
    main()
