r"""Discrete models known up to a normalising constant, and their neighbour log-ratios.

Every loss of `scorebayes.discrete` only needs the log-ratios

$$
\log r_{j-}(x) = \log\tilde p_\theta(x^{j-}) - \log\tilde p_\theta(x), \qquad
\log r_{j+}(x) = \log\tilde p_\theta(x) - \log\tilde p_\theta(x^{j+}),
$$

in which the normalising constant cancels. [`DiscreteModel`][scorebayes.discrete.models.base.DiscreteModel] computes them from any
unnormalised log-pmf by evaluating it at the neighbours (``1 + 2d`` evaluations per point).
[`ExponentialFamilyModel`][scorebayes.discrete.models.base.ExponentialFamilyModel] covers $\tilde p_\theta(x) = \exp(\eta(\theta)\cdot T(x) + b(x))$
(Example 1 of the paper): there the log-ratios are $\eta(\theta)\cdot T_{j\mp}(x) + b_{j\mp}(x)$
with statistics $T_{j-} = T(x^{j-}) - T(x)$, $T_{j+} = T(x) - T(x^{j+})$ (and the same
for $b$) that do not depend on $\theta$ and are computed once per data set.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Sections 2-3 and Appendix E.2
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor
from torch.distributions import Distribution

from ..domains import Domain

__all__ = ["DiscreteModel", "ExponentialFamilyModel", "RatioStatistics", "UserModel"]


class RatioStatistics(NamedTuple):
    r"""The $\theta$-free parts of the log-ratios of an exponential family at ``x [m, d]``.

    Attributes:
        minus: $T(x^{j-}) - T(x)$, ``[m, d, q]`` (zero where ``valid`` is false).
        minus_offset: $b(x^{j-}) - b(x)$, ``[m, d]`` (zero where ``valid`` is false).
        plus: $T(x) - T(x^{j+})$, ``[m, d, q]``.
        plus_offset: $b(x) - b(x^{j+})$, ``[m, d]``.
        valid: ``[m, d]`` bool, false where $x^{j-}$ is the star state.
    """

    minus: Tensor
    minus_offset: Tensor
    plus: Tensor
    plus_offset: Tensor
    valid: Tensor


class DiscreteModel(ABC):
    r"""An unnormalised discrete model $\tilde p_\theta(x)$ on a [`Domain`][scorebayes.discrete.domains.Domain].

    Subclasses set `domain` and `names` (the ``k`` parameter names) and implement
    [`log_unnormalized()`][scorebayes.discrete.models.base.DiscreteModel.log_unnormalized]. They may override [`log_ratios()`][scorebayes.discrete.models.base.DiscreteModel.log_ratios] with closed forms.
    """

    domain: Domain
    names: list[str]

    @property
    def num_params(self) -> int:
        return len(self.names)

    @property
    def dim(self) -> int:
        """Dimension ``d`` of one observation."""
        return self.domain.dim

    @abstractmethod
    def log_unnormalized(self, theta: Tensor, x: Tensor) -> Tensor:
        r"""$\log\tilde p_\theta(x)$ for ``theta [B, k]`` and integer-valued ``x [n, d]`` -> ``[B, n]``."""

    def log_ratios(self, theta: Tensor, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r"""Neighbour log-ratios at points of the domain.

        Arguments:
            theta: ``[B, k]``.
            x: ``[m, d]`` points of the domain (float, integer-valued).

        Returns:
            ``(log_r_minus [B, m, d], log_r_plus [B, m, d], valid [m, d])``, with
            ``log_r_minus = 0`` (not $-\infty$) where ``valid`` is false, so that no
            gradient is ever taken through the star state: mask it.
        """
        m, d = x.shape
        nb = self.domain.neighbours(x)
        points = torch.cat([x, nb.minus.reshape(d * m, d), nb.plus.reshape(d * m, d)], dim=0)
        lp = self.log_unnormalized(theta, points)
        centre = lp[:, :m, None]  # [B, m, 1]
        lp_minus = lp[:, m : m + d * m].reshape(-1, d, m).transpose(1, 2)
        lp_plus = lp[:, m + d * m :].reshape(-1, d, m).transpose(1, 2)
        return lp_minus - centre, centre - lp_plus, nb.valid

    def default_prior(self) -> Distribution | None:
        """A prior used by the paper for this model, or ``None``."""
        return None


class ExponentialFamilyModel(DiscreteModel):
    r"""$\tilde p_\theta(x) = \exp(\eta(\theta)\cdot T(x) + b(x))$ with closed-form ratio statistics.

    Subclasses implement [`natural_parameters()`][scorebayes.discrete.models.base.ExponentialFamilyModel.natural_parameters] (``theta [B, k] -> eta [B, q]``),
    [`sufficient_statistics()`][scorebayes.discrete.models.base.ExponentialFamilyModel.sufficient_statistics] (``x [n, d] -> T [n, q]``), [`base_measure()`][scorebayes.discrete.models.base.ExponentialFamilyModel.base_measure]
    (``x [n, d] -> b [n]``) and [`ratio_statistics()`][scorebayes.discrete.models.base.ExponentialFamilyModel.ratio_statistics] (closed form, see
    [`RatioStatistics`][scorebayes.discrete.models.base.RatioStatistics]).
    """

    @abstractmethod
    def natural_parameters(self, theta: Tensor) -> Tensor:
        r"""$\eta(\theta)$: ``[B, k] -> [B, q]``."""

    @abstractmethod
    def sufficient_statistics(self, x: Tensor) -> Tensor:
        r"""$T(x)$: ``[n, d] -> [n, q]``."""

    @abstractmethod
    def base_measure(self, x: Tensor) -> Tensor:
        r"""$b(x)$: ``[n, d] -> [n]``."""

    @abstractmethod
    def ratio_statistics(self, x: Tensor) -> RatioStatistics:
        r"""The statistics of the log-ratios at ``x [m, d]`` (see [`RatioStatistics`][scorebayes.discrete.models.base.RatioStatistics])."""

    def log_unnormalized(self, theta: Tensor, x: Tensor) -> Tensor:
        x = x.to(theta.dtype)
        return self.natural_parameters(theta) @ self.sufficient_statistics(x).T + self.base_measure(x)

    def log_ratios(self, theta: Tensor, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        stats = self.ratio_statistics(x.to(theta.dtype))
        eta = self.natural_parameters(theta)
        minus = torch.einsum("bq,mdq->bmd", eta, stats.minus) + stats.minus_offset
        plus = torch.einsum("bq,mdq->bmd", eta, stats.plus) + stats.plus_offset
        return minus, plus, stats.valid


class UserModel(DiscreteModel):
    r"""A model given as a plain function ``log_p(theta [B, k], x [n, d]) -> [B, n]`` and a domain.

    Arguments:
        log_p: the unnormalised log-pmf; ``x`` is passed as a float tensor of ``theta``'s dtype
            holding integer values.
        domain: a [`Domain`][scorebayes.discrete.domains.Domain] or the ``[[low, high], ...]`` bounds of one.
        names: the ``k`` parameter names.
    """

    def __init__(self, log_p: Callable[[Tensor, Tensor], Tensor], domain: Domain | Sequence,
                 names: Sequence[str]):
        self.log_p = log_p
        self.domain = domain if isinstance(domain, Domain) else Domain(domain)
        self.names = list(names)

    def log_unnormalized(self, theta: Tensor, x: Tensor) -> Tensor:
        out = self.log_p(theta, x.to(theta.dtype))
        if not isinstance(out, Tensor) or tuple(out.shape) != (theta.shape[0], x.shape[0]):
            shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"the model must return a tensor of shape [B, n] = "
                             f"[{theta.shape[0]}, {x.shape[0]}], got {shape}")
        return out
