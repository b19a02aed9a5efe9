r"""The unadjusted Langevin algorithm (ULA) as an ``(init, step)`` kernel, with tempering.

The Euler–Maruyama discretisation of the Langevin diffusion for ``C`` chains ``u [C, d]``, with
the likelihood score weighted by $t$ (tempering) and optionally clipped:

$$
u' = \mathcal R\Big(u + \tau\big(t\,\mathrm{clip}_c(\hat s(u)) + \nabla\log\pi_u(u)\big)
+ \sqrt{2\tau}\,\xi\Big),\qquad \xi\sim\mathcal N(0, I),
$$

where $\mathrm{clip}_c(s) = s\min(1, c/\|s\|)$ and $\mathcal R$ reflects into a box
([`reflect_into_box()`][scorebayes.samplers.langevin.reflect_into_box]) and/or applies a ``constrain`` map. No accept/reject step: for a
Gaussian target of precision eigenvalue $\lambda$ the chain is stable iff
$\tau\lambda < 2$, with stationary variance $1/(\lambda(1-\tau\lambda/2))$.
`tempering()` is the schedule of likelihood weights $t < 1$ for the first burn-in
steps, as an [`Adaptation`][scorebayes.samplers.base.Adaptation] of the driver.

References:
    - Exponential convergence of Langevin distributions and their discrete approximations
      (Roberts and Tweedie, 1996) <https://doi.org/10.2307/3318418>
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang et al., 2025)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from .base import Adaptation, Divergence, Kernel

__all__ = ["ULAState", "ULAInfo", "build_kernel", "tempering", "reflect_into_box",
           "LANGEVIN_DIVERGENCE"]

ScoreFn = Callable[[Tensor], Tensor]

#: the divergence rule of the Langevin chains (advice refers to the SBI sampler's settings)
LANGEVIN_DIVERGENCE = Divergence(
    1e6, 0.5, "{diverged} of {chains} Langevin chains diverged: use a smaller step size "
    "(step_size_factor) or score clipping (clip_norm)")


class ULAState(NamedTuple):
    """Chains ``position [C, d]``."""

    position: Tensor


class ULAInfo(NamedTuple):
    """Per step: the ``drift [C, d]`` at the previous position."""

    drift: Tensor


def reflect_into_box(u: Tensor, low: Tensor, high: Tensor) -> Tensor:
    """Reflect coordinates ``u [C, d]`` into ``[low, high]`` (repeatedly, for large overshoots)."""
    width = high - low
    finite = torch.isfinite(width)
    if not finite.any():
        return torch.maximum(torch.minimum(u, high), low)
    y = torch.where(finite, torch.remainder(u - low, 2 * torch.where(finite, width, 1.0)), u - low)
    y = torch.where(finite & (y > width), 2 * width - y, y)
    out = torch.where(finite, low + y, u)
    out = torch.where(~finite & (u < low), 2 * low - u, out)
    out = torch.where(~finite & (u > high), 2 * high - u, out)
    return out


def build_kernel(
    likelihood_score: ScoreFn,
    prior_score: ScoreFn,
    step_size: float,
    *,
    weight: float = 1.0,
    clip_norm: float | None = None,
    bounds: tuple[Tensor, Tensor] | None = None,
    constrain: Callable[[Tensor], Tensor] | None = None,
) -> Kernel:
    r"""The ULA kernel with likelihood weight $t$ = ``weight``.

    Arguments:
        likelihood_score: $\hat s(u)$, ``[C, d] -> [C, d]``.
        prior_score: $\nabla\log\pi_u(u)$, ``[C, d] -> [C, d]``.
        step_size: $\tau > 0$.
        weight: $t$, the likelihood's weight (1: the posterior).
        clip_norm: clip the likelihood score to this Euclidean norm $c$ (per chain).
        bounds: optional ``(low [d], high [d])``; proposals are reflected into the box.
        constrain: optional map ``[C, d] -> [C, d]`` applied after ``bounds``.

    Returns:
        [`Kernel`][scorebayes.samplers.base.Kernel] with ``init(u [C, d]) -> ULAState`` and
        ``step(state, generator) -> (ULAState, ULAInfo)``; one ``randn [C, d]`` per step.
    """
    noise_scale = math.sqrt(2 * step_size)

    def init(u: Tensor) -> ULAState:
        if u.dim() != 2:
            raise ValueError(f"chains must be [C, d], got shape {tuple(u.shape)}")
        return ULAState(u.detach().clone())

    def step(state: ULAState, generator: torch.Generator | None = None) -> tuple[ULAState, ULAInfo]:
        u = state.position
        with torch.no_grad():
            lik = likelihood_score(u)
            if clip_norm is not None:
                norm = lik.norm(dim=1, keepdim=True).clamp_min(1e-30)
                lik = lik * (clip_norm / norm).clamp(max=1.0)
            drift = weight * lik + prior_score(u)
            noise = torch.randn(u.shape, generator=generator, dtype=u.dtype, device=u.device)
            proposal = u + step_size * drift + noise_scale * noise
            if bounds is not None:
                proposal = reflect_into_box(proposal, bounds[0].to(u), bounds[1].to(u))
            if constrain is not None:
                proposal = constrain(proposal)
        return ULAState(proposal), ULAInfo(drift)

    return Kernel(init, step)


def tempering(build: Callable[[float], Kernel], weights: Sequence[float], steps_per_stage: int,
              final: Kernel) -> Adaptation | None:
    r"""The tempering schedule: ``steps_per_stage`` steps with ``build(t)`` for each weight ``t``
    in ``weights``, then ``final`` (the $t = 1$ kernel) for the rest of the burn-in.

    Returns:
        an [`Adaptation`][scorebayes.samplers.base.Adaptation] whose state is the step count, or
        ``None`` without stages.
    """
    kernels = [build(float(t)) for t in weights]
    if not kernels or steps_per_stage < 1:
        return None
    stages = len(kernels) * steps_per_stage

    def kernel(t: int) -> Kernel:
        return kernels[t // steps_per_stage] if t < stages else final

    return Adaptation(lambda state: 0, lambda t, step, state, info: t + 1, kernel)
