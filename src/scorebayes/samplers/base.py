r"""The MCMC framework: kernels as ``(init, step)`` pairs, adaptation, and one driver loop.

A kernel moves ``C`` chains at once. Its state is a ``NamedTuple`` whose ``position`` field holds
the chains ``[C, d]`` (other fields, e.g. a cached score ``[C, d]`` or log-density ``[C]``, have the
chains on their first axis too), and

$$
(\text{state}_{t+1}, \text{info}_{t+1}) = \mathrm{step}(\text{state}_t, \text{generator}),
$$

with every random number drawn from the explicit ``torch.Generator``, so the same seed gives the
same chain. [`run_chains()`][scorebayes.samplers.base.run_chains] is the one loop: ``num_steps`` steps, the first ``burn_in`` of them
discarded (and, with an [`Adaptation`][scorebayes.samplers.base.Adaptation], made by kernels it tunes), then every ``thin``-th
state kept,

$$
\text{draws}[:, s] = \text{state}_{b + (s+1)\,\mathrm{thin}}, \qquad
s = 0, \dots, \lfloor (N - b)/\mathrm{thin} \rfloor - 1.
$$

Adaptation is separate from kernels (as in blackjax): an [`Adaptation`][scorebayes.samplers.base.Adaptation] builds the kernel
of each burn-in step from what it has learned so far and learns from the step's result; the kept
draws come from one fixed kernel, so they are ordinary Markov chain output.

Divergence ([`Divergence`][scorebayes.samplers.base.Divergence]): a chain whose new position is non-finite or has a coordinate
beyond ``max_abs`` is declared diverged and frozen at its last good state; if more than
``max_fraction`` of the chains diverge, [`ChainsDivergedError`][scorebayes.samplers.base.ChainsDivergedError] is raised.

Examples:
    >>> import torch
    >>> from scorebayes.samplers.ula import ULAState, build_kernel
    >>> kernel = build_kernel(lambda u: -u, lambda u: torch.zeros_like(u), 0.1)
    >>> draws, state, info = run_chains(kernel, ULAState(torch.zeros(8, 2)), 30, burn_in=10,
    ...                                 thin=5, generator=torch.Generator().manual_seed(0))
    >>> draws.shape
    torch.Size([8, 4, 2])

References:
    - BlackJAX: Composable Bayesian inference in JAX (Cabezas et al., 2024)
      <https://arxiv.org/abs/2402.10797>
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor
from tqdm.auto import tqdm

__all__ = ["Kernel", "Adaptation", "Divergence", "ChainsInfo", "ChainsDivergedError", "run_chains",
           "alternating", "position", "warn_diverged"]


class ChainsDivergedError(RuntimeError):
    """Too many chains became non-finite or ran away: reduce the step size."""


class Kernel(NamedTuple):
    """``init(position [C, d]) -> state`` and ``step(state, generator=None) -> (state, info)``."""

    init: Callable[[Tensor], Any]
    step: Callable[..., tuple[Any, Any]]


class Adaptation(NamedTuple):
    r"""What sets the kernel during burn-in: ``a = init(state)``, then for each burn-in step ``t``
    the kernel ``kernel(a)`` makes the step and ``a = update(a, t, state, info)`` learns from it.

    An adaptive scheme (the random-walk scale of `scorebayes.samplers.step_size`) and a fixed
    schedule (the tempering stages of `scorebayes.samplers.ula.tempering()`) are both one.
    """

    init: Callable[[Any], Any]
    update: Callable[[Any, int, Any, Any], Any]
    kernel: Callable[[Any], Kernel]


class Divergence(NamedTuple):
    """The run-away rule: ``|x| > max_abs`` or non-finite; raise above ``max_fraction`` diverged.

    ``message`` is formatted with ``diverged`` and ``chains`` (counts).
    """

    max_abs: float = 1e6
    max_fraction: float = 0.5
    message: str = "{diverged} of {chains} chains diverged: use a smaller step size"


class ChainsInfo(NamedTuple):
    """``diverged [C]`` bool (all ``False`` without a [`Divergence`][scorebayes.samplers.base.Divergence]), steps run, and the final
    adaptation state (``None`` without an [`Adaptation`][scorebayes.samplers.base.Adaptation])."""

    diverged: Tensor
    num_steps: int
    adaptation: Any


def position(state: Any) -> Tensor:
    """The chains ``[C, d]`` of a kernel state: its ``position`` field (what is kept by default)."""
    return state.position


def _freeze(frozen: Tensor, old: Any, new: Any) -> Any:
    """``new`` with the chains in ``frozen [C]`` set back to ``old`` (fields ``None`` pass through)."""
    fields = []
    for a, b in zip(old, new, strict=True):
        if isinstance(b, Tensor) and b.dim() >= 1 and b.shape[0] == frozen.shape[0]:
            b = torch.where(frozen.reshape(-1, *([1] * (b.dim() - 1))), a, b)
        fields.append(b)
    return type(new)(*fields)


def _bad(x: Tensor, max_abs: float) -> Tensor:
    return ~torch.isfinite(x).all(1) | (x.abs() > max_abs).any(1)


def run_chains(
    kernel: Kernel | None,
    state: Any,
    num_steps: int,
    *,
    burn_in: int = 0,
    thin: int = 1,
    generator: torch.Generator | None = None,
    adaptation: Adaptation | None = None,
    divergence: Divergence | None = None,
    on_step: Callable[[int, Any, Any], None] | None = None,
    stop: Callable[[int, Tensor], bool] | None = None,
    collect: Callable[[Any], Tensor] = position,
    progress: bool = False,
    desc: str = "chains",
) -> tuple[Tensor, Any, ChainsInfo]:
    r"""Run ``num_steps`` steps of ``C`` chains and keep every ``thin``-th state after ``burn_in``.

    Arguments:
        kernel: the kernel of the kept steps (``t >= burn_in``); may be ``None`` when every step
            is a burn-in step made by ``adaptation``.
        state: the kernel state at the start, e.g. ``kernel.init(x0)``; ``state.position [C, d]``.
        num_steps: $N$ steps in all.
        burn_in: $b$ steps first, none kept.
        thin: keep the state after every ``thin``-th step from ``burn_in`` on:
            $\lfloor (N - b)/\mathrm{thin}\rfloor$ draws (trailing steps are run, not kept).
        generator: the only random source (same seed, same chain).
        adaptation: makes the burn-in steps ([`Adaptation`][scorebayes.samplers.base.Adaptation]); ``None``: ``kernel`` does.
        divergence: freeze run-away chains and raise [`ChainsDivergedError`][scorebayes.samplers.base.ChainsDivergedError] when too many
            ([`Divergence`][scorebayes.samplers.base.Divergence]); ``None``: no check.
        on_step: ``on_step(t, state, info)`` after every step (e.g. to count acceptances).
        stop: ``stop(t, draws [C, kept, ...]) -> bool`` after every kept draw; ``True`` ends the
            run there (`scorebayes.samplers.ess_stopping` stops at an ESS target).
        collect: what a draw is, ``state -> [C, ...]`` (default [`position()`][scorebayes.samplers.base.position]).
        progress: show a tqdm bar (``desc``); silent by default.

    Returns:
        ``(draws [C, S, ...], state, info)``: the kept draws, the last state and
        [`ChainsInfo`][scorebayes.samplers.base.ChainsInfo] (``num_steps``: the steps made, fewer than asked when ``stop`` ended
        the run).
    """
    if num_steps < 0 or burn_in < 0 or thin < 1:
        raise ValueError("need num_steps >= 0, burn_in >= 0 and thin >= 1")
    if kernel is None and (num_steps > burn_in or adaptation is None):
        raise ValueError("a kernel is needed for the steps after burn-in (and without an adaptation)")
    x = position(state)
    if x.dim() != 2:
        raise ValueError(f"chains must be [C, d], got shape {tuple(x.shape)}")
    diverged = ~torch.isfinite(x).all(1)
    if divergence is None:
        diverged = torch.zeros_like(diverged)
    adapted = None if adaptation is None else adaptation.init(state)
    num_draws = max(0, num_steps - burn_in) // thin
    draws: Tensor | None = None
    kept, steps_made = 0, 0
    bar = tqdm(total=num_steps, desc=desc, disable=not progress, leave=False)
    try:
        for t in range(num_steps):
            tuning = adaptation is not None and t < burn_in
            step_kernel = adaptation.kernel(adapted) if tuning else kernel
            new_state, info = step_kernel.step(state, generator)
            if divergence is not None:
                with torch.no_grad():
                    diverged = diverged | _bad(position(new_state), divergence.max_abs)
                    new_state = _freeze(diverged, state, new_state)
            state = new_state
            if tuning:
                adapted = adaptation.update(adapted, t, state, info)
            if on_step is not None:
                on_step(t, state, info)
            if t >= burn_in and (t - burn_in) % thin == thin - 1 and kept < num_draws:
                value = collect(state)
                if draws is None:
                    draws = value.new_empty(value.shape[0], num_draws, *value.shape[1:])
                draws[:, kept] = value
                kept += 1
                if stop is not None and stop(t, draws[:, :kept]):
                    steps_made = t + 1
                    bar.update(1)
                    break
            bar.update(1)
        else:
            steps_made = num_steps
    finally:
        bar.close()
    if draws is None:
        value = collect(state)
        draws = value.new_empty(value.shape[0], 0, *value.shape[1:])
    if divergence is not None and float(diverged.float().mean()) > divergence.max_fraction:
        raise ChainsDivergedError(divergence.message.format(diverged=int(diverged.sum()),
                                                            chains=len(diverged)))
    return draws[:, :kept], state, ChainsInfo(diverged, steps_made, adapted)


def warn_diverged(diverged: Tensor, *, stacklevel: int = 2) -> None:
    """Warn that ``diverged [C]`` chains (if any) are to be dropped by the caller."""
    if diverged.any():
        warnings.warn(f"{int(diverged.sum())} of {len(diverged)} chains diverged and were dropped",
                      stacklevel=stacklevel + 1)


class AlternatingState(NamedTuple):
    """The state of [`alternating()`][scorebayes.samplers.base.alternating]: the inner kernels' state and the steps made so far."""

    position: Tensor
    inner: Any
    steps: int


class AlternatingInfo(NamedTuple):
    """The step's inner info and whether the other kernel made it."""

    inner: Any
    is_other: bool


def alternating(kernel: Kernel, other: Kernel, every: int) -> Kernel:
    """A kernel whose every ``every``-th step (steps ``every, 2 every, ...``) is made by ``other``.

    Both kernels must share one state type (e.g. two MH kernels with different proposals); used for
    occasional long jumps between local moves.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")

    def init(x: Tensor) -> AlternatingState:
        inner = kernel.init(x)
        return AlternatingState(inner.position, inner, 0)

    def step(state: AlternatingState, generator: torch.Generator | None = None):
        is_other = (state.steps + 1) % every == 0
        inner, info = (other if is_other else kernel).step(state.inner, generator)
        return AlternatingState(inner.position, inner, state.steps + 1), AlternatingInfo(info, is_other)

    return Kernel(init, step)
