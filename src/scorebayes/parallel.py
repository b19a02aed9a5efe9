r"""Reproducible parallel maps through a ``concurrent.futures.Executor``.

Every unit of random work (a block of simulations, one bootstrap replicate, ...)
gets its own seed derived from the run seed and the unit's index,
$\text{seed}_k = H(\text{seed}, \text{tag}, k)$, so results do not depend on the
executor, the number of workers or how units are grouped into tasks.

Executors: ``None`` runs in-process (vectorised code, no pickling); a
``ProcessPoolExecutor`` or a Dask ``Client.get_executor()`` runs tasks elsewhere,
which needs picklable callables (module-level functions).
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, TypeVar

import torch
from tqdm.auto import tqdm

__all__ = ["torch_threads", "derive_seed", "make_generator", "map_units", "check_picklable", "make_executor",
           "tls_security", "EXECUTORS", "TLS_KEYS"]

EXECUTORS = ("serial", "processes", "dask")
TLS_KEYS = ("ca_file", "cert", "key")

T = TypeVar("T")


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the block with ``threads`` torch threads, restoring the previous number afterwards
    (``None``: torch's current setting, by default the cores this process may use, or
    ``OMP_NUM_THREADS``). Yields the number used.

    With another job on the same cores, OpenMP threads that spin while they wait made small
    networks' training 10x slower; ``import scorebayes`` therefore sets ``OMP_WAIT_POLICY=PASSIVE``
    unless it is set (effective when torch is imported after scorebayes, as by the command line).
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    before = torch.get_num_threads()
    if threads is not None and threads != before:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def derive_seed(seed: int, *keys: Any) -> int:
    """A 63-bit seed from ``seed`` and any keys (stable across processes and runs)."""
    text = repr((int(seed),) + tuple(keys)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def make_generator(seed: int, *keys: Any, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` seeded with [`derive_seed()`][scorebayes.parallel.derive_seed] (``seed``, ``keys``)."""
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
    on_result: Callable[[int, T], None] | None = None,
) -> list[T]:
    """``[function(u) for u in units]``, in order, optionally through ``executor``.

    Arguments:
        function: applied to each unit; must be picklable when ``executor`` is a pool.
        units: the work items (each should carry its own seed).
        executor: ``None`` (in-process) or any ``concurrent.futures.Executor``.
        progress: show a tqdm bar.
        on_result: called as ``on_result(i, result)`` for each unit as its result is
            collected, in unit order, e.g. to save it: a failing unit then loses none of the
            results collected before it (results of later units that already finished
            elsewhere are not collected).
    """
    units = list(units)
    total = total if total is not None else len(units)
    bar = tqdm(total=total, desc=desc, disable=not progress, leave=False)
    try:
        if executor is None:
            results = (function(unit) for unit in units)  # one at a time, in order
        else:
            futures = [executor.submit(function, unit) for unit in units]
            results = (fut.result() for fut in futures)
        out = []
        for result in results:
            out.append(result)
            if on_result is not None:
                on_result(len(out) - 1, result)
            bar.update(1)
        return out
    finally:
        bar.close()


def _user_modules() -> dict[str, str]:
    """Modules loaded from ``"file.py:name"`` config entries (``config.load_callable``)."""
    import sys

    return {name: module.__file__ for name, module in list(sys.modules.items())
            if name.startswith("scorebayes_user_") and getattr(module, "__file__", None)}


def _worker_init(modules: dict[str, str]) -> None:
    """Pool initializer: one torch thread, and the user's simulator files importable by
    the names the parent gave them (a spawned worker does not inherit them)."""
    import importlib.util
    import sys

    torch.set_num_threads(1)
    for name, file in modules.items():
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def tls_security(ca_file: str, cert: str, key: str, require_encryption: bool = True) -> Any:
    """A ``distributed.Security`` for a Dask scheduler reached over ``tls://``.

    Arguments:
        ca_file: certificate authority (PEM) that signed the scheduler's and workers'
            certificates; cert, key: this client's certificate and private key (PEM).
        require_encryption: refuse unencrypted connections (default).

    Raises:
        FileNotFoundError: a file is missing (named in the message).
    """
    from pathlib import Path

    for name, value in (("ca_file", ca_file), ("cert", cert), ("key", key)):
        if not Path(value).is_file():
            raise FileNotFoundError(f"dask TLS {name}: file {value} not found")
    from distributed import Security

    return Security(tls_ca_file=str(ca_file), tls_client_cert=str(cert),
                    tls_client_key=str(key), require_encryption=bool(require_encryption))


@contextlib.contextmanager
def make_executor(kind: str = "serial", *, workers: int | None = None,
                  dask_address: str | None = None, security: Any = None,
                  ) -> Iterator[Executor | None]:
    """A context manager yielding the executor for ``kind`` (closed on exit).

    Arguments:
        kind: ``"serial"`` (yields ``None``: in-process), ``"processes"`` (a
            ``ProcessPoolExecutor`` with the ``"spawn"`` start method, since forking a
            process that has started torch threads can hang) or ``"dask"``.
        workers: pool size (processes; a local Dask cluster's workers). Default 2.
        dask_address: ``"tcp://host:port"`` (or ``tls://``) of an existing Dask scheduler;
            without it a ``LocalCluster`` bound to 127.0.0.1 is started and shut down on exit.
        security: a ``distributed.Security`` (TLS) for a remote scheduler, passed through
            ([`tls_security()`][scorebayes.parallel.tls_security] builds one from file names; ``[options] dask_tls``).

    Dask re-runs the tasks of a worker that dies, so a lost worker does not fail the run;
    results do not depend on the executor (every block has its own seed).
    """
    if kind not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {kind!r}")
    if workers is not None and (isinstance(workers, bool) or int(workers) != workers
                                or workers < 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if dask_address is not None and kind != "dask":
        raise ValueError("dask_address is only used with executor = \"dask\"")
    if kind == "serial":
        yield None
        return
    if kind == "processes":
        pool = ProcessPoolExecutor(max_workers=workers or 2,
                                   mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_init, initargs=(_user_modules(),))
        try:
            yield pool
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - dask is a dependency here
        raise ImportError("executor = \"dask\" needs dask[distributed]: "
                          "pip install 'dask[distributed]'") from None
    with contextlib.ExitStack() as stack:
        if dask_address is None:
            cluster = stack.enter_context(LocalCluster(
                n_workers=workers or 2, threads_per_worker=1, processes=True,
                host="127.0.0.1", dashboard_address=None, silence_logs=40))
            client = stack.enter_context(Client(cluster, security=security))
        else:
            client = stack.enter_context(Client(dask_address, security=security))
        modules = _user_modules()
        if modules:  # also runs on workers started later (e.g. replacing a dead one)
            client.register_plugin(__getattr__("_UserModules")(modules), name="scorebayes-user-modules")
        yield client.get_executor(pure=False)


def __getattr__(name: str) -> Any:
    # the Dask plugin class is built on first use, so that importing this module does not
    # import ``distributed`` (workers unpickling it find it here the same way)
    if name != "_UserModules":
        raise AttributeError(name)
    from distributed.diagnostics.plugin import WorkerPlugin

    class _UserModules(WorkerPlugin):
        """Dask worker plugin: import the user's simulator files on every worker."""

        def __init__(self, modules: dict[str, str]):
            self.modules = modules

        def setup(self, worker: Any = None) -> None:
            _worker_init(self.modules)

    _UserModules.__module__, _UserModules.__qualname__ = __name__, "_UserModules"
    globals()["_UserModules"] = _UserModules
    return _UserModules
