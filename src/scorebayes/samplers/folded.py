r"""Sign-folded log-square coordinates for sign-symmetric parameters (a ``space`` for the samplers).

The graphical models' squared parameters $\theta = \tilde\theta^2$ make
the posterior in $\tilde\theta$ invariant under $\tilde\theta_i\mapsto-\tilde\theta_i$:
it has mirror copies, and a sampler whitened around one copy diverges when it crosses into
another. [`FoldedSquares`][scorebayes.samplers.nuts.FoldedSquares] samples $w = \log\tilde\theta^2$ instead, i.e. the
identified $|\tilde\theta|$, with the mirror copies folded together.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.3 (squared parameters)
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ..priors import IndependentPrior, ParameterSpace

__all__ = ["FoldedSquares"]


def _is_real(support) -> bool:
    """Whether a (univariate or vector) support is the whole real line in every coordinate."""
    base = getattr(support, "base_constraint", support)  # constraints.independent(real, 1)
    return type(base) is type(torch.distributions.constraints.real)


class FoldedSquares:
    r"""Sign-folded log-square coordinates for sign-symmetric parameters: a ``space`` for the samplers.

    For the coordinates $S$ (``squared [s]``), whose prior support must be the real line and
    on which the target must be invariant under $\tilde\theta_i\mapsto-\tilde\theta_i$,

    $$
    \tilde\theta_i = e^{w_i/2}\ (i\in S),\qquad
    \log|\det J(w)| = \sum_{i\in S}\big(w_i/2 - \log 2\big),
    $$

    the other coordinates use ``base`` (normally ``ParameterSpace(prior)``). The density of
    $w$ is $p(e^{w/2})e^{w/2}$ per folded coordinate: the fold of the two mirror copies
    ($p_{|\tilde\theta|} = 2p$ on $(0,\infty)$) cancels the $1/2$ of the
    Jacobian, so [`log_abs_det_jacobian()`][scorebayes.samplers.nuts.FoldedSquares.log_abs_det_jacobian] (the exact Jacobian of [`to_constrained()`][scorebayes.samplers.nuts.FoldedSquares.to_constrained])
    differs from the folded log-density of $w$ by the constant `log_fold`
    $= |S|\log 2$, which MCMC ignores. Draws mapped back have
    $\tilde\theta_i = |\tilde\theta_i| > 0$; [`to_unconstrained()`][scorebayes.samplers.nuts.FoldedSquares.to_unconstrained] takes any sign.

    Arguments:
        base: the bijection of the other coordinates (a [`ParameterSpace`][scorebayes.priors.ParameterSpace]).
        squared: indices of the sign-symmetric coordinates (e.g. ``model.squared_indices()``).

    All methods take and return ``[B, k]`` tensors (``[B]`` for log-densities).

    References:
        - Generalised Bayesian Inference for Discrete Intractable Likelihood
          (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.3 (squared parameters)
          <https://arxiv.org/abs/2206.08420>
    """

    def __init__(self, base: ParameterSpace, squared: Sequence[int] | Tensor):
        self.base = base
        self.dim = base.dim
        idx = torch.as_tensor(squared, dtype=torch.long).flatten()
        if idx.numel() == 0 or bool((idx < 0).any()) or bool((idx >= self.dim).any()) or \
                len(set(idx.tolist())) != idx.numel():
            raise ValueError(f"squared must be distinct indices in 0..{self.dim - 1}, got {idx.tolist()}")
        prior = base.prior
        supports = prior.marginal_supports if isinstance(prior, IndependentPrior) else [prior.support] * self.dim
        bad = [i for i in idx.tolist() if not _is_real(supports[i])]
        if bad:
            raise ValueError(f"coordinates {bad} are not supported on the real line, so they cannot be folded")
        self.squared = idx
        self.mask = torch.zeros(self.dim, dtype=torch.bool)
        self.mask[idx] = True
        self.log_fold = idx.numel() * math.log(2.0)

    def to_constrained(self, u: Tensor) -> Tensor:
        r"""$\theta$: ``base`` on the other coordinates, $e^{w/2}$ on the folded ones; ``[B, k]``."""
        folded = (0.5 * torch.where(self.mask, u, torch.zeros_like(u))).exp()  # no overflow off S
        return torch.where(self.mask, folded, self.base.to_constrained(u))

    def to_unconstrained(self, theta: Tensor) -> Tensor:
        r"""``base`` inverse, $w = \log\tilde\theta^2$ on the folded coordinates (any sign); ``[B, k]``."""
        folded = (torch.where(self.mask, theta, torch.ones_like(theta)) ** 2).log()  # no log(0) off S
        return torch.where(self.mask, folded, self.base.to_unconstrained(theta))

    def log_abs_det_jacobian(self, u: Tensor) -> Tensor:
        r"""Exact $\log|\det\partial\theta/\partial u|$, ``[B, k] -> [B]`` (``base``'s is 0 on ``S``)."""
        folded = (0.5 * u[..., self.squared] - math.log(2.0)).sum(-1)
        return self.base.log_abs_det_jacobian(torch.where(self.mask, torch.zeros_like(u), u)) + folded

    def log_prob_unconstrained(self, u: Tensor) -> Tensor:
        r"""Prior density of $u$, folded: $\log\pi(\theta(u)) + \log|\det J| + |S|\log 2$, ``[B]``."""
        return self.base.prior.log_prob(self.to_constrained(u)) + self.log_abs_det_jacobian(u) + self.log_fold
