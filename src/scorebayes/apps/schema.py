"""The typed configuration schema of ``scorebayes run``: one per method, checked before any work.

`validate()` checks a parsed TOML config, ``method``, ``seed``, ``[model]``, ``[[prior]]``
(or ``prior = "file.py:fn"``), ``[data]`` and ``[options]``, before any file of the user's is
imported and before any simulation, and raises `SchemaError`
(a `ConfigError`) with one line: the table and key, the value given,
what is allowed and, for a misspelled key, the closest valid one. Each ``[[prior]]`` table's
arguments are checked against the torch distribution's ``arg_constraints``.
`cli_reference()` renders every key's type, default and meaning as Markdown.

Why dataclasses with a small validator rather than pydantic: the ``[options]`` keys are derived
from the library's own signatures and settings dataclasses (`schema_options`), TOML has
only a handful of value types, and the messages must follow one exact one-line format
(pydantic's are multi-line and would be reformatted anyway); this keeps the CLI free of a
further dependency. The method modules still check what needs the user's code (shapes of
simulations, the model's values); this schema catches everything that can be seen in the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.distributions import constraints

from ..config import load_array
from ..priors import PRIOR_FAMILIES
from . import METHODS
from .schema_options import NPE_ONLY, OPTIONS, REFUSED
from .schema_rules import RULES
from .schema_types import (
    DataFile,
    Domain,
    Either,
    Float,
    Function,
    Int,
    Key,
    ListOf,
    SchemaError,
    Str,
    Table,
    bounds_text,
    check_table,
    show,
    suggest,
)

__all__ = ["validate", "check_priors", "cli_reference", "SCHEMAS", "SchemaError"]

SIMULATION_METHODS = ("score-langevin", "abc", "abc-pmc", "bsl", "npe")


def _builtin_models() -> tuple[str, ...]:
    from ..models import MODELS

    return tuple(sorted(MODELS))


def _dfd_builtins() -> tuple[str, ...]:
    from .dfd import BUILTINS

    return tuple(f"builtin:{b}" for b in BUILTINS)


def _unique(names: list[str]) -> str | None:
    return None if len(set(names)) == len(names) else "must not repeat a name"


PRIOR_TABLE = {
    "dist": Key("dist", Str(tuple(sorted(PRIOR_FAMILIES))), None, "the distribution (its arguments: "
                "see [[prior]] distributions)", required=True),
    "name": Key("name", Str(), None, "the parameter's name (if [model] parameters is not given)"),
    "ARGUMENT": Key("ARGUMENT", Float(), None, "the distribution's arguments, e.g. loc, scale", required=True),
}
NAMES = Key("parameters", ListOf(Str(), min_length=1), None, "parameter names, in order (length d)",
            default_text="theta0 .. theta{d-1}", check=_unique)
PRIOR_KEY = Key("prior", Either((ListOf(Table(what="table"), min_length=1), Function())), None,
                '[[prior]] tables, one per parameter, or "file.py:function" returning a Distribution')


def _top(method: str) -> dict[str, Key]:
    keys = {"method": Key("method", Str(tuple(METHODS)), None, "the inference method", required=True),
            "seed": Key("seed", Int(0), 0, "seed of every random draw (--seed overrides it)"),
            "name": Key("name", Str(), None, "a label for the run"),
            "model": Key("model", Table(what="table"), None, "the model ([model])"),
            "prior": PRIOR_KEY,
            "data": Key("data", Table(what="table"), None, "the observed data ([data])"),
            "options": Key("options", Table(what="table"), {}, "the method's options ([options])")}
    if method == "score-mh":
        del keys["model"], keys["prior"]
    return keys


def _sections(method: str) -> dict[str, dict[str, Key]]:
    """The tables of ``method``'s schema: ``{"": top level, "[model]": ..., "[data]": ...,
    "[options]": ...}``."""
    observed = Key("observed", DataFile(), None, "CSV (header optional) or .npy, rows = observations [n, p]")
    truth = Key("true_parameters", ListOf(Float(), min_length=1), None,
                "parameters to simulate the observed data at (or, with observed, to draw on the plots)")
    size = Key("n", Int(1), None, "observations to simulate (with true_parameters)",
               default_text="the built-in model's")
    if method == "score-mh":
        data = {"observed": Key("observed", DataFile(), None, "samples of the target [N, d]; the header "
                                "names the columns", required=True)}
        return {"": _top(method), "[data]": data, "[options]": OPTIONS[method]}
    if method == "dfd-bayes":
        model = {
            "model": Key("model", Str(_dfd_builtins()), None, "a built-in model (instead of log_unnormalized)"),
            "log_unnormalized": Key("log_unnormalized", Function(), None,
                                    "logp(theta [B, k], x [n, d] integer) -> [B, n]"),
            "domain": Key("domain", Domain(), None, "[low, high] per data column"),
            "parameters": NAMES,
            "side": Key("side", Int(2), None, "builtin:ising: side of the square lattice"),
            "coding": Key("coding", Str(("pm1", "01")), "pm1", "builtin:ising: spin coding"),
            "edge_count": Key("edge_count", Str(("single", "double")), "single", "builtin:ising: edge counting"),
            "boundary": Key("boundary", Str(("free", "periodic")), "free", "builtin:ising: lattice boundary"),
            "rate1": Key("rate1", Float(0, low_open=True), 5.0, "builtin:poisson-mixture: first rate"),
            "rate2": Key("rate2", Float(0, low_open=True), 60.0, "builtin:poisson-mixture: second rate"),
        }
        data = {"observed": observed,
                "counts": Key("counts", Either((Str(), Int(0))), None,
                              "the column (name or index) holding the counts of a frequency table"),
                "columns": Key("columns", ListOf(Str(), min_length=1), None, "the columns to use (CSV header)"),
                "true_parameters": truth, "n": size}
        return {"": _top(method), "[model]": model, "[data]": data, "[options]": OPTIONS[method]}
    model = {"simulator": Key("simulator", Function(_builtin_models()), None,
                              "batched simulate(theta [B, d], n, generator) -> x [B, n, p]", required=True),
             "parameters": NAMES,
             "options": Key("options", Table(what="table"), None, "keyword arguments of a built-in model")}
    data = {"observed": observed, "true_parameters": truth, "n": size}
    return {"": _top(method), "[model]": model, "[data]": data, "[options]": OPTIONS[method]}


SCHEMAS = {method: _sections(method) for method in METHODS}


# ------------------------------------------------------------------------------------------ priors
def _constraint_text(constraint: constraints.Constraint) -> str:
    """What ``constraint`` allows, e.g. ``"> 0"``, ``"in [0, 1]"``."""
    low, high = getattr(constraint, "lower_bound", None), getattr(constraint, "upper_bound", None)
    kind = type(constraint).__name__
    # (low bound used, high bound used, low open, high open) of torch's interval constraints
    forms = {"_GreaterThan": (True, False, True, False), "_GreaterThanEq": (True, False, False, False),
             "_LessThan": (False, True, False, True), "_Interval": (True, True, False, False),
             "_HalfOpenInterval": (True, True, False, True), "_OpenInterval": (True, True, True, True)}
    if kind in forms:
        use_low, use_high, low_open, high_open = forms[kind]
        return bounds_text(low if use_low else None, high if use_high else None, low_open, high_open).strip()
    return "a finite number" if kind == "_Real" else str(constraint)


def _arg_constraints(cls: type) -> dict[str, constraints.Constraint]:
    """The class's ``arg_constraints`` (``{}`` where they depend on the instance, as Uniform's)."""
    found = cls.arg_constraints
    return found if isinstance(found, dict) else {}


def check_priors(spec: Any) -> int:
    """Check ``[[prior]]`` tables (names, arguments, ``arg_constraints``); returns their number d."""
    if not isinstance(spec, list) or not spec:
        raise SchemaError("", "prior", 'must be [[prior]] tables or "file.py:function"', spec)
    families = sorted(PRIOR_FAMILIES)
    for k, table in enumerate(spec, 1):
        label = f"[[prior]] {k}"
        if not isinstance(table, dict):
            raise SchemaError("", label, 'must be a table like {dist = "normal", loc = 0.0, scale = 1.0}', table)
        if "dist" not in table:
            raise SchemaError(label, "dist", f"missing (required): one of {', '.join(families)}")
        family = table["dist"].lower() if isinstance(table["dist"], str) else table["dist"]
        if family not in PRIOR_FAMILIES:
            hint = suggest(str(family), families)
            raise SchemaError(label, "dist", f"unknown distribution; {hint}" +
                              ("" if hint.startswith("allowed") else f" (one of {', '.join(families)})"),
                              table["dist"])
        cls, names = PRIOR_FAMILIES[family]
        where, takes = f"{label} ({family})", f"{family} takes {', '.join(names)}"
        for key, value in table.items():
            if key == "name":
                if not isinstance(value, str):
                    raise SchemaError(where, key, "must be a string (the parameter's name)", value)
            elif key != "dist" and key not in names:
                hint = suggest(key, list(names))
                raise SchemaError(where, key, f"unknown argument; {hint if 'mean' in hint else takes}", value)
        for key in names:
            if key not in table:
                raise SchemaError(where, key, f"missing: {takes}")
            value = table[key]
            problem = Float().problem(value)
            if problem is not None:
                raise SchemaError(where, key, problem, value)
            constraint = _arg_constraints(cls).get(key)
            if constraint is not None and not constraints.is_dependent(constraint) and \
                    not bool(constraint.check(torch.tensor(float(value), dtype=torch.float64))):
                raise SchemaError(where, key, f"must be {_constraint_text(constraint)}", value)
        if family == "uniform" and not table["low"] < table["high"]:
            raise SchemaError(where, "high", f"must be > low = {show(table['low'])}", table["high"])
    return len(spec)


# -------------------------------------------------------------------------------------- validation
def validate(config: dict[str, Any], base_dir: str | Path) -> None:
    """Check ``config`` against its method's schema (see the module docstring).

    Raises:
        SchemaError: at the first bad entry, one line.
    """
    base_dir = Path(base_dir)
    if "method" not in config:
        raise SchemaError("", "method", f"missing (required): one of {', '.join(map(show, METHODS))}")
    method = config["method"]
    problem = Str(tuple(METHODS)).problem(method)
    if problem is not None:
        raise SchemaError("", "method", problem, method)
    sections = SCHEMAS[method]
    top = sections[""]
    check_table(config, top, "", base_dir)
    for where in ("[model]", "[data]"):
        table = config.get(where.strip("[]"))
        if table is not None:
            check_table(table, sections[where], where, base_dir)
    options = config.get("options", {})
    check_table(options, sections["[options]"], "[options]", base_dir, refused=REFUSED.get(method))
    if method == "npe":
        estimator = options.get("estimator", "maf")
        for other, keys in NPE_ONLY.items():
            for key in keys:
                if other != estimator and key in options:
                    raise SchemaError("[options]", key, f'not an option of estimator = "{estimator}" '
                                      f'(it is one of estimator = "{other}")', options[key])
    d = check_priors(config["prior"]) if isinstance(config.get("prior"), list) else None
    for rule in RULES.get(method, ()):
        rule(config, d)
    observed = config.get("data", {}).get("observed")
    if observed is not None:  # its shape, numbers and finiteness (one ConfigError line)
        load_array(observed, base_dir, what=f"[data] observed = {show(observed)}")


# ------------------------------------------------------------------------------------------- docs
def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _rows(keys: dict[str, Key]) -> list[str]:
    rows = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    rows += [f"| `{k.name}` | {_escape(k.type.name)} | {_escape(k.default_shown())} | {_escape(k.meaning)} |"
             for k in keys.values()]
    return rows


def _nested(keys: dict[str, Key], where: str) -> list[tuple[str, dict[str, Key]]]:
    found = []
    for key in keys.values():
        types = key.type.types if isinstance(key.type, Either) else (key.type,)
        for kind in types:
            if isinstance(kind, Table) and kind.keys is not None:
                found.append((f"{where} {key.name}", kind.keys))
    return found


def _prior_rows() -> list[str]:
    rows = ["| dist | arguments (each a number) |", "| --- | --- |"]
    for family, (cls, names) in sorted(PRIOR_FAMILIES.items()):
        found = _arg_constraints(cls)
        args = ", ".join(f"`{n}` {_constraint_text(found[n])}"
                         if n in found and not constraints.is_dependent(found[n]) else f"`{n}`" for n in names)
        rows.append(f"| `{family}` | {_escape(args)}{' (low < high)' if family == 'uniform' else ''} |")
    return rows


def cli_reference() -> str:
    """The configuration reference of ``scorebayes run`` as Markdown: one section per method and
    table, one row per key (key, type, default, meaning)."""
    lines = ["# Configuration reference", "",
             "Generated from `scorebayes.apps.schema`. Every key is optional unless its default "
             "reads *required*.", ""]
    for method, sections in SCHEMAS.items():
        lines += [f"## `{method}`", ""]
        for where, keys in sections.items():
            tables = [(where, keys), *_nested(keys, where)]
            for name, table in tables:
                lines += [f"### {name or 'top level'}", "", *_rows(table), ""]
            if where == "[model]":
                lines += ["### [[prior]]", "", "One table per parameter, in order (or the top-level "
                          '`prior = "file.py:function"`).', "", *_rows(PRIOR_TABLE), ""]
    lines += ["## [[prior]] distributions", "", *_prior_rows(), ""]
    return "\n".join(lines)
