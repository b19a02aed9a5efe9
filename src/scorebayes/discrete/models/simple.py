r"""One-dimensional count and binary models: Bernoulli, Poisson, Conway-Maxwell-Poisson, Poisson mixture.

========================  ==================================================  =============================================
model                     unnormalised pmf                                    $r_{j-}(x) = p(x^-)/p(x)$
========================  ==================================================  =============================================
Bernoulli (App. A.1)      $\theta^x(1-\theta)^{1-x}$, cyclic flip       $\theta^{1-2x}(1-\theta)^{2x-1}$
Poisson (App. A.3)        $\theta^x/x!$                                 $x/\theta$ (0 at $x=0$)
CMP (Section 4.1)         $\theta_1^x (x!)^{-\theta_2}$                 $x^{\theta_2}/\theta_1$ (0 at $x=0$)
Poisson mixture (A.4)     $(1-\theta)\,\text{Poi}(\lambda_1) + \theta\,\text{Poi}(\lambda_2)$  from the pmf
========================  ==================================================  =============================================

All observations are ``x [n, 1]``. [`sample_cmp()`][scorebayes.discrete.models.simple.sample_cmp] is an exact sampler (inverse CDF on a
truncated support with the normalisation computed in log space).

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.1 and Appendix A
      <https://arxiv.org/abs/2206.08420>
    - A useful distribution for fitting discrete data: revival of the Conway-Maxwell-Poisson
      distribution (Shmueli, Minka, Kadane, Borle and Boatwright, 2005)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.distributions import Chi2, Distribution, Uniform

from ..domains import Domain
from .base import DiscreteModel, ExponentialFamilyModel, RatioStatistics

__all__ = [
    "BernoulliModel",
    "PoissonModel",
    "CMPModel",
    "PoissonMixtureModel",
    "sample_cmp",
    "cmp_log_normaliser",
    "sample_poisson_mixture",
    "poisson_with_outliers",
]


def _chi2_prior(k: int) -> Distribution:
    from ...priors import independent

    return independent([Chi2(torch.tensor(3.0, dtype=torch.float64)) for _ in range(k)])


def _count_statistics(x: Tensor, minus: list[Tensor], plus: list[Tensor],
                      minus_offset: Tensor, plus_offset: Tensor) -> RatioStatistics:
    """Assemble statistics for one count coordinate ``x [m, 1]`` (star at 0)."""
    valid = x > 0
    zero = torch.zeros_like(x)
    t_minus = torch.stack([torch.where(valid, t, zero) for t in minus], dim=-1)
    return RatioStatistics(t_minus, torch.where(valid, minus_offset, zero),
                           torch.stack(plus, dim=-1), plus_offset, valid)


def _log_safe(x: Tensor) -> Tensor:
    """``log x`` with ``log 0`` replaced by 0 (masked later; keeps gradients finite)."""
    return torch.where(x > 0, x, torch.ones_like(x)).log()


class BernoulliModel(ExponentialFamilyModel):
    r"""Bernoulli($\theta$) on $\{0, 1\}$ with the cyclic convention (App. A.1).

    $\eta = \log\frac{\theta}{1-\theta}$, $T(x) = x$; $T_{j-} = 1-2x$,
    $T_{j+} = 2x-1$. Prior: Uniform(0, 1).
    """

    def __init__(self):
        self.domain = Domain.binary(1)
        self.names = ["theta"]

    def natural_parameters(self, theta: Tensor) -> Tensor:
        return torch.logit(theta)

    def sufficient_statistics(self, x: Tensor) -> Tensor:
        return x

    def base_measure(self, x: Tensor) -> Tensor:
        return torch.zeros(x.shape[0], dtype=x.dtype)

    def ratio_statistics(self, x: Tensor) -> RatioStatistics:
        zero = torch.zeros_like(x)
        return RatioStatistics((1 - 2 * x)[..., None], zero, (2 * x - 1)[..., None], zero,
                               torch.ones_like(x, dtype=torch.bool))

    def default_prior(self) -> Distribution:
        from ...priors import independent

        return independent([Uniform(torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))])


class PoissonModel(ExponentialFamilyModel):
    r"""Poisson($\theta$) on $\mathbb N_0$ (App. A.3): $\eta=\log\theta$,
    $T=x$, $b=-\log x!$. Prior: $\chi^2_3$."""

    def __init__(self):
        self.domain = Domain.counts(1)
        self.names = ["theta"]

    def natural_parameters(self, theta: Tensor) -> Tensor:
        return theta.log()

    def sufficient_statistics(self, x: Tensor) -> Tensor:
        return x

    def base_measure(self, x: Tensor) -> Tensor:
        return -torch.lgamma(x[:, 0] + 1)

    def ratio_statistics(self, x: Tensor) -> RatioStatistics:
        one = torch.ones_like(x)
        return _count_statistics(x, [-one], [-one], _log_safe(x), (x + 1).log())

    def default_prior(self) -> Distribution:
        return _chi2_prior(1)


class CMPModel(ExponentialFamilyModel):
    r"""Conway-Maxwell-Poisson $\tilde p_\theta(x) = \theta_1^x (x!)^{-\theta_2}$ on $\mathbb N_0$.

    $\eta = (\log\theta_1, -\theta_2)$, $T = (x, \log x!)$, so
    $\log r_{j-} = \theta_2\log x - \log\theta_1$ and
    $\log r_{j+} = \theta_2\log(x+1) - \log\theta_1$. $\theta_2 = 1$ is Poisson,
    $\theta_2 < 1$ over-dispersed. Prior: $\chi^2_3$ on each parameter (Section 4.1).
    """

    def __init__(self):
        self.domain = Domain.counts(1)
        self.names = ["theta1", "theta2"]

    def natural_parameters(self, theta: Tensor) -> Tensor:
        return torch.stack([theta[:, 0].log(), -theta[:, 1]], dim=-1)

    def sufficient_statistics(self, x: Tensor) -> Tensor:
        return torch.cat([x, torch.lgamma(x + 1)], dim=-1)

    def base_measure(self, x: Tensor) -> Tensor:
        return torch.zeros(x.shape[0], dtype=x.dtype)

    def ratio_statistics(self, x: Tensor) -> RatioStatistics:
        one, zero = torch.ones_like(x), torch.zeros_like(x)
        return _count_statistics(x, [-one, -_log_safe(x)], [-one, -(x + 1).log()], zero, zero)

    def default_prior(self) -> Distribution:
        return _chi2_prior(2)


def cmp_log_normaliser(theta: Tensor, max_value: int = 99) -> Tensor:
    r"""$\log Z_\theta \approx \log\sum_{y=0}^{Y}\theta_1^y (y!)^{-\theta_2}$ for ``theta [B, 2]`` -> ``[B]``."""
    y = torch.arange(max_value + 1, dtype=theta.dtype)
    logp = y * theta[:, :1].log() - theta[:, 1:] * torch.lgamma(y + 1)
    return torch.logsumexp(logp, dim=-1)


def sample_cmp(theta: Tensor, n: int, *, generator: torch.Generator | None = None,
               max_value: int = 1000) -> Tensor:
    r"""Exact CMP draws by inverse CDF on $\{0, \dots, Y\}$ (``Y = max_value``).

    Arguments:
        theta: ``[2]`` or ``[B, 2]`` with $\theta_1 > 0$, $\theta_2 \ge 0$.
        n: draws per parameter.

    Returns:
        ``[n, 1]`` for ``theta [2]``, else ``[B, n, 1]`` (float64, integer values).

    Raises:
        ValueError: if more than $10^{-10}$ of the mass lies beyond ``max_value``.
    """
    theta = torch.as_tensor(theta, dtype=torch.float64)
    single = theta.dim() == 1
    theta = theta.reshape(-1, 2)
    if bool((theta[:, 0] <= 0).any() or (theta[:, 1] < 0).any()):
        raise ValueError("CMP needs theta1 > 0 and theta2 >= 0")
    y = torch.arange(max_value + 1, dtype=torch.float64)
    logp = y * theta[:, :1].log() - theta[:, 1:] * torch.lgamma(y + 1)
    logp = logp - torch.logsumexp(logp, dim=-1, keepdim=True)
    tail = logp[:, -20:].logsumexp(-1)
    if bool((tail > math.log(1e-10)).any()):
        raise ValueError(f"the CMP distribution has non-negligible mass beyond {max_value}; "
                         "increase max_value (or the parameters are not normalisable)")
    cdf = logp.exp().cumsum(-1)
    u = torch.rand(theta.shape[0], n, generator=generator, dtype=torch.float64) * cdf[:, -1:]
    draws = torch.searchsorted(cdf, u).clamp(max=max_value).to(torch.float64)[..., None]
    return draws[0] if single else draws


class PoissonMixtureModel(DiscreteModel):
    r"""$p_\theta = (1-\theta)\,\text{Poi}(\lambda_1) + \theta\,\text{Poi}(\lambda_2)$, unknown weight
    $\theta\in(0,1)$ (App. A.4). Not an exponential family: ratios come from the pmf."""

    def __init__(self, rate1: float = 5.0, rate2: float = 60.0):
        self.domain = Domain.counts(1)
        self.names = ["theta"]
        self.rates = (float(rate1), float(rate2))

    def log_unnormalized(self, theta: Tensor, x: Tensor) -> Tensor:
        x = x[:, 0].to(theta.dtype)
        comps = [x * math.log(r) - r for r in self.rates]
        w = theta[:, :1]
        mix = torch.logaddexp(torch.log1p(-w) + comps[0], w.log() + comps[1])
        return mix - torch.lgamma(x + 1)

    def default_prior(self) -> Distribution:
        return BernoulliModel().default_prior()


def sample_poisson_mixture(theta: float, n: int, rates: tuple[float, float] = (5.0, 60.0), *,
                           generator: torch.Generator | None = None) -> Tensor:
    """``n`` draws ``[n, 1]`` from the two-component Poisson mixture with weight ``theta`` on ``rates[1]``."""
    second = torch.rand(n, generator=generator, dtype=torch.float64) < theta
    rate = torch.where(second, torch.tensor(rates[1], dtype=torch.float64), torch.tensor(rates[0], dtype=torch.float64))
    return torch.poisson(rate, generator=generator)[:, None]


def poisson_with_outliers(n: int, rate: float = 5.0, fraction: float = 0.1, outlier: float = 20.0, *,
                          generator: torch.Generator | None = None) -> Tensor:
    """Poisson(``rate``) draws ``[n, 1]`` with the first ``round(fraction * n)`` replaced by ``outlier`` (App. A.3)."""
    x = torch.poisson(torch.full((n,), float(rate), dtype=torch.float64), generator=generator)
    x[: int(round(fraction * n))] = float(outlier)
    return x[:, None]
