r"""MCMC convergence diagnostics: rank-normalised split R-hat, bulk ESS, start memory.

Follows Vehtari, Gelman, Simpson, Carpenter and Bürkner (2021). For ``C`` chains of
``S`` draws, each chain is split in half; draws are rank-normalised,
$z = \Phi^{-1}((r - 3/8)/(CS + 1/4))$, and

$$
\hat R = \sqrt{\frac{\frac{S'-1}{S'}W + \frac{1}{S'}B}{W}},
$$

with $W$ the mean within-chain variance and $B/S'$ the variance of the
chain means. The bulk ESS uses Geyer's initial monotone sequence on the combined
autocorrelation.

Many short chains (Langevin output: one or two draws per chain) leave R-hat undefined.
[`start_memory()`][scorebayes.diagnostics.start_memory] checks them instead: over chains, how much of the spread of the last
draws the starts explain ($R^2$ of a regression on the rank-normalised starts). Chains
that have mixed have forgotten their starts ($R^2 \approx d/(C-1)$); chains stuck near
their starts, or split between separated modes by where they started, remember them.

References:
    - Rank-normalization, folding, and localization: An improved R-hat (Vehtari et al., 2021)
      <https://arxiv.org/abs/1903.08008>
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

__all__ = ["rhat", "ess", "StartMemory", "start_memory", "remembers_start"]


def _split(draws: np.ndarray) -> np.ndarray:
    """``[C, S] -> [2C, S//2]``."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def _rank_normalise(draws: np.ndarray) -> np.ndarray:
    ranks = stats.rankdata(draws, method="average").reshape(draws.shape)
    return stats.norm.ppf((ranks - 0.375) / (draws.size + 0.25))


def rhat(draws: np.ndarray, *, rank: bool = True) -> float:
    r"""Rank-normalised split $\hat R$ of one scalar quantity.

    Arguments:
        draws: ``[C, S]`` (chains x draws); needs ``S >= 4``.
        rank: ``False``: the classical split $\hat R$ of the draws themselves (of their
            mean: no rank normalisation, no tail R-hat).

    Returns:
        The max of the bulk and tail (folded) R-hat, or ``nan`` if undefined.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or draws.shape[1] < 4 or not np.all(np.isfinite(draws)):
        return float("nan")
    split = _split(draws)
    if not rank:
        return _rhat_basic(split)
    bulk = _rhat_basic(_rank_normalise(split))
    folded = np.abs(split - np.median(split))
    tail = _rhat_basic(_rank_normalise(folded))
    return float(max(bulk, tail))


def _rhat_basic(z: np.ndarray) -> float:
    m, s = z.shape
    within = z.var(axis=1, ddof=1).mean()
    between = s * z.mean(axis=1).var(ddof=1)
    if within <= 0:
        return float("nan")
    var_plus = (s - 1) / s * within + between / s
    return float(np.sqrt(var_plus / within))


def ess(draws: np.ndarray, *, rank: bool = True) -> float:
    r"""Bulk effective sample size of one scalar quantity.

    Arguments:
        draws: ``[C, S]``. With ``S = 1`` (independent final states of C chains) the
            draws are treated as independent and ``C`` is returned.
        rank: ``False``: the ESS of the mean (of the draws themselves, not rank-normalised).
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or not np.all(np.isfinite(draws)):
        return float("nan")
    if draws.shape[1] == 1:
        return float(draws.shape[0])
    if draws.shape[1] < 4:
        return float("nan")
    z = _rank_normalise(_split(draws)) if rank else _split(draws)
    m, s = z.shape
    centred = z - z.mean(axis=1, keepdims=True)
    # autocovariance per chain via FFT
    nfft = 2 ** int(np.ceil(np.log2(2 * s)))
    spec = np.fft.rfft(centred, n=nfft, axis=1)
    acov = np.fft.irfft(spec * np.conj(spec), n=nfft, axis=1)[:, :s] / s
    chain_var = acov[:, 0] * s / (s - 1)
    within = chain_var.mean()
    var_plus = within * (s - 1) / s + z.mean(axis=1).var(ddof=1)
    if var_plus <= 0:
        return float(m * s)
    rho = 1.0 - (within - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    # Geyer's initial positive and monotone sequence on pairs
    total = 0.0
    prev_pair = np.inf
    for t in range(0, s - 1, 2):
        pair = rho[t] + rho[t + 1]
        if pair < 0:
            break
        pair = min(pair, prev_pair)
        prev_pair = pair
        total += pair
    tau = -1.0 + 2.0 * total
    tau = max(tau, 1.0 / np.log10(m * s))
    return float(m * s / tau)


class StartMemory(NamedTuple):
    """Per coordinate: the share of the last draws' (rank-normal) variance the starts explain."""

    r_squared: np.ndarray  # [d]
    p_value: np.ndarray  # [d], F test of no association


def start_memory(starts: np.ndarray, ends: np.ndarray) -> StartMemory:
    r"""How much of where the chains ended is explained by where they started.

    Starts and ends are rank-normalised per coordinate
    ($z = \Phi^{-1}((r - 3/8)/(C + 1/4))$, so any monotone reparametrisation gives the
    same answer); each end coordinate $k$ is regressed by least squares on all $d$
    start coordinates and an intercept:

    $$
    R^2_k = 1 - \frac{\lVert z^{end}_k - X\hat\beta_k\rVert^2}
    {\lVert z^{end}_k - \bar z^{end}_k\rVert^2},\qquad
    F_k = \frac{R^2_k/d}{(1 - R^2_k)/(C - d - 1)} \sim F(d, C - d - 1)
    $$

    under independence (mixed chains), where $E R^2_k = d/(C - 1)$. Linear in the
    rank-normal starts: a dependence that is not monotone in any start coordinate can be missed.

    Arguments:
        starts: ``[C, d]`` initial states; ends: ``[C, d]`` last draws.

    Returns:
        [`StartMemory`][scorebayes.diagnostics.StartMemory] of ``[d]`` arrays; ``nan`` with fewer than ``max(20, d + 3)`` chains
        (ranks of a few chains are too coarse for the F distribution: 4 chains in the same order
        happen once in 24, yet give $R^2 = 1$), non-finite values, or a constant coordinate.
    """
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    if starts.shape != ends.shape or starts.ndim != 2:
        raise ValueError(f"starts and ends must both be [C, d], got {starts.shape} and {ends.shape}")
    chains, d = starts.shape
    nan = np.full(d, np.nan)
    if (chains < max(20, d + 3) or not (np.isfinite(starts).all() and np.isfinite(ends).all())
            or (np.ptp(starts, axis=0) == 0).any() or (np.ptp(ends, axis=0) == 0).any()):
        return StartMemory(nan, nan.copy())
    x = np.column_stack([np.ones(chains), _rank_normal_columns(starts)])
    y = _rank_normal_columns(ends)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = ((y - x @ beta) ** 2).sum(0)
    total = ((y - y.mean(0)) ** 2).sum(0)
    r2 = np.clip(1.0 - resid / total, 0.0, 1.0)
    f = (r2 / d) / np.maximum((1.0 - r2) / (chains - d - 1), 1e-300)
    return StartMemory(r2, stats.f.sf(f, d, chains - d - 1))


def _rank_normal_columns(a: np.ndarray) -> np.ndarray:
    ranks = stats.rankdata(a, axis=0)
    return stats.norm.ppf((ranks - 0.375) / (len(a) + 0.25))


def remembers_start(memory: StartMemory, *, alpha: float = 1e-4, min_r_squared: float = 0.05) -> bool:
    r"""Whether the chains' last draws still depend on their starts.

    True when some coordinate has $p_k < \alpha/d$ (Bonferroni over the coordinates; a
    false alarm in at most $\alpha$ of mixed runs) and $R^2_k >$ ``min_r_squared``
    (with many chains, a memory too small to matter is not flagged).
    """
    p, r2 = np.asarray(memory.p_value), np.asarray(memory.r_squared)
    hit = np.isfinite(p) & (p < alpha / max(len(p), 1)) & (r2 > min_r_squared)
    return bool(hit.any())
