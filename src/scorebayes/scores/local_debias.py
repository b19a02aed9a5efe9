r"""Local linear refinement of the debiasing network around the posterior.

The single-model posterior score (Algorithm 3) subtracts the debiasing network from every
observation's score,

.. math:: \nabla_u\log\pi_n(u\mid\mathbf X^*) \approx \sum_{i=1}^n\big[s_\phi(u, X^*_i) - h_\psi(u)\big]
          + \nabla_u\log\pi_u(u),

so an error :math:`\delta(u) = h_\psi(u) - \mathbb E_{p_u}[s_\phi(u, X)]` enters the posterior
score **n times**, against a posterior score noise of order :math:`\sqrt n\,\mathrm{sd}(s)`. The
network must therefore be accurate to :math:`\mathrm{sd}(s)/\sqrt n` where the posterior lives; a
regression fitted over the whole proposal rarely is. On M/G/1 (n = 500) the fitted network put
the debiased score at the truth up to 5 SDs (of the summed score over data sets) off, while a
Monte Carlo mean of the same score network left it within 0.3 SD (``benchmarks/results/mg1.md``).

Refinement: draw groups :math:`u_l\sim\mathcal N(c, \mathrm{diag}(r^2))` from a Gaussian fitted
to current posterior draws (``r`` = posterior SD times an inflation), simulate :math:`m` observations
per group, and fit the residual group means by least squares,

.. math:: \bar s_l - h_\psi(u_l) \approx a + B(u_l - c), \qquad
          h'(u) = h_\psi(u) + a + B(u - c).

The intercept's error is about :math:`\mathrm{sd}(s)/\sqrt{mN}` and the slope's, relative to the
Fisher information, about :math:`\sqrt n/(2\sqrt{mN})` for ``r`` twice the posterior SD, so a
table of :math:`mN = 2\times10^5` observations suffices for n = 500, where a global network
needs the paper's :math:`5\times10^6`.

References:
    | Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang et al., 2025),
    | Algorithm 3 and eq. 25; ../shared/seeds/000_1aaaaf87072c12bc.txt
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LocalLinearCorrection", "fit_local_correction"]


class LocalLinearCorrection(nn.Module):
    r""":math:`h'(u) = h(u) + a + B(u - c)`, ``forward(u [*, d]) -> [*, d]``.

    Arguments:
        base: the debiasing network :math:`h` (any ``u [*, d] -> [*, d]`` module).
        intercept: :math:`a` ``[d]``; slope: :math:`B` ``[d, d]`` (``B[j, k] = da_j / du_k``);
        center: :math:`c` ``[d]``.
    """

    def __init__(self, base: nn.Module, intercept: Tensor, slope: Tensor, center: Tensor):
        super().__init__()
        self.base = base
        self.register_buffer("intercept", intercept.float())
        self.register_buffer("slope", slope.float())
        self.register_buffer("center", center.float())

    def forward(self, u: Tensor) -> Tensor:
        shift = self.intercept.to(u) + (u - self.center.to(u)) @ self.slope.to(u).T
        return self.base(u) + shift


def fit_local_correction(u: Tensor, residual_means: Tensor, center: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r"""Least-squares :math:`a, B` of :math:`r_l \approx a + B(u_l - c)`.

    Arguments:
        u: group parameters ``[N, d]``; residual_means: :math:`\bar s_l - h(u_l)` ``[N, d]``;
        center: :math:`c` ``[d]``.

    Returns:
        ``(intercept [d], slope [d, d], residual_sd [d])`` in float64.
    """
    u, r, c = u.double(), residual_means.double(), center.double()
    num, d = u.shape
    if r.shape != u.shape:
        raise ValueError(f"residual_means must have the shape of u {tuple(u.shape)}, got {tuple(r.shape)}")
    if num < 2 * (d + 1):
        raise ValueError(f"a local correction in d = {d} needs at least {2 * (d + 1)} groups, got {num}")
    design = torch.cat([torch.ones(num, 1, dtype=u.dtype), u - c], 1)  # [N, d + 1]
    coef = torch.linalg.lstsq(design, r).solution  # [d + 1, d]
    residual_sd = (r - design @ coef).std(0)
    return coef[0], coef[1:].T.contiguous(), residual_sd
