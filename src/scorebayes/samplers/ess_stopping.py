r"""Run chains until their draws reach an effective sample size, instead of for a fixed number of steps.

The chains' states are recorded every ``record_every`` steps. At checkpoints spaced geometrically
(each ``growth`` times the last), the first quarter of the record so far (at least
``min_burn_in`` steps) is treated as burn-in and the rest is tested:

$$
\min_j \mathrm{ESS}_j \ge \text{target} \quad\text{and}\quad
\max_j \hat R_j < \hat R_{\max},
$$

with the ESS of the mean and the split $\hat R$ of each coordinate $j$ of
``measure(states)`` over all chains ([`scorebayes.diagnostics.ess()`][scorebayes.diagnostics.ess],
[`scorebayes.diagnostics.rhat()`][scorebayes.diagnostics.rhat], ``rank=False``): the precision of the posterior means the
user reads, in the coordinates they read them in. (Rank-normalised diagnostics are invariant to
the coordinates, and so count a far tail of ``u`` that holds next to no mass in the parameters,
e.g. $u = \mathrm{logit}\,\theta$ of a posterior against $\theta = 0$, as
unmixed for ever.) The run stops at the first checkpoint that passes, or after ``max_steps``;
the draws returned are ``draws_per_chain`` states of each chain, evenly spaced over the tested
part. Discarding a fixed share keeps the burn-in proportional to the time the chains actually needed, and the
geometric schedule keeps the cost of the tests to a few per doubling of the run.

With ``C`` chains of ``e`` effective draws each, $\hat R \approx 1 + 1/(2e)$ even at
stationarity, so the limit `rhat_limit()` is twice that at the target (and at least 1.01,
the limit of Vehtari et al. for four long chains): many short chains are not held to a bound
they could meet only with many times the target.

References:
    - Rank-normalization, folding, and localization: an improved R-hat for assessing convergence
      of MCMC (Vehtari, Gelman, Simpson, Carpenter and Bürkner, 2021) <https://doi.org/10.1214/20-BA1221>
    - Practical Markov chain Monte Carlo (Geyer, 1992) <https://doi.org/10.1214/ss/1177011137>
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..diagnostics import ess, rhat
from .base import Adaptation, ChainsInfo, Divergence, Kernel, run_chains

__all__ = ["Convergence", "EssStopping", "burn_in_steps", "rhat_limit", "run_until_ess"]


class Convergence(NamedTuple):
    """Where the run stopped: steps made, the tested part's smallest ESS and largest R-hat over the
    coordinates, the targets, and whether they were met (``False``: ``max_steps`` ran out)."""

    steps: int
    ess: float
    rhat: float
    target: float
    max_rhat: float
    met: bool


class EssStopping(NamedTuple):
    """The stopping rule: ``target`` ESS, ``max_rhat``, checks from ``min_steps`` on, each
    ``growth`` times the previous one, at most ``max_steps`` steps, and at least ``min_burn_in``
    steps discarded."""

    target: float
    max_steps: int
    min_steps: int = 400
    max_rhat: float = 1.01
    growth: float = 1.5
    min_burn_in: int = 200


def rhat_limit(chains: int, target: float) -> float:
    r"""$1 + \max(0.01,\ C/\text{target})$: twice the stationary $\hat R - 1$ of ``chains``
    chains holding ``target`` effective draws in all."""
    return 1.0 + max(0.01, chains / target)


def burn_in_steps(steps: int, rule: EssStopping) -> int:
    """The burn-in of a run of ``steps`` steps: the first quarter, at least ``rule.min_burn_in``
    steps, at most half."""
    return min(max(steps // 4, rule.min_burn_in), steps // 2)


def tested_part(record: Tensor, steps: int, rule: EssStopping) -> Tensor:
    """The record ``[C, K, d]`` of ``steps`` steps without its burn-in (`burn_in_steps()`)."""
    return record[:, burn_in_steps(steps, rule) * record.shape[1] // max(1, steps) :]


def convergence(record: Tensor, steps: int, rule: EssStopping, *, measure: Callable[[Tensor], Tensor] | None = None,
                max_states: int = 500) -> Convergence:
    """[`Convergence`][scorebayes.samplers.langevin.Convergence] of the record ``[C, K, d]`` after ``steps`` steps (NaN-free chains only),
    of ``measure(states [C, K', d]) -> [C, K', q]`` (default the states themselves).

    The tested part is thinned to at most ``max_states`` states per chain, which bounds the cost
    of a test and loses little ESS while the spacing stays below the autocorrelation time."""
    half = tested_part(record, steps, rule)
    half = half[:, :: max(1, math.ceil(half.shape[1] / max_states))].detach()
    half = (half if measure is None else measure(half)).cpu().double().numpy()
    alive = np.isfinite(half).all(axis=(1, 2))
    half = half[alive]
    if half.shape[0] < 2 or half.shape[1] < 4:
        return Convergence(steps, float("nan"), float("nan"), rule.target, rule.max_rhat, False)
    smallest = min(ess(half[:, :, j], rank=False) for j in range(half.shape[2]))
    largest = max(rhat(half[:, :, j], rank=False) for j in range(half.shape[2]))
    met = bool(np.isfinite(smallest) and np.isfinite(largest) and smallest >= rule.target
               and largest < rule.max_rhat)
    return Convergence(steps, float(smallest), float(largest), rule.target, rule.max_rhat, met)


def run_until_ess(kernel: Kernel, state: Any, rule: EssStopping, *, draws_per_chain: int, record_every: int,
                  generator: torch.Generator | None = None, adaptation: Adaptation | None = None,
                  adaptation_steps: int = 0, divergence: Divergence | None = None,
                  measure: Callable[[Tensor], Tensor] | None = None, progress: bool = False,
                  desc: str = "chains") -> tuple[Tensor, Any, ChainsInfo, Convergence]:
    r"""Run ``C`` chains until [`EssStopping`][scorebayes.samplers.langevin.EssStopping] is met; keep ``draws_per_chain`` states per chain.

    Arguments:
        kernel: the kernel of the recorded steps; ``state.position [C, d]`` the start.
        rule: the target, R-hat limit and step limits.
        draws_per_chain: states returned per chain, evenly spaced over the tested part.
        record_every: steps between recorded states (the tested part must hold at least
            ``draws_per_chain`` of them by ``min_steps``: see `record_interval()`).
        adaptation, adaptation_steps: burn-in steps made first by the
            [`Adaptation`][scorebayes.samplers.base.Adaptation] (e.g. tempering), not recorded.
        divergence: as in [`run_chains()`][scorebayes.samplers.base.run_chains].
        measure: what is tested, ``states [C, K, d] -> [C, K, q]`` (e.g. the parameters of
            unconstrained or whitened chains); default the states.

    Returns:
        ``(draws [C, draws_per_chain, d], last state, ChainsInfo, Convergence)``; ``ChainsInfo``
        counts every step, the adaptation's included.
    """
    if draws_per_chain < 1 or record_every < 1:
        raise ValueError("need draws_per_chain >= 1 and record_every >= 1")
    if rule.max_steps < rule.min_steps or rule.min_steps < 1 or rule.growth <= 1:
        raise ValueError(f"need 1 <= min_steps <= max_steps and growth > 1, got {rule}")
    diverged = None
    if adaptation_steps:
        _, state, first = run_chains(None, state, adaptation_steps, burn_in=adaptation_steps,
                                     generator=generator, adaptation=adaptation, divergence=divergence,
                                     progress=progress, desc=f"{desc} (tempering)")
        diverged = first.diverged
    checkpoints = iter(checkpoint_steps(rule))
    next_check = next(checkpoints)
    result: list[Convergence] = []

    def stop(t: int, record: Tensor) -> bool:
        nonlocal next_check
        steps = t + 1
        if steps < next_check and steps < rule.max_steps:
            return False
        next_check = next(checkpoints, rule.max_steps)
        result.append(convergence(record, steps, rule, measure=measure))
        return result[-1].met

    record, state, info = run_chains(kernel, state, rule.max_steps, thin=record_every, generator=generator,
                                     divergence=divergence, stop=stop, progress=progress, desc=desc)
    if not result or result[-1].steps != info.num_steps:  # stopped at max_steps between checkpoints
        result.append(convergence(record, info.num_steps, rule, measure=measure))
    half = tested_part(record, info.num_steps, rule)
    index = torch.linspace(0, half.shape[1] - 1, draws_per_chain).round().long()
    if diverged is not None:
        info = info._replace(diverged=info.diverged | diverged)
    info = info._replace(num_steps=info.num_steps + adaptation_steps)
    return half[:, index], state, info, result[-1]


def checkpoint_steps(rule: EssStopping) -> list[int]:
    """The steps at which the rule is tested: ``min_steps``, then ``growth`` times more each time,
    ending at ``max_steps``."""
    steps, at = [], float(rule.min_steps)
    while at < rule.max_steps:
        steps.append(int(math.ceil(at)))
        at *= rule.growth
    return [*steps, rule.max_steps]


def record_interval(relaxation_steps: float, rule: EssStopping, draws_per_chain: int) -> int:
    """Steps between recorded states: about half a relaxation time, but often enough that the
    tested part of a ``min_steps`` run holds ``draws_per_chain`` states."""
    by_relaxation = max(1, math.ceil(relaxation_steps / 2))
    by_draws = max(1, (rule.min_steps // 2) // draws_per_chain)
    return min(by_relaxation, by_draws)
