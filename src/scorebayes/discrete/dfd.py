r"""The discrete Fisher divergence loss $D_n(\theta) = n\,\mathrm{DFD}(p_\theta\|p_n)$.

Definition 3 of the paper, $\mathrm{DFD}(p\|q) = \mathbb E_{X\sim q}\|\nabla^-p(X)/p(X) - \nabla^-q(X)/q(X)\|^2$,
becomes, up to a $\theta$-free constant (Proposition 1, eq. 5),

$$
D_n(\theta) = \sum_{i=1}^n\sum_{j=1}^d\Big[r_{j-}(x_i,\theta)^2 - 2\,r_{j-}(x_i^{j+},\theta)\Big],
\qquad r_{j-}(x,\theta) = \frac{p_\theta(x^{j-})}{p_\theta(x)},\quad
r_{j-}(x^{j+},\theta) = \frac{p_\theta(x)}{p_\theta(x^{j+})},
$$

with $r_{j-} = 0$ where $x^{j-}$ is the star state. The ratios are computed as
exponentials of log-differences (stable in float32 and float64, no normalising constant) and
the star terms are masked, so gradients stay finite. ``D_n`` is the *sum* over the data, used
both in the generalised posterior (6) and in the calibration (10).

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Definition 3, Proposition 1, eqs. (5)-(6)
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

import torch
from torch import Tensor

from .ratios import RatioLoss

__all__ = ["DFDLoss", "dfd_term"]


def dfd_term(log_r_minus: Tensor, log_r_plus: Tensor, valid: Tensor) -> Tensor:
    r"""$\mathbb 1[\text{valid}]\,e^{2\log r_{j-}} - 2e^{\log r_{j+}}$, elementwise."""
    square = torch.where(valid, torch.exp(2 * log_r_minus), torch.zeros((), dtype=log_r_minus.dtype))
    return square - 2 * torch.exp(log_r_plus)


class DFDLoss(RatioLoss):
    r"""``D_n(theta) = n * DFD(p_theta || p_n)`` for ``theta [B, k] -> [B]`` (see module docstring).

    Arguments:
        model: a [`DiscreteModel`][scorebayes.discrete.models.base.DiscreteModel].
        x: ``[n, d]`` integer data inside ``model.domain`` (or distinct rows with ``counts``).
        counts: optional ``[n]`` multiplicities (a frequency table).
        compress: merge repeated rows (cost $O(md)$) and, for exponential families,
            repeated terms (default ``True``; ``False`` gives the plain $O(nd)$ loss).

    Examples:
        >>> from scorebayes.discrete.models import PoissonModel
        >>> loss = DFDLoss(PoissonModel(), torch.tensor([[0.], [2.], [2.]]))
        >>> round(loss(torch.tensor([[2.0]], dtype=torch.float64)).item(), 9)  # (0 - 1) + 2 * (1 - 3)
        -5.0
    """

    def term(self, log_r_minus: Tensor, log_r_plus: Tensor, valid: Tensor) -> Tensor:
        return dfd_term(log_r_minus, log_r_plus, valid)

    def term_derivatives(self, log_r_minus: Tensor, log_r_plus: Tensor,
                         valid: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        square = torch.where(valid, torch.exp(2 * log_r_minus), torch.zeros((), dtype=log_r_minus.dtype))
        plus = torch.exp(log_r_plus)
        return 2 * square, 4 * square, -2 * plus, -2 * plus
