"""Rules of the configuration schema that tie keys together (``observed`` or ``true_parameters``
with ``n``; ``mh_init`` needs ``mh_correction``; ``k`` at most ``num_simulations``; ...).

Each rule is ``rule(config, d) -> None`` (``d``: the number of ``[[prior]]`` tables, or ``None``)
and raises `SchemaError` with one line. They run after every
table has been checked on its own (`scorebayes.apps.schema.validate()`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .schema_types import SchemaError

__all__ = ["RULES"]

EPIDEMICS = ("builtin:epidemic5", "builtin:epidemic10")


def _builtin(config: dict) -> str | None:
    spec = config.get("model", {}).get("simulator")
    return spec.strip().lower() if isinstance(spec, str) and spec.startswith("builtin:") else None


def _model_and_prior(config: dict, d: int | None) -> None:
    if "model" not in config:
        raise SchemaError("", "model", 'missing (required): a [model] table with simulator = '
                          '"file.py:function" or "builtin:NAME"')
    model, builtin = config["model"], _builtin(config)
    if "options" in model and builtin is None:
        raise SchemaError("[model]", "options", 'only for built-in models (simulator = "builtin:NAME")',
                          model["options"])
    if "prior" not in config and builtin is None:
        raise SchemaError("", "prior", 'missing: add one [[prior]] table per parameter, or prior = '
                          '"file.py:function"')
    names = model.get("parameters")
    if d is not None and names is not None and len(names) != d:
        raise SchemaError("[model]", "parameters", f"the prior has {d} parameter(s) but {len(names)} "
                          "are named here", names)


def _data(config: dict, d: int | None) -> None:
    builtin = _builtin(config)
    data = config.get("data")
    if data is None:
        if builtin is None:
            raise SchemaError("", "data", 'missing: a [data] table with observed = "x.csv" (or .npy), '
                              "or true_parameters with n")
        return
    truth, n = data.get("true_parameters"), data.get("n")
    if "observed" in data:
        if n is not None:
            raise SchemaError("[data]", "n", "only used to simulate data from true_parameters, "
                              "not with observed", n)
    elif builtin is None:
        if truth is None:
            raise SchemaError("[data]", "observed", 'missing: observed = "x.csv" (or .npy), or '
                              "true_parameters with n")
        if n is None:
            raise SchemaError("[data]", "true_parameters", "needs n (the number of observations to "
                              "simulate)", truth)
    k = d if d is not None else (len(config["model"]["parameters"])
                                 if isinstance(config.get("model", {}).get("parameters"), list) else None)
    if truth is not None and k is not None and len(truth) != k:
        raise SchemaError("[data]", "true_parameters", f"has {len(truth)} values for {k} parameters", truth)
    if truth is not None and d is not None:
        import torch

        from ..priors import prior_from_spec

        prior = prior_from_spec(config["prior"])
        if not bool(torch.isfinite(prior.log_prob(torch.tensor([truth], dtype=torch.float64))).all()):
            raise SchemaError("[data]", "true_parameters", "lie outside the prior's support", truth)


def _execution(config: dict, d: int | None) -> None:
    options = config.get("options", {})
    address = options.get("dask_address")
    if address is not None and options.get("executor") != "dask":
        raise SchemaError("[options]", "dask_address", 'needs executor = "dask"', address)
    if "dask_tls" in options and not (isinstance(address, str) and address.startswith("tls://")):
        raise SchemaError("[options]", "dask_tls", 'is for a remote scheduler: give dask_address = '
                          '"tls://host:port" too', options["dask_tls"])


def _summary(config: dict, d: int | None) -> None:
    value = config.get("options", {}).get("summary")
    method = config["method"]
    if value == "flatten" and method != "npe":
        raise SchemaError("[options]", "summary", f'"flatten" is for npe; {method} needs a summary', value)
    if value == "model" and _builtin(config) is None:
        raise SchemaError("[options]", "summary", 'needs a built-in model with summaries '
                          '(simulator = "builtin:NAME")', value)


def _langevin(config: dict, d: int | None) -> None:
    options = config.get("options", {})
    if "mh_correction" not in options:
        for key in ("mh_init", "mh_jump_every"):
            if key in options:
                raise SchemaError("[options]", key, 'needs mh_correction = "quadrature" or "learned"',
                                  options[key])
    builtin = _builtin(config)
    if options.get("localize_in_support") and "support_fn" not in options and builtin is None:
        raise SchemaError("[options]", "localize_in_support", "needs support_fn (the box the "
                          "localization is confined to)", True)
    for key in ("score_views", "tied_views", "data_features"):
        if options.get(key) == "builtin" and builtin not in EPIDEMICS:
            raise SchemaError("[options]", key, f"needs a builtin epidemic model ({', '.join(EPIDEMICS)})",
                              "builtin")
    for key in ("tied_views", "shared_embedding"):
        if options.get(key) and "score_views" not in options:
            raise SchemaError("[options]", key, "needs score_views (per-parameter data views)", options[key])
    calibration = options.get("calibration")
    if isinstance(calibration, dict) and "at" in calibration and d is not None and len(calibration["at"]) != d:
        raise SchemaError("[options] calibration", "at", f"must be a list of {d} parameter values",
                          calibration["at"])
    if "score_views" in options and options.get("mode", "single") == "single":
        raise SchemaError("[options]", "score_views", 'needs mode = "n", "full" or "markov" (the '
                          "single-model's debiasing network has no data view)", options["score_views"])


def _at_most(small: str, small_default: int, large: str, large_default: int, strict: bool = False):
    def rule(config: dict, d: int | None) -> None:
        options = config.get("options", {})
        a, b = options.get(small, small_default), options.get(large, large_default)
        if a > b or (strict and a == b):
            raise SchemaError("[options]", small, f"must be {'<' if strict else '<='} {large} = {b}", a)
    return rule


def _score_mh(config: dict, d: int | None) -> None:
    options = config.get("options", {})
    if options.get("proposal") == "pcn" and options.get("step_size", 0) >= 1:
        raise SchemaError("[options]", "step_size", "for pcn is beta and must be in (0, 1)", options["step_size"])


def _dfd(config: dict, d: int | None) -> None:
    options, model = config.get("options", {}), config.get("model", {})
    if options.get("init_from") == "minimiser" and "beta" in options:
        raise SchemaError("[options]", "init_from", "needs the calibration of beta: drop beta", "minimiser")
    if options.get("full_mass") and options.get("sampler", "rwmh") != "nuts":
        raise SchemaError("[options]", "full_mass", 'needs sampler = "nuts"', True)
    if "model" not in model:
        for key in ("log_unnormalized", "domain", "parameters"):
            if key not in model:
                raise SchemaError("[model]", key, 'missing: give log_unnormalized, domain and parameters, '
                                  'or model = "builtin:NAME"')
    if "observed" not in config.get("data", {}) and "true_parameters" not in config.get("data", {}):
        raise SchemaError("[data]", "observed", 'missing: observed = "x.csv" (integer data), or '
                          "true_parameters with n")


Rule = Callable[[dict[str, Any], "int | None"], None]
_SIMULATION = (_model_and_prior, _data, _execution)
RULES: dict[str, tuple[Rule, ...]] = {
    "score-langevin": (*_SIMULATION, _langevin),
    "abc": (*_SIMULATION, _at_most("k", 200, "num_simulations", 10_000)),
    "abc-pmc": (*_SIMULATION, _summary, _at_most("k", 400, "simulations_per_round", 10_000, strict=True)),
    "bsl": (*_SIMULATION, _summary, _at_most("burn_in", 1000, "num_steps", 3000, strict=True)),
    "npe": (*_SIMULATION, _summary),
    "score-mh": (_at_most("keep", 100, "steps", 300), _score_mh),
    "dfd-bayes": (_execution, _dfd),
}
