r"""Standard Bayes for one-dimensional count models with a truncated normalising constant.

$$
L_n(\theta) = -\sum_{i=1}^n\log\tilde p_\theta(x_i) + n\log Z_\theta,\qquad
Z_\theta \approx \sum_{y=0}^{Y}\tilde p_\theta(y)
$$

(the paper's baseline for the CMP model uses $Y = 99$). It has the
same interface as the other losses (``__call__``, ``reweighted``, ``per_row``) so it can be
sampled and, for comparison, calibrated in the same way; standard Bayes keeps $\beta = 1$.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.1
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from torch import Tensor

from .models.base import DiscreteModel
from .ratios import prepare_data

__all__ = ["TruncatedLikelihoodLoss"]


class TruncatedLikelihoodLoss:
    r"""Negative log-likelihood ``theta [B, k] -> [B]`` with $Z_\theta$ summed over ``0..max_value``.

    Arguments:
        model: a model on $\mathbb N_0$ (``d = 1``, lower bound 0).
        x: ``[n, 1]`` counts (or distinct values with ``counts``).
        counts: optional multiplicities.
        max_value: the truncation ``Y`` (default 99 as in the paper).
    """

    def __init__(self, model: DiscreteModel, x: Tensor | np.ndarray, counts: Tensor | np.ndarray | None = None,
                 *, max_value: int = 99):
        if model.dim != 1 or model.domain.kinds[0] != "lower" or float(model.domain.low[0]) != 0:
            raise ValueError("the truncated likelihood needs a one-dimensional model on {0, 1, 2, ...}")
        self.model = model
        self.rows, self.row_counts = prepare_data(model, x, counts)
        self.n = float(self.row_counts.sum())
        if float(self.rows.max()) > max_value:
            raise ValueError(f"data exceed the truncation max_value={max_value}")
        self._support = torch.arange(max_value + 1, dtype=torch.float64)[:, None]

    def log_normaliser(self, theta: Tensor) -> Tensor:
        r"""$\log Z_\theta$ ``[B]``."""
        return torch.logsumexp(self.model.log_unnormalized(theta, self._support.to(theta.dtype)), dim=-1)

    def per_row(self, theta: Tensor) -> Tensor:
        r"""$-\log p_\theta(x)$ for each distinct row, ``[B, m]``."""
        lp = self.model.log_unnormalized(theta, self.rows.to(theta.dtype))
        return self.log_normaliser(theta)[:, None] - lp

    def __call__(self, theta: Tensor, row_weights: Tensor | None = None) -> Tensor:
        w = self.row_counts[None] if row_weights is None else row_weights
        return (self.per_row(theta) * w.to(theta.dtype)).sum(-1)

    def reweighted(self, row_weights: Tensor) -> partial:
        """The loss on reweighted data ``row_weights [B, m]`` (see ``RatioLoss.reweighted``)."""
        return partial(self.__call__, row_weights=row_weights)
