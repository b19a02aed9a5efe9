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

Run directories and faults: with ``store`` (a :class:`~scorebayes.store.RunStore`) each
block is saved as ``.npy`` when it completes and reused on a re-run, so an interrupted table
resumes where it stopped with the same rows. With ``on_simulator_error = "skip"``/``"retry"``
a block whose simulation raises is re-run parameter by parameter (with derived seeds), and
parameters that fail or return NaN/inf are dropped and counted.

Simulation cost (METHODS.md I.10) is counted in datasets of the observed size ``n_data``:
:math:`N\,n_{obs}/n_{data}`.

References:
    | Simulation-based Inference via Langevin Dynamics with Score Matching
      (Jiang, Wang, Yang), Algorithms 1-3; seed file ``000_1aaaaf87072c12bc``.
"""

from __future__ import annotations

import copy
import hashlib
import math
import threading
import warnings
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from .parallel import check_picklable, make_generator
from .simulators import Simulator, SimulatorError, as_simulator, check_simulation

__all__ = ["ReferenceTable", "simulate_table", "simulate_grouped_table", "simulate_block",
           "FAULT_MODES"]


@dataclass(frozen=True)
class ReferenceTable:
    r"""A reference table.

    Attributes:
        theta: :math:`\theta^{(k)}`, ``[N, d]`` float64 (constrained space).
        x: :math:`\mathbf X^{(k)}`, ``[N, n_obs, p]``.
        simulations: cost in datasets of size ``n_data``, :math:`N\,n_{obs}/n_{data}`.
        seed: the run seed; ``tag`` and ``block_size`` complete the recipe.
        failed, nonfinite: parameters dropped because the simulator raised / returned
            non-finite values (``on_simulator_error`` of :func:`simulate_table`).
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


def _call_raw(simulator: Simulator, theta: Tensor, n_obs: int,
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


def _robust_block(simulator: Simulator, sampler: Any, rows: int, n_obs: int, seed: int, tag: str,
                  block: int, on_error: str, retries: int) -> tuple[Tensor, Tensor | None, int, int]:
    r"""One block with fault handling: ``(theta [r, d], x [r, n_obs, p] or None, failed, nonfinite)``.

    The block is first simulated exactly as in :func:`simulate_block`. If the simulator
    raises, each parameter is simulated on its own (so one bad :math:`\theta` does not lose
    the block), try :math:`t` with ``make_generator(seed, "table", tag, block, "row", i, t)``
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
        x, finite = _call_raw(simulator, theta, n_obs, generator)
    except Exception:  # noqa: BLE001 - user simulator code: retried row by row
        tries = retries if on_error == "retry" else 1
        kept_theta, kept_x, failed, nonfinite = [], [], 0, 0
        for i in range(rows):
            for t in range(tries):
                g = make_generator(seed, "table", tag, block, "row", i, t)
                try:
                    xi, fi = _call_raw(simulator, theta[i : i + 1], n_obs, g)
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


def _check_theta(theta: Any, rows: int) -> None:
    if not isinstance(theta, Tensor) or theta.dim() != 2 or theta.shape[0] != rows:
        raise ValueError(
            f"sampler.sample({rows}, generator) must return theta [{rows}, d], got "
            f"{tuple(theta.shape) if isinstance(theta, Tensor) else type(theta).__name__}")


def _simulate_task(task: tuple) -> list[tuple[int, Tensor, Tensor | None, int, int]]:
    """Run the blocks of one task (module level so that executors can pickle it)."""
    simulator, sampler, num, n_obs, seed, tag, block_size, blocks, on_error, retries = task
    out = []
    for k in blocks:
        rows = min(block_size, num - k * block_size)
        out.append((k,) + _robust_block(simulator, sampler, rows, n_obs, seed, tag, k,
                                        on_error, retries))
    return out


def _sampler_fingerprint(sampler: Any, seed: int) -> str:
    """A hash of a few draws of ``sampler`` (detects a changed proposal in a resumed table)."""
    with _SAMPLER_LOCK:
        theta = sampler.sample(4, make_generator(seed, "fingerprint"))
    return hashlib.sha256(theta.to(torch.float64).numpy().tobytes()).hexdigest()[:16]


class _BlockStore:
    """The blocks of one table in a :class:`~scorebayes.store.RunStore` (``tables/<tag>/``)."""

    def __init__(self, store: Any, tag: str, recipe: dict):
        self.store, self.prefix = store, f"table_{tag}"
        old = store.load_json(f"{self.prefix}/recipe")
        if old is not None and old != recipe:
            raise ValueError(
                f"table {tag!r} in {store.path} was drawn with another recipe ({old}); "
                "re-run with --fresh (fresh=True) to start over")
        if old is None:
            store.save_json(f"{self.prefix}/recipe", recipe)

    def load(self, k: int) -> tuple[Tensor, Tensor | None, int, int] | None:
        meta = self.store.load_json(f"{self.prefix}/{k:06d}")
        if meta is None:
            return None
        theta = torch.from_numpy(np.array(self.store.load_array(f"{self.prefix}/{k:06d}_theta")))
        x = (torch.from_numpy(np.array(self.store.load_array(f"{self.prefix}/{k:06d}_x")))
             if meta["kept"] else None)
        return theta, x, int(meta["failed"]), int(meta["nonfinite"])

    def save(self, k: int, theta: Tensor, x: Tensor | None, failed: int, nonfinite: int) -> None:
        self.store.save_array(f"{self.prefix}/{k:06d}_theta", theta)
        if x is not None:
            self.store.save_array(f"{self.prefix}/{k:06d}_x", x)
        # the block's JSON is written last: it marks the block complete
        self.store.save_json(f"{self.prefix}/{k:06d}", {
            "kept": int(theta.shape[0]) if x is not None else 0, "failed": failed,
            "nonfinite": nonfinite})


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
        store: a :class:`~scorebayes.store.RunStore`: every block is saved (atomically,
            ``.npy``) as it completes, and blocks already on disk are reused, not simulated.
        on_simulator_error: ``"raise"`` (default), ``"skip"`` (drop parameters whose
            simulation raises or is non-finite) or ``"retry"`` (``retries`` tries with
            derived seeds, then drop). A batch that raises is re-run parameter by parameter.
        max_failure_fraction: raise if more than this fraction of the rows is dropped.

    Returns:
        :class:`ReferenceTable` with ``theta [N', d]`` float64, ``x [N', n_obs, p]``
        (:math:`N' = N` minus dropped rows), and the fault and resume counts.

    Raises:
        ValueError: invalid sizes, or a sampler/simulator output of the wrong shape.
        TypeError: an unpicklable simulator or sampler with a process executor.
        SimulatorError: too many failed simulations.

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
    if chunk_size is None:
        per_task = 1 if executor is None else max(1, math.ceil(num_blocks / 32))
    else:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive number of rows, got {chunk_size!r}")
        per_task = max(1, math.ceil(chunk_size / block_size))
    if executor is not None:
        check_picklable(simulator, "simulator")
        check_picklable(sampler, "sampler")

    results: dict[int, tuple] = {}
    blocks_store = None
    resumed_rows = 0
    if store is not None:
        recipe = {"num": num, "n_obs": n_obs, "block_size": block_size, "seed": int(seed),
                  "on_error": on_simulator_error, "retries": int(retries),
                  "sampler": _sampler_fingerprint(sampler, int(seed))}
        blocks_store = _BlockStore(store, str(tag), recipe)
        for k in range(num_blocks):
            found = blocks_store.load(k)
            if found is not None:
                results[k] = found
                resumed_rows += min(block_size, num - k * block_size)
    todo = [k for k in range(num_blocks) if k not in results]
    tasks = [
        (simulator, sampler, num, n_obs, int(seed), str(tag), block_size,
         todo[start : start + per_task], on_simulator_error, int(retries))
        for start in range(0, len(todo), per_task)
    ]

    def keep(done: list) -> None:
        for k, theta, x, failed, nonfinite in done:
            if blocks_store is not None:
                blocks_store.save(k, theta, x, failed, nonfinite)
            results[k] = (theta, x, failed, nonfinite)

    bar = tqdm(total=len(tasks), desc=f"table {tag}", disable=not progress, leave=False)
    try:
        if executor is None:
            for task in tasks:
                keep(_simulate_task(task))
                bar.update(1)
        else:
            futures = [executor.submit(_simulate_task, task) for task in tasks]
            try:
                for future in as_completed(futures):
                    keep(future.result())
                    bar.update(1)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        bar.close()
    return _assemble(results, num, n_obs, n_data, int(seed), str(tag), block_size,
                     resumed_rows, max_failure_fraction)


def _assemble(results: dict, num: int, n_obs: int, n_data: float, seed: int, tag: str,
              block_size: int, resumed_rows: int, max_failure_fraction: float) -> ReferenceTable:
    """Concatenate the blocks in order, check shapes and the failure fraction."""
    thetas, xs, failed, nonfinite = [], [], 0, 0
    for k in sorted(results):
        theta, x, f, nf = results[k]
        failed, nonfinite = failed + f, nonfinite + nf
        if x is None:
            continue
        if xs and (theta.shape[1:] != thetas[0].shape[1:] or x.shape[1:] != xs[0].shape[1:]):
            raise SimulatorError(
                f"block {k} returned theta {tuple(theta.shape)} and x {tuple(x.shape)}, but "
                f"earlier blocks had theta [*, {thetas[0].shape[1]}] and x "
                f"{('*',) + tuple(xs[0].shape[1:])}")
        thetas.append(theta)
        xs.append(x)
    bad = failed + nonfinite
    if bad > max_failure_fraction * num or not xs:
        raise SimulatorError(
            f"table {tag!r}: {failed} of {num} simulations raised and {nonfinite} returned "
            f"non-finite values, more than max_failure_fraction = {max_failure_fraction}: "
            "fix the simulator or restrict the prior to where it works")
    if bad:
        warnings.warn(
            f"table {tag!r}: dropped {failed} failed and {nonfinite} non-finite simulations of "
            f"{num}; if failures depend on theta, the posterior is computed from the "
            "parameters where the simulator works and is biased towards them", stacklevel=3)
    return ReferenceTable(
        theta=torch.cat(thetas), x=torch.cat(xs), simulations=num * n_obs / n_data, seed=seed,
        tag=tag, block_size=block_size, failed=failed, nonfinite=nonfinite,
        resumed=resumed_rows * n_obs / n_data)


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
