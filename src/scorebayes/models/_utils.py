r"""Small helpers shared by the built-in models.

The smooth indicator replaces a hard Bernoulli draw $\mathbb 1(Z \le p(\theta))$,
whose derivative in $\theta$ is zero almost everywhere, by

$$
\mathbb 1_{\text{smooth}}(t) = \frac{1}{1 + e^{-a t}}, \qquad t = p(\theta) - Z,
$$

with sharpness $a = 500$. It is used only during gradient-based localization;
reference tables and sampling use the exact simulator.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (App. B.1)
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["smooth_indicator", "uniform_open", "as_float_tensor"]


def smooth_indicator(t: Tensor, sharpness: float = 500.0) -> Tensor:
    r"""Sigmoid surrogate $1/(1+e^{-a t})$ of the step function $\mathbb 1(t \ge 0)$.

    Arguments:
        t: any tensor, e.g. $p(\theta) - Z$ with $Z \sim U(0, 1)$.
        sharpness: the slope $a$ (the paper uses 500).

    Returns:
        A tensor shaped like ``t`` with values in $(0, 1)$.

    Examples:
        >>> smooth_indicator(torch.tensor([-1.0, 0.0, 1.0]))
        tensor([0.0000, 0.5000, 1.0000])
    """
    if sharpness <= 0:
        raise ValueError(f"sharpness must be positive, got {sharpness}")
    return torch.sigmoid(sharpness * t)


def uniform_open(shape: tuple[int, ...], generator: torch.Generator | None,
                 dtype: torch.dtype = torch.float64) -> Tensor:
    r"""Uniform draws on $(0, 1]$ (``1 - U[0, 1)``), safe for ``-log(V)``, shape ``shape``."""
    return 1.0 - torch.rand(shape, generator=generator, dtype=dtype)


def as_float_tensor(value, dtype: torch.dtype = torch.float64) -> Tensor:
    """Convert ``value`` (tensor, array, list, number) to a tensor of ``dtype``."""
    return torch.as_tensor(value, dtype=dtype)
