"""Turning a run config's ``[model]``, ``[[prior]]`` and ``[data]`` into library objects.

Shared by the simulation-based CLI methods (baselines, score-langevin). Every function
validates its part of the config and raises `ConfigError` with one
clear line; expensive work happens only after all of them have returned.

Config shapes:

```toml
[model]
simulator = "sims.py:simulate"   # batched simulate(theta [B, d], n, generator) -> [B, n, p]
# or "builtin:mg1" (scorebayes.models.get_model), with optional options = {...}
parameters = ["a", "b"]          # optional names (d of them)

[[prior]]                        # one table per parameter, or prior = "sims.py:prior"
dist = "uniform"
low = 0.0
high = 1.0

[data]
observed = "x.csv"               # or .npy; or true_parameters = [...] with n = 100
```
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.distributions import Distribution

from ..config import ConfigError, UserCodeError, check_keys, load_array, load_callable
from ..parallel import EXECUTORS, TLS_KEYS, make_executor, make_generator, tls_security
from ..priors import PriorError, prior_from_spec
from ..priors import sample as sample_prior
from ..simulators import Simulator, SimulatorError, as_simulator

__all__ = [
    "MODEL_KEYS",
    "DATA_KEYS",
    "builtin_model",
    "load_simulator",
    "load_prior",
    "load_observed",
    "parameter_names",
    "EXECUTION_KEYS",
    "EXECUTOR_KEYS",
    "TABLE_KEYS",
    "Execution",
    "pop_execution",
    "using_store",
    "current_store",
]

MODEL_KEYS = {"simulator", "parameters", "options"}
DATA_KEYS = {"observed", "true_parameters", "n"}
_CACHE: dict[int, tuple[dict, Any]] = {}


def _model_table(config: dict) -> dict:
    model = config.get("model")
    if not isinstance(model, dict):
        raise ConfigError("missing [model] table with simulator = \"file.py:function\" "
                          "or \"builtin:NAME\"")
    return model


def builtin_model(config: dict) -> Any:
    """The built-in `Model` named by ``simulator = "builtin:NAME"``,
    or ``None`` for a user simulator (built once per config dict)."""
    model = _model_table(config)
    spec = model.get("simulator")
    if not (isinstance(spec, str) and spec.startswith("builtin:")):
        if "options" in model:
            raise ConfigError("[model] options are only for built-in models (builtin:NAME)")
        return None
    cached = _CACHE.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    from ..models import get_model

    options = model.get("options", {})
    if not isinstance(options, dict):
        raise ConfigError("[model] options must be a table of keyword arguments")
    try:
        instance = get_model(spec, **options)
    except TypeError as err:
        raise ConfigError(f"[model] options for {spec}: {err}") from None
    except ValueError as err:
        raise ConfigError(str(err)) from None
    _CACHE.clear()  # keep only the latest config's model
    _CACHE[id(config)] = (config, instance)
    return instance


def load_simulator(config: dict, base_dir: str | Path,
                   extra_keys: set[str] = frozenset()) -> Simulator:
    """The ``[model] simulator`` as a [`Simulator`][scorebayes.simulators.Simulator].

    ``extra_keys``: further ``[model]`` keys a method accepts (checked for typos here).
    """
    model = _model_table(config)
    check_keys(model, MODEL_KEYS | set(extra_keys), "[model]")
    if "simulator" not in model:
        raise ConfigError("[model] needs simulator = \"file.py:function\" or \"builtin:NAME\"")
    found = builtin_model(config)
    if found is not None:
        return found.simulator
    function = load_callable(model["simulator"], base_dir, what="[model] simulator")
    try:
        return as_simulator(function)
    except TypeError as err:
        raise ConfigError(f"[model] simulator: {err}") from None


def load_prior(config: dict, base_dir: str | Path, num_params: int | None = None) -> Distribution:
    """The prior from ``[[prior]]`` tables, ``prior = "file.py:fn"`` or a built-in model.

    ``prior = "file.py:name"`` may name a ``Distribution`` or a function of no arguments
    returning one. Checks that it has ``num_params`` coordinates when given.
    """
    spec = config.get("prior")
    if spec is None:
        found = builtin_model(config)
        if found is None:
            raise ConfigError("missing prior: add one [[prior]] table per parameter or "
                              "prior = \"file.py:function\"")
        prior = found.prior
    elif isinstance(spec, list):
        if not all(isinstance(s, dict) for s in spec):
            raise ConfigError("[[prior]] entries must be tables like {dist = \"normal\", ...}")
        try:
            prior = prior_from_spec(spec)
        except PriorError as err:
            raise ConfigError(f"[[prior]]: {err}") from None
    elif isinstance(spec, str):
        obj = load_callable(spec, base_dir, what="prior")
        if not isinstance(obj, Distribution):
            try:
                obj = obj()
            except Exception as err:  # noqa: BLE001 - user code
                raise UserCodeError(f"prior {spec}", err) from err
        if not isinstance(obj, Distribution):
            raise ConfigError(f"prior {spec} must be (or return) a torch Distribution, "
                              f"got {type(obj).__name__}")
        prior = obj
    else:
        raise ConfigError("prior must be [[prior]] tables or a string \"file.py:function\"")
    if len(prior.event_shape) != 1:
        raise ConfigError(f"the prior must have event shape [d], got {tuple(prior.event_shape)}")
    d = int(prior.event_shape[0])
    if num_params is not None and d != num_params:
        raise ConfigError(f"the prior has {d} parameter(s) but {num_params} are named in "
                          "[model] parameters")
    return prior


def parameter_names(config: dict, d: int) -> list[str]:
    """Names from ``[model] parameters``, the ``name`` keys of ``[[prior]]``, a built-in model,
    or ``theta0 .. theta{d-1}``."""
    names = _model_table(config).get("parameters")
    if names is None and isinstance(config.get("prior"), list):
        given = [p.get("name") for p in config["prior"] if isinstance(p, dict)]
        names = given if all(isinstance(g, str) for g in given) and given else None
    if names is None:
        found = builtin_model(config)
        names = found.parameter_names if found is not None else [f"theta{k}" for k in range(d)]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError("[model] parameters must be a list of names")
    if len(names) != d:
        raise ConfigError(f"{len(names)} parameter name(s) for a prior with {d} parameter(s)")
    if len(set(names)) != len(names):
        raise ConfigError(f"duplicate parameter names in {names}")
    return list(names)


def _simulate(simulator: Simulator, theta: torch.Tensor, n: int, seed: int, key: str, what: str, *,
              on_error: str = "raise", retries: int = 1) -> torch.Tensor:
    """``x [B, n, p]`` at ``theta [B, d]`` with ``make_generator(seed, key)``, checked. Unless
    ``on_error`` is ``"raise"``, a call that raises or returns non-finite values is tried again
    (``retries`` tries in all, try ``t`` with ``make_generator(seed, key, t)``)."""
    tries = 1 if on_error == "raise" else max(int(retries), 1)
    for t in range(tries):
        try:
            x = simulator(theta, n, make_generator(seed, key, *([t] if t else [])))
            break
        except SimulatorError as err:
            if t + 1 == tries:
                raise ConfigError(f"{what}: {err}") from None
        except Exception as err:  # noqa: BLE001 - user simulator code
            if t + 1 == tries:
                raise UserCodeError(f"{what}: the simulator", err) from err
    if x.dim() != 3 or x.shape[:2] != (theta.shape[0], n):
        raise ConfigError(f"{what}: the simulator returned shape {tuple(x.shape)}, expected "
                          f"[B={theta.shape[0]}, n={n}, p]")
    return x


def load_observed(config: dict, base_dir: str | Path, simulator: Simulator, prior: Distribution,
                  seed: int, execution: Execution | None = None) -> tuple[torch.Tensor, list[float] | None]:
    """The observed data ``x_obs [n, p]`` (float64) and the true parameters if known.

    ``[data] observed`` reads a file (``true_parameters`` may accompany it, for plots
    only); ``true_parameters`` with ``n`` simulates the data with
    ``make_generator(seed, "observed")``; a built-in model without ``[data]`` uses its own
    truth and ``n``. A pilot simulation at two prior draws checks the simulator's output
    shape against the data. With ``execution``'s ``on_simulator_error`` other than ``"raise"``,
    both calls are tried again when the simulator raises (``retries`` tries).
    """
    faults = ({"on_error": execution.on_simulator_error, "retries": execution.retries}
              if execution is not None else {})
    data = config.get("data", {})
    if not isinstance(data, dict):
        raise ConfigError("[data] must be a table")
    check_keys(data, DATA_KEYS, "[data]")
    d = int(prior.event_shape[0])
    truth = data.get("true_parameters")
    if truth is not None:
        if not isinstance(truth, list) or not all(isinstance(t, (int, float)) for t in truth):
            raise ConfigError("[data] true_parameters must be a list of numbers")
        if len(truth) != d:
            raise ConfigError(f"[data] true_parameters has {len(truth)} values for {d} parameters")
        theta = torch.tensor([float(t) for t in truth], dtype=torch.float64)
        if not bool(torch.isfinite(prior.log_prob(theta[None])).all()):
            raise ConfigError(f"[data] true_parameters {truth} lie outside the prior's support")
        truth = [float(t) for t in truth]
    found = builtin_model(config)
    if "observed" in data:
        if "n" in data:
            raise ConfigError("[data] n is only used to simulate data from true_parameters")
        array, _ = load_array(data["observed"], base_dir, what="[data] observed")
        x_obs = torch.from_numpy(array)
    elif truth is not None or found is not None:
        if found is not None and truth is None:
            truth = found.true_parameters.tolist()
        n = data.get("n", found.n_obs if found is not None else None)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"[data] n must be a positive integer (data set size), got {n!r}")
        theta = torch.tensor(truth, dtype=torch.float64)[None]
        x_obs = _simulate(simulator, theta, n, seed, "observed", "simulating the observed data",
                          **faults)[0].to(torch.float64)
    else:
        raise ConfigError("[data] needs observed = \"x.csv\" (or .npy), or true_parameters "
                          "with n to simulate the data")
    if not torch.isfinite(x_obs).all():
        raise ConfigError("the observed data contain non-finite values")
    n, p = x_obs.shape
    pilot_theta = sample_prior(prior, 2, generator=make_generator(seed, "pilot")).to(torch.float64)
    pilot = _simulate(simulator, pilot_theta, n, seed, "pilot", "pilot simulation at two prior draws",
                      **faults)
    if pilot.shape[2] != p:
        raise ConfigError(f"the simulator returns p={pilot.shape[2]} column(s) per observation "
                          f"but the observed data have p={p}")
    return x_obs, truth


# ----------------------------------------------------------------------- execution
EXECUTOR_KEYS = ("executor", "workers", "dask_address", "dask_tls")  # where simulations run
TABLE_KEYS = ("stream_tables", "on_simulator_error", "max_failure_fraction", "retries")
EXECUTION_KEYS = (*EXECUTOR_KEYS, *TABLE_KEYS)
_STORE: list[Any] = [None]


@dataclass(frozen=True)
class Execution:
    """Where simulations run and what happens when they fail (``[options]`` keys
    ``executor``, ``workers``, ``dask_address``, ``dask_tls``, ``on_simulator_error``,
    ``max_failure_fraction``, ``retries``; ``stream_tables`` is applied to the run
    directory by `pop_execution()`)."""

    kind: str = "serial"
    workers: int | None = None
    dask_address: str | None = None
    on_simulator_error: str = "skip"
    max_failure_fraction: float = 0.1
    retries: int = 3
    dask_tls: dict | None = field(default=None, compare=False)

    def executor(self) -> contextlib.AbstractContextManager:
        """Context manager yielding the ``concurrent.futures.Executor`` (``None``: serial)."""
        security = tls_security(**self.dask_tls) if self.dask_tls else None
        return make_executor(self.kind, workers=self.workers, dask_address=self.dask_address,
                             security=security)

    def table_options(self) -> dict[str, Any]:
        """Keyword arguments of [`scorebayes.tables.simulate_table()`][scorebayes.tables.simulate_table]."""
        return {"on_simulator_error": self.on_simulator_error, "retries": self.retries,
                "max_failure_fraction": self.max_failure_fraction}


def _tls_files(value: Any, base_dir: str | Path | None) -> dict[str, str]:
    """``[options] dask_tls = {ca_file, cert, key[, require_encryption]}`` with the files
    resolved (relative to ``base_dir``) and checked to exist."""
    if not isinstance(value, dict):
        raise ConfigError("[options] dask_tls must be a table {ca_file = \"ca.pem\", "
                          "cert = \"client.pem\", key = \"client-key.pem\"}")
    check_keys(value, set(TLS_KEYS) | {"require_encryption"}, "[options] dask_tls")
    missing = [key for key in TLS_KEYS if key not in value]
    if missing:
        raise ConfigError(f"[options] dask_tls needs {', '.join(missing)} (files of the TLS "
                          "certificate authority, client certificate and client key)")
    out: dict[str, Any] = {}
    for key in TLS_KEYS:
        if not isinstance(value[key], str):
            raise ConfigError(f"[options] dask_tls {key} must be a file name, got {value[key]!r}")
        path = Path(value[key]).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ConfigError(f"[options] dask_tls {key}: file {path} not found")
        out[key] = str(path)
    encryption = value.get("require_encryption", True)
    if not isinstance(encryption, bool):
        raise ConfigError("[options] dask_tls require_encryption must be true or false")
    out["require_encryption"] = encryption
    return out


def pop_execution(options: dict, *, faults: bool = True,
                  base_dir: str | Path | None = None) -> Execution:
    """Remove and validate the execution keys of ``[options]`` (defaults: serial, skip).

    ``faults=False``: only ``executor``, ``workers``, ``dask_address``, ``dask_tls`` (no
    simulator). ``dask_tls`` files are relative to ``base_dir`` (default: the working
    directory). ``stream_tables = true`` makes the current run directory
    (`current_store()`) memory-map its reference tables instead of loading them
    (`scorebayes.table_store`)."""
    from ..tables import FAULT_MODES

    keys = EXECUTION_KEYS if faults else EXECUTOR_KEYS
    found = {key: options.pop(key) for key in keys if key in options}
    kind = found.get("executor", "serial")
    if kind not in EXECUTORS:
        raise ConfigError(f"[options] executor must be one of {list(EXECUTORS)}, got {kind!r}")
    workers = found.get("workers")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ConfigError(f"[options] workers must be a positive integer, got {workers!r}")
    if workers is not None and kind == "serial":
        kind = "processes"  # workers = N alone means a process pool
    address = found.get("dask_address")
    if address is not None:
        if kind != "dask":
            raise ConfigError("[options] dask_address needs executor = \"dask\"")
        if not isinstance(address, str) or "://" not in address:
            raise ConfigError(f"[options] dask_address must look like \"tcp://host:port\", "
                              f"got {address!r}")
    tls = found.get("dask_tls")
    if tls is not None:
        if address is None or not address.startswith("tls://"):
            raise ConfigError("[options] dask_tls is for a remote scheduler: give dask_address = "
                              "\"tls://host:port\" too")
        tls = _tls_files(tls, base_dir)
    stream = found.get("stream_tables", False)
    if not isinstance(stream, bool):
        raise ConfigError(f"[options] stream_tables must be true or false, got {stream!r}")
    if stream:
        if current_store() is None:
            raise ConfigError("[options] stream_tables maps the tables from the run directory: "
                              "run with scorebayes run --out DIR")
        current_store().stream_tables = True
    mode = found.get("on_simulator_error", "skip")
    if mode not in FAULT_MODES:
        raise ConfigError(f"[options] on_simulator_error must be one of {list(FAULT_MODES)}, "
                          f"got {mode!r}")
    fraction = found.get("max_failure_fraction", 0.1)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
            or not 0 <= fraction <= 1:
        raise ConfigError(f"[options] max_failure_fraction must be in [0, 1], got {fraction!r}")
    retries = found.get("retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 1:
        raise ConfigError(f"[options] retries must be a positive integer, got {retries!r}")
    return Execution(kind, workers, address, mode, float(fraction), retries, tls)


@contextlib.contextmanager
def using_store(store: Any) -> Iterator[Any]:
    """Make ``store`` (a [`RunStore`][scorebayes.store.RunStore]) the run directory of the
    methods run inside this block (set by ``scorebayes run --out DIR``)."""
    previous, _STORE[0] = _STORE[0], store
    try:
        yield store
    finally:
        _STORE[0] = previous


def current_store() -> Any:
    """The run directory set by `using_store()`, or ``None``."""
    return _STORE[0]
