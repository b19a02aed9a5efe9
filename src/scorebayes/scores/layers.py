r"""Building blocks of the score networks: activations, multilayer perceptrons, a standardiser.

An MLP of widths $(w_0, \dots, w_L)$ alternates affine maps and an activation
$\sigma$, with none after the last map:

$$
f(v) = A_L\,\sigma(A_{L-1} \cdots \sigma(A_1 v)), \qquad A_l(h) = W_l h + b_l .
$$

Inputs are standardised per column, $z = (v - m)/c$. `Standardiser.fit()` uses
robust statistics of a training table (median $m$, $c = \mathrm{IQR}/1.349$),
which keep heavy-tailed simulator outputs (the M/G/1 queue's inter-departure times) on a
usable scale; a mean and standard deviation recorded elsewhere can be given instead.

Forward-mode Jacobians (`score_and_jacobian()`) need
$\sigma'$, which `activation_derivative()` gives for the activations with a closed form.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

__all__ = ["ACTIVATIONS", "activation_class", "mlp", "Standardiser", "activation_derivative",
           "broadcast_leading"]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "relu": nn.ReLU,
    "silu": nn.SiLU,
    "gelu": nn.GELU,
    "softplus": nn.Softplus,
}


def activation_class(name: str | type[nn.Module]) -> type[nn.Module]:
    """The activation class named ``name`` (a key of `ACTIVATIONS`), or ``name`` itself."""
    if isinstance(name, str):
        if name.lower() not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
        return ACTIVATIONS[name.lower()]
    return name

def mlp(widths: Sequence[int], activation: str | type[nn.Module]) -> nn.Sequential:
    r"""``Linear(w_0, w_1), act, Linear(w_1, w_2), ..., Linear(w_{L-1}, w_L)``: ``[*, w_0] -> [*, w_L]``.

    Arguments:
        widths: $(w_0, \dots, w_L)$, at least two (two: one affine map, no activation).
        activation: a key of `ACTIVATIONS` or an ``nn.Module`` class (a fresh one per layer).
    """
    if len(widths) < 2:
        raise ValueError(f"an MLP needs at least an input and an output width, got {list(widths)}")
    act = activation_class(activation)
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-2], widths[1:-1]):
        layers += [nn.Linear(a, b), act()]
    layers.append(nn.Linear(widths[-2], widths[-1]))
    return nn.Sequential(*layers)


class Standardiser(nn.Module):
    """``(value - shift) / scale`` per column, ``[*, dim] -> [*, dim]``; `fit()` sets
    ``shift`` to the median and ``scale`` to IQR / 1.349 of a table ``[*, dim]``, or both are
    given (e.g. a mean and standard deviation recorded elsewhere).

    The IQR falls back to the SD for columns with IQR = 0 (e.g. mostly-constant discrete data),
    and to 1 for constant columns. Quantiles use at most ``max_rows`` evenly strided rows."""

    max_rows = 200_000

    def __init__(self, dim: int, shift: Tensor | None = None, scale: Tensor | None = None):
        super().__init__()
        self.register_buffer("shift", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(dim))
        if shift is not None:
            self.shift.copy_(torch.as_tensor(shift).reshape(dim))
        if scale is not None:
            scale = torch.as_tensor(scale).reshape(dim)
            if not torch.all(scale > 0):
                raise ValueError("standardisation scale must be positive (a constant data column?)")
            self.scale.copy_(scale)

    def fit(self, data: Tensor, pools: Sequence[Sequence[int]] = ()) -> None:
        """``pools``: groups of columns given one shift and scale, from their values pooled (the
        inputs of networks shared by several coordinates, `CoordinateViewScoreNet`)."""
        data = data.reshape(-1, data.shape[-1])
        if len(data) < 2:  # nothing to estimate a spread from
            if len(data):
                self.shift.copy_(data[0].to(self.shift))
            self.scale.fill_(1.0)
            return
        data = data[:: max(1, len(data) // self.max_rows)].double()
        shift, scale = self._robust(data)
        for pool in pools:
            pool = list(pool)
            pooled = data[:: max(1, len(pool)), pool].reshape(-1, 1)  # about as many rows as one column
            shift[pool], scale[pool] = (v.to(shift) for v in self._robust(pooled))
        self.shift.copy_(shift.to(self.shift))
        self.scale.copy_(scale.to(self.scale).clamp_min(1e-6))

    @staticmethod
    def _robust(data: Tensor) -> tuple[Tensor, Tensor]:
        """Per column of ``data [N, k]``: median and IQR / 1.349 (the SD where the IQR is 0, 1 for
        a constant column)."""
        quartiles = torch.quantile(data, torch.tensor([0.25, 0.5, 0.75], dtype=data.dtype), dim=0)
        scale = (quartiles[2] - quartiles[0]) / 1.349
        sd = data.std(0)
        scale = torch.where(scale > 1e-6 * sd.clamp_min(1e-300), scale, sd)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        return quartiles[1], scale

    def forward(self, value: Tensor) -> Tensor:
        return (value - self.shift) / self.scale

def activation_derivative(layer: nn.Module) -> Callable[[Tensor, Tensor], Tensor] | None:
    """``(pre-activation z, output y) -> sigma'(z)`` for the activations with a closed form."""
    if isinstance(layer, nn.Tanh):
        return lambda z, y: 1 - y * y
    if isinstance(layer, nn.ELU):
        return lambda z, y: torch.where(z > 0, torch.ones_like(y), y + layer.alpha)
    if isinstance(layer, nn.ReLU):
        return lambda z, y: (z > 0).to(y.dtype)
    if isinstance(layer, nn.SiLU):
        def silu(z: Tensor, y: Tensor) -> Tensor:
            sig = torch.sigmoid(z)
            return sig * (1 + z * (1 - sig))
        return silu
    if isinstance(layer, nn.Softplus):
        return lambda z, y: torch.where(z * layer.beta > layer.threshold, torch.ones_like(y),
                                        torch.sigmoid(z * layer.beta))
    return None

def broadcast_leading(t: Tensor, z: Tensor) -> tuple[Tensor, Tensor]:
    """``t [*a, k]`` and ``z [*b, p]`` expanded to their common leading shape."""
    lead = torch.broadcast_shapes(t.shape[:-1], z.shape[:-1])
    return t.expand(*lead, t.shape[-1]), z.expand(*lead, z.shape[-1])
