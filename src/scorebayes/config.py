"""Reading run configurations (TOML) at the edge of the library.

Everything here validates user input and turns it into Python objects: callables
named ``"file.py:function"`` / ``"package.module:function"``, data files (CSV with an
optional header, ``.npy``), priors and option tables. Errors are :class:`ConfigError`
with one clear line; nothing below the CLI reads configuration.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ConfigError",
    "load_config",
    "load_callable",
    "load_array",
    "check_keys",
    "check_options",
]


class ConfigError(ValueError):
    """Bad user input: reported as one line on stderr by the CLI."""


TOP_LEVEL_KEYS = {"method", "seed", "model", "prior", "data", "options", "name"}


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML config and check its top-level keys."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        with open(path, "rb") as fh:
            config = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None
    check_keys(config, TOP_LEVEL_KEYS, "config")
    if "method" not in config:
        raise ConfigError(f"{path}: missing `method` (e.g. method = \"score-langevin\")")
    return config


def check_keys(table: dict[str, Any], allowed: Iterable[str], where: str) -> None:
    """Raise on keys of ``table`` not in ``allowed`` (catches typos early)."""
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown key(s) in {where}: {unknown}; allowed: {sorted(allowed)}")


def check_options(options: dict[str, Any], function: Callable, where: str = "[options]",
                  exclude: Iterable[str] = ()) -> None:
    """Raise if ``options`` names an argument that ``function`` does not take."""
    params = inspect.signature(function).parameters
    allowed = {k for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    allowed -= set(exclude)
    check_keys(options, allowed, where)


def load_callable(spec: str, base_dir: str | Path, what: str = "function") -> Callable:
    """Resolve ``"file.py:name"`` (relative to ``base_dir``) or ``"pkg.module:name"``."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"{what} must look like \"file.py:function\" or \"module:function\", got {spec!r}")
    target, _, name = spec.rpartition(":")
    if target.endswith(".py"):
        file = (Path(base_dir) / target).resolve()
        if not file.is_file():
            raise ConfigError(f"{what}: file not found: {file}")
        module_name = f"scorebayes_user_{file.stem}"
        stamp = (str(file), file.stat().st_mtime_ns)
        module = sys.modules.get(module_name)
        # one module object per unchanged file: two names from the same file (simulator and
        # summary, say) must be the objects pickle finds under that module's name
        if getattr(module, "__scorebayes_source__", None) != stamp:
            spec_obj = importlib.util.spec_from_file_location(module_name, file)
            module = importlib.util.module_from_spec(spec_obj)
            module.__scorebayes_source__ = stamp
            sys.modules[module_name] = module  # so functions defined there can be pickled by name
            if str(file.parent) not in sys.path:
                sys.path.insert(0, str(file.parent))
            try:
                spec_obj.loader.exec_module(module)
            except Exception as err:  # noqa: BLE001 - user code may raise anything
                sys.modules.pop(module_name, None)
                raise ConfigError(f"{what}: importing {file.name} failed: {type(err).__name__}: {err}") from None
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise ConfigError(f"{what}: cannot import module {target!r}: {err}") from None
    obj = getattr(module, name, None)
    if obj is None:
        raise ConfigError(f"{what}: {target} has no attribute {name!r}")
    return obj


def load_array(path: str | Path, base_dir: str | Path, *, what: str = "data") -> tuple[np.ndarray, list[str] | None]:
    """Load ``[n, p]`` data from CSV (header optional) or ``.npy``.

    Returns:
        (array float64 [n, p], column names or None).
    """
    file = (Path(base_dir) / path).resolve()
    if not file.is_file():
        raise ConfigError(f"{what} file not found: {file}")
    header = None
    if file.suffix == ".npy":
        try:
            arr = np.load(file, allow_pickle=False)
        except ValueError as err:
            raise ConfigError(f"{what}: cannot read {file.name}: {err}") from None
    else:
        with open(file) as fh:
            first = fh.readline()
        cells = [c.strip() for c in first.split(",")]
        has_header = any(not _is_number(c) for c in cells if c)
        try:
            arr = np.loadtxt(file, delimiter=",", skiprows=1 if has_header else 0, ndmin=2)
        except ValueError as err:
            raise ConfigError(f"{what}: {file.name} is not a numeric CSV: {err}") from None
        if has_header:
            header = cells
    arr = np.asarray(arr)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ConfigError(f"{what}: expected a [n, p] table, got shape {arr.shape}")
    if arr.dtype.kind not in "fiub":
        raise ConfigError(f"{what}: expected numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ConfigError(f"{what}: non-finite value at row {bad[0]}, column {bad[1]} of {file.name}")
    return arr, header


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
