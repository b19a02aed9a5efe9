r"""Reproducible parallel maps through a ``concurrent.futures.Executor``.

Every unit of random work (a block of simulations, one bootstrap replicate, ...)
gets its own seed derived from the run seed and the unit's index,
:math:`\text{seed}_k = H(\text{seed}, \text{tag}, k)`, so results do not depend on the
executor, the number of workers or how units are grouped into tasks.

Executors: ``None`` runs in-process (vectorised code, no pickling); a
``ProcessPoolExecutor`` or a Dask ``Client.get_executor()`` runs tasks elsewhere,
which needs picklable callables (module-level functions).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

import torch
from tqdm.auto import tqdm

__all__ = ["derive_seed", "make_generator", "map_units", "check_picklable"]

T = TypeVar("T")


def derive_seed(seed: int, *keys: Any) -> int:
    """A 63-bit seed from ``seed`` and any keys (stable across processes and runs)."""
    text = repr((int(seed),) + tuple(keys)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def make_generator(seed: int, *keys: Any, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` seeded with :func:`derive_seed` (``seed``, ``keys``)."""
    g = torch.Generator(device=device)
    g.manual_seed(derive_seed(seed, *keys))
    return g


def check_picklable(obj: Any, what: str) -> None:
    """Raise a clear error if ``obj`` cannot be sent to another process."""
    try:
        pickle.dumps(obj)
    except Exception as err:  # noqa: BLE001 - any pickling failure means the same thing
        raise TypeError(
            f"the {what} cannot be sent to worker processes ({type(err).__name__}: {err}). "
            "Define it at module level in an importable file (not a lambda, closure or "
            "notebook cell), or use executor=None."
        ) from None


def map_units(
    function: Callable[[Any], T],
    units: Sequence[Any] | Iterable[Any],
    *,
    executor: Executor | None = None,
    progress: bool = False,
    desc: str = "",
    total: int | None = None,
) -> list[T]:
    """``[function(u) for u in units]``, in order, optionally through ``executor``.

    Arguments:
        function: applied to each unit; must be picklable when ``executor`` is a pool.
        units: the work items (each should carry its own seed).
        executor: ``None`` (in-process) or any ``concurrent.futures.Executor``.
        progress: show a tqdm bar.
    """
    units = list(units)
    total = total if total is not None else len(units)
    bar = tqdm(total=total, desc=desc, disable=not progress, leave=False)
    try:
        if executor is None:
            out = []
            for unit in units:
                out.append(function(unit))
                bar.update(1)
            return out
        futures = [executor.submit(function, unit) for unit in units]
        out = []
        for fut in futures:
            out.append(fut.result())
            bar.update(1)
        return out
    finally:
        bar.close()
