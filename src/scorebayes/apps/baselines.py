r"""CLI methods ``abc``, ``abc-pmc``, ``bsl`` and ``npe``: a config mapped onto
`scorebayes.baselines`.

``[options]`` holds keyword arguments of `abc_w1()`,
`abc_pmc()`, `bsl()`,
`npe()` or `gaussian_npe()`, plus these
CLI-only keys:

- ``summary`` (abc-pmc, bsl, npe): ``"file.py:function"`` (``x [B, n, p] -> [B, k]``),
  ``"mean_sd"`` (mean and SD of each column), ``"flatten"`` (npe: the raw data set) or
  ``"model"`` (a built-in model's paper summaries). Default: the built-in model's
  summaries if any, else ``"mean_sd"`` for abc-pmc and bsl and ``"flatten"`` for npe.
- ``estimator`` (npe): ``"maf"`` (``sbi``, default) or ``"gaussian"`` (Chatha et al.).
- ``localize`` (all): ``true`` or a table of [`scorebayes.sbi.localization.minimum_distance.localize()`][scorebayes.sbi.localization.minimum_distance.localize] options;
  the localized proposal $q$ then draws the table (abc, npe; reweighted by
  $\pi/q$), round 0 (abc-pmc) or initialises and shapes the chains (bsl).
- ``executor``, ``workers``, ``dask_address``, ``dask_tls`` (abc, abc-pmc, npe) and
  ``stream_tables`` (abc, npe): where the reference table (abc-pmc: each round's blocks) is
  simulated (`scorebayes.apps.common.pop_execution()`); with ``scorebayes run --out DIR``
  the table's blocks are saved and reused on a re-run.
- ``on_simulator_error``, ``max_failure_fraction``, ``retries`` (all): simulator faults
  (dropped table rows for abc and npe; rejected proposals for bsl, whose chain state is
  checkpointed in ``DIR`` every ``checkpoint_every`` iterations and resumed on a re-run).

Option values are checked before any table or chain is simulated: the method is called once
with a stand-in simulator that stops it at its first simulation (`_check_values()`).

``num_simulations`` defaults to 10,000 for abc and npe. ``abc-pmc`` simulates round by round
(``simulations_per_round`` times ``rounds + 1`` data sets; no fault options: a non-finite
summary is never kept, a raising simulator stops the run); with ``--out DIR`` each round is
checkpointed in ``DIR`` and a re-run resumes after the last one (or adds rounds when ``rounds``
grew).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import torch

from ..baselines import abc_pmc, abc_w1, bsl, gaussian_npe, mean_sd_summary, npe
from ..baselines._common import seed_from
from ..config import ConfigError, UserCodeError, check_options, load_callable
from ..parallel import derive_seed, make_generator
from ..proposal import PriorSampler
from ..tables import simulate_table
from . import AppResult
from .common import (
    EXECUTOR_KEYS,
    TABLE_KEYS,
    Execution,
    builtin_model,
    current_store,
    load_observed,
    load_prior,
    load_simulator,
    parameter_names,
    pop_execution,
)

__all__ = ["run"]

FUNCTIONS: dict[str, Callable[..., Any]] = {"abc": abc_w1, "abc-pmc": abc_pmc, "bsl": bsl}
NPE_ESTIMATORS: dict[str, Callable[..., Any]] = {"maf": npe, "gaussian": gaussian_npe}
# arguments filled in by the application, never from [options]
RESERVED = ("x_obs", "prior", "simulator", "table", "sampler", "names", "generator",
            "progress", "executor", "store")
CLI_KEYS = {"abc": ("localize",), "abc-pmc": ("localize", "summary"), "bsl": ("localize", "summary"),
            "npe": ("localize", "summary", "estimator")}
DEFAULT_SIMULATIONS = 10_000


def _summary(spec: Any, method: str, config: dict, base_dir: Path, x_obs: torch.Tensor):
    model = builtin_model(config)
    if spec is None:
        if model is not None and model.summary_fn is not None:
            spec = "model"
        else:
            spec = "flatten" if method == "npe" else "mean_sd"
    if spec == "mean_sd":
        fn = mean_sd_summary
    elif spec == "flatten":
        if method != "npe":
            raise ConfigError(f"[options] summary = \"flatten\" is for npe; {method} needs a summary")
        return None
    elif spec == "model":
        if model is None or model.summary_fn is None:
            raise ConfigError("[options] summary = \"model\" needs a built-in model with summaries")
        fn = model.summary_fn
    elif isinstance(spec, str):
        fn = load_callable(spec, base_dir, what="[options] summary")
    else:
        raise ConfigError("[options] summary must be \"mean_sd\", \"flatten\", \"model\" or "
                          "\"file.py:function\"")
    try:
        s = torch.as_tensor(fn(x_obs[None]))
    except Exception as err:  # noqa: BLE001 - user code
        raise UserCodeError("[options] summary on the observed data", err) from err
    if s.dim() != 2 or s.shape[0] != 1 or not torch.isfinite(s).all():
        raise ConfigError(f"[options] summary must map x [B, n, p] to finite [B, k]; got shape "
                          f"{tuple(s.shape)} for B=1")
    return fn


def _localize_options(value: Any) -> dict | None:
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if isinstance(value, dict):
        from ..sbi.localization.minimum_distance import localize

        check_options(value, localize, "[options] localize",
                      exclude=("simulator", "x_obs", "prior", "seed", "progress", "executor"))
        return dict(value)
    raise ConfigError("[options] localize must be true/false or a table of localize options")


class _Checked(BaseException):
    """Raised by the stand-in simulator: the method accepted its options."""


def _stand_in(theta: torch.Tensor, n: int, generator: Any = None) -> torch.Tensor:
    raise _Checked


def _check_values(method: str, function: Callable[..., Any], options: dict, x_obs: torch.Tensor,
                  prior: Any) -> None:
    """Run ``function`` with ``options`` and a simulator that stops it at its first call:
    every method validates its arguments before simulating, so a bad value is reported
    here, before the table or the chain is simulated (``ConfigError``)."""
    kwargs = dict(options, generator=torch.Generator().manual_seed(0), progress=False)
    try:
        if method == "bsl":
            function(x_obs, _stand_in, prior, **kwargs)
        else:
            function(x_obs, prior, simulator=_stand_in, **kwargs)
    except _Checked:
        return
    except (TypeError, ValueError) as err:
        raise ConfigError(f"[options]: {err}") from None
    raise ConfigError(f"[options]: {method} did not simulate anything")  # pragma: no cover


def run(config: dict, *, base_dir: Path, out_dir: Path, seed: int, progress: bool) -> AppResult:
    """Run ``abc``, ``abc-pmc``, ``bsl`` or ``npe`` from a parsed config (see the module docstring)."""
    method = config.get("method")
    if method not in ("abc", "abc-pmc", "bsl", "npe"):
        raise ConfigError(f"scorebayes.apps.baselines runs abc, abc-pmc, bsl or npe, not {method!r}")
    options = dict(config.get("options", {}))
    if not isinstance(config.get("options", {}), dict):
        raise ConfigError("[options] must be a table")
    cli = {key: options.pop(key) for key in CLI_KEYS[method] if key in options}
    if method == "npe":
        estimator = cli.get("estimator", "maf")
        if estimator not in NPE_ESTIMATORS:
            raise ConfigError(f"[options] estimator must be one of {sorted(NPE_ESTIMATORS)}, "
                              f"got {estimator!r}")
        function = NPE_ESTIMATORS[estimator]
    else:
        function = FUNCTIONS[method]
    if method == "bsl":
        given = [key for key in (*EXECUTOR_KEYS, "stream_tables") if key in options]
        if given:
            raise ConfigError(f"[options] {', '.join(given)}: bsl simulates inside its Markov "
                              "chain, one proposal at a time; these options are for abc and npe")
    if method == "abc-pmc":
        given = [key for key in TABLE_KEYS if key in options]
        if given:
            raise ConfigError(f"[options] {', '.join(given)}: abc-pmc keeps no reference table and has "
                              "no fault handling (a non-finite summary is never kept; a raising "
                              "simulator stops the run, resumable with --out DIR)")
    execution = pop_execution(options, base_dir=base_dir)
    check_options(options, function, "[options]", exclude=RESERVED)
    localize_options = _localize_options(cli.get("localize"))
    if "init" in options:
        options["init"] = torch.tensor(options["init"], dtype=torch.float64)
    if method in ("abc", "npe"):
        options.setdefault("num_simulations", DEFAULT_SIMULATIONS)

    simulator = load_simulator(config, base_dir)
    with execution.executor() as executor:  # spawned workers (safe after torch threads)
        return _run(method, function, config, options, cli, localize_options, simulator,
                    executor, execution, base_dir=base_dir, seed=seed, progress=progress)


def _run(method: str, function: Callable[..., Any], config: dict, options: dict, cli: dict,
         localize_options: dict | None, simulator: Any, executor: Executor | None,
         execution: Execution, *, base_dir: Path, seed: int, progress: bool) -> AppResult:
    names_given = config["model"].get("parameters")
    prior = load_prior(config, base_dir,
                       len(names_given) if isinstance(names_given, list) else None)
    names = parameter_names(config, int(prior.event_shape[0]))
    x_obs, truth = load_observed(config, base_dir, simulator, prior, seed, execution)
    if method in ("abc-pmc", "bsl", "npe"):
        summary = _summary(cli.get("summary"), method, config, base_dir, x_obs)
        if method != "npe" or summary is not None:
            options["summary"] = summary
    _check_values(method, function, options, x_obs, prior)

    extra: dict[str, Any] = {}
    sampler = None
    if localize_options is not None:
        from ..sbi.localization.minimum_distance import localize

        found = localize(simulator, x_obs, prior, seed=derive_seed(seed, "localize"),
                         progress=progress, **localize_options)
        sampler = found.proposal
        extra["localization_simulations"] = found.simulations
        extra["proposal"] = sampler.to_dict()
    generator = make_generator(seed, "baseline", method)
    kwargs = dict(options, names=names, generator=generator, progress=progress)
    if sampler is not None:
        kwargs["sampler"] = sampler
    if executor is not None:
        kwargs["executor"] = executor
    if method in ("abc", "npe"):
        # the table the method would draw itself (same seed draw from the generator, same
        # tag and blocks), drawn here with the run directory and the fault handling
        table = simulate_table(
            simulator, sampler if sampler is not None else PriorSampler(prior),
            kwargs.pop("num_simulations"), x_obs.shape[0], seed=seed_from(generator),
            tag=method, block_size=options.get("block_size", 256), executor=executor,
            progress=progress, store=current_store(), **execution.table_options())
        kwargs["table"] = table
        extra.update(failed_simulations=table.failed, nonfinite_simulations=table.nonfinite,
                     resumed_simulations=table.resumed)
    if method == "bsl":
        kwargs.update(execution.table_options(), store=current_store())
        posterior = function(x_obs, simulator, prior, **kwargs)
    elif method == "abc-pmc":  # with --out DIR, rounds are checkpointed there and resumed on a re-run
        posterior = function(x_obs, prior, simulator, store=current_store(), **kwargs)
    else:
        posterior = function(x_obs, prior, **kwargs)
    extra.update({k: v for k, v in posterior.info.items() if k not in ("method", "seconds")})
    return AppResult(posterior=posterior, extra=extra, truth=truth)
