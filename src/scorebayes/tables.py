r"""Reference tables $\{(\theta^{(k)}, \mathbf X^{(k)})\}_{k=1}^N$, drawn in seeded blocks.

Step 1 of Algorithm 1 in Jiang, Wang & Yang draws the table i.i.d. from
$p(\theta)\,p^{(n)}_\theta$, where $p(\theta)$ is the prior $\pi$ or the
localized proposal $q$ ([`scorebayes.sbi.localization.minimum_distance`][scorebayes.sbi.localization.minimum_distance]):

$$
\theta^{(k)} \sim p(\theta), \qquad
\mathbf X^{(k)} = (X^{(k)}_1, \dots, X^{(k)}_{n_{obs}})
\overset{iid}{\sim} p_{\theta^{(k)}}.
$$

The single-observation method uses two such tables (Algorithm 3): $\mathcal D^S$ with
``n_obs = 1`` and $\mathcal D^R$ with one parameter per group of ``n_obs = m_R``
observations; both come from [`simulate_table()`][scorebayes.tables.simulate_table] ([`simulate_grouped_table()`][scorebayes.tables.simulate_grouped_table] only
changes the defaults).

Reproducibility: rows are cut into blocks of ``block_size``; block $k$ (rows
$k\,b, \dots, (k+1)\,b - 1$, the last block possibly shorter) draws its parameters
*and* its simulations from ``make_generator(seed, "table", tag, k)``. Tasks are groups of
consecutive blocks, so the table is bit-identical whatever ``chunk_size`` (rows per task)
and the executor (``None``, a ``ProcessPoolExecutor``, ``dask`` ``Client.get_executor()``).

Run directories and faults: with ``store`` (a [`RunStore`][scorebayes.store.RunStore]) each
block is saved as ``.npy`` when it completes and reused on a re-run, so an interrupted table
resumes where it stopped with the same rows. With ``on_simulator_error = "skip"``/``"retry"``
a block whose simulation raises is re-run parameter by parameter (with derived seeds), and
parameters that fail or return NaN/inf are dropped and counted (`scorebayes.table_blocks`).
With ``in_memory=False`` the table is memory-mapped from the run directory instead of
concatenated in memory (`scorebayes.table_store`).

Simulation cost is counted in datasets of the observed size ``n_data``:
$N\,n_{obs}/n_{data}$.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Algorithms 1-3)
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, wait
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor
from tqdm.auto import tqdm

from .parallel import check_picklable
from .simulators import Simulator, SimulatorError, as_simulator
from .table_blocks import FAULT_MODES, sampler_fingerprint, simulate_block, simulate_task
from .table_store import BlockStore

__all__ = ["ReferenceTable", "simulate_table", "simulate_grouped_table", "simulate_block",
           "check_faults", "FAULT_MODES"]


@dataclass(frozen=True)
class ReferenceTable:
    r"""A reference table.

    Attributes:
        theta: $\theta^{(k)}$, ``[N, d]`` float64 (constrained space).
        x: $\mathbf X^{(k)}$, ``[N, n_obs, p]``.
        simulations: cost in datasets of size ``n_data``, $N\,n_{obs}/n_{data}$.
        seed: the run seed; ``tag`` and ``block_size`` complete the recipe.
        failed, nonfinite: parameters dropped because the simulator raised / returned
            non-finite values (``on_simulator_error`` of [`simulate_table()`][scorebayes.tables.simulate_table]).
        resumed: simulations (same unit as ``simulations``) reused from a run directory.
    """

    theta: Tensor
    x: Tensor
    simulations: float
    seed: int
    tag: str = "S"
    block_size: int = 256
    failed: int = 0
    nonfinite: int = 0
    resumed: float = 0.0

    def __len__(self) -> int:
        return int(self.theta.shape[0])


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
    store: Any = None,
    on_simulator_error: str = "raise",
    retries: int = 3,
    max_failure_fraction: float = 0.1,
    in_memory: bool | None = None,
) -> ReferenceTable:
    r"""Draw a reference table of ``num`` parameters with ``n_obs`` observations each.

    Arguments:
        simulator: a [`Simulator`][scorebayes.simulators.Simulator] (a batched callable
            ``(theta [B, d], n, generator) -> x [B, n, p]`` is wrapped).
        sampler: ``PriorSampler`` or ``GaussianProposal`` (anything with
            ``sample(num, generator) -> theta [num, d]``).
        num: $N$, number of rows (any positive integer; the last block may be short).
        n_obs: observations per parameter: 1 for $\mathcal D^S$, $m_R$ for
            $\mathcal D^R$, $n$ for the full-data (n-model) table.
        seed: run seed; block $k$ uses ``make_generator(seed, "table", tag, k)``.
        tag: distinguishes tables of one run (``"S"``, ``"R"``, ``"val"``, ...).
        block_size: rows per seeded block (part of the recipe: changing it changes the table).
        chunk_size: rows per executor task, rounded up to a multiple of ``block_size``
            (does not change the table). Default: one block per task in-process or when
            streaming (``in_memory=False``: at most 16 tasks in flight), else about 32 tasks.
        n_data: size of the observed dataset, the unit of ``simulations`` (default ``n_obs``).
        executor: ``None`` (in-process) or a ``concurrent.futures.Executor``; the simulator
            and sampler must then be picklable (checked before any work).
        progress: tqdm bar, one tick per task.
        store: a [`RunStore`][scorebayes.store.RunStore]: every block is saved (atomically,
            ``.npy``) as it completes, and blocks already on disk are reused, not simulated.
        on_simulator_error: ``"raise"`` (default), ``"skip"`` (drop parameters whose
            simulation raises or is non-finite) or ``"retry"`` (``retries`` tries with
            derived seeds, then drop). A batch that raises is re-run parameter by parameter.
        max_failure_fraction: raise if more than this fraction of the rows is dropped.
        in_memory: ``False`` (needs ``store``) returns ``theta`` and ``x`` as read-only tensors
            memory-mapped over ``arrays/table_<tag>/theta.npy`` and ``x.npy`` (written block
            by block; see `scorebayes.table_store`): memory does not grow with the table.
            Default: ``not store.stream_tables`` (``[options] stream_tables``), else ``True``.

    Returns:
        [`ReferenceTable`][scorebayes.tables.ReferenceTable] with ``theta [N', d]`` float64, ``x [N', n_obs, p]``
        ($N' = N$ minus dropped rows), and the fault and resume counts.

    Raises:
        ValueError: invalid sizes, or a sampler/simulator output of the wrong shape.
        TypeError: an unpicklable simulator or sampler with a process executor.
        SimulatorError: too many failed simulations.

    Examples:
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
    plan = _plan(simulator, sampler, num, n_obs, block_size=block_size, chunk_size=chunk_size, n_data=n_data,
                 executor=executor, store=store, on_simulator_error=on_simulator_error, retries=retries,
                 max_failure_fraction=max_failure_fraction, in_memory=in_memory)
    seed, tag, in_memory = int(seed), str(tag), plan.in_memory
    results: dict[int, tuple] = {}
    blocks_store = None
    if store is not None:
        recipe = {"num": plan.num, "n_obs": plan.n_obs, "block_size": plan.block_size, "seed": seed,
                  "on_error": on_simulator_error, "retries": int(retries),
                  "sampler": sampler_fingerprint(sampler, seed)}
        blocks_store = BlockStore(store, tag, recipe)
        results = blocks_store.completed(plan.num_blocks, in_memory=in_memory)
    resumed_rows = sum(min(plan.block_size, plan.num - k * plan.block_size) for k in results)
    todo = [k for k in range(plan.num_blocks) if k not in results]
    tasks = [
        (plan.simulator, sampler, plan.num, plan.n_obs, seed, tag, plan.block_size,
         todo[start : start + plan.per_task], on_simulator_error, int(retries))
        for start in range(0, len(todo), plan.per_task)
    ]

    def keep(done: list) -> None:
        for k, theta, x, failed, nonfinite in done:
            if blocks_store is not None:
                blocks_store.save(k, theta, x, failed, nonfinite)
            results[k] = (theta, x, failed, nonfinite) if in_memory else \
                (None, None, failed, nonfinite)

    # streaming: at most 16 tasks in flight (their blocks are in memory)
    _run_tasks(tasks, keep, executor, window=len(tasks) if in_memory else 16, progress=progress,
               desc=f"table {tag}")
    failed = sum(r[2] for r in results.values())
    nonfinite = sum(r[3] for r in results.values())
    if in_memory:
        theta, x = _concatenate(results)
        check_faults(failed, nonfinite, plan.num, f"table {tag!r}", max_failure_fraction, x is not None)
    else:  # memory-mapped: one block in memory at a time
        kept = [k for k in sorted(results) if blocks_store.meta(k)["kept"]]
        check_faults(failed, nonfinite, plan.num, f"table {tag!r}", max_failure_fraction, bool(kept))
        theta, x = blocks_store.mapped(kept)
    return ReferenceTable(
        theta=theta, x=x, simulations=plan.num * plan.n_obs / plan.n_data, seed=seed, tag=tag,
        block_size=plan.block_size, failed=failed, nonfinite=nonfinite,
        resumed=resumed_rows * plan.n_obs / plan.n_data)


class _Plan(NamedTuple):
    """The checked sizes of a table and how its blocks are grouped into tasks."""

    simulator: Simulator
    num: int
    n_obs: int
    block_size: int
    n_data: Any
    num_blocks: int
    per_task: int
    in_memory: bool


def _plan(simulator: Simulator | Any, sampler: Any, num: int, n_obs: int, *, block_size: int,
          chunk_size: int | None, n_data: int | None, executor: Executor | None, store: Any,
          on_simulator_error: str, retries: int, max_failure_fraction: float,
          in_memory: bool | None) -> _Plan:
    """Check the arguments of [`simulate_table()`][scorebayes.tables.simulate_table] (before any work) and resolve the defaults."""
    simulator = as_simulator(simulator)
    if not callable(getattr(sampler, "sample", None)):
        raise TypeError(f"sampler must have a .sample(num, generator) method, got {sampler!r}")
    for name, value in (("num", num), ("n_obs", n_obs), ("block_size", block_size),
                        ("retries", retries)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if on_simulator_error not in FAULT_MODES:
        raise ValueError(f"on_simulator_error must be one of {FAULT_MODES}, got "
                         f"{on_simulator_error!r}")
    if not 0.0 <= max_failure_fraction <= 1.0:
        raise ValueError(f"max_failure_fraction must be in [0, 1], got {max_failure_fraction!r}")
    num, n_obs, block_size = int(num), int(n_obs), int(block_size)
    n_data = n_obs if n_data is None else n_data
    if n_data <= 0:
        raise ValueError(f"n_data must be positive, got {n_data!r}")
    num_blocks = math.ceil(num / block_size)
    if in_memory is None:
        in_memory = not getattr(store, "stream_tables", False)
    if chunk_size is None:  # streaming: one block per task, so that few are in memory
        per_task = 1 if executor is None or not in_memory else max(1, math.ceil(num_blocks / 32))
    else:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive number of rows, got {chunk_size!r}")
        per_task = max(1, math.ceil(chunk_size / block_size))
    if executor is not None:
        check_picklable(simulator, "simulator")
        check_picklable(sampler, "sampler")
    if not in_memory and store is None:
        raise ValueError("in_memory=False maps the table from a run directory: pass store=")
    return _Plan(simulator=simulator, num=num, n_obs=n_obs, block_size=block_size, n_data=n_data,
                 num_blocks=num_blocks, per_task=per_task, in_memory=in_memory)


def _run_tasks(tasks: list[tuple], keep: Callable[[list], None], executor: Executor | None, *,
               window: int, progress: bool, desc: str) -> None:
    """Run ``simulate_task`` on each task, in order in-process or through ``executor`` with at most
    ``window`` tasks in flight, and pass each result to ``keep`` as it arrives."""
    bar = tqdm(total=len(tasks), desc=desc, disable=not progress, leave=False)
    try:
        if executor is None:
            for task in tasks:
                keep(simulate_task(task))
                bar.update(1)
        else:
            queue, pending = iter(tasks), set()

            def submit(count: int) -> None:
                for task in itertools.islice(queue, count):
                    pending.add(executor.submit(simulate_task, task))

            submit(window)
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        pending.discard(future)
                        keep(future.result())
                        bar.update(1)
                    submit(len(done))
            except BaseException:
                for future in pending:
                    future.cancel()
                raise
    finally:
        bar.close()


def _concatenate(results: dict) -> tuple[Tensor | None, Tensor | None]:
    """The kept rows of the blocks, in block order (``None`` if there are none)."""
    thetas, xs = [], []
    for k in sorted(results):
        theta, x, _, _ = results[k]
        if x is None:
            continue
        if xs and (theta.shape[1:] != thetas[0].shape[1:] or x.shape[1:] != xs[0].shape[1:]):
            raise SimulatorError(
                f"block {k} returned theta {tuple(theta.shape)} and x {tuple(x.shape)}, but "
                f"earlier blocks had theta [*, {thetas[0].shape[1]}] and x "
                f"{('*',) + tuple(xs[0].shape[1:])}")
        thetas.append(theta)
        xs.append(x)
    return (torch.cat(thetas), torch.cat(xs)) if xs else (None, None)


def check_faults(failed: int, nonfinite: int, num: int, what: str, max_failure_fraction: float,
                 any_rows: bool, stacklevel: int = 3) -> None:
    """Raise above ``max_failure_fraction`` dropped simulations of ``num`` (or none left); warn below.

    ``what`` names the simulations in the message (``"table 'S'"``, ``"the fit's check"``)."""
    bad = failed + nonfinite
    if bad > max_failure_fraction * num or not any_rows:
        raise SimulatorError(
            f"{what}: {failed} of {num} simulations raised and {nonfinite} returned "
            f"non-finite values, more than max_failure_fraction = {max_failure_fraction}: "
            "fix the simulator or restrict the prior to where it works")
    if bad:
        warnings.warn(
            f"{what}: dropped {failed} failed and {nonfinite} non-finite simulations of "
            f"{num}; if failures depend on theta, the posterior is computed from the "
            "parameters where the simulator works and is biased towards them", stacklevel=stacklevel)


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
    r"""The table $\mathcal D^R = \{(\tilde\theta^{(l)}, \tilde{\mathbf X}^{(l)}_{m_R})\}_l$.

    One parameter with ``group_size`` $= m_R$ observations per row: exactly
    [`simulate_table()`][scorebayes.tables.simulate_table] with ``n_obs = group_size`` and ``tag = "R"`` by default (pass
    ``n_data = n`` to count its cost $N_R m_R / n$ in observed datasets).
    """
    return simulate_table(
        simulator, sampler, num_groups, group_size, seed=seed, tag=tag, **options
    )
