r"""Reference tables :math:`\{(\theta^{(k)}, \mathbf X^{(k)})\}_{k=1}^N`, drawn in seeded blocks.

Step 1 of Algorithm 1 in Jiang, Wang & Yang draws the table i.i.d. from
:math:`p(\theta)\,p^{(n)}_\theta`, where :math:`p(\theta)` is the prior :math:`\pi` or the
localized proposal :math:`q` (:mod:`scorebayes.localize`):

.. math:: \theta^{(k)} \sim p(\theta), \qquad
          \mathbf X^{(k)} = (X^{(k)}_1, \dots, X^{(k)}_{n_{obs}})
          \overset{iid}{\sim} p_{\theta^{(k)}}.

The single-observation method uses two such tables (Algorithm 3): :math:`\mathcal D^S` with
``n_obs = 1`` and :math:`\mathcal D^R` with one parameter per group of ``n_obs = m_R``
observations; both come from :func:`simulate_table` (:func:`simulate_grouped_table` only
changes the defaults).

Reproducibility: rows are cut into blocks of ``block_size``; block :math:`k` (rows
:math:`k\,b, \dots, (k+1)\,b - 1`, the last block possibly shorter) draws its parameters
*and* its simulations from ``make_generator(seed, "table", tag, k)``. Tasks are groups of
consecutive blocks, so the table is bit-identical whatever ``chunk_size`` (rows per task)
and the executor (``None``, a ``ProcessPoolExecutor``, ``dask`` ``Client.get_executor()``).

Simulation cost (METHODS.md I.10) is counted in datasets of the observed size ``n_data``:
:math:`N\,n_{obs}/n_{data}`.

References:
    | Simulation-based Inference via Langevin Dynamics with Score Matching
      (Jiang, Wang, Yang), Algorithms 1-3; seed file ``000_1aaaaf87072c12bc``.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from .parallel import check_picklable, make_generator
from .simulators import Simulator, SimulatorError, as_simulator

__all__ = ["ReferenceTable", "simulate_table", "simulate_grouped_table", "simulate_block"]


@dataclass(frozen=True)
class ReferenceTable:
    r"""A reference table.

    Attributes:
        theta: :math:`\theta^{(k)}`, ``[N, d]`` float64 (constrained space).
        x: :math:`\mathbf X^{(k)}`, ``[N, n_obs, p]``.
        simulations: cost in datasets of size ``n_data``, :math:`N\,n_{obs}/n_{data}`.
        seed: the run seed; ``tag`` and ``block_size`` complete the recipe.
    """

    theta: Tensor
    x: Tensor
    simulations: float
    seed: int
    tag: str = "S"
    block_size: int = 256

    def __len__(self) -> int:
        return int(self.theta.shape[0])


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


def _simulate_task(task: tuple) -> tuple[int, Tensor, Tensor]:
    """Run the blocks of one task (module level so that executors can pickle it)."""
    simulator, sampler, num, n_obs, seed, tag, block_size, blocks = task
    thetas, xs = [], []
    for k in blocks:
        rows = min(block_size, num - k * block_size)
        theta, x = simulate_block(simulator, sampler, rows, n_obs, seed, tag, k)
        thetas.append(theta)
        xs.append(x)
    return blocks[0], torch.cat(thetas), torch.cat(xs)


def simulate_table(
    simulator: Simulator | Any,
    sampler: Any,
    num: int,
    n_obs: int,
    *,
    seed: int,
    tag: str = "S",
    block_size: int = 256,
    chunk_size: int | None = None,
    n_data: int | None = None,
    executor: Executor | None = None,
    progress: bool = False,
) -> ReferenceTable:
    r"""Draw a reference table of ``num`` parameters with ``n_obs`` observations each.

    Arguments:
        simulator: a :class:`~scorebayes.simulators.Simulator` (a batched callable
            ``(theta [B, d], n, generator) -> x [B, n, p]`` is wrapped).
        sampler: ``PriorSampler`` or ``GaussianProposal`` (anything with
            ``sample(num, generator) -> theta [num, d]``).
        num: :math:`N`, number of rows (any positive integer; the last block may be short).
        n_obs: observations per parameter: 1 for :math:`\mathcal D^S`, :math:`m_R` for
            :math:`\mathcal D^R`, :math:`n` for the full-data (n-model) table.
        seed: run seed; block :math:`k` uses ``make_generator(seed, "table", tag, k)``.
        tag: distinguishes tables of one run (``"S"``, ``"R"``, ``"val"``, ...).
        block_size: rows per seeded block (part of the recipe: changing it changes the table).
        chunk_size: rows per executor task, rounded up to a multiple of ``block_size``
            (does not change the table). Default: one block per task in-process, about
            32 tasks with an executor.
        n_data: size of the observed dataset, the unit of ``simulations`` (default ``n_obs``).
        executor: ``None`` (in-process) or a ``concurrent.futures.Executor``; the simulator
            and sampler must then be picklable (checked before any work).
        progress: tqdm bar, one tick per task.

    Returns:
        :class:`ReferenceTable` with ``theta [N, d]`` float64, ``x [N, n_obs, p]``.

    Raises:
        ValueError: invalid sizes, or a sampler/simulator output of the wrong shape.
        TypeError: an unpicklable simulator or sampler with a process executor.

    Example:
        >>> from scorebayes.priors import independent
        >>> from scorebayes.proposal import PriorSampler
        >>> def simulate(theta, n, g):  # x_i ~ N(theta, 1)
        ...     return theta[:, None, :] + torch.randn(len(theta), n, 1, generator=g,
        ...                                            dtype=theta.dtype)
        >>> sampler = PriorSampler(independent([torch.distributions.Normal(0.0, 1.0)]))
        >>> table = simulate_table(Simulator(simulate), sampler, 1000, 1, seed=0, n_data=100)
        >>> table.theta.shape, table.x.shape, table.simulations
        (torch.Size([1000, 1]), torch.Size([1000, 1, 1]), 10.0)
    """
    simulator = as_simulator(simulator)
    if not callable(getattr(sampler, "sample", None)):
        raise TypeError(f"sampler must have a .sample(num, generator) method, got {sampler!r}")
    for name, value in (("num", num), ("n_obs", n_obs), ("block_size", block_size)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    num, n_obs, block_size = int(num), int(n_obs), int(block_size)
    n_data = n_obs if n_data is None else n_data
    if n_data <= 0:
        raise ValueError(f"n_data must be positive, got {n_data!r}")
    num_blocks = math.ceil(num / block_size)
    if chunk_size is None:
        per_task = 1 if executor is None else max(1, math.ceil(num_blocks / 32))
    else:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive number of rows, got {chunk_size!r}")
        per_task = max(1, math.ceil(chunk_size / block_size))
    if executor is not None:
        check_picklable(simulator, "simulator")
        check_picklable(sampler, "sampler")
    tasks = [
        (simulator, sampler, num, n_obs, int(seed), str(tag), block_size,
         list(range(start, min(start + per_task, num_blocks))))
        for start in range(0, num_blocks, per_task)
    ]

    theta_out: Tensor | None = None
    x_out: Tensor | None = None

    def store(first_block: int, theta: Tensor, x: Tensor) -> None:
        nonlocal theta_out, x_out
        if theta_out is None:  # allocate once, from the first result's shapes and dtype
            theta_out = torch.empty(num, theta.shape[1], dtype=torch.float64)
            x_out = torch.empty((num, n_obs) + tuple(x.shape[2:]), dtype=x.dtype)
        start = first_block * block_size
        if theta.shape[1:] != theta_out.shape[1:] or x.shape[1:] != x_out.shape[1:]:
            raise SimulatorError(
                f"block {first_block} returned theta {tuple(theta.shape)} and x "
                f"{tuple(x.shape)}, but earlier blocks had theta [*, {theta_out.shape[1]}] "
                f"and x {('*',) + tuple(x_out.shape[1:])}"
            )
        theta_out[start : start + theta.shape[0]] = theta
        x_out[start : start + x.shape[0]] = x

    bar = tqdm(total=len(tasks), desc=f"table {tag}", disable=not progress, leave=False)
    try:
        if executor is None:
            for task in tasks:
                store(*_simulate_task(task))
                bar.update(1)
        else:
            futures = [executor.submit(_simulate_task, task) for task in tasks]
            for future in as_completed(futures):
                store(*future.result())
                bar.update(1)
    finally:
        bar.close()
    assert theta_out is not None and x_out is not None
    return ReferenceTable(
        theta=theta_out,
        x=x_out,
        simulations=num * n_obs / n_data,
        seed=int(seed),
        tag=str(tag),
        block_size=block_size,
    )


def simulate_grouped_table(
    simulator: Simulator | Any,
    sampler: Any,
    num_groups: int,
    group_size: int,
    *,
    seed: int,
    tag: str = "R",
    **options: Any,
) -> ReferenceTable:
    r"""The table :math:`\mathcal D^R = \{(\tilde\theta^{(l)}, \tilde{\mathbf X}^{(l)}_{m_R})\}_l`.

    One parameter with ``group_size`` :math:`= m_R` observations per row: exactly
    :func:`simulate_table` with ``n_obs = group_size`` and ``tag = "R"`` by default (pass
    ``n_data = n`` to count its cost :math:`N_R m_R / n` in observed datasets).
    """
    return simulate_table(
        simulator, sampler, num_groups, group_size, seed=seed, tag=tag, **options
    )
