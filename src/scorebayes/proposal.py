r"""Parameter samplers for reference tables: the prior, a localized Gaussian proposal, or a mixture.

Both expose the same small interface, used by reference tables, score matching
($\nabla_u \log p_{\text{train}}(u)$) and importance
reweighting of baselines ($\pi(\theta)/q(\theta)$):

- ``sample(num, generator) -> theta [num, d]`` (float64, constrained space);
- ``log_prob(theta [B, d]) -> [B]`` (density of theta in the constrained space);
- ``log_prob_unconstrained(u [B, d]) -> [B]`` and ``grad_log_prob_unconstrained(u)``.

The localized proposal is Gaussian in the *unconstrained* space,
$u \sim q_u = \mathcal N(\mu, \operatorname{diag} s^2)$, $\theta = T(u)$, so
that $\log q(\theta) = \log q_u(T^{-1}\theta) - \log|\det J_T(T^{-1}\theta)|$.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.distributions import Distribution

from .priors import ParameterSpace
from .priors import sample as sample_prior

__all__ = ["PriorSampler", "GaussianProposal", "MixtureProposal"]


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
    r"""The localized proposal $q_u = \mathcal N(\mu, \operatorname{diag} s^2)$ over ``u``.

    Arguments:
        space: the prior's [`ParameterSpace`][scorebayes.priors.ParameterSpace].
        mean: $\mu$, ``[d]`` (unconstrained space).
        sd: $s$, ``[d]``, positive.
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


class MixtureProposal:
    r"""The density of a table pooled from several rounds: $p(u) = \sum_r w_r\, q_r(u)$.

    A table made of $N_r$ draws from each $q_r$ is a sample of this mixture with
    $w_r = N_r / \sum_s N_s$, so score matching on the pooled table uses
    $\nabla_u \log p(u) = \sum_r \rho_r(u)\, \nabla_u \log q_r(u)$ with the
    responsibilities $\rho_r(u) = w_r q_r(u) / p(u)$ (the loss needs only
    the training density's score).

    Arguments:
        components: samplers with ``log_prob_unconstrained``, ``grad_log_prob_unconstrained``
            and ``sample``, all over the same parameter space.
        weights: $w_r$, ``[R]`` non-negative (normalised here), e.g. the rounds' table sizes.
    """

    def __init__(self, components, weights):
        self.components = list(components)
        w = torch.as_tensor(weights, dtype=torch.float64).reshape(-1)
        if not self.components or len(w) != len(self.components):
            raise ValueError(f"need one weight per component, got {len(w)} weights for "
                             f"{len(self.components)} components")
        if not torch.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"weights must be non-negative with a positive sum, got {w.tolist()}")
        self.weights = w / w.sum()
        self.space = self.components[0].space

    def _log_terms(self, u: Tensor) -> Tensor:
        r"""``[B, R]``: $\log w_r + \log q_r(u)$."""
        return torch.stack([c.log_prob_unconstrained(u) for c in self.components], -1) + self.weights.log()

    def sample(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        """``theta [num, d]``: each draw from component r with probability $w_r$."""
        pick = torch.multinomial(self.weights, num, replacement=True, generator=generator)
        theta = torch.empty(num, self.space.dim, dtype=torch.float64)
        for r, component in enumerate(self.components):
            rows = (pick == r).nonzero().reshape(-1)
            if len(rows):
                theta[rows] = component.sample(len(rows), generator).to(torch.float64)
        return theta

    def log_prob_unconstrained(self, u: Tensor) -> Tensor:
        return torch.logsumexp(self._log_terms(u), -1)

    def grad_log_prob_unconstrained(self, u: Tensor) -> Tensor:
        rho = torch.softmax(self._log_terms(u), -1)  # [B, R] responsibilities
        grads = torch.stack([c.grad_log_prob_unconstrained(u) for c in self.components], -1)
        return (grads * rho.unsqueeze(-2)).sum(-1)

    def log_prob(self, theta: Tensor) -> Tensor:
        u = self.space.to_unconstrained(theta.to(torch.float64))
        return self.log_prob_unconstrained(u) - self.space.log_abs_det_jacobian(u)
