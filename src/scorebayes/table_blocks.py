r"""One block of a reference table: a seeded draw, with simulator-fault handling.

Block $k$ of a table (rows $k\,b, \dots, (k+1)\,b - 1$) draws its parameters
and its simulations from ``make_generator(seed, "table", tag, k)`` ([`simulate_block()`][scorebayes.tables.simulate_block]),
so a table does not depend on how blocks are grouped into tasks or executors.

Faults (``on_simulator_error``): ``"raise"`` propagates any simulator error; with ``"skip"``
or ``"retry"`` a block whose batch call raises is re-run parameter by parameter, try
$t$ of row $i$ with ``make_generator(seed, "table", tag, k, "row", i, t)``
(deterministic for a seed), and rows that keep failing or return NaN/inf are dropped and
counted (`robust_block()`).

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Algorithm 1, step 1)
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from .parallel import make_generator
from .simulators import Simulator, check_simulation

__all__ = ["simulate_block", "robust_block", "simulate_unchecked", "simulate_groups", "simulate_data_sets",
           "pilot_simulation", "simulate_task", "sampler_fingerprint", "FAULT_MODES"]


# ``priors.sample`` (behind ``PriorSampler``) seeds the *global* torch RNG inside
# ``fork_rng``, which races when a thread-based executor (dask with processes=False, a
# ThreadPoolExecutor) draws two blocks at once; one lock per process serialises the draws.
_SAMPLER_LOCK = threading.Lock()


def simulate_block(
    simulator: Simulator, sampler: Any, rows: int, n_obs: int, seed: int, tag: str, block: int
) -> tuple[Tensor, Tensor]:
    r"""Draw one block: ``theta [rows, d]`` from ``sampler``, then ``x [rows, n_obs, p]``.

    Both draws use ``make_generator(seed, "table", tag, block)``, in that order.
    """
    generator = make_generator(seed, "table", tag, block)
    with _SAMPLER_LOCK:
        theta = sampler.sample(rows, generator)
    if not isinstance(theta, Tensor) or theta.dim() != 2 or theta.shape[0] != rows:
        raise ValueError(
            f"sampler.sample({rows}, generator) must return theta [{rows}, d], got "
            f"{tuple(theta.shape) if isinstance(theta, Tensor) else type(theta).__name__}"
        )
    theta = theta.to(torch.float64)
    x = simulator(theta, n_obs, generator)
    return theta, x


FAULT_MODES = ("skip", "retry", "raise")


def simulate_unchecked(simulator: Simulator, theta: Tensor, n_obs: int,
                       generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Simulate without the finiteness check: ``(x [B, n, p], finite rows [B] bool)``."""
    raw = copy.copy(simulator)
    raw.validate = False
    x = raw(theta, n_obs, generator)
    if isinstance(x, Tensor) and x.is_floating_point():
        finite = torch.isfinite(x.reshape(x.shape[0], -1)).all(1) if x.dim() >= 2 else \
            torch.isfinite(x)
        x = torch.where(torch.isfinite(x), x, torch.zeros((), dtype=x.dtype))
    else:
        finite = None
    x = check_simulation(x, theta.shape[0], n_obs, simulator.obs_dim)
    if finite is None:
        finite = torch.ones(theta.shape[0], dtype=torch.bool)
    return x, finite


def robust_block(simulator: Simulator, sampler: Any, rows: int, n_obs: int, seed: int, tag: str,
                 block: int, on_error: str, retries: int) -> tuple[Tensor, Tensor | None, int, int]:
    r"""One block with fault handling: ``(theta [r, d], x [r, n_obs, p] or None, failed, nonfinite)``.

    The block is first simulated exactly as in [`simulate_block()`][scorebayes.tables.simulate_block]. If the simulator
    raises, each parameter is simulated on its own (so one bad $\theta$ does not lose
    the block), try $t$ with ``make_generator(seed, "table", tag, block, "row", i, t)``
    (``retries`` tries with ``"retry"``, one with ``"skip"``): deterministic for a seed.
    Rows that keep failing and rows with non-finite values are dropped and counted.
    With ``"raise"`` any failure or non-finite value raises.
    """
    if on_error == "raise":
        theta, x = simulate_block(simulator, sampler, rows, n_obs, seed, tag, block)
        return theta, x, 0, 0
    generator = make_generator(seed, "table", tag, block)
    with _SAMPLER_LOCK:
        theta = sampler.sample(rows, generator)
    _check_theta(theta, rows)
    theta = theta.to(torch.float64)
    try:
        x, finite = simulate_unchecked(simulator, theta, n_obs, generator)
    except Exception:  # noqa: BLE001 - user simulator code: retried row by row
        tries = retries if on_error == "retry" else 1
        kept_theta, kept_x, failed, nonfinite = [], [], 0, 0
        for i in range(rows):
            for t in range(tries):
                g = make_generator(seed, "table", tag, block, "row", i, t)
                try:
                    xi, fi = simulate_unchecked(simulator, theta[i : i + 1], n_obs, g)
                except Exception:  # noqa: BLE001
                    continue
                if bool(fi[0]):
                    kept_theta.append(theta[i : i + 1])
                    kept_x.append(xi)
                else:
                    nonfinite += 1
                break
            else:
                failed += 1
        if not kept_x:
            return theta[:0], None, failed, nonfinite
        return torch.cat(kept_theta), torch.cat(kept_x), failed, nonfinite
    nonfinite = int((~finite).sum())
    if nonfinite:
        theta, x = theta[finite], x[finite]
    return theta, x, 0, nonfinite


def simulate_groups(simulator: Simulator, theta: Tensor, group_size: int, n_obs: int,
                    generator: torch.Generator | None, *, retries: int = 1,
                    active: Tensor | None = None, obs_dim: int = 1,
                    ) -> tuple[Tensor, Tensor, int, int]:
    r"""``group_size`` data sets at each of ``theta [G, d]``, with fault handling.

    One batched call ``simulator(theta.repeat_interleave(group_size), n_obs, generator)``;
    if it raises, each *active* group is simulated on its own, up to ``retries`` tries, all
    drawing from ``generator`` (deterministic for a seed when the faults are).

    Returns:
        ``(x [G * group_size, n_obs, p], good [G] bool, failed, nonfinite)``: ``good`` marks
        active groups whose simulations all worked and are finite; ``failed`` counts active
        groups whose simulation kept raising, ``nonfinite`` active groups with NaN/inf values
        (their rows of ``x`` are zeros or the replaced values: do not use them).
    """
    num = theta.shape[0]
    active = torch.ones(num, dtype=torch.bool) if active is None else active
    rows = theta.repeat_interleave(group_size, 0)
    try:
        x, finite = simulate_unchecked(simulator, rows, n_obs, generator)
    except Exception:  # noqa: BLE001 - user simulator code: group by group
        x, good, failed, nonfinite = None, torch.zeros(num, dtype=torch.bool), 0, 0
        for c in torch.nonzero(active).flatten().tolist():
            part = slice(c * group_size, (c + 1) * group_size)
            for _ in range(retries):
                try:
                    xc, fc = simulate_unchecked(simulator, rows[part], n_obs, generator)
                except Exception:  # noqa: BLE001
                    continue
                if x is None:
                    x = torch.zeros((len(rows),) + tuple(xc.shape[1:]), dtype=xc.dtype)
                x[part], good[c] = xc, bool(fc.all())
                nonfinite += int(not good[c])
                break
            else:
                failed += 1
        if x is None:
            x = torch.zeros(len(rows), n_obs, obs_dim, dtype=theta.dtype)
        return x, good, failed, nonfinite
    good = finite.reshape(num, group_size).all(1)
    return x, good, 0, int((active & ~good).sum())


def simulate_data_sets(simulator: Simulator, theta: Tensor, n_obs: int, generator: torch.Generator, *,
                       on_error: str, retries: int) -> tuple[Tensor, Tensor, int, int]:
    """One data set at each row of ``theta [B, d]``, with the tables' fault handling.

    ``"raise"``: one checked call (a failure or a non-finite value raises). ``"skip"``/``"retry"``:
    `simulate_groups()` with groups of one (each parameter on its own once the batch call
    raises, one try or ``retries``); with no fault, the same draws as the checked call.

    Returns:
        ``(x [B, n_obs, p], good [B] bool, failed, nonfinite)``; rows of ``x`` that are not
        ``good`` are placeholders.
    """
    if on_error == "raise":
        x = simulator(theta, n_obs, generator)
        return x, torch.ones(theta.shape[0], dtype=torch.bool), 0, 0
    return simulate_groups(simulator, theta, 1, n_obs, generator,
                           retries=retries if on_error == "retry" else 1,
                           obs_dim=simulator.obs_dim or 1)


def pilot_simulation(simulator: Simulator, theta: Tensor, n_obs: int,
                     generator: Callable[[int], torch.Generator], *, on_error: str, tries: int) -> Tensor:
    """A pilot call that reads the simulator's output shape: ``x [B, n_obs, p]``.

    With ``"raise"``, one checked call with ``generator(0)``. Otherwise up to ``tries`` calls, try
    ``t`` with ``generator(t)`` (the first with the same draws as ``"raise"``), the first that
    returns is kept, non-finite values and all (only its shape is read); the last error is raised
    if none returns.
    """
    if on_error == "raise":
        return simulator(theta, n_obs, generator(0))
    tries = max(int(tries), 1)
    for t in range(tries - 1):
        try:
            return simulate_unchecked(simulator, theta, n_obs, generator(t))[0]
        except Exception:  # noqa: BLE001 - user simulator code: tried again
            continue
    return simulate_unchecked(simulator, theta, n_obs, generator(tries - 1))[0]


def _check_theta(theta: Any, rows: int) -> None:
    if not isinstance(theta, Tensor) or theta.dim() != 2 or theta.shape[0] != rows:
        raise ValueError(
            f"sampler.sample({rows}, generator) must return theta [{rows}, d], got "
            f"{tuple(theta.shape) if isinstance(theta, Tensor) else type(theta).__name__}")


def simulate_task(task: tuple) -> list[tuple[int, Tensor, Tensor | None, int, int]]:
    """Run the blocks of one task (module level so that executors can pickle it)."""
    simulator, sampler, num, n_obs, seed, tag, block_size, blocks, on_error, retries = task
    out = []
    for k in blocks:
        rows = min(block_size, num - k * block_size)
        out.append((k,) + robust_block(simulator, sampler, rows, n_obs, seed, tag, k,
                                       on_error, retries))
    return out


def sampler_fingerprint(sampler: Any, seed: int) -> str:
    """A hash of a few draws of ``sampler`` (detects a changed proposal in a resumed table)."""
    with _SAMPLER_LOCK:
        theta = sampler.sample(4, make_generator(seed, "fingerprint"))
    return hashlib.sha256(theta.to(torch.float64).numpy().tobytes()).hexdigest()[:16]
