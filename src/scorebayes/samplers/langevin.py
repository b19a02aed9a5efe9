r"""Vectorised unadjusted Langevin chains driven by a (learned) score.

The Euler–Maruyama discretisation of the Langevin diffusion (Algorithm 1, with the prior
gradient at the *previous* iterate, V.A2), with a tempered likelihood (App. C.2.2):

$$
u^{(k)} = u^{(k-1)} + \tau\big(t\,\hat s(u^{(k-1)}) + \nabla\log\pi_u(u^{(k-1)})\big)
+ \sqrt{2\tau}\,\xi_k,\qquad \xi_k\sim\mathcal N(0, I),
$$

for ``C`` chains ``u [C, d]`` at once. Stages with likelihood weight $t<1$ are
burn-in only; draws are kept at $t = 1$. [`run_langevin()`][scorebayes.samplers.langevin.run_langevin] is the ULA kernel of
`scorebayes.samplers.ula` run by the driver of [`scorebayes.samplers.base`][scorebayes.samplers.base], with the
tempering stages as its burn-in schedule. The step size comes from the drift's curvature
([`curvature_step_size()`][scorebayes.samplers.langevin.curvature_step_size], re-exported here with the
preconditioners and the warm-up windows that the Langevin-SBI sampler imports from this module).

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang et al., 2025)
    - Exponential convergence of Langevin distributions and their discrete approximations
      (Roberts and Tweedie, 1996) <https://doi.org/10.2307/3318418>
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from .adaptation import adaptation_windows
from .base import ChainsDivergedError, Kernel, run_chains, warn_diverged
from .ess_stopping import Convergence, EssStopping, burn_in_steps, run_until_ess
from .preconditioning import covariance_preconditioner, dense_preconditioner
from .step_size import StepSize, curvature_step_size
from .ula import LANGEVIN_DIVERGENCE, build_kernel, reflect_into_box
from .ula import tempering as tempering_schedule

__all__ = ["LangevinInfo", "StepSize", "adaptation_windows", "covariance_preconditioner",
           "curvature_step_size", "dense_preconditioner", "reflect_into_box", "run_langevin",
           "run_langevin_to_ess", "ChainsDivergedError", "Convergence", "EssStopping"]

ScoreFn = Callable[[Tensor], Tensor]


class LangevinInfo(NamedTuple):
    """The run's settings, ``diverged [C]`` (bool: frozen chains) and ``total_steps``."""

    step_size: float
    burn_in: int
    thin: int
    tempering: tuple[float, ...]
    steps_per_stage: int
    diverged: Tensor  # [C] bool
    total_steps: int
    convergence: Convergence | None = None  # with run_langevin_to_ess


def _parts(likelihood_score: ScoreFn, prior_score: ScoreFn, init: Tensor, step_size: float,
           tempering: Sequence[float], steps_per_stage: int, clip_norm: float | None,
           bounds: tuple[Tensor, Tensor] | None, constrain: Callable[[Tensor], Tensor] | None,
           max_abs: float, max_diverged_fraction: float):
    """The checked inputs' ``(t = 1 kernel, tempering adaptation or None, tempering steps,
    divergence rule)``, shared by [`run_langevin()`][scorebayes.samplers.langevin.run_langevin] and [`run_langevin_to_ess()`][scorebayes.samplers.langevin.run_langevin_to_ess]."""
    if init.dim() != 2:
        raise ValueError(f"init must be [C, d], got shape {tuple(init.shape)}")
    if not step_size > 0 or not math.isfinite(step_size):
        raise ValueError(f"step_size must be positive and finite, got {step_size}")

    def build(weight: float) -> Kernel:
        return build_kernel(likelihood_score, prior_score, step_size, weight=weight, clip_norm=clip_norm,
                            bounds=bounds, constrain=constrain)

    kernel = build(1.0)
    stages = len(tempering) * steps_per_stage
    divergence = LANGEVIN_DIVERGENCE._replace(max_abs=max_abs, max_fraction=max_diverged_fraction)
    return kernel, tempering_schedule(build, tempering, steps_per_stage, kernel), stages, divergence


def run_langevin(
    likelihood_score: ScoreFn,
    prior_score: ScoreFn,
    init: Tensor,
    *,
    step_size: float,
    num_draws: int,
    burn_in: int,
    thin: int = 1,
    tempering: Sequence[float] = (),
    steps_per_stage: int = 0,
    clip_norm: float | None = None,
    bounds: tuple[Tensor, Tensor] | None = None,
    constrain: Callable[[Tensor], Tensor] | None = None,
    max_abs: float = 1e6,
    max_diverged_fraction: float = 0.5,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> tuple[Tensor, LangevinInfo]:
    r"""Run ``C`` Langevin chains and return ``draws [C, num_draws, d]`` and [`LangevinInfo`][scorebayes.samplers.langevin.LangevinInfo].

    Arguments:
        likelihood_score: $\hat s(u)$, ``[C, d] -> [C, d]``.
        prior_score: $\nabla\log\pi_u(u)$, ``[C, d] -> [C, d]``.
        init: ``[C, d]`` initial states.
        step_size: $\tau$.
        num_draws, burn_in, thin: at $t=1$, ``burn_in`` steps then ``num_draws*thin``
            steps keeping every ``thin``-th state.
        tempering: likelihood weights before the final $t = 1$ stage (e.g. 0.1..0.9),
            ``steps_per_stage`` steps each (burn-in only).
        clip_norm: clip the likelihood score to this Euclidean norm (per chain).
        bounds: optional ``(low [d], high [d])``; states are reflected into the box.
        constrain: optional map applied to every proposed state ``[C, d] -> [C, d]`` after
            ``bounds`` (e.g. a reflection into a box expressed in other coordinates).
        max_abs: a chain with ``|u| > max_abs`` or non-finite state is declared diverged and frozen.
        max_diverged_fraction: raise [`ChainsDivergedError`][scorebayes.samplers.langevin.ChainsDivergedError] above this fraction.
    """
    if num_draws < 1 or burn_in < 0 or thin < 1:
        raise ValueError("need num_draws >= 1, burn_in >= 0 and thin >= 1")
    kernel, adaptation, stages, divergence = _parts(
        likelihood_score, prior_score, init, step_size, tempering, steps_per_stage, clip_norm, bounds,
        constrain, max_abs, max_diverged_fraction)
    draws, _, run = run_chains(kernel, kernel.init(init), stages + burn_in + num_draws * thin,
                               burn_in=stages + burn_in, thin=thin, generator=generator,
                               adaptation=adaptation,
                               divergence=divergence, progress=progress, desc="langevin")
    warn_diverged(run.diverged)
    info = LangevinInfo(step_size, burn_in, thin, tuple(float(t) for t in tempering),
                        steps_per_stage, run.diverged, run.num_steps)
    return draws, info


def run_langevin_to_ess(
    likelihood_score: ScoreFn,
    prior_score: ScoreFn,
    init: Tensor,
    rule: EssStopping,
    *,
    step_size: float,
    num_draws: int,
    record_every: int,
    tempering: Sequence[float] = (),
    steps_per_stage: int = 0,
    clip_norm: float | None = None,
    bounds: tuple[Tensor, Tensor] | None = None,
    constrain: Callable[[Tensor], Tensor] | None = None,
    max_abs: float = 1e6,
    max_diverged_fraction: float = 0.5,
    measure: Callable[[Tensor], Tensor] | None = None,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> tuple[Tensor, LangevinInfo]:
    r"""[`run_langevin()`][scorebayes.samplers.langevin.run_langevin] run until its draws reach the ESS target of ``rule``
    (`run_until_ess()`): the tempering stages, then steps at
    $t = 1$ until the run after its burn-in has the target ESS and $\hat R$, or
    ``rule.max_steps`` steps; ``num_draws`` draws per chain from the tested part. ``measure``
    maps states ``[C, K, d]`` to what is tested (e.g. the constrained parameters).

    ``LangevinInfo.burn_in`` is then the discarded steps (tempering included), ``thin`` the
    spacing of the draws returned, and ``convergence`` the [`Convergence`][scorebayes.samplers.langevin.Convergence].
    """
    kernel, adaptation, stages, divergence = _parts(
        likelihood_score, prior_score, init, step_size, tempering, steps_per_stage, clip_norm, bounds,
        constrain, max_abs, max_diverged_fraction)
    draws, _, run, converged = run_until_ess(
        kernel, kernel.init(init), rule, draws_per_chain=num_draws, record_every=record_every,
        generator=generator, adaptation=adaptation,
        adaptation_steps=stages, divergence=divergence, measure=measure, progress=progress, desc="langevin")
    warn_diverged(run.diverged)
    recorded = converged.steps  # steps at t = 1, after the tempering stages
    burn = burn_in_steps(recorded, rule)
    info = LangevinInfo(step_size, stages + burn, max(1, (recorded - burn) // num_draws),
                        tuple(float(t) for t in tempering), steps_per_stage, run.diverged, run.num_steps,
                        converged)
    return draws, info
