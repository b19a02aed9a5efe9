r"""The learned summary regressed onto the parameters, with generic statistics of a data set
where they add information.

A Gaussian synthetic likelihood of the learned score summary $T$ needs the mean of $T$ to be
close to quadratic in $u$ over the calibration's window. The score at a fixed point is often
far from that: on a skewed posterior at moderate $n$ its mean curves by several of its noise
SDs within one posterior SD, and a quadratic fitted over the window misses it where the
posterior lies. The calibration data sets have known parameters $u_m$, so such a summary (the synthetic
likelihood's lack of fit shows it, `synthetic_likelihood.lack_of_fit`) can be replaced by a
local prediction of $u$ from it, whose mean is close to linear in $u$ by construction (it
predicts $u$):

$$
T'(\mathbf X) = \hat B^\top \big(1,\; z,\; [z_i z_j],\; [S(\mathbf X)]\big) \in \mathbb R^d,
\qquad z = (T(\mathbf X) - T(\mathbf X^*)) / s_T,
$$

a regression in the standardised summary $z$ (centred at the observed one), quadratic for a
curved summary, and linear in generic statistics $S$ of the data set when they help: if
$(z, S)$ predicts some $u_j$ on held-back data sets clearly better than $z$ alone, $T$ was not
efficient, and $S$ joins. This is the semi-automatic summary of Fearnhead and Prangle (2012) built on the
learned one. $\hat B$ is a locally weighted least-squares fit (the synthetic likelihood's
Gaussian kernel around the current estimate), so it is a local approximation of
$E[u \mid T, S]$.

$S$, for a data set of $n$ observations with columns $x$ (each column mapped to normal scores if
heavy-tailed, then standardised, by maps fitted on the observed data): per column the octiles
(quartiles beyond two columns) and the mean, and the means of all products $x_a x_b$ (of the
first `MAX_PRODUCT_COLUMNS` columns): a robust description of each margin, and the sufficient
statistics of a linear-Gaussian model.

References:
    - Constructing summary statistics for approximate Bayesian computation: semi-automatic
      approximate Bayesian computation (Fearnhead and Prangle, 2012)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ...scores.layers import Standardiser
from ...scores.normal_scores import NormalScores
from .synthetic_likelihood import linear_features, quadratic_features

__all__ = ["DataStatistics", "SummaryProjection", "fit_projection", "GAIN"]

OCTILES, QUARTILES = tuple(k / 8 for k in range(1, 8)), (0.25, 0.5, 0.75)
MAX_PRODUCT_COLUMNS = 10
CHUNK_ELEMENTS = 2**22
#: the data statistics join the regression when they explain this share of some parameter's
#: held-back residual variance. Statistics that explain a share g and are left out cost the
#: posterior a data-specific error of about sqrt(g / (1 - g)) of its SDs (0.33 at g = 0.1); but
#: joined, their fitted coefficients add an error of their own, and the gain is judged on the
#: held-back fifth of one round's data sets, so a lower threshold moves about as many posteriors
#: away from the exact one as towards it
GAIN = 0.1


class DataStatistics:
    """$S$ of the module docstring, with its column maps fitted on the observed view ``[n, p]``.
    ``__call__(views)`` takes ``M`` views ``[n_m, p]`` and returns ``[M, k]`` (float64)."""

    def __init__(self, observed: Tensor):
        observed = observed.detach().double()
        p = observed.shape[-1]
        self.marginal, self.norm = NormalScores(p), Standardiser(p)
        self.norm.fit(self.marginal.fit(observed))
        columns = min(p, MAX_PRODUCT_COLUMNS)
        self.pairs = torch.triu_indices(columns, columns)
        # octiles describe one or two margins well; quartiles keep wider data's statistics few
        self.levels = torch.tensor(OCTILES if p <= 2 else QUARTILES, dtype=torch.float64)

    def __call__(self, views: list[Tensor]) -> Tensor:
        if not views:
            return torch.zeros(0, 0, dtype=torch.float64)
        if len({tuple(v.shape) for v in views}) > 1:  # sizes differ: one by one
            return torch.cat([self._statistics(v.double()[None]) for v in views])
        # data sets of one size, in chunks (torch.quantile takes at most 2**24 elements)
        chunk = max(1, CHUNK_ELEMENTS // views[0].numel())
        return torch.cat([self._statistics(torch.stack(views[start:start + chunk]).double())
                          for start in range(0, len(views), chunk)])

    def _statistics(self, x: Tensor) -> Tensor:
        z = self.norm(self.marginal(x))  # [M, n, p]
        quantiles = torch.quantile(z, self.levels, dim=1)  # [levels, M, p]
        products = (z[..., self.pairs[0]] * z[..., self.pairs[1]]).mean(1)  # [M, pairs]
        return torch.cat([quantiles.permute(1, 0, 2).flatten(1), z.mean(1), products], 1)


@dataclass
class SummaryProjection:
    r"""$T' = \hat B^\top (1, z[, z_i z_j][, S])$, cross-fitted: ``coef [2, k, d]`` are fitted on the
    even and the odd rows, and a row's $T'$ uses the other half's fit, so that the synthetic
    likelihood sees $T'$ as it would on new data; data sets outside the fit (held back, observed)
    use their average. ``location``, ``spread`` ``[d]``: the standardisation of $T$; ``quadratic``:
    whether the products $z_i z_j$ are in the design;
    ``statistics``: whether $S$ is in the design; ``gain [d]``: the share of each parameter's
    held-back residual variance given $z$ that $(z, S)$ explains."""

    coef: Tensor
    location: Tensor
    spread: Tensor
    quadratic: bool
    statistics: bool
    gain: Tensor

    def __call__(self, t: Tensor, s: Tensor, fold: Tensor | None = None) -> Tensor:
        """``t [M, d]``, ``s [M, k]``; ``fold [M]`` in {0, 1} (the row's own half) or ``None``."""
        design = _design(t, s if self.statistics else None, self.location, self.spread, self.quadratic)
        if fold is None:
            return design @ self.coef.mean(0)
        return torch.where(fold[:, None] == 0, design @ self.coef[1], design @ self.coef[0])


def _design(t: Tensor, s: Tensor | None, location: Tensor, spread: Tensor, quadratic: bool) -> Tensor:
    """``[M, 1 + d (+ d(d+1)/2) (+ k)]``: 1, the standardised summary (its products) (and ``s``)."""
    z = (t.double() - location) / spread
    parts = [quadratic_features(z) if quadratic else linear_features(z)]
    return torch.cat(parts if s is None else [*parts, s.double()], 1)


def _weighted_fit(features: Tensor, u: Tensor, weights: Tensor) -> Tensor:
    root = weights.sqrt()[:, None]
    a, b = features * root, u * root
    gram = a.T @ a
    ridge = 1e-6 * gram.diagonal().mean() * torch.eye(len(gram), dtype=gram.dtype)
    return torch.linalg.solve(gram + ridge, a.T @ b)


def fit_projection(u: Tensor, t: Tensor, s: Tensor, held: Tensor, fold: Tensor, center: Tensor, scale: Tensor,
                   bandwidth: float, t_obs: Tensor | None = None, quadratic: bool = False) -> SummaryProjection | None:
    """The projection of the module docstring, fitted on the rows of ``u [M, d]``, ``t [M, d]``,
    ``s [M, k]`` not ``held [M]`` (the two ``fold [M]`` halves apart), with Gaussian kernel weights in
    ``(u - center) / (bandwidth scale)``, and judged on the held rows; ``t`` is standardised
    around ``t_obs [d]`` (``None``: its weighted mean), with its products if ``quadratic``. $S$
    joins the design when it explains more than ``GAIN`` of some parameter's held-back residual
    variance; ``None`` when there are too few rows, or the regression would be linear in $T$
    alone (an affine map of $T$: the summary then stays)."""
    weights = torch.exp(-0.5 * (((u - center) / (bandwidth * scale)) ** 2).sum(-1))
    d = t.shape[1]
    k = 1 + d + (d * (d + 1) // 2 if quadratic else 0) + s.shape[1]
    halves = [~held & (fold == half) for half in (0, 1)]
    if min(float(weights[rows].sum()) for rows in halves) < 3 * k or int(held.sum()) < 20:
        return None
    fit_rows = ~held
    w = weights[fit_rows] / weights[fit_rows].sum()
    mean = (w[:, None] * t[fit_rows]).sum(0)
    location = mean if t_obs is None else t_obs.reshape(-1).double()
    spread = (w[:, None] * (t[fit_rows] - mean) ** 2).sum(0).sqrt().clamp_min(1e-12)
    residual, coefs = [], []
    for stats in (None, s):
        coefs.append(torch.stack([_weighted_fit(_design(t[rows], None if stats is None else stats[rows], location,
                                                        spread, quadratic), u[rows], weights[rows])
                                  for rows in halves]))
        design = _design(t[held], None if stats is None else stats[held], location, spread, quadratic)
        error = u[held] - design @ coefs[-1].mean(0)
        residual.append((weights[held, None] * error**2).sum(0) / weights[held].sum())
    gain = 1 - residual[1] / residual[0].clamp_min(1e-300)
    statistics = bool((gain > GAIN).any())
    if not (quadratic or statistics):
        return None
    return SummaryProjection(coefs[1] if statistics else coefs[0], location, spread, quadratic, statistics, gain)
