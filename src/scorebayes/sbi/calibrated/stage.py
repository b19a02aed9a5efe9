r"""The calibration stage: the learned score as a summary, calibrated on data sets of the observed size.

Summing a learned single-observation score over $n$ observations sums its error too: a
relative error $\epsilon$ in one observation's score moves the posterior by about
$\epsilon\sqrt n$ posterior SDs. Used as a *summary* instead, the same network gives a
posterior whose bias is removed by simulation:

$$
T(\mathbf X) = \frac1n \sum_{i=1}^n \big[s_\phi(\hat u, x_i) - h_\psi(\hat u)\big] \in \mathbb R^d,
\qquad
\pi(u \mid \mathbf X^*) \propto \pi_u(u)\, \mathcal N\big(T(\mathbf X^*); m(u), \Sigma(u)\big),
$$

at a point estimate $\hat u$, with the Gaussian synthetic likelihood $(m, \Sigma)$ of
[`scorebayes.sbi.calibrated.synthetic_likelihood`][scorebayes.sbi.calibrated.synthetic_likelihood] fitted
to whole data sets simulated at the observed $n$. If $T$ were the exact score, it would be
locally sufficient, and the calibrated posterior the exact one to first order; a learned score
only has to be nearly efficient, not unbiased.

Rounds: round 0 draws its data sets from the localized proposal; each later round from
$\mathcal N(\bar u, (\kappa\,\mathrm{sd})^2)$ around the last calibrated posterior
($\kappa = 2.5$; both truncated at 3 SDs), with $\hat u = \bar u$ and the summaries of all rounds' data sets
recomputed there. The rounds stop when the posterior mean moved less than 0.3 of its SDs and
the SDs by less than 30% (or after ``MAX_ROUNDS``). A score summary whose mean curves more than
the synthetic likelihood's quadratic allows (its lack of fit,
[`lack_of_fit()`][scorebayes.sbi.calibrated.synthetic_likelihood.lack_of_fit], beyond
``LACK_OF_FIT_LIMIT`` in some round) is replaced, from then on, by its local quadratic
regression onto the parameters, $T' = \hat B^\top(1, z, z_i z_j)$ with $z$ the standardised
$T$, whose mean is close to linear in $u$, and fitted by generalised least squares; generic
statistics $S$ of the data sets (quantiles, means, cross-products) join the regression when
they predict the parameters of held-back data sets clearly better
([`scorebayes.sbi.calibrated.statistics`][scorebayes.sbi.calibrated.statistics]). The posterior is sampled by MALA
([`scorebayes.sbi.calibrated.sampling`][scorebayes.sbi.calibrated.sampling]). A fifth of the latest round's data sets
is held back (earlier rounds' all join the fit) for the local simulation-based calibration of
[`scorebayes.sbi.calibrated.coverage`][scorebayes.sbi.calibrated.coverage], which is relative to
that round's proposal, and for judging the projection.

References:
    - Constructing summary statistics for approximate Bayesian computation: semi-automatic
      approximate Bayesian computation (Fearnhead and Prangle, 2012)
    - Statistical inference for noisy nonlinear ecological dynamic systems (Wood, 2010)
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ...parallel import make_generator
from ...posterior import Posterior
from ...proposal import GaussianProposal
from ..budget import MAX_ROUNDS
from ..checks.simulated import simulate_views
from ..fitted import FittedEstimator
from .coverage import held_out_coverage
from .sampling import sample_mala
from .statistics import DataStatistics, fit_projection
from .synthetic_likelihood import GaussianSyntheticLikelihood, fit_synthetic_likelihood, lack_of_fit

__all__ = ["CalibrationReport", "calibrated_posterior", "information_ratio", "proposal_moments", "score_summaries"]

#: a round's proposal SD over the last posterior's SD
WIDTH = 2.5
HOLD_OUT = 0.2
#: a round's proposal is truncated at this many of its SDs (no far-out parameters, where
#: simulators overflow)
TRUNCATION = 3.0
#: the rounds stop when the mean moves less than this many SDs and the SDs less than this ratio
MOVE_TOLERANCE, SD_TOLERANCE = 0.3, 1.3
#: a table round (a sharper summary) that moved the mean more than this many SDs, or shrank an
#: SD below this ratio, had not settled the posterior yet
SETTLED_MOVE, SETTLED_SD_RATIO = 0.3, 0.8
#: a score summary whose synthetic likelihood's variance exceeds its pure-error variance by
#: this factor in some component curves more than a quadratic mean allows
LACK_OF_FIT_LIMIT = 1.4


@dataclass
class CalibrationReport:
    """What the calibration did: per round ``{"data_sets", "center", "mean", "sd", "moved"}``,
    the held-back data sets' ``coverage``, the observed summary's standardised distance
    ``observed_distance`` (chi-square with ``d`` degrees of freedom if the model fits), and the
    final synthetic likelihood."""

    rounds: list[dict[str, Any]] = field(default_factory=list)
    coverage: dict[str, Any] = field(default_factory=dict)
    observed_distance: float = math.nan
    converged: bool = False
    likelihood: GaussianSyntheticLikelihood | None = None
    proposal: tuple[Tensor, Tensor] | None = None
    table_rounds: int = 0
    #: per table round, how it changed the posterior (`record_sharpening()`)
    sharpening: list[dict[str, float]] = field(default_factory=list)
    information_ratio: tuple[float, float] = (math.nan, math.nan)
    #: every round's parameters and data sets' network views, kept for a later round
    pooled_u: list[Tensor] = field(default_factory=list, repr=False)
    pooled_views: list[Tensor] = field(default_factory=list, repr=False)
    pooled_statistics: list[Tensor] = field(default_factory=list, repr=False)
    #: per round, the share of each parameter's residual variance that the data statistics
    #: explained beyond the score (`scorebayes.sbi.calibrated.statistics`), or None if they did
    #: not join the regression
    projection_gain: list[list[float] | None] = field(default_factory=list)
    #: the summed-score posterior's Laplace approximation against this one (`summed`), or None
    summed_score: dict[str, Any] | None = None
    #: per round, the score summary's lack of fit per component (`synthetic_likelihood.lack_of_fit`)
    lack_of_fit: list[list[float]] = field(default_factory=list)
    #: whether some round's lack of fit passed ``LACK_OF_FIT_LIMIT``: from then on the summary
    #: is regressed quadratically onto the parameters
    curved: bool = False

    def last_estimate(self) -> tuple[Tensor, Tensor]:
        """The last round's posterior mean and SD in ``u``, ``[d]`` each."""
        last = self.rounds[-1]
        return (torch.tensor(last["mean"], dtype=torch.float64), torch.tensor(last["sd"], dtype=torch.float64))

    def record_sharpening(self, before: tuple[Tensor, Tensor]) -> None:
        """Record how a table round changed the posterior from ``before`` (mean, SD): the largest
        move of the mean in the new SDs and the smallest ratio of new to old SDs."""
        (mean0, sd0), (mean1, sd1) = before, self.last_estimate()
        self.sharpening.append({"moved": float(((mean1 - mean0).abs() / sd1).max()),
                                "sd_ratio": float((sd1 / sd0).min())})

    def still_sharpening(self) -> bool:
        """Whether the last table round moved the mean more than ``SETTLED_MOVE`` SDs or shrank an
        SD below ``SETTLED_SD_RATIO`` of the previous one (another may sharpen it further)."""
        if not self.sharpening:
            return False
        last = self.sharpening[-1]
        return last["moved"] > SETTLED_MOVE or last["sd_ratio"] < SETTLED_SD_RATIO

    def score_inefficient(self) -> bool:
        """Whether, in the last round, generic data statistics explained more than `statistics.GAIN` of
        some parameter's residual variance beyond the learned score (they joined the summary)."""
        return bool(self.projection_gain) and self.projection_gain[-1] is not None

    def to_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "coverage": self.coverage, "converged": self.converged,
                "observed_distance": self.observed_distance, "table_rounds": self.table_rounds,
                "sharpening": self.sharpening, "projection_gain": self.projection_gain,
                "summed_score": self.summed_score, "lack_of_fit": self.lack_of_fit, "curved": self.curved,
                "information_ratio": list(self.information_ratio)}


def score_summaries(likelihood: Any, u_hat: Tensor, views: list[Tensor]) -> Tensor:
    r"""$T(\mathbf X_m)$ at ``u_hat [d]`` for the network views of ``M`` data sets: ``[M, d]``."""
    if not views:
        return torch.zeros(0, u_hat.numel(), dtype=torch.float64)
    score = likelihood.for_data_sets(views)
    with torch.no_grad():
        total = score(u_hat.to(torch.float64).reshape(1, 1, -1).expand(len(views), 1, -1).clone())[:, 0]
    counts = torch.tensor([float(len(v)) for v in views], dtype=torch.float64)[:, None]
    return total / counts


def information_ratio(synthetic: GaussianSyntheticLikelihood, n: int) -> tuple[float, float]:
    r"""The extreme eigenvalues of $(n\Sigma)^{-1/2} \bar J (n\Sigma)^{-1/2}$ at the fit's centre,
    with $\bar J$ the symmetrised slope $\partial m / \partial u$ of the summary's mean and
    $\Sigma$ its covariance. For the exact score both are the Fisher information of one
    observation (the information identity), and the ratios are 1; a learned score whose spread
    exceeds its slope gives ratios below 1."""
    d = len(synthetic.center)
    slope = synthetic.mean_coef[1:d + 1] / synthetic.scale[:, None]  # [d(u), d(T)]
    slope = 0.5 * (slope + slope.T)
    sd = synthetic.log_sd_coef[0].exp()
    cov = n * sd[:, None] * (synthetic.corr_chol @ synthetic.corr_chol.T) * sd[None, :]
    root = torch.linalg.cholesky(cov)
    inner = torch.linalg.solve_triangular(root, torch.linalg.solve_triangular(root, slope, upper=False).T,
                                          upper=False)
    eig = torch.linalg.eigvalsh(0.5 * (inner + inner.T))
    return float(eig.min()), float(eig.max())


def proposal_moments(est: FittedEstimator) -> tuple[Tensor, Tensor]:
    """The tables' proposal in ``u`` as a mean and SD, ``[d]`` each: the localized (or a table
    round's) Gaussian, or the prior's moments. Round 0 of the calibration draws from it."""
    proposal = est.proposal_
    if isinstance(proposal, GaussianProposal):
        return proposal.mean.clone(), proposal.sd.clone()
    with torch.random.fork_rng():
        torch.manual_seed(est.seed)
        u = est.space.to_unconstrained(est.prior.sample((4000,)).to(torch.float64))
    u = u[torch.isfinite(u).all(-1)]
    return u.mean(0), u.std(0)


def calibrated_posterior(est: FittedEstimator, num_samples: int, *, seed: int, names: list[str],
                         report: CalibrationReport | None = None,
                         rounds: int = MAX_ROUNDS) -> tuple[Posterior, CalibrationReport]:
    """The calibrated posterior of the fitted ``est`` (module docstring) and its report.

    The data sets are simulated through the tables' fault handling and counted in
    ``est.simulations_["calibration"]``; each round is one stage of ``est.ledger_``. A
    ``report`` of an earlier call (before a table round retrained the networks) continues it:
    its data sets are kept, their summaries recomputed with the new networks, and at most
    ``rounds`` new rounds start from its last estimate.
    """
    g = make_generator(seed, "calibration", len(report.rounds) if report else 0)
    likelihood = est.likelihood_
    _, _, observed_view = simulate_views(est, None, g, "the calibration", data=likelihood.x_obs[None])
    statistics = DataStatistics(observed_view[0])
    s_obs = statistics(observed_view)
    size = est.plan_.calibration
    if report is None:
        report = CalibrationReport()
        center, proposal_sd = proposal_moments(est)
        scale = proposal_sd / WIDTH
    else:
        center, scale = report.last_estimate()
        proposal_sd = WIDTH * scale
    pooled_u, pooled_views = report.pooled_u, report.pooled_views
    held = torch.zeros(sum(len(u) for u in pooled_u), dtype=torch.bool)
    first = len(report.rounds)
    for r in range(first, first + rounds):
        with est.ledger_.stage(f"calibration {r + 1}"):
            u_new = center + proposal_sd * _truncated_normal(size, len(center), g)
            est.simulations_["calibration"] = est.simulations_.get("calibration", 0.0) + float(size)
            keep, _, views = simulate_views(est, est.space.to_constrained(u_new), g, "the calibration",
                                            drop_nonfinite=True)
            u_new = u_new[keep]
            held = torch.cat([torch.zeros_like(held), torch.rand(len(u_new), generator=g) < HOLD_OUT])
            pooled_u.append(u_new)
            pooled_views += views
            report.pooled_statistics.append(statistics(views))
            u_all, s_all = torch.cat(pooled_u), torch.cat(report.pooled_statistics)
            t_all = score_summaries(likelihood, center, pooled_views)
            t_obs = score_summaries(likelihood, center, observed_view)
            good = torch.isfinite(t_all).all(-1) & torch.isfinite(s_all).all(-1)
            fold = torch.arange(len(u_all)) % 2
            fit_rows = good & ~held
            raw = fit_synthetic_likelihood(u_all[fit_rows], t_all[fit_rows], center, scale, bandwidth=WIDTH)
            report.information_ratio = information_ratio(raw, len(likelihood.x_obs))  # of the score
            report.lack_of_fit.append(lack_of_fit(raw, u_all[fit_rows], t_all[fit_rows]).tolist())
            report.curved = report.curved or max(report.lack_of_fit[-1]) > LACK_OF_FIT_LIMIT
            projection = fit_projection(u_all[good], t_all[good], s_all[good], held[good], fold[good],
                                        center, scale, 2 * WIDTH, t_obs[0], quadratic=report.curved)
            report.projection_gain.append(projection.gain.tolist() if projection and projection.statistics else None)
            synthetic = raw
            if projection is not None:  # T' (a local prediction of u) replaces T
                t_all, t_obs = projection(t_all, s_all, fold), projection(t_obs, s_obs)
                synthetic = fit_synthetic_likelihood(u_all[fit_rows], t_all[fit_rows], center, scale,
                                                     bandwidth=WIDTH, generalised=report.curved)
            t_obs = t_obs[0]

            def log_posterior(u: Tensor, synthetic=synthetic, t_obs=t_obs) -> Tensor:
                return est.space.log_prob_unconstrained(u) + synthetic.log_prob(t_obs, u)

            box = (center - 4 * proposal_sd, center + 4 * proposal_sd)
            draws, info = sample_mala(log_posterior, center, torch.diag(scale**2), num_samples, box=box,
                                      generator=g, progress=est.progress)
            flat = draws.reshape(-1, draws.shape[-1])
            mean, sd = flat.mean(0), flat.std(0).clamp_min(1e-12)
            moved = float(((mean - center).abs() / sd).max())
            sd_change = float((sd / scale).log().abs().max().exp())
            report.rounds.append({"data_sets": int(keep.sum()), "center": center.tolist(), "mean": mean.tolist(),
                                  "sd": sd.tolist(), "moved": moved, "acceptance": info["acceptance_rate"]})
            report.likelihood, report.proposal = synthetic, (center.clone(), proposal_sd.clone())
            report.observed_distance = float((synthetic.standardised(t_obs, mean)[0] ** 2).sum())
            est.ledger_.note(f"  calibration round {r + 1}: the estimate moved {moved:.2f} posterior SDs, "
                             f"the SDs changed by a factor up to {sd_change:.2f}")
        report.converged = r > 0 and moved < MOVE_TOLERANCE and sd_change < SD_TOLERANCE
        if report.converged or sum(est.simulations_.values()) + size > _cap(est):
            break
        center, scale, proposal_sd = mean, sd, WIDTH * sd
    proposal_draws = report.proposal[0] + report.proposal[1] * _truncated_normal(4000, len(center), g)
    rows = torch.nonzero(held & good).flatten()
    report.coverage = held_out_coverage(report.likelihood, u_all[rows], t_all[rows], proposal_draws)
    theta = est.space.to_constrained(draws.reshape(-1, draws.shape[-1])).reshape(draws.shape)
    return Posterior(theta, names, info={"posterior": "calibrated", **info}), report


def _truncated_normal(num: int, d: int, g: torch.Generator) -> Tensor:
    """``[num, d]`` standard normal draws truncated to ``[-TRUNCATION, TRUNCATION]`` (redrawn)."""
    z = torch.randn(num, d, generator=g, dtype=torch.float64)
    while (out := z.abs() > TRUNCATION).any():
        z[out] = torch.randn(int(out.sum()), generator=g, dtype=torch.float64)
    return z


def _cap(est: FittedEstimator) -> float:
    """The budget the rounds may spend up to (``inf`` without ``num_simulations``)."""
    total = est.plan_.total
    return math.inf if total is None else float(total)
