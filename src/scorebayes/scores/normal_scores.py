r"""A monotone, parameter-free view of heavy-tailed data columns: normal scores.

A score network sees each data column through a fixed map $g_k$ fitted once on the training
table. For a light-tailed column $g_k$ is the identity (the network's robust standardisation
follows, `Standardiser`). For a heavy-tailed one it is the *normal-score* transform

$$
g_k(x) = \Phi^{-1}\bigl(\hat F_k(x)\bigr), \qquad
\hat F_k(v) = \frac{\#\{x_i < v\} + \tfrac12 \#\{x_i = v\}}{N},
$$

the mid-rank empirical CDF of the column's $N$ training values mapped to a normal quantile,
evaluated at $K$ knots (the column's values at evenly spaced normal quantiles, or every distinct
value when there are at most $K$), linear between knots, and continued beyond the outer knots by
$z_K + \operatorname{asinh}(\lambda_K (x - x_K))$ with $\lambda_K$ the outer segment's slope, so
that the map is continuous, strictly increasing and grows only logarithmically far out. The
mid-rank ECDF gives tied values (counts, a point mass) one knot at the middle of their ranks.

**Why it leaves the posterior unchanged.** $g$ is a fixed bijection of each coordinate that does
not depend on $\theta$, so $\log p(g(x) \mid \theta) = \log p(x \mid \theta) - \log|g'(x)|$ and
$\nabla_\theta \log p(g(x)\mid\theta) = \nabla_\theta \log p(x\mid\theta)$: the likelihood score,
the target of score matching, is the same function of the data, only seen in other coordinates.

**Why it matters.** The robust standardisation $(x - \text{median})/(\text{IQR}/1.349)$ leaves
heavy tails heavy. A g-and-k table whose values reach $10^{13}$ puts every realistic observation
within a hair of zero after a first layer scaled for the extremes, and the network cannot learn
the data's effect at all. A column is called heavy-tailed, and transformed, when its 0.1% or
99.9% quantile lies more than `HEAVY_TAIL` robust SDs from its median (Gaussian data: 3.1;
exponential: 7.6; lognormal with $\sigma = 1$: about 21).

References:
    - Rank-based inverse normal transformations are increasingly used, but are they merited?
      (Beasley, Erickson and Allison, 2009), on the mid-rank normal-score transform.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["NormalScores", "HEAVY_TAIL", "KNOTS"]

#: a column whose 0.1% or 99.9% quantile is this many robust SDs from its median is transformed
HEAVY_TAIL = 10.0
#: knots of the piecewise-linear normal-score map of one column
KNOTS = 41


class NormalScores(nn.Module):
    """Per column of ``[*, dim]``: the identity, or for heavy-tailed columns the normal-score map
    $g_k$ of the module docstring (``knots [dim, K]`` in data units, ``levels [dim, K]`` their
    normal scores, ``used [dim]`` the number of knots of each transformed column, 0 for the
    identity). Buffers, so the map is saved with the network's state dict. ``enabled=False``
    keeps every column as it is."""

    max_rows = 200_000

    def __init__(self, dim: int, knots: int = KNOTS, *, enabled: bool = True):
        super().__init__()
        self.enabled = enabled  # False: every column passes through (the papers' networks)
        self.register_buffer("knots", torch.zeros(dim, knots, dtype=torch.float64))
        self.register_buffer("levels", torch.zeros(dim, knots, dtype=torch.float64))
        self.register_buffer("used", torch.zeros(dim, dtype=torch.long))

    @property
    def transformed(self) -> list[int]:
        """The columns mapped to normal scores."""
        return torch.nonzero(self.used).flatten().tolist()

    def fit(self, data: Tensor, pools: Sequence[Sequence[int]] = ()) -> Tensor:
        """Fit on a training table ``data [..., dim]`` (at most ``max_rows`` evenly strided rows
        are read, so a memory-mapped table stays on disk) and return those rows transformed,
        ``[rows, dim]``. ``pools``: groups of columns that share one map, fitted on their values
        pooled."""
        rows = data.reshape(-1, data.shape[-1])
        rows = rows[:: max(1, len(rows) // self.max_rows)]
        self.used.zero_()
        if not self.enabled:
            return rows
        flat = rows.detach().double()
        pooled = {k for pool in pools for k in pool}
        groups = [list(pool) for pool in pools] + [[k] for k in range(flat.shape[1]) if k not in pooled]
        for group in groups:
            values = flat[:: max(1, len(group)), group].reshape(-1)
            values = values[torch.isfinite(values)]
            if len(values) < 20 or not _heavy_tailed(values):
                continue
            knots, levels = _normal_score_knots(values, self.knots.shape[1])
            for k in group:
                self.knots[k].zero_()
                self.levels[k].zero_()
                self.knots[k, : len(knots)], self.levels[k, : len(knots)] = knots, levels
                self.used[k] = len(knots)
        return self(rows)

    def forward(self, x: Tensor) -> Tensor:
        # on the Langevin drift's path (once per step): one check when no column is transformed
        if not bool(self.used.any()):
            return x
        columns = self.transformed
        out = x.clone()
        for k in columns:  # a few columns at most; each a searchsorted over K knots
            out[..., k] = _piecewise(x[..., k], self.knots[k, : self.used[k]], self.levels[k, : self.used[k]])
        return out


def _heavy_tailed(values: Tensor) -> bool:
    q = torch.quantile(values, torch.tensor([0.001, 0.25, 0.5, 0.75, 0.999], dtype=values.dtype))
    spread = (q[3] - q[1]) / 1.349
    if spread <= 0:  # a point mass at the median: heavy if anything lies far out in SD units
        sd = values.std()
        return bool(sd > 0 and torch.max((q[[0, 4]] - q[2]).abs()) > HEAVY_TAIL * sd)
    return bool(torch.max((q[[0, 4]] - q[2]).abs()) > HEAVY_TAIL * spread)


def _normal_score_knots(values: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """Knots (data values) and their mid-rank normal scores for one column's ``values [N]``."""
    ordered, _ = torch.sort(values)
    n = len(ordered)
    distinct = torch.unique(ordered)
    if len(distinct) <= count:
        knots = distinct
    else:  # the values at evenly spaced normal quantiles, out to about 1/(2N) in each tail
        edge = float(torch.special.ndtri(torch.tensor(1 - 0.5 / n, dtype=torch.float64)))
        probs = torch.special.ndtr(torch.linspace(-edge, edge, count, dtype=torch.float64))
        index = (probs * (n - 1)).round().long().clamp(0, n - 1)
        knots = torch.unique(ordered[index])
    below = torch.searchsorted(ordered, knots, right=False).double()
    at_or_below = torch.searchsorted(ordered, knots, right=True).double()
    mid_rank = (below + at_or_below) / 2 / n
    return knots, torch.special.ndtri(mid_rank.clamp(0.5 / n, 1 - 0.5 / n))


def _piecewise(x: Tensor, knots: Tensor, levels: Tensor) -> Tensor:
    """The normal-score map of one column at ``x [*]``: linear between ``knots [K]`` (data
    units) and ``levels [K]``, asinh tails with the outer segments' slopes."""
    dtype = x.dtype
    v = x.double()
    index = torch.searchsorted(knots, v.contiguous()).clamp(1, len(knots) - 1)
    x0, x1, z0, z1 = knots[index - 1], knots[index], levels[index - 1], levels[index]
    inner = z0 + (v - x0) * (z1 - z0) / (x1 - x0)
    low_slope = (levels[1] - levels[0]) / (knots[1] - knots[0])
    high_slope = (levels[-1] - levels[-2]) / (knots[-1] - knots[-2])
    low = levels[0] + torch.asinh(low_slope * (v - knots[0]))
    high = levels[-1] + torch.asinh(high_slope * (v - knots[-1]))
    out = torch.where(v < knots[0], low, torch.where(v > knots[-1], high, inner))
    return out.to(dtype)
