"""Reading run configurations (TOML) at the edge of the library.

Everything here validates user input and turns it into Python objects: callables
named ``"file.py:function"`` / ``"package.module:function"``, data files (CSV with an
optional header, ``.npy``), priors and option tables. Errors are `ConfigError`
with one clear line; nothing below the CLI reads configuration. A function of the user's
that raises is reported as `UserCodeError`, naming the file and line in the user's
code (`user_frame()`: the files `load_callable()` loaded are the user's).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import re
import sys
import tomllib
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ConfigError",
    "UserCodeError",
    "user_frame",
    "load_config",
    "load_callable",
    "load_array",
    "check_keys",
    "check_options",
]


class ConfigError(ValueError):
    """Bad user input: reported as one line on stderr by the CLI."""


#: files of the user's code, as loaded by :func:`load_callable` (resolved paths)
USER_FILES: set[str] = set()
_REMOTE_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def user_frame(err: BaseException, files: Iterable[str] | None = None) -> tuple[str, int, str] | None:
    """``(file, line, function)`` of the innermost traceback frame of ``err`` in one of ``files``
    (default `USER_FILES`), looking through its causes and a worker process's traceback
    text; ``None`` if the user's code is not on the traceback."""
    files = set(USER_FILES if files is None else files)
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        found = None
        if isinstance(err, SyntaxError) and err.filename and str(Path(err.filename).resolve()) in files:
            found = (str(Path(err.filename).resolve()), int(err.lineno or 0), "<module>")
        for frame, line in traceback.walk_tb(err.__traceback__):
            if str(Path(frame.f_code.co_filename).resolve()) in files:
                found = (frame.f_code.co_filename, line, frame.f_code.co_name)
        if found is None and type(err).__name__ == "_RemoteTraceback":  # concurrent.futures worker
            remote = [m for m in _REMOTE_FRAME.findall(str(err)) if str(Path(m[0]).resolve()) in files]
            found = (remote[-1][0], int(remote[-1][1]), remote[-1][2]) if remote else None
        if found is not None:
            return found
        err = err.__cause__ or err.__context__
    return None


def one_line(err: BaseException, limit: int = 300) -> str:
    """``err``'s message on one line (whitespace collapsed, cut to ``limit`` characters)."""
    text = " ".join(str(err).split()) or "(no message)"
    return text if len(text) <= limit else text[:limit - 3] + "..."


class UserCodeError(ConfigError):
    """A function of the user's (simulator, model, summary, prior) raised ``original``.

    The message names ``what`` was running, the exception and the innermost frame of the user's
    code (``location = (file, line, function)``, or ``None`` if not found)."""

    def __init__(self, what: str, original: BaseException):
        self.original, self.location = original, user_frame(original)
        at = f" at {self.location[0]}:{self.location[1]} in {self.location[2]}" if self.location else ""
        super().__init__(f"{what} raised {type(original).__name__}: {one_line(original)}{at}")


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML config (its keys are checked by `scorebayes.apps.schema.validate()`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        with open(path, "rb") as fh:
            config = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {one_line(err)}") from None
    return config


def check_keys(table: dict[str, Any], allowed: Iterable[str], where: str) -> None:
    """Raise on the first key of ``table`` not in ``allowed``, with the closest allowed name."""
    allowed = sorted(allowed)
    for key in sorted(set(table) - set(allowed)):
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"allowed: {', '.join(allowed)}"
        raise ConfigError(f"{where} {key}: unknown key; {hint}")


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
            USER_FILES.add(str(file))
            try:
                spec_obj.loader.exec_module(module)
            except Exception as err:  # noqa: BLE001 - user code may raise anything
                sys.modules.pop(module_name, None)
                raise UserCodeError(f"{what}: importing {file.name}", err) from err
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise ConfigError(f"{what}: cannot import module {target!r}: {one_line(err)}") from None
        if getattr(module, "__file__", None) and not module.__name__.startswith("scorebayes"):
            USER_FILES.add(str(Path(module.__file__).resolve()))
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
