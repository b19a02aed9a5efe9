r"""A local, heteroscedastic Gaussian synthetic likelihood of a $d$-dimensional summary.

Given $M$ simulated pairs $(u_j, T_j)$, $T_j = T(\mathbf X_j)$ with
$\mathbf X_j \sim p(\cdot \mid T(u_j))$ a whole data set of the observed size, the summary's
distribution near a centre $c$ is modelled as

$$
T \mid u \sim \mathcal N\big(m(z),\; D(z) R D(z)\big), \qquad z = (u - c) / s,
$$

with $m$ quadratic in $z$ (``[1, z, z_i z_j]``), $\log D = \operatorname{diag}$
linear in $z$ (a regression of the log squared residuals, its intercept rescaled so that the
standardised residuals have unit weighted variance) and a constant correlation $R$. The mean
is fitted by least squares, or (``generalised``) by feasible generalised least squares:
ordinary least squares first, then each component weighted by its fitted precision
$D_k(z)^{-2}$. Where the mean model does not fit exactly (a curved summary), a component whose
noise varies tenfold over the fit's window would otherwise be fitted where it is noisy and
missed where it is precise, which is where it matters.
The fit is local (weights: a Gaussian kernel in $z$) and robust (two passes that
down-weight data sets whose standardised residual lies beyond the 99% quantile of
$\chi^2_d$).

References:
    - Statistical inference for noisy nonlinear ecological dynamic systems (Wood, 2010):
      the Gaussian synthetic likelihood
    - Constructing summary statistics for approximate Bayesian computation: semi-automatic
      approximate Bayesian computation (Fearnhead and Prangle, 2012): regression summaries
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy.stats import chi2
from torch import Tensor

__all__ = ["GaussianSyntheticLikelihood", "fit_synthetic_likelihood", "lack_of_fit", "linear_features",
           "quadratic_features"]

#: E log chi^2_1: the log squared residual of a unit normal, on average
_LOG_CHI2_MEAN = -1.2703628454614782
#: the generalised least squares' precision weights stay within this log-ratio of the centre's
MAX_LOG_VARIANCE_RATIO = math.log(100.0)
#: data sets per block of the nearest-neighbour search of `lack_of_fit()`
NEIGHBOUR_CHUNK = 1024


def quadratic_features(z: Tensor) -> Tensor:
    """``[..., d] -> [..., 1 + d + d(d+1)/2]``: ``1``, ``z`` and the products ``z_i z_j`` (``i <= j``)."""
    d = z.shape[-1]
    i, j = torch.triu_indices(d, d)
    return torch.cat([torch.ones_like(z[..., :1]), z, z[..., i] * z[..., j]], dim=-1)


def linear_features(z: Tensor) -> Tensor:
    """``[..., d] -> [..., 1 + d]``: ``1`` and ``z``."""
    return torch.cat([torch.ones_like(z[..., :1]), z], dim=-1)


def _weighted_lstsq(features: Tensor, targets: Tensor, weights: Tensor) -> Tensor:
    """Ridge-stabilised weighted least squares, ``[M, P], [M, k], [M] -> [P, k]``."""
    w = weights / weights.sum()
    gram = features.T @ (w[:, None] * features)
    ridge = 1e-8 * gram.diagonal().mean() * torch.eye(len(gram), dtype=gram.dtype)
    return torch.linalg.solve(gram + ridge, features.T @ (w[:, None] * targets))


@dataclass(frozen=True)
class GaussianSyntheticLikelihood:
    r"""$\log \mathcal N(T; m(z), D(z) R D(z))$ with the coefficients of
    [`fit_synthetic_likelihood()`][scorebayes.sbi.calibrated.synthetic_likelihood.fit_synthetic_likelihood].

    Attributes:
        center, scale: $c$, $s$ ``[d]`` (``u`` coordinates).
        mean_coef: ``[1 + d + d(d+1)/2, d]`` (quadratic features to the summary's mean).
        log_sd_coef: ``[1 + d, d]`` (linear features to $\log D$).
        corr_chol: the Cholesky factor of $R$, ``[d, d]``.
        effective_size: the kernel weights' effective number of data sets.
    """

    center: Tensor
    scale: Tensor
    mean_coef: Tensor
    log_sd_coef: Tensor
    corr_chol: Tensor
    effective_size: float

    def z(self, u: Tensor) -> Tensor:
        return (u - self.center) / self.scale

    def moments(self, u: Tensor) -> tuple[Tensor, Tensor]:
        """The summary's mean and log SD at ``u [..., d]``, both ``[..., d]``."""
        z = self.z(u)
        return quadratic_features(z) @ self.mean_coef, linear_features(z) @ self.log_sd_coef

    def standardised(self, summary: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
        """``R^{-1/2} D^{-1} (T - m)`` and ``log D``, ``[..., d]`` each (broadcast over ``summary`` and ``u``)."""
        mean, log_sd = self.moments(u)
        e = (summary - mean) / log_sd.exp()
        shape = torch.broadcast_shapes(e.shape)
        white = torch.linalg.solve_triangular(self.corr_chol, e.reshape(-1, e.shape[-1]).T, upper=False).T
        return white.reshape(shape), log_sd

    def log_prob(self, summary: Tensor, u: Tensor) -> Tensor:
        r"""$\log p(T \mid u)$, ``summary [..., d]`` and ``u [..., d]`` (broadcast) ``-> [...]``."""
        white, log_sd = self.standardised(summary, u)
        d = white.shape[-1]
        log_det = log_sd.sum(-1) + self.corr_chol.diagonal().log().sum()
        return -0.5 * (white**2).sum(-1) - log_det - 0.5 * d * math.log(2 * math.pi)


def fit_synthetic_likelihood(u: Tensor, summaries: Tensor, center: Tensor, scale: Tensor, *,
                             bandwidth: float | None = 2.5, min_effective: float = 200.0,
                             robust_passes: int = 2, generalised: bool = False) -> GaussianSyntheticLikelihood:
    r"""Fit the synthetic likelihood of the module docstring to ``u [M, d]`` and ``summaries [M, d]``.

    Arguments:
        center, scale: $c$, $s$ ``[d]``: the centre of the fit and the unit of $z$
            (typically the current posterior mean and SD in ``u``).
        bandwidth: the kernel's SD in units of $z$; widened until the weights' effective
            size reaches ``min_effective`` (or all data sets). ``None``: no kernel.
        robust_passes: refits that down-weight outlying data sets.
        generalised: each component's mean weighted by its fitted precision (one more pass).

    Raises:
        ValueError: fewer data sets than the quadratic mean has coefficients.
    """
    u, summaries = u.to(torch.float64), summaries.to(torch.float64)
    center, scale = center.to(torch.float64), scale.to(torch.float64).clamp_min(1e-12)
    M, d = summaries.shape
    z = (u - center) / scale
    quad, lin = quadratic_features(z), linear_features(z)
    if M < 2 * quad.shape[1]:
        raise ValueError(f"the synthetic likelihood needs at least {2 * quad.shape[1]} data sets, got {M}")
    kernel = torch.ones(M, dtype=torch.float64)
    if bandwidth is not None:
        h = float(bandwidth)
        sq = (z**2).sum(-1)
        while True:
            kernel = torch.exp(-0.5 * sq / h**2)
            if _effective(kernel) >= min(min_effective, M) * 0.999 or h > 1e3:
                break
            h *= 1.25
    weights = kernel.clone()
    cutoff = float(chi2.ppf(0.99, d))
    precision = torch.ones_like(summaries)  # 1 / D(z)^2 per component (generalised): OLS first
    for _ in range(robust_passes + 1 + int(generalised)):
        if generalised:  # each component's mean weighted by its own precision
            mean_coef = torch.cat([_weighted_lstsq(quad, summaries[:, k:k + 1], weights * precision[:, k])
                                   for k in range(d)], 1)
        else:
            mean_coef = _weighted_lstsq(quad, summaries, weights)
        resid = summaries - quad @ mean_coef
        log_sd_coef = 0.5 * _weighted_lstsq(lin, torch.log(resid**2 + 1e-300), weights)
        log_sd_coef[0] -= 0.5 * _LOG_CHI2_MEAN
        e = resid / (lin @ log_sd_coef).exp()
        w = weights / weights.sum()
        log_sd_coef[0] += 0.5 * torch.log((w[:, None] * e**2).sum(0))  # unit weighted variance
        e = resid / (lin @ log_sd_coef).exp()
        if generalised:  # relative to the centre's (a constant factor per component changes no fit)
            log_var = 2 * z @ log_sd_coef[1:]
            precision = torch.exp(-log_var.clamp(-MAX_LOG_VARIANCE_RATIO, MAX_LOG_VARIANCE_RATIO))
        corr = (w[:, None] * e).T @ e
        corr = corr / torch.outer(corr.diagonal().sqrt(), corr.diagonal().sqrt())
        chol = torch.linalg.cholesky(corr + 1e-9 * torch.eye(d, dtype=torch.float64))
        white = torch.linalg.solve_triangular(chol, e.T, upper=False).T
        distance = (white**2).sum(-1)
        weights = kernel * (cutoff / distance).clamp(max=1.0)  # down-weight beyond the 99% quantile
    return GaussianSyntheticLikelihood(center, scale, mean_coef, log_sd_coef, chol, _effective(kernel))


def _effective(weights: Tensor) -> float:
    return float(weights.sum() ** 2 / (weights**2).sum().clamp_min(1e-300))


def lack_of_fit(synthetic: GaussianSyntheticLikelihood, u: Tensor, summaries: Tensor, *, radius: float = 2.0) -> Tensor:
    r"""Per summary component, the synthetic likelihood's variance over the pure-error variance,
    ``[d]``, on the data sets within ``radius`` of the fit's centre (in $z$).

    The pure error is estimated from nearest neighbours in $z$: half the mean squared difference
    of the summaries of each data set and its nearest neighbour. A mean model that fits leaves
    residuals as large as that noise (ratio about 1, a little below from the neighbours' distance);
    a mean that curves more than the quadratic allows inflates the fitted variance with its
    misfit, and the ratio grows (the lack-of-fit test of regression with replicates). With fewer
    than 20 data sets within ``radius`` (a sparse window in several dimensions) there is no
    evidence either way, and the ratios are 1."""
    u = u.to(torch.float64)
    z = synthetic.z(u)
    near = (z**2).sum(-1) <= radius**2
    if int(near.sum()) < 20:
        return torch.ones(summaries.shape[-1], dtype=torch.float64)
    z, t = z[near], summaries.to(torch.float64)[near]
    neighbour = torch.empty(len(z), dtype=torch.long)
    for start in range(0, len(z), NEIGHBOUR_CHUNK):  # [chunk, M] distances at a time
        distance = torch.cdist(z[start:start + NEIGHBOUR_CHUNK], z)
        distance[:, start:start + NEIGHBOUR_CHUNK].fill_diagonal_(math.inf)
        neighbour[start:start + NEIGHBOUR_CHUNK] = distance.argmin(1)
    pure = 0.5 * ((t - t[neighbour]) ** 2).mean(0)
    _, log_sd = synthetic.moments(u[near])
    return (2 * log_sd).exp().mean(0) / pure.clamp_min(1e-300)
