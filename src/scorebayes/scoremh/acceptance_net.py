r"""The acceptance network $a_\omega(x', x) \in (0, 1)$: probability of moving from ``x`` to ``x'``.

Architecture (paper App. D): input $[x', x]$ (plus optional
conditioning such as a noise level and a step size) $\to$ Linear to width ``h`` $\to$
residual blocks $u \leftarrow u + \mathrm{GELU}(\mathrm{Linear}(u))$ $\to$ Linear to a
scalar logit $\ell$. The head is a sigmoid, and $\log a = \operatorname{logsigmoid}(\ell)$
is computed stably. ``final_gelu=True`` reproduces the paper's literal "GELU then Sigmoid"
head, $a = \sigma(\mathrm{GELU}(\ell)) \ge \sigma(-0.17) \approx 0.458$, which cannot
represent small acceptance probabilities (V.C3); it is off by default.

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025), App. D
      <https://arxiv.org/abs/2501.00467>
    - Deep Residual Learning for Image Recognition (He et al., 2016), <https://arxiv.org/abs/1512.03385>
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["AcceptanceNet", "ResidualBlock"]


class ResidualBlock(nn.Module):
    r"""$u + \mathrm{GELU}(\mathrm{Linear}(u))$, ``[..., h] -> [..., h]``."""

    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, u: Tensor) -> Tensor:
        return u + F.gelu(self.linear(u))


class AcceptanceNet(nn.Module):
    r"""Acceptance network $a_\omega(x_{to}, x_{from})$; the first slot is the destination.

    Arguments:
        dim: data dimension ``d``.
        hidden: width ``h``.
        num_blocks: residual blocks.
        cond_dim: size of the optional conditioning vector (0: none).
        final_gelu: literal paper head (GELU before the sigmoid); see the module docstring.
    """

    def __init__(self, dim: int, hidden: int = 256, num_blocks: int = 3, cond_dim: int = 0,
                 final_gelu: bool = False):
        super().__init__()
        self.dim, self.cond_dim, self.final_gelu = dim, cond_dim, final_gelu
        self.input = nn.Linear(2 * dim + cond_dim, hidden)
        self.blocks = nn.Sequential(*[ResidualBlock(hidden) for _ in range(num_blocks)])
        self.output = nn.Linear(hidden, 1)

    def logit(self, x_to: Tensor, x_from: Tensor, cond: Tensor | None = None) -> Tensor:
        r"""The pre-sigmoid output ``[B]`` for ``x_to [B, d]``, ``x_from [B, d]``, ``cond [B, k]``."""
        if x_to.shape != x_from.shape or x_to.shape[-1] != self.dim:
            raise ValueError(f"expected two [B, {self.dim}] inputs, got {tuple(x_to.shape)} and "
                             f"{tuple(x_from.shape)}")
        parts = [x_to, x_from]
        if self.cond_dim:
            if cond is None:
                raise ValueError(f"this acceptance network needs a [B, {self.cond_dim}] conditioning")
            parts.append(cond.expand(*x_to.shape[:-1], self.cond_dim))
        dtype = x_to.dtype
        weight_dtype = self.input.weight.dtype
        u = self.input(torch.cat(parts, dim=-1).to(weight_dtype))
        out = self.output(self.blocks(u)).squeeze(-1)
        if self.final_gelu:
            out = F.gelu(out)
        return out.to(dtype)

    def log_accept(self, x_to: Tensor, x_from: Tensor, cond: Tensor | None = None) -> Tensor:
        r"""$\log a(x_{to}, x_{from}) = \operatorname{logsigmoid}(\ell)$, ``[B]``."""
        return F.logsigmoid(self.logit(x_to, x_from, cond))

    def forward(self, x_to: Tensor, x_from: Tensor, cond: Tensor | None = None) -> Tensor:
        """Acceptance probability ``[B]`` in (0, 1)."""
        return torch.sigmoid(self.logit(x_to, x_from, cond))
