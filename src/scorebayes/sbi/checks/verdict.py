r"""The fit's verdict: cheap checks that say whether a learned posterior can be trusted.

Every check uses the fitted [`LearnedLikelihoodScore`][scorebayes.sbi.likelihood.LearnedLikelihoodScore] and
$M$ data sets simulated at the learned posterior mean $\hat u$ (no new fit, no exact
posterior). A true likelihood score $S(u; \mathbf X) = \nabla_u\log p(\mathbf X\mid T(u))$
obeys the two Bartlett identities at every $u$,

$$
\mathbb E_{\mathbf X\sim p(\cdot\mid T(u))} S(u; \mathbf X) = 0, \qquad
\operatorname{Var} S(u; \mathbf X) = -\mathbb E\,\nabla_u S(u; \mathbf X) =: J,
$$

so with $\bar S$, $\hat V$ and $\hat J$ their averages over the $M$
data sets ($\hat J$ as the secant slope over $\hat u \pm$ one posterior SD):

- **bias** $\delta = \hat V^{-1}\bar S$, per parameter in units of
  $\sqrt{(\hat V^{-1})_{jj}}$: how far the score's bias moves a posterior the data dominate,
  in posterior standard deviations (standard error $1/\sqrt M$). A score shifted by one
  posterior SD gives $\delta \approx 1$.
- **scale** $r_j$: the posterior draws' SD over the SD implied by the scores' spread,
  $\sqrt{\operatorname{diag}(\hat J\hat V^{-1}\hat J + H_\pi)^{-1}}$ (the Godambe
  information plus the prior's curvature $H_\pi$; Laplace). For a right score
  $\hat J = \hat V$ and $r \approx 1$; a score $c$ times too large gives
  $r = c^{-1/2}$, a score that is right near $\hat u$ but too flat in the tails
  gives $r > 1$ (standard error of $\log r$ about $1/\sqrt{2M}$).
- **table**: the share of posterior draws farther than 3 SDs from the table's proposal mean
  (the score network extrapolates there), and the share at the edge of the trained region.
- **chains**: start memory, R-hat and effective sample size of the draws.

Each check gives ``pass``, ``warn`` (a number beyond the accuracy the defaults aim at: the
posterior mean within 0.3 SD and the SD within 25%, by more than 2 standard errors) or ``fail``
(clearly beyond it, by more than 3 standard errors); the verdict is the worst.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
    - Bartlett, "Approximate confidence intervals" (Biometrika, 1953): the score identities
    - Godambe, "An optimum property of regular maximum likelihood estimation" (Ann. Math. Stat., 1960)
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
from .score_mean import score_shift
from .simulated import simulate_views

__all__ = ["VERDICTS", "FitCheck", "Findings", "chain_findings", "check_fit", "grade"]

VERDICTS = ("pass", "warn", "fail")
#: (warn, fail) limits: |bias| in posterior SDs, |log sd ratio|, shares of draws
BIAS_LIMITS = (0.3, 0.5)
SCALE_LIMITS = (math.log(1.25), math.log(1.4))
TABLE_LIMITS = (0.01, 0.05)
EDGE_LIMITS = (0.01, 0.05)


@dataclass
class FitCheck:
    r"""The verdict of [`check_fit()`][scorebayes.sbi.checks.verdict.check_fit].

    Attributes:
        verdict: ``"pass"``, ``"warn"`` or ``"fail"`` (the worst of the checks).
        reasons: one sentence per check that did not pass (what it measured).
        advice: what to try, for the failed checks.
        remedies: what was done automatically before this verdict (empty if nothing).
        details: the numbers: ``bias_sd [d]``, ``sd_ratio [d]``, ``table_outside``,
            ``edge_fraction``, ``rhat``, ``ess``, ``num_data_sets``.
    """

    verdict: str
    reasons: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"verdict", "reasons", "advice", "remedies", "details"}``."""
        return {"verdict": self.verdict, "reasons": list(self.reasons), "advice": list(self.advice),
                "remedies": list(self.remedies), "details": dict(self.details)}

    def line(self) -> str:
        """The verdict in one line (printed after a fit)."""
        text = f"check: {self.verdict}"
        if self.reasons:
            text += ": " + "; ".join(self.reasons)
        if self.remedies:
            text += " (after: " + "; ".join(self.remedies) + ")"
        if self.verdict == "fail" and self.advice:
            text += ". Try: " + "; ".join(self.advice)
        return text


class Findings:
    """Collects (level, reason, advice) and reduces them to a verdict."""

    def __init__(self):
        self.level, self.reasons, self.advice = 0, [], []

    def add(self, level: int, reason: str, advice: str | None = None) -> None:
        if level == 0:
            return
        self.level = max(self.level, level)
        self.reasons.append(reason)
        if level == 2 and advice and advice not in self.advice:
            self.advice.append(advice)


def grade(excess_warn: float, excess_fail: float) -> int:
    """0 (pass), 1 (warn) or 2 (fail) from how far a statistic is beyond each limit (> 0: beyond)."""
    return 2 if excess_fail > 0 else 1 if excess_warn > 0 else 0


def chain_findings(found: Findings, posterior: Posterior, details: dict[str, Any]) -> None:
    """Did the chains mix? Warnings for an R-hat above 1.05 and fewer than 100 effective draws
    (``details["rhat"]``, the largest, and ``details["ess"]``, the smallest over the parameters)."""
    rows = posterior.summary()
    rhat = [r["rhat"] for r in rows if r["rhat"] is not None]
    ess = [r["ess"] for r in rows if r["ess"] is not None]
    details["rhat"], details["ess"] = (max(rhat) if rhat else None), (min(ess) if ess else None)
    if rhat and max(rhat) > 1.05:
        found.add(1, f"R-hat is {max(rhat):.3f} (chains disagree)")
    if ess and min(ess) < 100:
        found.add(1, f"only {min(ess):.0f} effective draws")


def bartlett_statistics(likelihood, u_hat: Tensor, step: Tensor, x: list[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    r"""The bias $\delta$ ``[d]``, the scores' covariance $\hat V$ ``[d, d]`` and the
    learned score's mean negative slope $\hat J$ ``[d, d]`` (symmetrised) at ``u_hat [d]``
    over data sets ``x`` (their network views, ``[m, p_net]`` each; module docstring). The slope is
    the secant over ``u_hat +- step [d]`` (the posterior's SDs): the curvature that sets the
    posterior's width, not a network's local wiggle."""
    M, d = len(x), u_hat.numel()
    u_hat = u_hat.detach().to(torch.float64)
    offsets = torch.cat([torch.zeros(1, d, dtype=torch.float64), torch.diag(step), -torch.diag(step)])
    with torch.no_grad():
        scores = likelihood.for_data_sets(x)((u_hat + offsets).expand(M, -1, -1).clone())  # [M, 1 + 2d, d]
    at = scores[:, 0]
    slope = (scores[:, 1:d + 1] - scores[:, d + 1:]) / (2 * step[None, :, None])  # [M, d(u), d(score)]
    V = torch.cov(at.T).reshape(d, d)
    J = -slope.mean(0).T
    _, bias = score_shift(at.mean(0), V)
    return bias, V, 0.5 * (J + J.T)


def implied_sd(space, u_hat: Tensor, V: Tensor, J: Tensor) -> Tensor:
    r"""The posterior SDs ``[d]`` (in ``u``) that the learned score's spread implies at ``u_hat``:
    $\sqrt{\operatorname{diag}(J V^{-1} J - \nabla^2_u\log\pi_u(\hat u))^{-1}}$, the Godambe
    (sandwich) information of the likelihood plus the prior's curvature (Laplace)."""
    prior_hessian = torch.autograd.functional.hessian(
        lambda v: space.log_prob_unconstrained(v[None]).sum(), u_hat.detach().to(torch.float64))
    precision = J @ torch.linalg.pinv(V) @ J - prior_hessian
    return torch.linalg.pinv(0.5 * (precision + precision.T)).diagonal().clamp_min(0).sqrt()


def check_fit(estimator, posterior: Posterior, *, num_data_sets: int = 200, seed: int | None = None,
              remedies: list[str] | None = None) -> FitCheck:
    r"""Check a fitted [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] and its ``posterior``.

    Simulates ``num_data_sets`` data sets of the observed size at the posterior mean (they are
    counted in ``estimator.simulations_["check"]``) and runs the checks of the module docstring.

    Returns:
        a [`FitCheck`][scorebayes.sbi.checks.verdict.FitCheck].
    """
    if isinstance(num_data_sets, bool) or not isinstance(num_data_sets, int) or num_data_sets < 20:
        raise ValueError(f"num_data_sets must be an integer >= 20, got {num_data_sets!r}")
    likelihood, space = estimator.likelihood_, estimator.space
    names = posterior.names
    u_draws = estimator.posterior_u(posterior)
    found = Findings()
    details: dict[str, Any] = {"num_data_sets": num_data_sets}

    # the Bartlett identities at the posterior mean
    u_hat = u_draws.mean(0)
    g = make_generator(estimator.seed if seed is None else seed, "fit-check")
    theta_hat = space.to_constrained(u_hat[None]).expand(num_data_sets, -1).clone()
    estimator.simulations_["check"] = estimator.simulations_.get("check", 0.0) + float(num_data_sets)
    _, _, views = simulate_views(estimator, theta_hat, g, "the fit's check")
    sd = u_draws.std(0)
    bias, V, J = bartlett_statistics(likelihood, u_hat, sd, views)
    ratio = sd / implied_sd(space, u_hat, V, J)
    details["bias_sd"], details["sd_ratio"] = bias.tolist(), ratio.tolist()
    se_bias, se_log = 1 / math.sqrt(len(views)), 1 / math.sqrt(2 * len(views))
    for j, name in enumerate(names):
        b, r = float(bias[j]), float(ratio[j])
        level = grade(abs(b) - BIAS_LIMITS[0] - 2 * se_bias, abs(b) - BIAS_LIMITS[1] - 3 * se_bias)
        found.add(level, f"the learned score of {name} is biased by {b:+.2f} posterior SDs at the "
                         "posterior mean", "a table round around the posterior, or more simulations")
        if not (math.isfinite(r) and r > 0):
            found.add(2, f"the learned scores of {name} do not vary between data sets (no "
                         "information)", "more simulations or longer training")
            continue
        log_r = abs(math.log(r)) if r > 0 else float("inf")
        level = grade(log_r - SCALE_LIMITS[0] - 2 * se_log, log_r - SCALE_LIMITS[1] - 3 * se_log)
        found.add(level, f"the posterior SD of {name} looks {r:.2f} times the right one (the draws "
                         "against the learned scores' spread)",
                  "a table round around the posterior, or more simulations")

    # does the table cover the posterior?
    proposal = estimator.proposal_
    if isinstance(proposal, GaussianProposal):
        z = (u_draws - proposal.mean) / proposal.sd
        outside = float((z.abs() > 3).any(-1).double().mean())
        details["table_outside"] = outside
        found.add(grade(outside - TABLE_LIMITS[0], outside - TABLE_LIMITS[1]),
                  f"{outside:.1%} of the draws lie beyond 3 SDs of the table's proposal",
                  "a table round around the posterior, or a wider proposal (proposal_inflation)")
    edge = float(posterior.info.get("edge_fraction", 0.0))
    details["edge_fraction"] = edge
    found.add(grade(edge - EDGE_LIMITS[0], edge - EDGE_LIMITS[1]),
              f"{edge:.1%} of the draws lie at the edge of the region the score was trained on",
              "a table round around the posterior, or a wider proposal (proposal_inflation)")

    chain_findings(found, posterior, details)
    if posterior.info.get("remembers_start"):
        found.add(1, "the chains have not forgotten their starts")
    return FitCheck(VERDICTS[found.level], found.reasons, found.advice, list(remedies or []), details)
