r"""The generalised posterior $\pi_n(\theta) \propto \pi(\theta)\exp(-\beta D_n(\theta))$ as a potential.

DFD-Bayes is the case $D_n = n\,\mathrm{DFD}(p_\theta\|p_n)$ (Definition 4, eq. 6); the
same object serves KSD-Bayes, pseudo-likelihood Bayes and standard Bayes ($\beta = 1$
with the negative log-likelihood). The normalising constant of the model never appears, so
the posterior can be sampled by standard MCMC (Remark 3).

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Definition 4 and Remark 3
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.distributions import Distribution

__all__ = ["GeneralisedPosterior"]


class GeneralisedPosterior:
    r"""Unnormalised log-density $\log\pi(\theta) - \beta D_n(\theta)$.

    Arguments:
        loss: ``theta [B, k] -> [B]`` (e.g. a [`DFDLoss`][scorebayes.discrete.dfd.DFDLoss]).
        prior: a ``Distribution`` with event shape ``[k]``.
        beta: the loss weight $\beta > 0$.
    """

    def __init__(self, loss: Callable[[Tensor], Tensor], prior: Distribution, beta: float):
        if not beta > 0:
            raise ValueError(f"beta must be positive, got {beta}")
        self.loss, self.prior, self.beta = loss, prior, float(beta)

    def log_prob(self, theta: Tensor) -> Tensor:
        r"""$\log\pi(\theta) - \beta D_n(\theta)$ for ``theta [B, k]`` -> ``[B]`` (``-inf`` off the support)."""
        lp = self.prior.log_prob(theta)
        inside = torch.isfinite(lp)
        value = lp - self.beta * self.loss(theta)
        value = torch.where(torch.isnan(value), torch.full_like(value, -torch.inf), value)
        return torch.where(inside, value, torch.full_like(value, -torch.inf))

    __call__ = log_prob
