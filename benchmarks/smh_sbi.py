"""Benchmark smh-sbi: MH-corrected Langevin for the score-based SBI posterior (issue 5).

    scorebayes bench smh-sbi [--full] [--seed S] [--refit] [--quiet]

(i) Monotone regression (``get_model("monotone")``, n = 1000, d = 11; exact Gibbs reference):
one ScoreLangevin fit per run (cached in ``benchmarks/results/smh_sbi_monotone_<scale>_s<seed>.pt``,
a pickled fitted estimator; ``--refit`` ignores the cache), then, across step sizes
:math:`\\kappa = h\\lambda_{\\max}` on the standardised scale: ULA vs MH with the path-integral
(Gauss-Legendre) acceptance vs MH with a learned (SBM) acceptance network, all with the same MALA
proposal, initial states and step. All chains start at exact Gibbs draws (independent of the
reference) and are preconditioned by their covariance, so the rows measure each sampler's
stationary bias at a fixed score, not convergence from the localized proposal. The same grid is run with the model's exact likelihood score
(``true score`` rows) to separate the sampler's bias from the score's. Metrics: KS and W1 of the
regression-function posterior on the 101-point grid against Gibbs (Table 2 of the SBI paper),
95% band coverage and width, and per-parameter mean error and SD ratio (in reference SDs).

(ii) A bimodal posterior: theta ~ N(0.5, 1), x_i ~ N(theta^2, 1), n = 20, theta* = 1.5 (sign
identifiable only through the prior); exact posterior by quadrature on a grid. Mode weight
P(theta > 0 | x) recovered by ULA, MH without jumps, and MH with pCN jumps (quadrature and learned
acceptance).

Default (small) scale: ~20k simulations for the monotone fit, 1000 draws per sampler, 5 step
sizes (learned acceptance at 3). ``--full``: 200k simulations, 4000 draws, 7 step sizes.
"""

from __future__ import annotations

import math
import pickle
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.distributions import Normal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _smh_common import RESULTS, parser, pyplot, write_results  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.priors import independent  # noqa: E402
from scorebayes.samplers.sbi_mh import mh_correct  # noqa: E402
from scorebayes.sbi import ScoreLangevin, TrainingSchedule  # noqa: E402
from scorebayes.simulators import Simulator  # noqa: E402

NAME = "smh_sbi"


# ------------------------------------------------------------------ monotone
def fit_monotone(model, x_obs, *, full: bool, seed: int, refit: bool, progress: bool) -> ScoreLangevin:
    """The fitted single-model ScoreLangevin, from the cache when possible."""
    scale = "full" if full else "small"
    cache = RESULTS / f"{NAME}_monotone_{scale}_s{seed}.pt"
    sizes = (dict(num_simulations=200_000, num_groups=5000, group_size=1000,
                  schedule=TrainingSchedule(epochs=100, penalty_epochs=50, batch_size=1000),
                  localization={"replicates": 100})
             if full else
             dict(num_simulations=20_000, num_groups=500, group_size=200,
                  schedule=TrainingSchedule(epochs=60, penalty_epochs=10),
                  mean_schedule=TrainingSchedule(epochs=60, penalty_epochs=10, batch_size=32),
                  localization={"replicates": 20, "iterations": 200}))
    est = ScoreLangevin(model.prior, model.simulator, curvature_penalties=(1e-3,), mean_penalties=(1e-3,),
                        parameter_names=model.parameter_names, seed=seed, progress=progress, **sizes)
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
    """The attributes sbi_mh uses, with the model's exact likelihood score pushed to ``u``."""

    def __init__(self, est: ScoreLangevin, model, x_obs: torch.Tensor):
        self.space, self.proposal_, self.training_region_ = est.space, est.proposal_, est.training_region_
        self.parameter_names, self.seed = est.parameter_names, est.seed
        self.model, self.x_obs = model, x_obs.to(torch.float64)

    def likelihood_score(self, u: torch.Tensor) -> torch.Tensor:
        theta = self.space.to_constrained(u.detach().double())
        data = self.x_obs[None].expand(len(theta), *self.x_obs.shape)
        return self.space.pushforward_score(u.detach().double(), self.model.true_score(theta, data))


def parameter_errors(posterior, reference) -> dict[str, float]:
    """Mean over parameters of |mean error| / sd_ref and |sd / sd_ref - 1|."""
    a, b = posterior.draws.double(), reference.draws.double()
    sd_ref = b.std(0)
    return {"mean_err_sd": float(((a.mean(0) - b.mean(0)).abs() / sd_ref).mean()),
            "sd_ratio_err": float((a.std(0) / sd_ref - 1).abs().mean())}


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
    kappas = [0.05, 0.2, 0.5, 1.0, 1.5, 2.5, 4.0] if args.full else [0.1, 0.5, 1.0, 3.0]
    learned_kappas = kappas if args.full else [0.5, 3.0]
    # chains start at exact (Gibbs) draws independent of the reference: the rows measure the
    # samplers' bias at a fixed score, not their convergence from the localized proposal
    start_draws = model.reference_posterior(x_obs, 200, torch.Generator().manual_seed(args.seed + 3))
    common = dict(num_samples=num, burn_in=400 if args.full else 200, thin=2, seed=args.seed,
                  init=start_draws)
    rows = []
    scores = {"learned score": est, "true score": ExactScore(est, model, x_obs)}
    for score_name, target in scores.items():
        for kappa in kappas:
            samplers = ["none", "quadrature"] + (["learned"] if score_name == "learned score"
                                                 and kappa in learned_kappas else [])
            for acc in samplers:
                t0 = time.perf_counter()
                extra = dict(acceptance_epochs=400 if args.full else 100, acceptance_batch=128,
                             pilot_steps=100) if acc == "learned" else {}
                try:
                    post = mh_correct(target, acceptance=acc, step_size_factor=kappa, num_nodes=3,
                                      quadrature="lobatto", **common,
                                      **extra)
                    metrics = {**model.table2_metrics(post, reference), **parameter_errors(post, reference)}
                    info = {"acceptance_rate": post.info["acceptance_rate"], "step_size": post.info["step_size"]}
                except Exception as err:  # noqa: BLE001 - a diverging ULA run is a result, not a crash
                    metrics, info = {"error": f"{type(err).__name__}: {err}"[:200]}, {}
                row = {"score": score_name, "kappa": kappa, "sampler": "ULA" if acc == "none" else f"MH-{acc}",
                       "seconds": round(time.perf_counter() - t0, 1), **info, **metrics}
                rows.append(row)
                log(row)
    ula_auto = est.sample(num, chains=100, seed=args.seed, burn_in=1000, thin=1)
    baseline = {**model.table2_metrics(ula_auto, reference), **parameter_errors(ula_auto, reference),
                "step_size_u": ula_auto.info["step_size"]}
    log({"ScoreLangevin.sample (auto step, kappa=0.1 in u)": baseline})
    return {"fit_seconds": fit_seconds, "n_obs": model.n_obs, "draws": num, "rows": rows,
            "score_langevin_sample": baseline}


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
    est = ScoreLangevin(independent([Normal(prior_mean, 1.0)]), sim, localize=False,
                        num_simulations=100_000 if args.full else 20_000, num_groups=1000, group_size=100,
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
def figures(mono: dict, bim: dict) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    styles = {"ULA": "o-", "MH-quadrature": "s-", "MH-learned": "^-"}
    for score_name, dash in (("learned score", "-"), ("true score", ":")):
        for sampler, style in styles.items():
            rs = [r for r in mono["rows"] if r["score"] == score_name and r["sampler"] == sampler and "w1" in r]
            if not rs:
                continue
            k = [r["kappa"] for r in rs]
            lab = f"{sampler} ({score_name})"
            axes[0].plot(k, [r["w1"] for r in rs], style[:-1] + dash, label=lab)
            axes[1].plot(k, [r["sd_ratio_err"] for r in rs], style[:-1] + dash, label=lab)
            axes[2].plot(k, [r["acceptance_rate"] for r in rs], style[:-1] + dash, label=lab)
    for ax, title in zip(axes, ("W1 of B_M(x) vs Gibbs", "mean |sd/sd_ref - 1|", "acceptance rate")):
        ax.set_xscale("log")
        ax.set_xlabel("kappa = h * lambda_max")
        ax.set_title(title)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle("monotone regression: ULA vs MH-corrected Langevin across step sizes")
    fig.tight_layout()
    fig.savefig(RESULTS / f"{NAME}_monotone.png", dpi=110)
    plt.close(fig)

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


def markdown(mono: dict, bim: dict) -> str:
    lines = ["## (i) Monotone regression across step sizes", "",
             f"n = {mono['n_obs']}, {mono['draws']} draws per sampler (100 chains started at independent "
             "exact Gibbs draws, preconditioned by their covariance), reference: exact Gibbs. "
             "kappa = h * lambda_max on the standardised scale (ULA unstable for kappa >= 2). "
             "`mean_err_sd`: mean over parameters of |mean error| in reference SDs; `sd_ratio_err`: "
             "mean |sd/sd_ref - 1|.", "",
             "| score | kappa | sampler | accept | KS | W1 | cover95 | CI width | mean_err_sd | sd_ratio_err | s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in mono["rows"]:
        if "error" in r:
            lines.append(f"| {r['score']} | {r['kappa']} | {r['sampler']} | failed: {r['error']} |||||||| {r['seconds']} |")
            continue
        lines.append(f"| {r['score']} | {r['kappa']} | {r['sampler']} | {r['acceptance_rate']:.3f} | {r['ks']:.3f} | "
                     f"{r['w1']:.4f} | {r['cover95']:.3f} | {r['ci95_width']:.4f} | {r['mean_err_sd']:.2f} | "
                     f"{r['sd_ratio_err']:.2f} | {r['seconds']} |")
    b = mono["score_langevin_sample"]
    lines += ["", f"ScoreLangevin.sample (auto step): KS {b['ks']:.3f}, W1 {b['w1']:.4f}, cover95 {b['cover95']:.3f}, "
              f"mean_err_sd {b['mean_err_sd']:.2f}, sd_ratio_err {b['sd_ratio_err']:.2f}.", "",
              f"![monotone]({NAME}_monotone.png)", "",
              "## (ii) Bimodal posterior (sign-symmetric parameter)", "",
              f"x_i ~ N(theta^2, 1), n = {bim['n_obs']}, theta* = {bim['theta_star']}, prior N({bim['prior_mean']}, 1). "
              f"Exact P(theta > 0 | x) = **{bim['exact_mode_weight']:.3f}** (quadrature).", "",
              "| sampler | P(theta>0) | W1 to exact | MALA accept | jump accept | s |", "|---|---|---|---|---|---|"]
    for label, r in bim["rows"].items():
        ja = "-" if r["jump_acceptance_rate"] is None else f"{r['jump_acceptance_rate']:.3f}"
        lines.append(f"| {label} | {r['mode_weight']:.3f} | {r['w1']:.4f} | {r['acceptance_rate']:.3f} | {ja} | {r['seconds']} |")
    lines += ["", f"![bimodal]({NAME}_bimodal.png)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--refit", action="store_true", help="ignore the cached monotone fit")
    p.add_argument("--skip-monotone", action="store_true", help="only the bimodal study")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()

    def log(msg) -> None:
        if not args.quiet:
            print(msg, flush=True)

    bim = bimodal_study(args, log)
    mono = ({"rows": [], "n_obs": 0, "draws": 0, "fit_seconds": 0.0,
             "score_langevin_sample": {k: math.nan for k in ("ks", "w1", "cover95", "mean_err_sd", "sd_ratio_err")}}
            if args.skip_monotone else monotone_study(args, log))
    figures(mono, bim)
    payload = {"name": "smh-sbi", "scale": "full" if args.full else "small", "seed": args.seed,
               "monotone": mono, "bimodal": {k: v for k, v in bim.items() if not k.startswith("_")}}
    write_results(NAME, payload, markdown(mono, bim), start)
    return payload


if __name__ == "__main__":
    main()
