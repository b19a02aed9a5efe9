r"""MCMC convergence diagnostics: rank-normalised split R-hat and bulk ESS.

Follows Vehtari, Gelman, Simpson, Carpenter and Bürkner (2021). For ``C`` chains of
``S`` draws, each chain is split in half; draws are rank-normalised,
:math:`z = \Phi^{-1}((r - 3/8)/(CS + 1/4))`, and

.. math:: \hat R = \sqrt{\frac{\frac{S'-1}{S'}W + \frac{1}{S'}B}{W}},

with :math:`W` the mean within-chain variance and :math:`B/S'` the variance of the
chain means. The bulk ESS uses Geyer's initial monotone sequence on the combined
autocorrelation.

References:
    | Rank-normalization, folding, and localization: An improved R-hat (Vehtari et al., 2021)
    | https://arxiv.org/abs/1903.08008
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["rhat", "ess"]


def _split(draws: np.ndarray) -> np.ndarray:
    """``[C, S] -> [2C, S//2]``."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def _rank_normalise(draws: np.ndarray) -> np.ndarray:
    ranks = stats.rankdata(draws, method="average").reshape(draws.shape)
    return stats.norm.ppf((ranks - 0.375) / (draws.size + 0.25))


def rhat(draws: np.ndarray) -> float:
    r"""Rank-normalised split :math:`\hat R` of one scalar quantity.

    Arguments:
        draws: ``[C, S]`` (chains x draws); needs ``S >= 4``.

    Returns:
        The max of the bulk and tail (folded) R-hat, or ``nan`` if undefined.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or draws.shape[1] < 4 or not np.all(np.isfinite(draws)):
        return float("nan")
    split = _split(draws)
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


def ess(draws: np.ndarray) -> float:
    r"""Bulk effective sample size of one scalar quantity.

    Arguments:
        draws: ``[C, S]``. With ``S = 1`` (independent final states of C chains) the
            draws are treated as independent and ``C`` is returned.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or not np.all(np.isfinite(draws)):
        return float("nan")
    if draws.shape[1] == 1:
        return float(draws.shape[0])
    if draws.shape[1] < 4:
        return float("nan")
    z = _rank_normalise(_split(draws))
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
