r"""KSD-Bayes baseline: $n\,\mathrm{KSD}^2(p_\theta\|p_n)$ with the discrete Stein operator.

With $u_j(x) = 1 - r_{j-}(x,\theta)$ (the $j$-th component of $\nabla^-p/p$,
$u_j = 1$ at the star state), the V-statistic with the forward-difference Stein kernel is,
up to a $\theta$-free term (as in the paper's reference code),

$$
n\,\mathrm{KSD}^2 \overset{\theta}{=} \frac1n\Big[\sum_{a,b}\sum_j u_j(x_a)u_j(x_b)k(x_a,x_b)
+ 2\sum_{a,b}\sum_j u_j(x_b)\big(k(x_a^{j+},x_b) - k(x_a,x_b)\big)\Big].
$$

Kernels are $k(x,x') = w(x)\,\kappa(h(x,x'))\,w(x')$ with $h$ the Hamming distance:

- ``"hamming"``: $\kappa(h) = \exp(-h/d)$ (the main experiments; V.B5 fixes the "=" typo);
- ``"indicator"``: $\kappa(h) = \mathbb 1\{h=0\}$ (Bernoulli illustration);
- ``"exp-indicator"``: $\kappa(h) = \exp(-\mathbb 1\{h=0\})$ (Poisson outliers, App. A.3);
- ``weight``: an optional $w(x)$ (``[n, d] -> [n]``), e.g. `sigmoid_weight()`
  (App. A.3: $\sigma(15-x)$; App. D.4: $\sigma(90-|\sum_i x_i|)$).

The data enter through the $\theta$-free matrices $K$ ``[m, m]`` and
$G_{bj} = \sum_a c_a (k(x_a^{j+},x_b) - k(x_a,x_b))$ ``[m, d]``, precomputed once, so one
evaluation costs $O(m^2 d)$ (``m`` distinct rows).

References:
    - Robust generalised Bayesian inference for intractable likelihoods
      (Matsubara, Knoblauch, Briol and Oates, 2022) <https://arxiv.org/abs/2104.07359>
    - Generalised Bayesian Inference for Discrete Intractable Likelihood (2023), Sections 4.1-4.2, App. A.3, D.4
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import torch
from torch import Tensor

from .models.base import DiscreteModel
from .ratios import prepare_data

__all__ = ["KSDLoss", "sigmoid_weight"]

_KERNELS = {
    "hamming": lambda h, d: torch.exp(-h / d),
    "indicator": lambda h, d: (h == 0).to(h.dtype),
    "exp-indicator": lambda h, d: torch.exp(-(h == 0).to(h.dtype)),
}


class sigmoid_weight:  # noqa: N801 - used like a function
    r"""Weight $w(x) = \sigma(c - |\sum_i x_i|)$ (``[n, d] -> [n]``); picklable.

    ``sigmoid_weight(15.0)`` is App. A.3's $\sigma(15 - x)$ for counts and
    ``sigmoid_weight(90.0)`` App. D.4's robust Ising weight.
    """

    def __init__(self, centre: float):
        self.centre = float(centre)

    def __call__(self, x: Tensor) -> Tensor:
        return torch.sigmoid(self.centre - x.sum(-1).abs())


class KSDLoss:
    r"""``n * KSD^2(p_theta || p_n)`` for ``theta [B, k] -> [B]`` (see module docstring).

    Arguments:
        model: a [`DiscreteModel`][scorebayes.discrete.models.base.DiscreteModel].
        x: ``[n, d]`` integer data (or distinct rows with ``counts``).
        counts: optional ``[n]`` multiplicities.
        kernel: ``"hamming"``, ``"indicator"`` or ``"exp-indicator"``.
        weight: optional $w(x)$, ``[n, d] -> [n]``.
        compress: merge repeated rows (``False``: the plain $O(n^2d)$ V-statistic).
        chunk: rows per block when precomputing ``G`` (memory ``chunk * m * d``).
    """

    def __init__(self, model: DiscreteModel, x: Tensor | np.ndarray, counts: Tensor | np.ndarray | None = None,
                 *, kernel: str = "hamming", weight: Callable[[Tensor], Tensor] | None = None,
                 compress: bool = True, chunk: int = 64):
        if kernel not in _KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; choose one of {sorted(_KERNELS)}")
        self.model, self.kernel, self.weight, self.chunk = model, kernel, weight, int(chunk)
        self.rows, self.row_counts = prepare_data(model, x, counts, compress=compress)
        self.n = float(self.row_counts.sum())
        rows, d = self.rows, model.dim
        self._plus = model.domain.plus(rows)  # [m, d] new value of coordinate j
        self._w = weight(rows) if weight is not None else torch.ones(rows.shape[0], dtype=torch.float64)
        if weight is not None:
            nb = model.domain.neighbours(rows)
            self._w_plus = torch.stack([weight(nb.plus[j]) for j in range(d)], dim=-1)  # [m, d]
        else:
            self._w_plus = torch.ones_like(rows)
        self._ham = (rows[:, None, :] != rows[None, :, :]).sum(-1).to(torch.float64)
        self.gram = self._w[:, None] * _KERNELS[kernel](self._ham, d) * self._w[None, :]
        self._g_full = self.stein_offsets(self.row_counts[None])[0]

    def stein_offsets(self, row_weights: Tensor) -> Tensor:
        r"""$G_{bj}(c) = \sum_a c_a (k(x_a^{j+}, x_b) - k(x_a, x_b))$ for weights ``[B, m]`` -> ``[B, m, d]``."""
        rows, d = self.rows, self.model.dim
        kappa = _KERNELS[self.kernel]
        out = torch.zeros(row_weights.shape[0], rows.shape[0], d, dtype=torch.float64)
        for start in range(0, rows.shape[0], self.chunk):
            a = slice(start, start + self.chunk)
            neq = rows[a, None, :] != rows[None, :, :]  # [ca, m, d]
            neq_plus = self._plus[a, None, :] != rows[None, :, :]
            ham_plus = self._ham[a, :, None] - neq.to(torch.float64) + neq_plus.to(torch.float64)
            k_plus = self._w_plus[a, None, :] * kappa(ham_plus, d) * self._w[None, :, None]
            delta = k_plus - self.gram[a, :, None]
            out += torch.einsum("Ba,abj->Bbj", row_weights[:, a].to(torch.float64), delta)
        return out

    def stein_components(self, theta: Tensor) -> Tensor:
        r"""$u_j(x_b) = 1 - r_{j-}(x_b,\theta)$, ``[B, m, d]``."""
        lm, _, valid = self.model.log_ratios(theta, self.rows.to(theta.dtype))
        return 1 - torch.where(valid, torch.exp(lm), torch.zeros((), dtype=lm.dtype))

    def _rowwise(self, theta: Tensor, weights: Tensor, offsets: Tensor) -> Tensor:
        u = self.stein_components(theta)  # [B, m, d]
        v = weights.to(theta.dtype)[:, :, None] * u
        ku = torch.matmul(self.gram.to(theta.dtype), v)  # [B, m, d]
        return ((u * ku).sum(-1) + 2 * (u * offsets.to(theta.dtype)).sum(-1)) / self.n

    def per_row(self, theta: Tensor) -> Tensor:
        r"""Each distinct row's share ``[B, m]`` of the loss (sum over rows x counts = loss)."""
        return self._rowwise(theta, self.row_counts.expand(theta.shape[0], -1), self._g_full[None])

    def __call__(self, theta: Tensor, row_weights: Tensor | None = None, offsets: Tensor | None = None) -> Tensor:
        r"""The loss ``[B]``; with ``row_weights [B, m]`` pass their ``offsets = stein_offsets(row_weights)``."""
        if row_weights is None:
            w, g = self.row_counts.expand(theta.shape[0], -1), self._g_full[None]
        else:
            w, g = row_weights, (offsets if offsets is not None else self.stein_offsets(row_weights))
        return (self._rowwise(theta, w, g) * w.to(theta.dtype)).sum(-1)

    def reweighted(self, row_weights: Tensor) -> partial:
        """The loss on reweighted data ``row_weights [B, m]``: a callable ``theta [B, k] -> [B]``."""
        return partial(self.__call__, row_weights=row_weights, offsets=self.stein_offsets(row_weights))
