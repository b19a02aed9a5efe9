r"""Poisson and Conway-Maxwell-Poisson graphical models on $\mathbb N_0^d$ (complete graph).

$$
\tilde p(x) = \exp\Big(\sum_i\theta_i x_i - \sum_{i<j}\tilde\theta_{ij}^2 x_ix_j
- \sum_i \tilde\theta_{0,i}^2\log x_i!\Big),
$$

with a squared reparametrisation (unconstrained $\tilde\theta$,
interactions $\theta_{ij} = \tilde\theta_{ij}^2 \ge 0$, negative dependence only). The
Poisson graphical model (PGM) fixes $\tilde\theta_{0,i}^2 = 1$. Parameters, in order:
$\theta_1..\theta_d$, (CMP-GM only) $\tilde\theta_{0,1}..\tilde\theta_{0,d}$, then
$\tilde\theta_{ij}$ for ``i < j`` row by row: ``d + d(d-1)/2`` = 55 (PGM) and
``2d + d(d-1)/2`` = 65 (CMP-GM) for ``d = 10``. Log-ratios (star at $x_j = 0$):

$$
\log r_{j-} = \tilde\theta_{0,j}^2\log x_j - \theta_j + \sum_{k\ne j}\tilde\theta_{jk}^2x_k,\qquad
\log r_{j+} = \tilde\theta_{0,j}^2\log(x_j+1) - \theta_j + \sum_{k\ne j}\tilde\theta_{jk}^2x_k.
$$

`sample_graphical()` draws from the model by systematic-scan Gibbs: each full conditional is
a CMP (a Poisson for the PGM) with $\log\theta_1 = \theta_j - \sum_k\theta_{jk}x_k$,
sampled exactly by inverse CDF on a truncated support.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.3 and Appendix F.3
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.distributions import Distribution, Normal

from ..domains import Domain
from .base import ExponentialFamilyModel, RatioStatistics

__all__ = ["PoissonGraphicalModel", "CMPGraphicalModel", "sample_graphical"]


class PoissonGraphicalModel(ExponentialFamilyModel):
    r"""Poisson graphical model on $\mathbb N_0^d$ (``d + d(d-1)/2`` parameters, see module docstring).

    Arguments:
        d: number of count variables.
    """

    dispersion = False

    def __init__(self, d: int):
        if d < 2:
            raise ValueError("a graphical model needs d >= 2")
        self.domain = Domain.counts(d)
        self.pairs = torch.triu_indices(d, d, offset=1).T  # [P2, 2]
        names = [f"theta_{i + 1}" for i in range(d)]
        if self.dispersion:
            names += [f"theta0_{i + 1}" for i in range(d)]
        names += [f"theta_{a + 1}_{b + 1}" for a, b in self.pairs.tolist()]
        self.names = names
        inc = torch.zeros(d, len(self.pairs), d, dtype=torch.float64)
        for p, (a, b) in enumerate(self.pairs.tolist()):
            inc[a, p, b] = 1.0
            inc[b, p, a] = 1.0
        self._incidence = inc  # [d, P2, d]: pair p joins j to k

    def split(self, theta: Tensor) -> tuple[Tensor, Tensor | None, Tensor]:
        r"""``theta [B, k]`` -> ($\theta_i$ ``[B, d]``, $\tilde\theta_{0}$ ``[B, d]`` or None,
        $\tilde\theta_{ij}$ ``[B, P2]``)."""
        d = self.dim
        if self.dispersion:
            return theta[:, :d], theta[:, d : 2 * d], theta[:, 2 * d :]
        return theta[:, :d], None, theta[:, d:]

    def squared_indices(self) -> Tensor:
        r"""Indices ``[k - d]`` of the squared coordinates ($\tilde\theta_{0,i}$, $\tilde\theta_{ij}$).

        The model (and the default prior) is invariant under the sign flip of each of them, so a
        sampler may fold them ([`FoldedSquares`][scorebayes.samplers.nuts.FoldedSquares])."""
        return torch.arange(self.dim, self.num_params)

    def interaction_matrix(self, theta: Tensor) -> Tensor:
        r"""Symmetric $\theta_{jk} = \tilde\theta_{jk}^2$ as ``[B, d, d]`` (zero diagonal)."""
        _, _, pair = self.split(theta)
        return torch.einsum("bp,jpk->bjk", pair**2, self._incidence.to(theta.dtype))

    def natural_parameters(self, theta: Tensor) -> Tensor:
        first, disp, pair = self.split(theta)
        parts = [first] + ([disp**2] if disp is not None else []) + [pair**2]
        return torch.cat(parts, dim=-1)

    def sufficient_statistics(self, x: Tensor) -> Tensor:
        prod = -(x[:, self.pairs[:, 0]] * x[:, self.pairs[:, 1]])
        parts = [x] + ([-torch.lgamma(x + 1)] if self.dispersion else []) + [prod]
        return torch.cat(parts, dim=-1)

    def base_measure(self, x: Tensor) -> Tensor:
        if self.dispersion:
            return torch.zeros(x.shape[0], dtype=x.dtype)
        return -torch.lgamma(x + 1).sum(-1)

    def ratio_statistics(self, x: Tensor) -> RatioStatistics:
        m, d = x.shape
        valid = x > 0
        eye = torch.eye(d, dtype=x.dtype).expand(m, d, d)
        pair = torch.einsum("jpk,ik->ijp", self._incidence.to(x.dtype), x)  # [m, d, P2]
        log_x = torch.where(valid, x, torch.ones_like(x)).log()
        log_x1 = (x + 1).log()
        if self.dispersion:
            minus = torch.cat([-eye, eye * log_x[:, :, None], pair], dim=-1)
            plus = torch.cat([-eye, eye * log_x1[:, :, None], pair], dim=-1)
            minus_off = plus_off = torch.zeros_like(x)
        else:
            minus = torch.cat([-eye, pair], dim=-1)
            plus = minus.clone()
            minus_off, plus_off = log_x, log_x1
        minus = torch.where(valid[..., None], minus, torch.zeros_like(minus))
        minus_off = torch.where(valid, minus_off, torch.zeros_like(minus_off))
        return RatioStatistics(minus, minus_off, plus, plus_off, valid)

    def default_prior(self) -> Distribution:
        r"""The prior: $\theta_i\sim N(0,1)$, $\tilde\theta_{ij}\sim N(0, (1/P_2)^2)$,
        $\tilde\theta_{0,i}\sim N(0,1)$, with $P_2 = d(d-1)/2$."""
        from ...priors import independent

        d, p2 = self.dim, len(self.pairs)
        one = torch.tensor(1.0, dtype=torch.float64)
        zero = torch.tensor(0.0, dtype=torch.float64)
        marg = [Normal(zero, one) for _ in range(d)]
        if self.dispersion:
            marg += [Normal(zero, one) for _ in range(d)]
        marg += [Normal(zero, one / p2) for _ in range(p2)]
        return independent(marg)


class CMPGraphicalModel(PoissonGraphicalModel):
    r"""CMP graphical model: the PGM with per-variable dispersions $\tilde\theta_{0,i}^2$
    (``2d + d(d-1)/2`` parameters)."""

    dispersion = True


def _cmp_conditional_draw(log_rate: Tensor, nu: Tensor, u: Tensor, max_value: int) -> Tensor:
    """Inverse-CDF draws from CMP(exp(log_rate), nu) truncated to 0..max_value; all ``[S]``."""
    y = torch.arange(max_value + 1, dtype=log_rate.dtype)
    logp = y * log_rate[:, None] - nu[:, None] * torch.lgamma(y + 1)
    cdf = torch.softmax(logp, dim=-1).cumsum(-1)
    return torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).clamp(max=max_value)[:, 0].to(log_rate.dtype)


def sample_graphical(model: PoissonGraphicalModel, theta: Tensor, num_samples: int, *,
                     burn_in: int = 500, thin: int = 1, init: Tensor | None = None,
                     generator: torch.Generator | None = None, max_value: int = 200) -> Tensor:
    r"""Systematic-scan Gibbs draws from a (CMP) graphical model, one chain per parameter.

    Arguments:
        model: a `PoissonGraphicalModel` or `CMPGraphicalModel`.
        theta: ``[S, k]`` parameters (one independent chain each).
        num_samples: draws kept per chain (after ``burn_in`` sweeps, every ``thin`` sweeps).
        init: ``[S, d]`` starting counts (default zeros).
        max_value: truncation of the CMP full conditionals (the PGM uses exact Poisson draws).

    Returns:
        ``[S, num_samples, d]`` float64 counts.
    """
    theta = torch.as_tensor(theta, dtype=torch.float64).reshape(-1, model.num_params)
    s, d = theta.shape[0], model.dim
    first, disp, _ = model.split(theta)
    nu = disp**2 if disp is not None else None
    inter = model.interaction_matrix(theta)
    x = torch.zeros(s, d, dtype=torch.float64) if init is None else init.to(torch.float64).clone()
    out = torch.empty(s, num_samples, d, dtype=torch.float64)
    total = burn_in + num_samples * thin
    kept = 0
    for sweep in range(total):
        for j in range(d):
            log_rate = first[:, j] - (inter[:, j, :] * x).sum(-1)
            if nu is None:
                x[:, j] = torch.poisson(log_rate.clamp(max=math.log(1e6)).exp(), generator=generator)
            else:
                u = torch.rand(s, generator=generator, dtype=torch.float64)
                x[:, j] = _cmp_conditional_draw(log_rate, nu[:, j], u, max_value)
        if sweep >= burn_in and (sweep - burn_in) % thin == thin - 1:
            out[:, kept] = x
            kept += 1
    return out
