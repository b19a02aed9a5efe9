r"""Pseudo-likelihood loss for models with binary coordinates (the Ising baseline).

$$
L_n(\theta) = -\sum_{i=1}^n\sum_{j=1}^d \log p_\theta(x_{ij}\mid x_{i,-j})
= \sum_{i,j}\log\big(1 + r_{j-}(x_i,\theta)\big),
$$

since for a binary coordinate $x^{j-}$ is the flip and
$p(x_j\mid x_{-j}) = p(x)/(p(x)+p(x^{j-}))$. For the Ising model this is
$-\sum\log\sigma(\Delta_j/\theta)$ with $\Delta_j$ the flip change of the statistic
(as in the paper's reference code). Calibrated with $\beta_*$ like the other generalised posteriors.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.2
      <https://arxiv.org/abs/2206.08420>
    - Statistical analysis of non-lattice data (Besag, 1975)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch.nn.functional import softplus

from .models.base import DiscreteModel
from .ratios import RatioLoss

__all__ = ["PseudoLikelihoodLoss"]


class PseudoLikelihoodLoss(RatioLoss):
    r"""Negative log pseudo-likelihood ``theta [B, k] -> [B]`` (binary coordinates only).

    Arguments: as [`DFDLoss`][scorebayes.discrete.dfd.DFDLoss].

    Raises:
        ValueError: if a coordinate of the domain does not have exactly two values.
    """

    def __init__(self, model: DiscreteModel, x: Tensor | np.ndarray, counts: Tensor | np.ndarray | None = None,
                 *, compress: bool = True):
        dom = model.domain
        sizes = (dom.high - dom.low) / dom.spacing + 1
        if not bool(torch.isfinite(sizes).all()) or bool((sizes != 2).any()):
            raise ValueError("the pseudo-likelihood loss needs binary coordinates (two values each)")
        super().__init__(model, x, counts, compress=compress)

    def term(self, log_r_minus: Tensor, log_r_plus: Tensor, valid: Tensor) -> Tensor:
        return softplus(log_r_minus)

    def term_derivatives(self, log_r_minus: Tensor, log_r_plus: Tensor,
                         valid: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        sig = torch.sigmoid(log_r_minus)
        zero = torch.zeros_like(log_r_plus)
        return sig, sig * (1 - sig), zero, zero
