r"""The score-mean test: a learned likelihood score's mean over data sets simulated at one parameter.

For the true likelihood score, $\mathbb E_{x\sim p(x\mid\theta)}\nabla_u\log p(x\mid T(u)) = 0$
at every $\theta$ (the first Bartlett identity), so the mean of the learned score over
$M$ data sets simulated at $\theta$ is a cheap test of its bias: no sampling involved.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853>
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ...parallel import make_generator
from .simulated import checked_parameters, simulate_views

__all__ = ["ScoreMeanTest", "score_mean_test", "score_shift"]


@dataclass
class ScoreMeanTest:
    r"""The outcome of [`score_mean_test()`][scorebayes.sbi.checks.score_mean.score_mean_test] at one parameter (``d`` parameters, in ``u``).

    Attributes:
        names, theta: the parameters' names and the parameter tested, ``[d]``.
        mean, se: the learned score's mean over the data sets and its standard error, ``[d]``.
        t: ``mean / se`` (about N(0, 1) per parameter if the score is right).
        shift: $\hat I^{-1}\bar s$ with $\hat I$ the scores' covariance (the Fisher
            information for a true score): roughly how far the score's bias moves a posterior
            that the data dominate, in ``u``; ``shift_sd`` divides it by $\sqrt{(\hat I^{-1})_{jj}}$.
        prior_pull: where the *exact* posterior's mean sits relative to ``theta`` on average, to
            first order (Laplace): $H^{-1}\nabla_u\log\pi_u(u^*)$ with
            $H = \hat I - \nabla_u^2\log\pi_u(u^*)$, in ``u``; ``prior_pull_sd`` divides it by
            $\sqrt{(H^{-1})_{jj}}$, the posterior SD. Even an exact posterior's intervals
            are off-centre at a fixed ``theta`` by about this much (coverage there is 0.95 only on
            average over the prior), so ``calibrate(at=theta)``'s mean z should be read against it.
        information: $\hat I$, the learned scores' covariance over the data sets ``[d, d]``
            (in ``u``); posterior_cov: $H^{-1}$, the Laplace posterior covariance ``[d, d]``.
    """

    names: list[str]
    theta: Tensor
    mean: Tensor
    se: Tensor
    t: Tensor
    shift: Tensor
    shift_sd: Tensor
    prior_pull: Tensor
    prior_pull_sd: Tensor
    information: Tensor
    posterior_cov: Tensor
    num_data_sets: int

    def to_dict(self) -> dict[str, Any]:
        return {"names": self.names, "theta": self.theta.tolist(), "num_data_sets": self.num_data_sets,
                **{k: getattr(self, k).tolist()
                   for k in ("mean", "se", "t", "shift", "shift_sd", "prior_pull", "prior_pull_sd",
                             "information", "posterior_cov")}}

    def summary(self) -> str:
        """A markdown table: t statistic, implied shift and the exact posterior's prior pull per parameter."""
        lines = [f"| parameter | t = mean / se ({self.num_data_sets} data sets) | shift (u) | shift / sd "
                 "| prior pull / sd (exact posterior) |",
                 "|---|---|---|---|---|"]
        for j, name in enumerate(self.names):
            lines.append(f"| {name} | {float(self.t[j]):+.1f} | {float(self.shift[j]):+.3f} | "
                         f"{float(self.shift_sd[j]):+.2f} | {float(self.prior_pull_sd[j]):+.2f} |")
        return "\n".join(lines)


def score_shift(mean: Tensor, information: Tensor) -> tuple[Tensor, Tensor]:
    r"""How far a score's mean ``[d]`` moves a posterior that the data dominate, given the scores'
    covariance ``information [d, d]``: $I^{-1}\bar s$ in ``u``, and the same divided by
    $\sqrt{(I^{-1})_{jj}}$ (in posterior SDs), ``([d], [d])``."""
    inverse = torch.linalg.pinv(information)
    shift = inverse @ mean
    return shift, shift / inverse.diagonal().clamp_min(1e-300).sqrt()


def score_mean_test(estimator, theta: Tensor, num_data_sets: int = 1000, *, seed: int | None = None) -> ScoreMeanTest:
    r"""Does the learned score have mean zero where it should? For the true likelihood score,
    $\mathbb E_{x\sim p(x\mid\theta)}\,\nabla_u\log p(x\mid T(u)) = 0$ at every
    $\theta$: simulate ``num_data_sets`` data sets at ``theta [d]`` and test the learned
    score's mean there (no sampling involved). It finds a biased score, not a badly scaled one
    (a score 3x too large still has mean zero: [`calibrate()`][scorebayes.sbi.checks.calibration.calibrate] finds that). Also the exact
    posterior's first-order offset at ``theta``, the prior's pull ([`ScoreMeanTest`][scorebayes.sbi.checks.score_mean.ScoreMeanTest]).

    Returns:
        a [`ScoreMeanTest`][scorebayes.sbi.checks.score_mean.ScoreMeanTest].
    """
    estimator.likelihood_  # noqa: B018 - raises if the estimator is not fitted
    if isinstance(num_data_sets, bool) or not isinstance(num_data_sets, int) or num_data_sets < 10:
        raise ValueError(f"num_data_sets must be an integer >= 10, got {num_data_sets!r}")
    space = estimator.space
    d = space.dim
    theta = checked_parameters(space, theta, "theta", ((d,),), f"{d} parameter values")
    g = make_generator(estimator.seed if seed is None else seed, "score-mean-test")
    _, _, views = simulate_views(estimator, theta.expand(num_data_sets, d).clone(), g, "the score-mean test")
    u = space.to_unconstrained(theta).expand(len(views), 1, d)
    with torch.no_grad():
        scores = estimator.likelihood_.for_data_sets(views)(u)[:, 0]  # [M, d]
    mean, se = scores.mean(0), scores.std(0) / math.sqrt(len(views))
    info = torch.cov(scores.T).reshape(d, d)
    shift, shift_sd = score_shift(mean, info)
    # the exact posterior's first-order offset: a Newton step from u* on log prior + log likelihood,
    # whose expected gradient at u* is the prior's alone
    u_star = u[0, 0].detach().to(torch.float64)

    def log_prior(v: Tensor) -> Tensor:  # [d] -> 0-d
        return space.log_prob_unconstrained(v[None]).sum()

    prior_grad = torch.autograd.functional.jacobian(log_prior, u_star)
    posterior_cov = torch.linalg.pinv(info - torch.autograd.functional.hessian(log_prior, u_star))
    prior_pull = posterior_cov @ prior_grad
    return ScoreMeanTest(names=estimator.parameter_names or [f"theta{j}" for j in range(d)], theta=theta,
                         mean=mean, se=se, t=mean / se.clamp_min(1e-300), shift=shift,
                         shift_sd=shift_sd,
                         prior_pull=prior_pull,
                         prior_pull_sd=prior_pull / posterior_cov.diagonal().clamp_min(1e-300).sqrt(),
                         information=info, posterior_cov=posterior_cov, num_data_sets=len(views))

