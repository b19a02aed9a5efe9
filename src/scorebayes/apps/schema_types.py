"""The value types of the configuration schema and the check of one table against its keys.

A `Key` is a name, a value type (`Int`, `Float`, `Str`, ...), a
default and a one-line meaning; `check_table()` checks a TOML table against a dict of keys
and raises `SchemaError` (a `ConfigError`) at the first bad
key, with one line naming the table, the key, the value given, what is allowed and, for a
misspelled key, the closest valid name. Each type's ``name`` is its entry in the CLI reference.
"""

from __future__ import annotations

import difflib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ConfigError

__all__ = ["SchemaError", "bounds_text", "show", "Key", "Int", "Float", "Str", "Bool", "ListOf", "Table", "Either",
           "Function", "DataFile", "Domain", "check_table", "suggest"]

MISSING = object()


def show(value: Any, limit: int = 60) -> str:
    """``value`` as it would be written in TOML, cut to about ``limit`` characters."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = '"' + value.replace('"', '\\"') + '"'
    elif isinstance(value, float) and not math.isfinite(value):
        text = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(show(v, limit) for v in value) + "]"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k} = {show(v, limit)}" for k, v in value.items()) + "}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class SchemaError(ConfigError):
    """One bad entry of a config, as one line: ``WHERE KEY = VALUE: PROBLEM``.

    Arguments:
        where: the table (``"[options]"``, ``"[[prior]] 2 (normal)"``; ``""`` at the top level).
        key: the key (``None``: the table itself).
        value: the value given (omitted for a missing key).
        problem: what is allowed, or what is wrong.
    """

    def __init__(self, where: str, key: str | None, problem: str, value: Any = MISSING):
        self.where, self.key, self.problem, self.value = where, key, problem, value
        place = " ".join(part for part in (where, key) if part)
        given = "" if value is MISSING else f" = {show(value)}"
        super().__init__(f"{place}{given}: {problem}")


def suggest(name: str, allowed: list[str]) -> str:
    """``"did you mean X?"`` for the closest of ``allowed``, else ``"allowed: a, b, ..."``."""
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}?"
    return f"allowed: {', '.join(sorted(allowed))}" if allowed else "this table takes no keys"


class Type(ABC):
    """A value type: ``name`` for the reference, ``problem(value, base_dir)`` -> what is allowed
    (a string) when ``value`` does not fit, else ``None``."""

    name = "value"

    @abstractmethod
    def problem(self, value: Any, base_dir: Path | None) -> str | None:
        """What is allowed, when ``value`` does not fit; ``None`` when it does."""


def bounds_text(low: Any, high: Any, low_open: bool, high_open: bool) -> str:
    """`` in [a, b)``, `` > a``, `` <= b`` ... (with a leading space), or ``""`` for no bound."""
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high:g}"
    return ""


@dataclass(frozen=True)
class Int(Type):
    """An integer (``true``/``false`` refused) in ``[low, high]``."""

    low: int | None = None
    high: int | None = None

    @property
    def name(self) -> str:
        return "int" + bounds_text(self.low, self.high, False, False)

    def problem(self, value, base_dir=None):
        bad = isinstance(value, bool) or not isinstance(value, int)
        if bad or (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return f"must be an integer{bounds_text(self.low, self.high, False, False)}"
        return None


@dataclass(frozen=True)
class Float(Type):
    """A number (integers accepted) within the bounds; ``inf`` only with ``allow_inf``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    allow_inf: bool = False

    @property
    def name(self) -> str:
        return "float" + bounds_text(self.low, self.high, self.low_open, self.high_open) + \
            (" (inf allowed)" if self.allow_inf else "")

    def problem(self, value, base_dir=None):
        allowed = f"must be a number{bounds_text(self.low, self.high, self.low_open, self.high_open)}"
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            return allowed
        if math.isinf(value) and not (self.allow_inf and value > 0):
            return allowed + ("" if self.allow_inf else " (finite)")
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return allowed
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            return allowed
        return None


@dataclass(frozen=True)
class Str(Type):
    """A string, one of ``choices`` when given."""

    choices: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return " | ".join(f'"{c}"' for c in self.choices) if self.choices else "string"

    def problem(self, value, base_dir=None):
        if not isinstance(value, str):
            return f"must be one of {', '.join(map(show, self.choices))}" if self.choices else "must be a string"
        if self.choices and value not in self.choices:
            close = difflib.get_close_matches(value, list(self.choices), n=1, cutoff=0.6)
            hint = f"; did you mean {show(close[0])}?" if close else ""
            return f"must be one of {', '.join(map(show, self.choices))}{hint}"
        return None


@dataclass(frozen=True)
class Bool(Type):
    name = "bool"

    def problem(self, value, base_dir=None):
        return None if isinstance(value, bool) else "must be true or false"


@dataclass(frozen=True)
class ListOf(Type):
    """A list of ``item`` values, of ``length`` items when given (else at least ``min_length``)."""

    item: Type
    length: int | None = None
    min_length: int = 0

    @property
    def name(self) -> str:
        size = f"{self.length} × " if self.length else ""
        return f"list of {size}{self.item.name}"

    def problem(self, value, base_dir=None):
        if self.length:
            allowed = f"must be a list of {self.length} values ({self.item.name})"
        else:
            allowed = f"must be a {'non-empty ' if self.min_length else ''}list of {self.item.name}"
        if not isinstance(value, list) or (self.length is not None and len(value) != self.length) \
                or len(value) < self.min_length:
            return allowed
        for item in value:
            if self.item.problem(item, base_dir) is not None:
                return allowed
        return None


@dataclass(frozen=True)
class Table(Type):
    """A table; with ``keys``, each of its keys is checked (`check_table()`)."""

    keys: dict[str, Key] | None = None
    what: str = "table"

    @property
    def name(self) -> str:
        return self.what

    def problem(self, value, base_dir=None):
        return None if isinstance(value, dict) else f"must be a {self.what}"


@dataclass(frozen=True)
class Either(Type):
    """The first of ``types`` that fits."""

    types: tuple[Type, ...]

    @property
    def name(self) -> str:
        return " | ".join(t.name for t in self.types)

    def problem(self, value, base_dir=None):
        found = [t.problem(value, base_dir) for t in self.types]
        if any(p is None for p in found):
            return None
        return "must be " + " or ".join(p.removeprefix("must be ") for p in found)

    def matching(self, value: Any, base_dir: Path | None) -> Type | None:
        return next((t for t in self.types if t.problem(value, base_dir) is None), None)


@dataclass(frozen=True)
class Function(Type):
    """``"file.py:function"`` (the file must exist, relative to the config) or ``"module:function"``;
    ``builtin`` names extra prefixes allowed (``"builtin:"``)."""

    builtin: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return '"file.py:function" | "module:function"' + (' | "builtin:NAME"' if self.builtin else "")

    def problem(self, value, base_dir=None):
        allowed = 'must be "file.py:function" or "module:function"'
        if self.builtin:
            allowed += f" or \"builtin:NAME\" (NAME one of {', '.join(self.builtin)})"
        if not isinstance(value, str) or ":" not in value or value.endswith(":"):
            return allowed
        target, _, _ = value.rpartition(":")
        if target == "builtin":
            name = value.partition(":")[2].strip().lower()
            if not self.builtin:
                return allowed
            if name not in self.builtin:
                close = difflib.get_close_matches(name, list(self.builtin), n=1)
                return f"unknown built-in model{'; did you mean builtin:' + close[0] + '?' if close else ''} " \
                       f"(one of {', '.join(self.builtin)})"
            return None
        if target.endswith(".py") and base_dir is not None and not (Path(base_dir) / target).is_file():
            return f"file not found: {(Path(base_dir) / target).resolve()}"
        return None


@dataclass(frozen=True)
class DataFile(Type):
    """A CSV or ``.npy`` file, relative to the config; it must exist."""

    name = '"file.csv" | "file.npy"'

    def problem(self, value, base_dir=None):
        if not isinstance(value, str) or not value:
            return "must be a file name (CSV or .npy)"
        if base_dir is not None and not (Path(base_dir) / value).is_file():
            return f"file not found: {(Path(base_dir) / value).resolve()}"
        return None


@dataclass(frozen=True)
class Domain(Type):
    """A list of ``[low, high]`` integer bounds, one per data column (``"inf"``, ``"-inf"`` allowed)."""

    name = 'list of [low, high] (int, "-inf", "inf")'

    def problem(self, value, base_dir=None):
        def bound(b):
            return (isinstance(b, int | float) and not isinstance(b, bool)) or b in ("inf", "-inf")
        if not isinstance(value, list) or not value or not all(
                isinstance(pair, list) and len(pair) == 2 and all(bound(b) for b in pair) for pair in value):
            return 'must be a list of [low, high] pairs of numbers or "inf"/"-inf", e.g. [[0, "inf"]]'
        return None


@dataclass(frozen=True)
class Key:
    """One key of a table: its type, default (``required``: none), one-line meaning and, where
    the default is computed, its ``default_text``."""

    name: str
    type: Type
    default: Any = None
    meaning: str = ""
    required: bool = False
    default_text: str | None = None
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)

    def default_shown(self) -> str:
        if self.required:
            return "required"
        if self.default_text is not None:
            return self.default_text
        return "none" if self.default is None else show(self.default)


def check_table(table: Any, keys: dict[str, Key], where: str, base_dir: Path | None,
                refused: dict[str, str] | None = None) -> None:
    """Check ``table`` against ``keys`` (nested `Table` keys too).

    ``refused``: keys that exist elsewhere but not here, with the reason. Raises
    `SchemaError` at the first unknown, missing or ill-typed key."""
    if not isinstance(table, dict):
        raise SchemaError("", where.strip("[]") or "config", "must be a table", table)
    for name, value in table.items():
        if refused and name in refused:
            raise SchemaError(where, name, refused[name], value)
        if name not in keys:
            raise SchemaError(where, name, f"unknown key; {suggest(name, list(keys))}", value)
        key = keys[name]
        problem = key.type.problem(value, base_dir)
        if problem is None and key.check is not None:
            problem = key.check(value)
        if problem is not None:
            raise SchemaError(where, name, problem, value)
        nested = key.type.matching(value, base_dir) if isinstance(key.type, Either) else key.type
        if isinstance(nested, Table) and nested.keys is not None:
            check_table(value, nested.keys, f"{where} {name}".strip(), base_dir)
    for name, key in keys.items():
        if key.required and name not in table:
            raise SchemaError(where, name, f"missing (required): {key.meaning}")
