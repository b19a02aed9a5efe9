r"""Generic statistics of a data set, and the learned summary projected onto them where they add
information.

The calibrated posterior is honest about its summary $T$, but only as sharp as $T$ is
informative. Whether a learned score misses information can be tested on the calibration data
sets themselves: they have known parameters $u_m$, so a regression of $u$ on the summary
predicts the parameter about as well as the summary allows. Add generic statistics $S$ of each
data set and predict again, on held-back data sets. If $(T, S)$ predicts some $u_j$ clearly
better than $T$ alone, $T$ was not efficient, and the prediction itself

$$
T'(\mathbf X) = \hat B^\top \big(1, T(\mathbf X), S(\mathbf X)\big) \in \mathbb R^d
$$

is the better summary, the semi-automatic summary of Fearnhead and Prangle (2012) built on the
learned one. $\hat B$ is a locally weighted least-squares fit (the synthetic likelihood's Gaussian
kernel around the current estimate), so it is a local linear approximation of $E[u \mid T, S]$.

$S$, for a data set of $n$ observations with columns $z$ (each column mapped to normal scores if
heavy-tailed, then standardised, by maps fitted on the observed data): per column the octiles
(quartiles beyond two columns) and the mean, and the means of all products $z_a z_b$ (of the
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

__all__ = ["DataStatistics", "SummaryProjection", "fit_projection", "GAIN"]

OCTILES, QUARTILES = tuple(k / 8 for k in range(1, 8)), (0.25, 0.5, 0.75)
MAX_PRODUCT_COLUMNS = 10
CHUNK_ELEMENTS = 2**22
#: the projection replaces the score summary when it explains this share of some parameter's
#: held-back residual variance
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
    r"""$T' = \hat B^\top (1, T, S)$, cross-fitted: ``coef [2, 1 + d + k, d]`` are fitted on the
    even and the odd rows, and a row's $T'$ uses the other half's fit, so that the synthetic
    likelihood sees $T'$ as it would on new data; data sets outside the fit (held back, observed)
    use their average. ``gain [d]``: the share of each parameter's held-back residual variance
    given $T$ that $(T, S)$ explains."""

    coef: Tensor
    gain: Tensor

    def __call__(self, t: Tensor, s: Tensor, fold: Tensor | None = None) -> Tensor:
        """``t [M, d]``, ``s [M, k]``; ``fold [M]`` in {0, 1} (the row's own half) or ``None``."""
        design = _design(t, s)
        if fold is None:
            return design @ self.coef.mean(0)
        return torch.where(fold[:, None] == 0, design @ self.coef[1], design @ self.coef[0])


def _design(t: Tensor, s: Tensor | None) -> Tensor:
    parts = [torch.ones(len(t), 1, dtype=torch.float64), t.double()]
    return torch.cat(parts if s is None else [*parts, s.double()], 1)


def _weighted_fit(features: Tensor, u: Tensor, weights: Tensor) -> Tensor:
    root = weights.sqrt()[:, None]
    a, b = features * root, u * root
    gram = a.T @ a
    ridge = 1e-6 * gram.diagonal().mean() * torch.eye(len(gram), dtype=gram.dtype)
    return torch.linalg.solve(gram + ridge, a.T @ b)


def fit_projection(u: Tensor, t: Tensor, s: Tensor, held: Tensor, fold: Tensor, center: Tensor, scale: Tensor,
                   bandwidth: float) -> SummaryProjection | None:
    """The projection of the module docstring, fitted on the rows of ``u [M, d]``, ``t [M, d]``,
    ``s [M, k]`` not ``held [M]`` (the two ``fold [M]`` halves apart), with Gaussian kernel weights in
    ``(u - center) / (bandwidth scale)``, and judged on the held rows; ``None`` when it explains
    less than ``GAIN`` of every parameter's residual variance given $T$ alone (the score summary
    then stays) or there are too few rows."""
    weights = torch.exp(-0.5 * (((u - center) / (bandwidth * scale)) ** 2).sum(-1))
    k = 1 + t.shape[1] + s.shape[1]
    halves = [~held & (fold == half) for half in (0, 1)]
    if min(float(weights[rows].sum()) for rows in halves) < 3 * k or int(held.sum()) < 20:
        return None
    residual, coefs = [], None
    for stats in (None, s):
        coefs = torch.stack([_weighted_fit(_design(t[rows], None if stats is None else stats[rows]), u[rows],
                                           weights[rows]) for rows in halves])
        error = u[held] - _design(t[held], None if stats is None else stats[held]) @ coefs.mean(0)
        residual.append((weights[held, None] * error**2).sum(0) / weights[held].sum())
    gain = 1 - residual[1] / residual[0].clamp_min(1e-300)
    if not bool((gain > GAIN).any()):
        return None
    return SummaryProjection(coefs, gain)
