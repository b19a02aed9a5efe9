"""CLI method ``score-langevin``: a config mapped onto [`scorebayes.sbi.ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin].

``[options]`` holds keyword arguments of [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] and of its
[`sample()`][scorebayes.sbi.estimator.ScoreLangevin.sample] method (``num_samples``, ``chains``,
``tempering``, ...). Tables map onto objects: ``schedule = {epochs = 200, batch_size = 256}``
and ``mean_schedule`` onto [`TrainingSchedule`][scorebayes.scores.training.TrainingSchedule];
``localization = {replicates = 50}`` onto [`scorebayes.sbi.localization.minimum_distance.localize()`][scorebayes.sbi.localization.minimum_distance.localize] options.
``weight_fn`` and ``support_fn`` may name ``"file.py:function"``. ``score_views = "builtin"``
takes a builtin model's per-parameter data views (``Epidemic.score_views``).
``data_features`` may name ``"file.py:function"`` or be ``"builtin"``: the builtin epidemic's
floor-spread summaries (``Epidemic.floor_spread``), which ``score_views = "builtin"`` then includes.
``tied_views = "builtin"`` (with ``score_views``) gives the builtin epidemic's floor rates one shared
network (``Epidemic.exchangeable_rates``); a list of coordinate-index lists ties those groups.
``shared_embedding = k`` (with ``score_views``) appends one learned embedding of the whole data
view, k numbers, to every parameter's view.
``mh_correction = "quadrature"`` or ``"learned"`` replaces the unadjusted Langevin chains by
MH-corrected MALA chains ([`scorebayes.samplers.sbi_mh.mh_correct()`][scorebayes.samplers.sbi_mh.mh_correct]; of the sampling
options only ``num_samples`` and ``chains`` apply then). ``mh_init = "ula"`` starts them from the
Langevin chains instead (run with all the sampling options; the correction then keeps their
count) and ``mh_jump_every = k`` makes every k-th step a pCN jump, so that chains stuck in a
spurious region of the learned score can leave it (as on the M/G/1 queue).
``calibration = {num_data_sets = 100}`` (any [`scorebayes.sbi.checks.calibration.calibrate()`][scorebayes.sbi.checks.calibration.calibrate] options, or
``true`` for its defaults) checks the fit afterwards by simulation-based calibration on the table's
proposal: ``calibration.md`` (coverage and mean standardised error per parameter),
``calibration_ranks.png`` and ``summary.json["calibration"]``. A failure there is reported in
``summary.json["calibration_error"]`` and loses nothing else.
"""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..config import ConfigError, check_keys, load_callable
from ..posterior import finite_or_none  # JSON has no NaN: undefined checks become null
from ..sbi import ScoreLangevin
from ..sbi.checks import calibration as calibration_check
from ..sbi.settings import GROUPS, OPTION_GROUPS
from ..scores.training import TrainingSchedule
from . import AppResult
from .common import (
    builtin_model,
    current_store,
    load_observed,
    load_prior,
    load_simulator,
    parameter_names,
    pop_execution,
)

__all__ = ["run", "split_options"]

_RESERVED = {"prior", "simulator", "seed", "progress", "parameter_names", "executor", "store",
             "on_simulator_error", "max_failure_fraction", "retries"}  # the last two: common.pop_execution


def _keywords(function: Any) -> set[str]:
    params = inspect.signature(function).parameters
    return {k for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"self"}


def split_options(options: dict[str, Any], base_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``[options]`` into (constructor kwargs, sample kwargs), converting tables."""
    init_keys = (set(OPTION_GROUPS) | (_keywords(ScoreLangevin.__init__) - set(GROUPS))) - _RESERVED
    sample_keys = _keywords(ScoreLangevin.sample) - {"seed"}
    check_keys(options, init_keys | sample_keys, "[options]")
    init, sample = {}, {}
    for key, value in options.items():
        if key in ("schedule", "mean_schedule"):
            if not isinstance(value, dict):
                raise ConfigError(f"[options] {key} must be a table, e.g. {{epochs = 200}}")
            check_keys(value, {f.name for f in fields(TrainingSchedule)}, f"[options] {key}")
            if "lr" in value:
                value = {**value, "lr": tuple(value["lr"])}
            value = TrainingSchedule(**value)
        elif isinstance(value, str) and (key in ("weight_fn", "support_fn")
                                         or (key == "data_features" and value != "builtin")):
            value = load_callable(value, base_dir, what=f"[options] {key}")
        elif key == "score_views" and isinstance(value, str) and value != "builtin":
            raise ConfigError('[options] score_views must be a list of index lists or "builtin", '
                              f"got {value!r}")
        elif key == "tied_views" and isinstance(value, str) and value != "builtin":
            raise ConfigError('[options] tied_views must be a list of coordinate-index lists or "builtin", '
                              f"got {value!r}")
        elif key == "localization" and not isinstance(value, dict):
            raise ConfigError("[options] localization must be a table of localize() options")
        (init if key in init_keys else sample)[key] = value
    return init, sample


def run(config: dict, *, base_dir: Path, out_dir: Path, seed: int, progress: bool) -> AppResult:
    simulator = load_simulator(config, base_dir)
    names_given = config.get("model", {}).get("parameters")
    prior = load_prior(config, base_dir, len(names_given) if isinstance(names_given, list) else None)
    d = int(prior.event_shape[0])
    names = parameter_names(config, d)
    options = dict(config.get("options", {}))
    execution = pop_execution(options, base_dir=base_dir)
    x_obs, truth = load_observed(config, base_dir, simulator, prior, seed, execution)
    mh_correction = options.pop("mh_correction", None)
    if mh_correction not in (None, "quadrature", "learned"):
        raise ConfigError('[options] mh_correction must be "quadrature" or "learned", '
                          f"got {mh_correction!r}")
    mh_init = options.pop("mh_init", "proposal")
    mh_jump_every = options.pop("mh_jump_every", None)
    if mh_correction is None and ("mh_init" in config.get("options", {}) or mh_jump_every is not None):
        raise ConfigError('[options] mh_init and mh_jump_every need mh_correction = "quadrature" or "learned"')
    if mh_init not in ("proposal", "ula"):
        raise ConfigError(f'[options] mh_init must be "proposal" or "ula", got {mh_init!r}')
    if mh_jump_every is not None and (isinstance(mh_jump_every, bool) or not isinstance(mh_jump_every, int)
                                      or mh_jump_every < 1):
        raise ConfigError(f"[options] mh_jump_every must be an integer >= 1, got {mh_jump_every!r}")
    calibration = _calibration_options(options.pop("calibration", None), d)
    init, sample = split_options(options, base_dir)
    model = builtin_model(config)
    spread = init.get("data_features") == "builtin"
    if spread:
        if model is None or not hasattr(model, "floor_spread"):
            raise ConfigError('[options] data_features = "builtin" needs a builtin epidemic model '
                              "(builtin:epidemic5, builtin:epidemic10)")
        init["data_features"] = model.floor_spread
    if init.get("score_views") == "builtin":
        if model is None or not hasattr(model, "score_views"):
            raise ConfigError('[options] score_views = "builtin" needs a builtin model with data views '
                              "(builtin:epidemic5, builtin:epidemic10)")
        init["score_views"] = model.score_views(spread=spread)
    if init.get("tied_views") == "builtin":
        if model is None or not hasattr(model, "exchangeable_rates"):
            raise ConfigError('[options] tied_views = "builtin" needs a builtin epidemic model '
                              "(builtin:epidemic5, builtin:epidemic10)")
        init["tied_views"] = model.exchangeable_rates()
    if model is not None:
        # Model.support -> support_fn; the weight function only where it is valid (n-model)
        sources = {"support_fn": "support", "weight_fn": "weight_fn"}
        for key, attr in sources.items():
            if key == "weight_fn" and init.get("mode", "single") != "n":
                continue
            if key not in init and getattr(model, attr, None) is not None:
                init[key] = getattr(model, attr)
    with execution.executor() as executor:
        try:
            estimator = ScoreLangevin.from_options(
                prior, simulator, seed=seed, progress=progress, parameter_names=names, executor=executor,
                store=current_store(), on_simulator_error=execution.on_simulator_error,
                max_failure_fraction=execution.max_failure_fraction, retries=execution.retries, **init)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"[options]: {err}") from None
        estimator.fit(x_obs)
    if mh_correction is None:
        posterior = estimator.sample(**sample)
    else:  # MH-corrected Langevin on the learned score (scorebayes.samplers.sbi_mh)
        from ..samplers.sbi_mh import mh_correct

        start = estimator.sample(**{**sample, "check": False}) if mh_init == "ula" else "proposal"
        chains = start.samples.shape[0] if mh_init == "ula" else sample.get("chains")
        posterior = mh_correct(estimator, sample.get("num_samples", 2000), acceptance=mh_correction,
                               chains=chains, init=start, jump_every=mh_jump_every, seed=seed,
                               progress=progress)
        if sample.get("check", True):
            estimator.check(posterior)
    extra = {}
    if calibration is not None:
        extra = _calibrate(estimator, calibration, out_dir, seed=seed, progress=progress)
    return AppResult(posterior, {**extra, "simulations": posterior.info["simulations"],
                                 "simulations_by_stage": posterior.info["simulations_by_stage"],
                                 "dropped_by_stage": posterior.info.get("dropped_by_stage", {}),
                                 "step_size": posterior.info["step_size"],
                                 # sampler checks (sbi.ScoreLangevin.sample; absent after MH correction)
                                 **{k: finite_or_none(posterior.info[k])
                                    for k in ("edge_fraction", "start_memory", "starts_redrawn",
                                              "starts_reflected", "chains_reset") if k in posterior.info},
                                 "check": posterior.info.get("check"),
                                 "failed_simulations": int(estimator.faults_["failed"]),
                                 "nonfinite_simulations": int(estimator.faults_["nonfinite"]),
                                 "resumed_simulations": estimator.faults_["resumed"]}, truth)


def _calibration_options(value: Any, d: int) -> dict[str, Any] | None:
    """``[options] calibration`` (``true`` or a table of calibrate options), checked before any fit."""
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("[options] calibration must be true or a table of calibrate options, "
                          f"e.g. {{num_data_sets = 100}}; got {value!r}")
    check_keys(value, set(calibration_check.OPTIONS), "[options] calibration")
    if "at" in value and (not isinstance(value["at"], list) or len(value["at"]) != d):
        raise ConfigError(f"[options] calibration.at must be a list of {d} parameter values")
    try:
        calibration_check.check_options(**{k: v for k, v in value.items() if k != "at"})
    except ValueError as err:
        raise ConfigError(f"[options] calibration: {err}") from None
    return dict(value)


def _calibrate(estimator: ScoreLangevin, options: dict[str, Any], out_dir: Path, *, seed: int,
               progress: bool) -> dict[str, Any]:
    """Run the calibration, write ``calibration.md`` and ``calibration_ranks.png``; a failure is
    returned as ``calibration_error`` (the posterior is written all the same)."""
    import warnings

    try:
        cal = calibration_check.calibrate(estimator, **options, seed=seed, progress=progress)
    except Exception as err:  # noqa: BLE001 - the posterior must still be written
        warnings.warn(f"calibration failed: {err}", stacklevel=2)
        return {"calibration_error": f"{type(err).__name__}: {err}"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "calibration.md").write_text(
        f"# Simulation-based calibration ({cal.num_data_sets} data sets, "
        f"{'theta = ' + str(options['at']) + ', the prior' if 'at' in options else 'theta from the table proposal'})"
        f"\n\n{cal.summary()}\n")
    cal.plot(out_dir / "calibration_ranks.png")
    return {"calibration": cal.to_dict()}
