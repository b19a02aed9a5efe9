r"""Accuracy metrics of the experiments (App. C of the Langevin-SBI paper) and sample-set distances.

Per-parameter metrics over repetitions (Tables 1, 3, 6): the bias of the posterior mean
$|\mathbb E(\hat\theta) - \theta^*|$, the width of the equal-tailed 95% credible
interval and its coverage of $\theta^*$ (weighted draws use weighted means and
[`scorebayes.posterior.weighted_quantile()`][scorebayes.posterior.weighted_quantile]).

Functional metrics (Table 2): for posterior draws of a regression function on a grid,
``f [S, G]``, the KS and $W_1$ distances to a reference posterior ``[R, G]`` at each
grid point, averaged over the grid (function units; the paper prints $W_1 \times 10^2$),
and the pointwise credible band's coverage of the true function and its width.

Score losses (App. C.2.3): the mean squared error $\mathbb E\|s_\phi - s^*\|^2$ of a
full-data score ``score_fn(theta [B, d], x [B, n, p]) -> [B, d]`` against the true one, on
single observations (loss-1), on data sets (loss-n) and at posterior draws with the observed
data (loss-n-posterior).

Sample-set distances: exact $W_1$/$W_2$ by optimal transport (POT ``ot.emd2``) and
the unbiased $\mathrm{MMD}^2$ with a Gaussian kernel and the median heuristic.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5, App. C)
    - Gretton et al., A kernel two-sample test, JMLR 2012. <https://jmlr.org/papers/v13/gretton12a.html>
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats
from scipy.spatial.distance import pdist
from torch import Tensor

from .posterior import Posterior, weighted_quantile

__all__ = [
    "posterior_mean", "bias", "credible_interval", "ci_width", "covers", "repetition_summary",
    "ks_1d", "w1_1d", "function_distances", "band_coverage",
    "score_loss", "loss_one", "loss_n", "loss_n_posterior",
    "wasserstein", "mmd2_unbiased",
]

Samples = Posterior | Tensor | np.ndarray


def _flatten(samples: Samples, weights: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``Posterior`` / ``[S, d]`` / ``[C, S, d]`` -> (``[S', d]`` array, normalised weights or None)."""
    if isinstance(samples, Posterior):
        if weights is None and samples.weights is not None:
            weights = samples.weights
        samples = samples.draws
    x = samples.detach().cpu().numpy() if isinstance(samples, Tensor) else np.asarray(samples)
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    x = x.reshape(-1, x.shape[-1])
    if weights is None:
        return x, None
    w = weights.detach().cpu().numpy() if isinstance(weights, Tensor) else np.asarray(weights)
    w = np.asarray(w, dtype=float).reshape(-1)
    if w.shape[0] != x.shape[0]:
        raise ValueError(f"{w.shape[0]} weights for {x.shape[0]} draws")
    if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
        raise ValueError("weights must be finite, non-negative and not all zero")
    return x, w / w.sum()


def posterior_mean(samples: Samples, weights: Any = None) -> np.ndarray:
    """(Weighted) posterior mean ``[d]`` of draws ``[S, d]`` (or ``[C, S, d]``, a Posterior)."""
    x, w = _flatten(samples, weights)
    return x.mean(0) if w is None else w @ x


def bias(samples: Samples, truth: Any, weights: Any = None) -> np.ndarray:
    r"""Absolute bias $|\mathbb E(\hat\theta) - \theta^*|$ of the posterior mean, ``[d]``."""
    return np.abs(posterior_mean(samples, weights) - np.asarray(truth, dtype=float))


def credible_interval(samples: Samples, weights: Any = None,
                      level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed credible interval per coordinate: ``(low [d], high [d])``."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x, w = _flatten(samples, weights)
    if w is not None:  # zero-weight draws (e.g. outside the prior) must not move the quantiles
        x, w = x[w > 0], w[w > 0]
    tail = (1 - level) / 2
    low = np.array([weighted_quantile(x[:, k], w, tail) for k in range(x.shape[1])])
    high = np.array([weighted_quantile(x[:, k], w, 1 - tail) for k in range(x.shape[1])])
    return low, high


def ci_width(samples: Samples, weights: Any = None, level: float = 0.95) -> np.ndarray:
    """Width of the equal-tailed credible interval, ``[d]``."""
    low, high = credible_interval(samples, weights, level)
    return high - low


def covers(samples: Samples, truth: Any, weights: Any = None, level: float = 0.95) -> np.ndarray:
    """Whether each coordinate's equal-tailed interval contains the truth, bool ``[d]``."""
    low, high = credible_interval(samples, weights, level)
    truth = np.asarray(truth, dtype=float)
    return (low <= truth) & (truth <= high)


def repetition_summary(posteriors: Sequence[Samples], truth: Any,
                       level: float = 0.95) -> dict[str, np.ndarray]:
    r"""Bias, CI width and coverage over repetitions (one posterior per repetition).

    Arguments:
        posteriors: ``R`` Posteriors (weights used when present) or draw arrays ``[S, d]``.
        truth: $\theta^*$ ``[d]``.

    Returns:
        ``{"bias_mean", "bias_sd", "width_mean", "width_sd", "coverage"}``, each ``[d]``
        (SDs over repetitions with ``ddof=1``; 0 for one repetition).
    """
    if len(posteriors) == 0:
        raise ValueError("need at least one repetition")
    b = np.stack([bias(p, truth) for p in posteriors])
    wd = np.stack([ci_width(p, level=level) for p in posteriors])
    cov = np.stack([covers(p, truth, level=level) for p in posteriors])
    ddof = 1 if len(posteriors) > 1 else 0
    return {"bias_mean": b.mean(0), "bias_sd": b.std(0, ddof=ddof), "width_mean": wd.mean(0),
            "width_sd": wd.std(0, ddof=ddof), "coverage": cov.mean(0)}


def _ecdf(values: np.ndarray, weights: np.ndarray | None, at: np.ndarray) -> np.ndarray:
    order = np.argsort(values)
    v = values[order]
    cw = (np.arange(1, len(v) + 1) / len(v)) if weights is None else np.cumsum(weights[order])
    idx = np.searchsorted(v, at, side="right")
    return np.where(idx > 0, cw[np.maximum(idx - 1, 0)], 0.0)


def ks_1d(a: Any, b: Any, weights_a: Any = None, weights_b: Any = None) -> float:
    r"""Kolmogorov-Smirnov distance $\sup_t |F_a(t) - F_b(t)|$ of (weighted) 1-D samples."""
    a, wa = _flatten(np.asarray(a, dtype=float).reshape(-1), weights_a)
    b, wb = _flatten(np.asarray(b, dtype=float).reshape(-1), weights_b)
    a, b = a[:, 0], b[:, 0]
    at = np.concatenate([a, b])
    return float(np.max(np.abs(_ecdf(a, wa, at) - _ecdf(b, wb, at))))


def w1_1d(a: Any, b: Any, weights_a: Any = None, weights_b: Any = None) -> float:
    r"""$W_1$ between (weighted) 1-D samples (area between the two CDFs)."""
    wa = None if weights_a is None else np.asarray(weights_a, dtype=float).reshape(-1)
    wb = None if weights_b is None else np.asarray(weights_b, dtype=float).reshape(-1)
    return float(stats.wasserstein_distance(np.asarray(a, float).reshape(-1),
                                            np.asarray(b, float).reshape(-1), wa, wb))


def function_distances(f: Any, f_ref: Any, weights: Any = None,
                       ref_weights: Any = None) -> dict[str, float]:
    r"""KS and $W_1$ between pointwise posteriors of a function, averaged over the grid.

    Arguments:
        f: draws of the function on a grid, ``[S, G]``.
        f_ref: reference draws (e.g. the exact Gibbs posterior), ``[R, G]``.
        weights, ref_weights: optional draw weights ``[S]`` / ``[R]``.

    Returns:
        ``{"ks": mean_g KS_g, "w1": mean_g W1_g}`` in function units.
    """
    f, w = _flatten(f, weights)
    g, wr = _flatten(f_ref, ref_weights)
    if f.shape[1] != g.shape[1]:
        raise ValueError(f"grids differ: {f.shape[1]} vs {g.shape[1]} points")
    ks = [ks_1d(f[:, j], g[:, j], w, wr) for j in range(f.shape[1])]
    w1 = [w1_1d(f[:, j], g[:, j], w, wr) for j in range(f.shape[1])]
    return {"ks": float(np.mean(ks)), "w1": float(np.mean(w1))}


def band_coverage(f: Any, f_true: Any, weights: Any = None,
                  level: float = 0.95) -> dict[str, float]:
    r"""Pointwise equal-tailed band of ``f [S, G]``: coverage of ``f_true [G]`` and width, grid-averaged."""
    f_true = np.asarray(f_true.detach().cpu() if isinstance(f_true, Tensor) else f_true,
                        dtype=float).reshape(-1)
    low, high = credible_interval(f, weights, level)
    if low.shape != f_true.shape:
        raise ValueError(f"f has {low.shape[0]} grid points, f_true {f_true.shape[0]}")
    return {"coverage": float(np.mean((low <= f_true) & (f_true <= high))),
            "width": float(np.mean(high - low))}


def score_loss(estimated: Tensor, true: Tensor) -> float:
    r"""Mean squared error $\frac1B\sum_b \|\hat s_b - s^*_b\|^2$ of scores ``[B, d]``."""
    if estimated.shape != true.shape:
        raise ValueError(f"score shapes differ: {tuple(estimated.shape)} vs {tuple(true.shape)}")
    return float(((estimated.detach() - true.detach()) ** 2).sum(-1).mean())


ScoreFn = Callable[[Tensor, Tensor], Tensor]


def _batched_loss(score_fn: ScoreFn, true_score: ScoreFn, theta: Tensor, x: Tensor,
                  batch_size: int) -> float:
    total = 0.0
    for start in range(0, theta.shape[0], batch_size):
        th, xb = theta[start:start + batch_size], x[start:start + batch_size]
        total += score_loss(score_fn(th, xb), true_score(th, xb)) * th.shape[0]
    return total / theta.shape[0]


def loss_one(score_fn: ScoreFn, true_score: ScoreFn, theta: Tensor, x: Tensor,
             batch_size: int = 10_000) -> float:
    r"""loss-1: $\mathbb E_{(\theta, X) \sim q p_\theta}\|s(\theta, X) - s^*(\theta, X)\|^2$.

    Arguments:
        score_fn: full-data score ``(theta [B, d], x [B, n, p]) -> [B, d]``, called with ``n = 1``.
        true_score: exact score with the same signature.
        theta: ``[B, d]``; x: one observation per parameter, ``[B, p]``.
    """
    if x.dim() != 2 or x.shape[0] != theta.shape[0]:
        raise ValueError(f"x must be [B={theta.shape[0]}, p], got {tuple(x.shape)}")
    return _batched_loss(score_fn, true_score, theta, x[:, None, :], batch_size)


def loss_n(score_fn: ScoreFn, true_score: ScoreFn, theta: Tensor, x: Tensor,
           batch_size: int = 1000) -> float:
    r"""loss-n: $\mathbb E_{(\theta, \mathbf X_n) \sim q p^{(n)}_\theta}\|s - s^*\|^2$, ``x [B, n, p]``."""
    if x.dim() != 3 or x.shape[0] != theta.shape[0]:
        raise ValueError(f"x must be [B={theta.shape[0]}, n, p], got {tuple(x.shape)}")
    return _batched_loss(score_fn, true_score, theta, x, batch_size)


def loss_n_posterior(score_fn: ScoreFn, true_score: ScoreFn, theta: Tensor, x_obs: Tensor,
                     batch_size: int = 1000) -> float:
    r"""loss-n-posterior: the loss at posterior draws ``theta [S, d]`` with the observed ``x_obs [n, p]``."""
    if x_obs.dim() != 2:
        raise ValueError(f"x_obs must be [n, p], got {tuple(x_obs.shape)}")
    x = x_obs[None].expand(theta.shape[0], *x_obs.shape)
    return _batched_loss(score_fn, true_score, theta, x, batch_size)


def _subsample(x: np.ndarray, w: np.ndarray | None, max_samples: int | None,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    if max_samples is None or x.shape[0] <= max_samples:
        return x, w
    idx = rng.choice(x.shape[0], size=max_samples, replace=False)
    return x[idx], (None if w is None else w[idx] / w[idx].sum())


def wasserstein(a: Samples, b: Samples, *, order: int = 1, weights_a: Any = None,
                weights_b: Any = None, max_samples: int | None = None, seed: int = 0) -> float:
    r"""Exact $W_p$ (``order`` 1 or 2, Euclidean ground cost) between sample sets ``[N, p]``, ``[M, p]``.

    Solves the optimal transport problem with POT's network simplex (``ot.emd2``), cost
    $O(NM)$ memory; ``max_samples`` subsamples each set first (seeded by ``seed``).
    """
    import ot

    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order}")
    rng = np.random.default_rng(seed)
    x, wx = _subsample(*_flatten(a, weights_a), max_samples, rng)
    y, wy = _subsample(*_flatten(b, weights_b), max_samples, rng)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"dimensions differ: {x.shape[1]} vs {y.shape[1]}")
    if x.shape[0] * y.shape[0] > 10**8:
        raise ValueError(f"{x.shape[0]} x {y.shape[0]} cost matrix is too large; set max_samples")
    wx = np.full(x.shape[0], 1.0 / x.shape[0]) if wx is None else wx
    wy = np.full(y.shape[0], 1.0 / y.shape[0]) if wy is None else wy
    cost = ot.dist(x, y, metric="euclidean" if order == 1 else "sqeuclidean")
    value = float(ot.emd2(wx, wy, cost, numItermax=10**7))
    return value if order == 1 else float(np.sqrt(max(value, 0.0)))


def mmd2_unbiased(a: Samples, b: Samples, *, bandwidth: float | None = None,
                  block: int = 2048) -> float:
    r"""Unbiased $\mathrm{MMD}^2$ with a Gaussian kernel $e^{-\|x-y\|^2/(2h^2)}$.

    $$
    \frac{1}{N(N-1)}\sum_{i\ne j}k(a_i,a_j) + \frac{1}{M(M-1)}\sum_{i\ne j}k(b_i,b_j)
    - \frac{2}{NM}\sum_{i,j}k(a_i,b_j)
    $$

    ``bandwidth`` $h$ defaults to the median pairwise distance of the pooled samples
    (computed on at most 1000 points of each set). Kernel sums run in row blocks.
    """
    x, _ = _flatten(a)
    y, _ = _flatten(b)
    if x.shape[0] < 2 or y.shape[0] < 2:
        raise ValueError("each sample set needs at least 2 points")
    if bandwidth is None:
        bandwidth = float(np.median(pdist(np.concatenate([x[:1000], y[:1000]]))))
        bandwidth = bandwidth if bandwidth > 0 else 1.0

    def kernel_sum(u: np.ndarray, v: np.ndarray) -> float:
        total = 0.0
        v2 = (v**2).sum(-1)
        for s in range(0, u.shape[0], block):
            ub = u[s:s + block]
            d2 = np.maximum((ub**2).sum(-1)[:, None] + v2[None, :] - 2 * ub @ v.T, 0.0)
            total += np.exp(-d2 / (2 * bandwidth**2)).sum()
        return total

    n, m = x.shape[0], y.shape[0]
    kxx = (kernel_sum(x, x) - n) / (n * (n - 1))
    kyy = (kernel_sum(y, y) - m) / (m * (m - 1))
    return float(kxx + kyy - 2 * kernel_sum(x, y) / (n * m))
