r"""Losses that are sums of per-term functions of neighbour log-ratios, with automatic compression.

A ratio loss is

$$
L_n(\theta) = \sum_{i=1}^n\sum_{j=1}^d f\big(\log r_{j-}(x_i,\theta), \log r_{j+}(x_i,\theta)\big),
$$

($f$ masked at the star state). Two compressions make it cheap (Remark 1 of the paper):

- **repeated rows**: data are reduced to their ``m`` unique rows with counts, so a loss costs
  $O(md)$ instead of $O(nd)$;
- **repeated terms** (exponential families, [`ExponentialFamilyModel`][scorebayes.discrete.models.base.ExponentialFamilyModel]):
  each $(i, j)$ term depends on $\theta$ only through $\eta(\theta)$ and the
  $\theta$-free statistics $(T_{j\mp}, b_{j\mp})$, so identical statistics are merged.
  An Ising model then has at most 9 distinct terms, whatever ``n`` and ``d``.

Bootstrap replicates reuse the compression: `RatioLoss.reweighted()` maps row weights
``[B, m]`` (resampling counts) to term weights once.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Remark 1 and Example 1
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import torch
from torch import Tensor

from .models.base import DiscreteModel, ExponentialFamilyModel

__all__ = ["RatioLoss", "WeightedLoss", "prepare_data"]


def prepare_data(model: DiscreteModel, x: Tensor | np.ndarray, counts: Tensor | np.ndarray | None = None,
                 *, compress: bool = True) -> tuple[Tensor, Tensor]:
    r"""Validate integer data against the model's domain and merge repeated rows.

    Arguments:
        x: ``[n, d]`` observations (or ``[n]`` for ``d = 1``), or distinct values when ``counts`` is given.
        counts: optional ``[n]`` non-negative integer multiplicities (a frequency table).
        compress: merge repeated rows (``False`` keeps one row per observation).

    Returns:
        ``(rows [m, d] float64, row_counts [m] float64)``.
    """
    x = torch.as_tensor(np.asarray(x) if not isinstance(x, Tensor) else x).to(torch.float64)
    if x.dim() == 1 and model.dim == 1:
        x = x[:, None]
    model.domain.check(x)
    if counts is None:
        c = torch.ones(x.shape[0], dtype=torch.float64)
    else:
        c = torch.as_tensor(np.asarray(counts) if not isinstance(counts, Tensor) else counts).to(torch.float64)
        if c.shape != (x.shape[0],):
            raise ValueError(f"counts must have shape [{x.shape[0]}] (one per row), got {tuple(c.shape)}")
        if not bool(torch.isfinite(c).all()) or bool((c < 0).any()) or bool((c != c.round()).any()):
            raise ValueError("counts must be non-negative integers")
        if c.sum() <= 0:
            raise ValueError("counts sum to zero: no data")
        keep = c > 0
        x, c = x[keep], c[keep]
    if compress:
        rows, inverse = torch.unique(x, dim=0, return_inverse=True)
        c = torch.zeros(rows.shape[0], dtype=torch.float64).index_add_(0, inverse, c)
        if counts is None:
            return rows, c
        x = rows
    elif counts is not None:
        x = x.repeat_interleave(c.long(), dim=0)
        c = torch.ones(x.shape[0], dtype=torch.float64)
    return x, c


class RatioLoss(ABC):
    r"""Base class of [`DFDLoss`][scorebayes.discrete.dfd.DFDLoss] and the pseudo-likelihood loss.

    Arguments:
        model: a [`DiscreteModel`][scorebayes.discrete.models.base.DiscreteModel].
        x: ``[n, d]`` integer data (or distinct rows when ``counts`` is given).
        counts: optional ``[n]`` multiplicities (a frequency table).
        compress: merge repeated rows and (for exponential families) repeated terms.

    Attributes:
        rows: ``[m, d]`` distinct rows; ``row_counts`` ``[m]``; ``n`` the number of observations.
    """

    def __init__(self, model: DiscreteModel, x: Tensor | np.ndarray, counts: Tensor | np.ndarray | None = None,
                 *, compress: bool = True):
        self.model = model
        self.rows, self.row_counts = prepare_data(model, x, counts, compress=compress)
        self.n = float(self.row_counts.sum())
        self.compress = compress
        self._exp_family = isinstance(model, ExponentialFamilyModel)
        if self._exp_family:
            self._build_terms()
        else:
            self.term_weights = self.row_counts

    def _build_terms(self) -> None:
        m, d = self.rows.shape
        s = self.model.ratio_statistics(self.rows)
        q = s.minus.shape[-1]
        feats = torch.cat([s.minus, s.minus_offset[..., None], s.plus, s.plus_offset[..., None],
                           s.valid[..., None].to(torch.float64)], dim=-1).reshape(m * d, 2 * q + 3)
        if self.compress:
            feats, inverse = torch.unique(feats, dim=0, return_inverse=True)
        else:
            inverse = torch.arange(m * d)
        self._term_index = inverse.reshape(m, d)
        self._t_minus, self._b_minus = feats[:, :q], feats[:, q]
        self._t_plus, self._b_plus = feats[:, q + 1 : 2 * q + 1], feats[:, 2 * q + 1]
        self._valid = feats[:, 2 * q + 2] > 0.5
        self.term_weights = self.term_weights_for(self.row_counts[None])[0]

    @property
    def num_terms(self) -> int:
        """Number of distinct terms ``T`` the loss is evaluated on."""
        return self.term_weights.shape[-1]

    @abstractmethod
    def term(self, log_r_minus: Tensor, log_r_plus: Tensor, valid: Tensor) -> Tensor:
        """Elementwise loss term ``f`` (``valid`` false at the star state)."""

    def term_values(self, theta: Tensor) -> Tensor:
        r"""Per-term values ``[B, T]`` for ``theta [B, k]``."""
        if self._exp_family:
            eta = self.model.natural_parameters(theta)
            dt = theta.dtype
            lm = eta @ self._t_minus.to(dt).T + self._b_minus.to(dt)
            lp = eta @ self._t_plus.to(dt).T + self._b_plus.to(dt)
            return self.term(lm, lp, self._valid)
        lm, lp, valid = self.model.log_ratios(theta, self.rows.to(theta.dtype))
        return self.term(lm, lp, valid).sum(-1)

    def term_derivatives(self, log_r_minus: Tensor, log_r_plus: Tensor,
                         valid: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
        """``(df/dlm, d2f/dlm2, df/dlp, d2f/dlp2)`` elementwise, or ``None`` (then autograd is used)."""
        return None

    @property
    def has_closed_form(self) -> bool:
        """Whether `natural_derivatives()` is available (exponential family and known term derivatives)."""
        return self._exp_family and type(self).term_derivatives is not RatioLoss.term_derivatives

    def natural_derivatives(self, eta: Tensor, term_weights: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        r"""Value ``[B]``, gradient ``[B, q]`` and Hessian ``[B, q, q]`` with respect to the natural
        parameters ``eta [B, q]``, in closed form: with $l_\mp = \eta\cdot T_{j\mp} + b_{j\mp}$,
        $\nabla_\eta = \sum_u w_u(f_- T_- + f_+ T_+)$ and
        $\nabla^2_\eta = \sum_u w_u(f_{--} T_-T_-^\top + f_{++} T_+T_+^\top)$."""
        w = (self.term_weights if term_weights is None else term_weights).to(eta.dtype).expand(eta.shape[0], -1)
        tm, tp = self._t_minus.to(eta.dtype), self._t_plus.to(eta.dtype)
        lm = eta @ tm.T + self._b_minus.to(eta.dtype)
        lp = eta @ tp.T + self._b_plus.to(eta.dtype)
        value = (self.term(lm, lp, self._valid) * w).sum(-1)
        fm, fmm, fp, fpp = self.term_derivatives(lm, lp, self._valid)
        grad = (w * fm) @ tm + (w * fp) @ tp
        b, (u, q) = eta.shape[0], tm.shape
        chunk = max(1, 4_000_000 // max(u * q, 1))
        hess = torch.empty(b, q, q, dtype=eta.dtype)
        for s in range(0, b, chunk):
            c = slice(s, s + chunk)
            hess[c] = (torch.matmul(((w * fmm)[c, :, None] * tm).transpose(1, 2), tm)
                       + torch.matmul(((w * fpp)[c, :, None] * tp).transpose(1, 2), tp))
        return value, grad, hess

    def term_weights_for(self, row_weights: Tensor) -> Tensor:
        r"""Map row weights ``[B, m]`` (e.g. bootstrap counts) to term weights ``[B, T]``."""
        if not self._exp_family:
            return row_weights.to(torch.float64)
        b, (m, d) = row_weights.shape[0], self._term_index.shape
        out = torch.zeros(b, self._valid.shape[0], dtype=torch.float64)
        expanded = row_weights.to(torch.float64)[:, :, None].expand(b, m, d).reshape(b, m * d)
        return out.index_add_(1, self._term_index.reshape(-1), expanded)

    def __call__(self, theta: Tensor, term_weights: Tensor | None = None) -> Tensor:
        r"""The loss ``[B]`` at ``theta [B, k]`` (full data, or ``term_weights [B, T]``)."""
        w = self.term_weights if term_weights is None else term_weights
        return (self.term_values(theta) * w.to(theta.dtype)).sum(-1)

    def reweighted(self, row_weights: Tensor) -> WeightedLoss:
        r"""The loss on reweighted data: a callable ``theta [B, k] -> [B]`` for ``row_weights [B, m]``
        (one weighting per row of ``theta``)."""
        return WeightedLoss(self, self.term_weights_for(row_weights))

    def per_row(self, theta: Tensor) -> Tensor:
        r"""The loss of one observation of each distinct row, ``[B, m]`` (sum over rows x counts = loss)."""
        if self._exp_family:
            return self.term_values(theta)[:, self._term_index].sum(-1)
        return self.term_values(theta)


class WeightedLoss:
    r"""A `RatioLoss` with fixed term weights ``[B, T]`` (e.g. bootstrap replicates); picklable.

    Calls ``theta [B, k] -> [B]`` and offers `natural_derivatives()` like the loss itself.
    """

    def __init__(self, loss: RatioLoss, term_weights: Tensor):
        self.loss, self.term_weights = loss, term_weights
        self.model, self.has_closed_form = loss.model, loss.has_closed_form

    def __call__(self, theta: Tensor) -> Tensor:
        return self.loss(theta, self.term_weights)

    def natural_derivatives(self, eta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.loss.natural_derivatives(eta, self.term_weights)
