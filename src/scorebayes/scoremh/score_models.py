r"""Score networks for a target known through samples, with recorded standardisation.

The network works on standardised coordinates $z = (x - m)/c$ (``m``, ``c`` are buffers
recorded from the training data, or 0 and 1); the score in the original space is undone
by the chain rule, $\nabla_x\log p(x) = \tilde s_z(z) / c$. The layers and the
standardiser are those of the likelihood-score networks (`scorebayes.scores.layers`).

- `ScoreNet`: MLP $d \to h \to h \to d$ with Softplus (paper App. D; depth configurable).
- `NoiseConditionalScoreNet`: $\tilde s(x, \sigma) = \mathrm{MLP}([z, \log\sigma])/\sigma$
  (the $1/\sigma$ output scaling of Song & Ermon), for annealed sampling.

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025), App. D
      <https://arxiv.org/abs/2501.00467>
    - Improved Techniques for Training Score-Based Generative Models (Song & Ermon, 2020)
      <https://arxiv.org/abs/2006.09011>
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..scores.layers import Standardiser, mlp

__all__ = ["ScoreNet", "NoiseConditionalScoreNet", "softplus_mlp"]


def softplus_mlp(d_in: int, d_out: int, hidden: int, num_hidden: int = 2) -> nn.Sequential:
    """``d_in -> hidden (x num_hidden, Softplus) -> d_out`` (no output activation):
    `scorebayes.scores.layers.mlp()` with widths ``(d_in, hidden, ..., hidden, d_out)``."""
    return mlp([d_in, *[hidden] * num_hidden, d_out], nn.Softplus)


def _renamed_buffers(state: dict, prefix: str, *args) -> None:
    """Load state dicts saved with the buffers at the top (``loc``, ``scale``) into ``norm``."""
    for old, new in (("loc", "norm.shift"), ("scale", "norm.scale")):
        if prefix + old in state and prefix + new not in state:
            state[prefix + new] = state.pop(prefix + old)


class _Standardised(nn.Module):
    """Holds the recorded standardisation ``loc [d]``, ``scale [d]`` (a
    `Standardiser`, ``norm``)."""

    def __init__(self, dim: int, loc: Tensor | None, scale: Tensor | None):
        super().__init__()
        self.norm = Standardiser(dim, loc, scale)
        self._register_load_state_dict_pre_hook(_renamed_buffers)

    @property
    def loc(self) -> Tensor:
        """$m$, ``[d]``."""
        return self.norm.shift

    @property
    def scale(self) -> Tensor:
        """$c$, ``[d]``."""
        return self.norm.scale

    def standardize(self, x: Tensor) -> Tensor:
        """$z = (x - m)/c$, ``[..., d]`` (in ``x``'s dtype)."""
        return (x - self.loc.to(x)) / self.scale.to(x)

    def unstandardize(self, z: Tensor) -> Tensor:
        """$x = m + c z$, ``[..., d]``."""
        return self.loc.to(z) + self.scale.to(z) * z


class ScoreNet(_Standardised):
    r"""Score model $\tilde s(x) \approx \nabla\log p(x)$, ``[..., d] -> [..., d]``.

    Arguments:
        dim: data dimension ``d``.
        hidden: hidden width ``h``.
        num_hidden: number of hidden layers (2 in the paper).
        loc, scale: recorded standardisation ``[d]`` (default none).
    """

    def __init__(self, dim: int, hidden: int = 128, num_hidden: int = 2,
                 loc: Tensor | None = None, scale: Tensor | None = None):
        super().__init__(dim, loc, scale)
        self.dim = dim
        self.net = softplus_mlp(dim, dim, hidden, num_hidden)

    def score_standardized(self, z: Tensor) -> Tensor:
        r"""$\nabla_z\log p_z(z)$ on standardised coordinates ``[..., d]``."""
        dtype = z.dtype
        return self.net(z.to(self.scale.dtype)).to(dtype)

    def forward(self, x: Tensor) -> Tensor:
        r"""$\tilde s(x) = \tilde s_z((x-m)/c)/c$, ``[..., d]``."""
        return self.score_standardized(self.standardize(x)) / self.scale.to(x)


class NoiseConditionalScoreNet(_Standardised):
    r"""Noise-conditional score $\tilde s(x, \sigma) \approx \nabla\log p_\sigma(x)$.

    $p_\sigma = p * \mathcal N(0, \sigma^2 I)$ on standardised coordinates; ``sigma`` is a
    float or a tensor ``[...]`` broadcasting over the batch.

    Arguments:
        dim: data dimension ``d``; hidden: width; num_hidden: hidden layers.
        loc, scale: recorded standardisation ``[d]``.
    """

    def __init__(self, dim: int, hidden: int = 256, num_hidden: int = 3,
                 loc: Tensor | None = None, scale: Tensor | None = None):
        super().__init__(dim, loc, scale)
        self.dim = dim
        self.net = softplus_mlp(dim + 1, dim, hidden, num_hidden)

    def score_standardized(self, z: Tensor, sigma: float | Tensor) -> Tensor:
        """Score ``[..., d]`` of the noised standardised data at level ``sigma``."""
        dtype = z.dtype
        z = z.to(self.scale.dtype)
        sigma = torch.as_tensor(sigma, dtype=z.dtype, device=z.device).expand(z.shape[:-1])
        out = self.net(torch.cat([z, sigma.log()[..., None]], dim=-1)) / sigma[..., None]
        return out.to(dtype)

    def forward(self, x: Tensor, sigma: float | Tensor) -> Tensor:
        """Score ``[..., d]`` in the original coordinates (``sigma`` in standardised units)."""
        return self.score_standardized(self.standardize(x), sigma) / self.scale.to(x)
