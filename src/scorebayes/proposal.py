r"""Parameter samplers for reference tables: the prior, or a localized Gaussian proposal.

Both expose the same small interface, used by reference tables, score matching
(:math:`\nabla_u \log p_{\text{train}}(u)`, METHODS.md V.A1) and importance
reweighting of baselines (:math:`\pi(\theta)/q(\theta)`):

- ``sample(num, generator) -> theta [num, d]`` (float64, constrained space);
- ``log_prob(theta [B, d]) -> [B]`` (density of theta in the constrained space);
- ``log_prob_unconstrained(u [B, d]) -> [B]`` and ``grad_log_prob_unconstrained(u)``.

The localized proposal is Gaussian in the *unconstrained* space,
:math:`u \sim q_u = \mathcal N(\mu, \operatorname{diag} s^2)`, :math:`\theta = T(u)`, so
that :math:`\log q(\theta) = \log q_u(T^{-1}\theta) - \log|\det J_T(T^{-1}\theta)|`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.distributions import Distribution

from .priors import ParameterSpace
from .priors import sample as sample_prior

__all__ = ["PriorSampler", "GaussianProposal"]


class PriorSampler:
    """Draw table parameters from the prior itself (picklable)."""

    def __init__(self, prior: Distribution):
        self.prior = prior
        self.space = ParameterSpace(prior)

    def sample(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        return sample_prior(self.prior, num, generator=generator).to(torch.float64)

    def log_prob(self, theta: Tensor) -> Tensor:
        return self.prior.log_prob(theta)

    def log_prob_unconstrained(self, u: Tensor) -> Tensor:
        return self.space.log_prob_unconstrained(u)

    def grad_log_prob_unconstrained(self, u: Tensor) -> Tensor:
        return self.space.grad_log_prob_unconstrained(u)


class GaussianProposal:
    r"""The localized proposal :math:`q_u = \mathcal N(\mu, \operatorname{diag} s^2)` over ``u``.

    Arguments:
        space: the prior's :class:`~scorebayes.priors.ParameterSpace`.
        mean: :math:`\mu`, ``[d]`` (unconstrained space).
        sd: :math:`s`, ``[d]``, positive.
    """

    def __init__(self, space: ParameterSpace, mean: Tensor, sd: Tensor):
        self.space = space
        self.mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1)
        self.sd = torch.as_tensor(sd, dtype=torch.float64).reshape(-1)
        if self.mean.shape != self.sd.shape or self.mean.numel() != space.dim:
            raise ValueError(f"mean and sd must have shape [{space.dim}]")
        if not (self.sd > 0).all() or not torch.isfinite(self.mean).all():
            raise ValueError("the proposal needs finite means and positive standard deviations")

    def sample_unconstrained(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        """``u [num, d]``."""
        z = torch.randn(num, self.mean.numel(), generator=generator, dtype=torch.float64)
        return self.mean + self.sd * z

    def sample(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        """``theta [num, d]`` (float64)."""
        return self.space.to_constrained(self.sample_unconstrained(num, generator))

    def log_prob_unconstrained(self, u: Tensor) -> Tensor:
        z = (u - self.mean) / self.sd
        return (-0.5 * z**2 - self.sd.log() - 0.5 * math.log(2 * math.pi)).sum(-1)

    def grad_log_prob_unconstrained(self, u: Tensor) -> Tensor:
        return -(u - self.mean) / self.sd**2

    def log_prob(self, theta: Tensor) -> Tensor:
        u = self.space.to_unconstrained(theta.to(torch.float64))
        return self.log_prob_unconstrained(u) - self.space.log_abs_det_jacobian(u)

    def to_dict(self) -> dict:
        return {"mean_unconstrained": self.mean.tolist(), "sd_unconstrained": self.sd.tolist()}
