"""The ``[options]`` keys of each CLI method: type, default and meaning of every key.

Defaults are read from the Python API's signatures and settings dataclasses (so the reference
cannot drift from the library); the tests check that each method's keys are exactly those its
application module accepts.
"""

from __future__ import annotations

import inspect
from dataclasses import MISSING, fields
from typing import Any

from ..sbi.checks.calibration import calibrate
from ..discrete import generalised_bayes
from ..sbi.localization.minimum_distance import localize
from ..parallel import EXECUTORS
from ..sbi import ScoreLangevin
from ..sbi.estimator import MODES
from ..sbi.settings import (DEBIAS, NETWORK_COORDINATES, PRESETS, Localization, Networks, Simulation, Tables,
                            Training)
from ..scoremh.pipeline import ACCEPTANCES, PROPOSALS, score_mh
from ..scoremh.score_matching import SCORE_METHODS
from ..scores.layers import ACTIVATIONS
from ..scores.training import TrainingSchedule
from ..tables import FAULT_MODES
from .schema_types import Bool, Either, Float, Function, Int, Key, ListOf, Str, Table

__all__ = ["OPTIONS", "REFUSED", "NPE_ONLY"]

POS, NONNEG = Int(1), Int(0)
POSF, NONNEGF = Float(0, low_open=True), Float(0)
FRACTION = Float(0, 1, low_open=True, high_open=True)
AUTO = Str(("auto",))
NUMBERS = ListOf(Float())
INDEX_LISTS = ListOf(ListOf(NONNEG))


def _signature(function: Any) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(function).parameters.items()}


def _dataclass(cls: type) -> dict[str, Any]:
    return {f.name: f.default_factory() if f.default is MISSING and f.default_factory is not MISSING
            else f.default for f in fields(cls)}


def _keys(defaults: dict[str, Any], spec: dict[str, tuple], **texts: str) -> dict[str, Key]:
    """Keys from ``name -> (type, meaning)`` with defaults from ``defaults`` (a signature)."""
    out = {}
    for name, (kind, meaning) in spec.items():
        default = defaults.get(name)
        if isinstance(default, tuple):
            default = list(default)
        out[name] = Key(name, kind, None if default is inspect.Parameter.empty else default, meaning,
                        default_text=texts.get(name))
    return out


def _table(keys: dict[str, Key], what: str) -> Table:
    return Table(keys, what)


SCHEDULE = _table(_keys(_dataclass(TrainingSchedule), {
    "epochs": (POS, "training epochs at most"),
    "penalty_epochs": (NONNEG, "epochs of each curvature-penalty candidate"),
    "batch_size": (POS, "rows (data sets outside single mode) per step"),
    "lr": (ListOf(POSF, 2), "learning rate [start, end] of the cosine schedule"),
    "patience": (POS, "epochs without validation improvement before stopping"),
    "validation_fraction": (FRACTION, "share of the table held out for validation"),
    "chunk_observations": (POS, "observations per chunk when evaluating the loss"),
    "penalty_groups": (POS, "groups of D^R per step for the curvature penalty (none: all)"),
}), "table of TrainingSchedule fields")

LOCALIZE = _table(_keys(_signature(localize), {
    "replicates": (POS, "minimum-distance replicates"),
    "iterations": (POS, "optimiser iterations per replicate"),
    "restarts": (POS, "restarts per replicate (method = \"adam\")"),
    "num_directions": (POS, "random projections of the sliced distance"),
    "lr": (Either((POSF, ListOf(POSF, 2))), "Adam learning rate, or [start, end]"),
    "m": (POS, "simulated data set size (none: that of the data)"),
    "fixed_directions": (Bool(), "the same projections in every iteration"),
    "init": (Str(("prior", "median")), "starting parameters of the replicates"),
    "method": (Str(("auto", "adam", "nelder-mead")), "optimiser"),
    "step_scale": (Either((Str(("prior",)), POSF)), "Nelder-Mead step: from the prior's spread, or a number"),
    "min_sd": (POSF, "floor on the proposal's standard deviations"),
    "max_evaluations": (POS, "Nelder-Mead evaluations per replicate (none: iterations)"),
    "tolerance": (NONNEGF, "Nelder-Mead convergence tolerance"),
}), "table of localize() options")

CALIBRATION = _table(_keys(_signature(calibrate), {
    "num_data_sets": (Int(2), "simulated data sets"),
    "at": (NUMBERS, "fixed parameters to simulate at (none: draws from the table's proposal)"),
    "chains": (POS, "Langevin chains per data set"),
    "draws_per_chain": (POS, "draws kept per chain"),
    "burn_in": (NONNEG, "Langevin steps discarded per chain"),
    "thin": (POS, "keep every thin-th step"),
    "step_size_factor": (Float(0, 2, low_open=True, high_open=True), "kappa of the automatic step size"),
    "level": (FRACTION, "level of the credible intervals whose coverage is reported"),
}), "table of calibrate() options")

DASK_TLS = _table({
    "ca_file": Key("ca_file", Str(), None, "certificate authority file", required=True),
    "cert": Key("cert", Str(), None, "client certificate file", required=True),
    "key": Key("key", Str(), None, "client key file", required=True),
    "require_encryption": Key("require_encryption", Bool(), True, "refuse unencrypted connections"),
}, "table {ca_file, cert, key}")

EXECUTION = {
    "executor": Key("executor", Str(tuple(EXECUTORS)), "serial", "where simulations run"),
    "workers": Key("workers", POS, None, "worker processes (alone: executor = \"processes\")"),
    "dask_address": Key("dask_address", Str(), None, "a Dask scheduler, \"tcp://host:port\" or \"tls://...\"",
                        check=lambda v: None if "://" in v else 'must look like "tcp://host:port"'),
    "dask_tls": Key("dask_tls", DASK_TLS, None, "TLS files for a remote scheduler (with dask_address = \"tls://...\")"),
}
FAULTS = {
    "stream_tables": Key("stream_tables", Bool(), False, "memory-map the reference tables from --out DIR"),
    "on_simulator_error": Key("on_simulator_error", Str(FAULT_MODES), "skip",
                              "a simulation that raises or is non-finite: skip, retry, or stop the run"),
    "max_failure_fraction": Key("max_failure_fraction", Float(0, 1), 0.1,
                                "stop when more than this share of the simulations fail"),
    "retries": Key("retries", POS, 3, "tries per failed simulation with on_simulator_error = \"retry\""),
}
LOCALIZE_SWITCH = Key("localize", Either((Bool(), LOCALIZE)), False,
                      "localize first: true or a table of localize() options (the proposal draws the table)")


#: localize() options of score-langevin: the default plan localizes with 20 x 100, not localize()'s own
#: defaults (scorebayes.sbi.budget)
LANGEVIN_LOCALIZE = _table({**LOCALIZE.keys, **{
    name: Key(name, LOCALIZE.keys[name].type, LOCALIZE.keys[name].default, LOCALIZE.keys[name].meaning,
              default_text=text)
    for name, text in (("replicates", "20 (preset = \"paper\": 100)"),
                       ("iterations", "100 (preset = \"paper\": 500)"),
                       ("max_evaluations", "iterations"))}}, LOCALIZE.what)


def _langevin() -> dict[str, Key]:
    settings = {**_dataclass(Localization), **_dataclass(Tables), **_dataclass(Networks),
                **_dataclass(Training), **_dataclass(Simulation)}
    settings.update(localize=True, localization={}, localize_in_support=False, proposal_inflation=2.0,
                    network_coordinates="unconstrained")
    init = _keys({**_signature(ScoreLangevin.__init__), **settings}, {
        "mode": (Str(MODES), "the data view: single observations, or whole data sets (n, full, markov)"),
        "preset": (Str(tuple(PRESETS)), ("the settings not given: the quick default plan, or the paper's "
                                         "(localization 100 x 500, N_S = 20000 or N = 2000, N_R = 2000, "
                                         "up to 300 epochs, penalty grids [0, 1e-3, 1e-1])")),
        "localize": (Bool(), "draw the tables from the localized proposal q (false: the prior)"),
        "localization": (LANGEVIN_LOCALIZE, "options of the localization (localize())"),
        "localize_in_support": (Bool(), "confine the localization to support_fn(x_obs)"),
        "proposal_inflation": (POSF, "factor on q's standard deviations"),
        "num_simulations": (POSF, ("the whole simulation budget, in data sets of the observed size n "
                                   "(localization, tables, the calibration and the check included)")),
        "table_size": (POS, "rows of the main table: single observations (single mode) or data sets"),
        "num_groups": (POS, "groups N_R of the debiasing table D^R (single mode)"),
        "group_size": (POS, "simulations m_R per group of D^R"),
        "antithetic": (Bool(), "mirrored parameter pairs with common random numbers"),
        "noise_sd": (POSF, "Gaussian smoothing added to simulated and observed data"),
        "noise_draws": (POS, "noisy copies of the observed data the chains condition on"),
        "calibrate": (Bool(), ("the learned score as a summary calibrated on data sets of the observed size "
                               "(false: the paper's Langevin chains on the summed score)")),
        "calibration_size": (POS, "data sets per calibration round"),
        "time_limit": (NONNEGF, ("seconds after which a calibrated fit whose check failed starts no "
                                 "further escalation step (more calibration data sets, larger tables)")),
        "hidden": (ListOf(POS, min_length=1), "hidden widths of every network"),
        "activation": (Str(tuple(ACTIVATIONS)), "activation of every network"),
        "score_views": (Either((Str(("builtin",)), INDEX_LISTS)), "per-parameter data views (index lists)"),
        "tied_views": (Either((Str(("builtin",)), INDEX_LISTS)), "groups of parameters sharing one view network"),
        "shared_embedding": (NONNEG, "width of an embedding of the whole view appended to every view"),
        "normal_scores": (Bool(), "heavy-tailed data columns reach the score network as normal scores"),
        "data_features": (Either((Str(("builtin",)), Function())), "summaries appended to the network's view"),
        "network_coordinates": (Str(NETWORK_COORDINATES), "the coordinates the networks take"),
        "schedule": (SCHEDULE, "training of the score network"),
        "mean_schedule": (SCHEDULE, "training of the debiasing network"),
        "curvature_penalties": (ListOf(NONNEGF, min_length=1), "lambda_1 grid chosen on validation"),
        "mean_penalties": (ListOf(NONNEGF, min_length=1), "lambda_2 grid of the debiasing network"),
        "debias": (Str(DEBIAS), "debiasing of the single-observation score"),
        "cross_fit": (Bool(), "fit the debiasing network on each half of D^R and average"),
        "block_size": (POS, "parameters per seeded block of simulations"),
        "weight_fn": (Function(), "weight function of the score-matching loss (mode = \"n\")"),
        "support_fn": (Function(), "support_fn(x_obs) -> (low, high): the region to train and sample in"),
        "device": (Str(), "torch device of the networks"),
        "threads": (POS, "torch threads for the fit and the chains"),
    }, num_simulations="the default plan's total (about 7,800 at n = 200; 4,200 with calibrate = false)",
        table_size="80000 (single), 1000 (other modes)", num_groups="500", group_size="min(1000, max(100, n))",
        antithetic="true in single mode", calibrate="true in modes single and n (not with preset paper)",
        normal_scores="true (false with preset paper)",
        calibration_size="1000", time_limit="300", threads="torch's (the cores this process may use)",
        schedule="at most 60 epochs, 15 per penalty, patience 10",
        mean_schedule="at most 60 epochs, 15 per penalty, patience 10, batch_size 32")
    sample = _keys(_signature(ScoreLangevin.sample), {
        "num_samples": (POS, "posterior draws over all chains"),
        "chains": (POS, "parallel Langevin chains (none: max(4, num_samples / 50))"),
        "step_size": (Either((POSF, AUTO)), "Langevin step size tau"),
        "step_size_factor": (POSF, "kappa of the automatic step size kappa / lambda_max"),
        "burn_in": (Either((NONNEG, AUTO)), "steps discarded per chain"),
        "thin": (Either((POS, AUTO)), "keep every thin-th step"),
        "tempering": (Either((Bool(), ListOf(Float(0, 1, low_open=True)))), "likelihood weights before t = 1"),
        "steps_per_stage": (Either((POS, AUTO)), "steps per tempering stage"),
        "init": (Str(("proposal", "prior")), "where the chains start"),
        "clip_norm": (POSF, "clip the learned likelihood score to this norm"),
        "max_steps": (POS, "most steps per chain when burn_in and thin are auto"),
        "target_ess": (Either((POSF, AUTO)), "run until this effective sample size (auto: num_samples / 4)"),
        "compile_drift": (Bool(), "evaluate the drift through torch.compile"),
        "precondition": (Str(("dense",)), "run the chains whitened by the drift's curvature"),
        "adapt_steps": (NONNEG, "warm-up steps refitting the whitening"),
        "reset_stragglers": (Bool(), "restart warm-up chains far below the others"),
        "check": (Bool(), "check the fit afterwards by simulation (summary.json check)"),
        "remedy": (Bool(), ("when the check fails, a second table round around the posterior, then "
                            "sample and check again")),
    })
    cli = {
        "mh_correction": Key("mh_correction", Str(("quadrature", "learned")), None,
                             "MH-corrected MALA chains instead of unadjusted Langevin"),
        "mh_init": Key("mh_init", Str(("proposal", "ula")), "proposal", "start of the MH-corrected chains"),
        "mh_jump_every": Key("mh_jump_every", POS, None, "every k-th MH step a pCN jump"),
        "calibration": Key("calibration", Either((Bool(), CALIBRATION)), False,
                           "simulation-based calibration after the fit (true or calibrate() options)"),
    }
    return {**init, **sample, **cli, **EXECUTION, **FAULTS}


def _baselines() -> dict[str, dict[str, Key]]:
    from ..baselines import abc_pmc, abc_w1, bsl, gaussian_npe, npe

    summary = Either((Str(("mean_sd", "flatten", "model")), Function()))
    table_keys = {"block_size": (POS, "parameters per seeded block of simulations"),
                  "chunk_size": (POS, "data sets per chunk of the distance or summary computation")}
    abc = _keys(_signature(abc_w1), {"num_simulations": (POS, "rows of the reference table"),
                                     "k": (POS, "nearest data sets kept (W1 distance)"), **table_keys},
                num_simulations="10000")
    pmc = _keys(_signature(abc_pmc), {
        "rounds": (POS, "population Monte Carlo rounds after round 0"),
        "simulations_per_round": (POS, "data sets simulated per round"),
        "k": (Int(10), "data sets kept per round (< simulations_per_round)"),
        "adjust": (Bool(), "regression adjustment of the kept parameters"),
        "metric": (Str(("residual", "spread")), "scaling of the summary distance"),
        "block_size": (POS, "parameters per seeded block of simulations")})
    pmc["summary"] = Key("summary", summary, None, "summary statistics", default_text='model\'s, else "mean_sd"')
    chains = _keys(_signature(bsl), {
        "num_chains": (POS, "MCMC chains"), "num_steps": (POS, "steps per chain"),
        "burn_in": (NONNEG, "steps discarded per chain (< num_steps)"),
        "num_sims": (Int(2), "simulations per likelihood estimate (> summary dimension)"),
        "init": (NUMBERS, "start of the chains, theta [d] (none: the prior)"),
        "target_acceptance": (FRACTION, "acceptance rate the step size adapts to"),
        "adapt": (Bool(), "adapt the proposal during burn-in"),
        "adapt_covariance": (Bool(), "adapt the proposal covariance (none: with adapt)"),
        "checkpoint_every": (POS, "iterations between checkpoints in --out DIR")})
    chains["summary"] = pmc["summary"]
    maf, gauss = _signature(npe), _signature(gaussian_npe)
    flows = {**_keys(gauss, {"num_layers": (POS, "gaussian: hidden layers"),
                             "weight_decay": (NONNEGF, "gaussian: AdamW weight decay"),
                             "patience": (POS, "gaussian: epochs without improvement before stopping")}),
             **_keys(maf, {"num_transforms": (POS, "maf: flow transforms"),
                           "stop_after_epochs": (POS, "maf: epochs without improvement before stopping"),
                           "max_sampling_rounds": (POS, "maf: rounds of rejection sampling into the prior")})}
    both = {"num_simulations": (POS, "rows of the reference table"),
            "num_samples": (POS, "posterior draws"),
            "hidden_features": (POS, "hidden width"), "batch_size": (POS, "training batch size"),
            "learning_rate": (POSF, "Adam learning rate"), "max_epochs": (POS, "training epochs at most"),
            "validation_fraction": (FRACTION, "share of the table held out for validation"),
            "unconstrained": (Bool(), "fit in the prior's unconstrained coordinates"),
            "weight_smoothing": (Str(("psis",)), "smoothing of the pi/q importance weights"), **table_keys}
    shared = _keys(maf, both, num_simulations="10000")
    for name, key in shared.items():
        if maf.get(name) != gauss.get(name):
            shared[name] = Key(name, key.type, key.default, key.meaning,
                               default_text=f"{show_default(maf[name])} (maf), {show_default(gauss[name])} (gaussian)")
    estimator = {
        "estimator": Key("estimator", Str(("maf", "gaussian")), "maf", "maf (the sbi package) or gaussian"),
        "summary": Key("summary", Either((Str(("mean_sd", "flatten", "model")), Function())), None,
                       "summary statistics", default_text='model\'s, else "flatten"'),
    }
    localize_key = {"localize": LOCALIZE_SWITCH}
    return {"abc": {**abc, **localize_key, **EXECUTION, **FAULTS},
            "abc-pmc": {**pmc, **localize_key, **EXECUTION},
            "bsl": {**chains, **localize_key, **{k: v for k, v in FAULTS.items() if k != "stream_tables"}},
            "npe": {**estimator, **shared, **flows, **localize_key, **EXECUTION, **FAULTS}}


def show_default(value: Any) -> str:
    from .schema_types import show

    return "none" if value is None else show(value)


def _dfd() -> dict[str, Key]:
    keys = _keys(_signature(generalised_bayes), {
        "beta": (POSF, "the loss weight (none: calibrated by the bootstrap)"),
        "num_bootstrap": (POS, "bootstrap replicates of the calibration"),
        "method": (Str(("newton", "adam")), "minimiser of the calibration"),
        "init_steps": (POS, "Adam steps before Newton's method"), "init_lr": (POSF, "their learning rate"),
        "steps": (POS, "minimiser steps per replicate"), "lr": (POSF, "their learning rate"),
        "max_step": (POSF, "largest Newton step (robust calibration)"),
        "max_distance": (Float(0, low_open=True, allow_inf=True), "flag replicates farther than this"),
        "max_flagged": (Float(0, 1, high_open=True), "largest share of flagged replicates"),
        "sampler": (Str(("rwmh", "nuts")), "MCMC sampler of the generalised posterior"),
        "num_chains": (POS, "chains"), "num_samples": (POS, "draws per chain"),
        "burn_in": (NONNEG, "steps discarded per chain"), "thin": (POS, "keep every thin-th step"),
        "step_size": (POSF, "initial step size"), "adapt": (Bool(), "adapt the step size during burn-in"),
        "target_accept": (FRACTION, "acceptance rate the step size adapts to (none: the sampler's)"),
        "full_mass": (Bool(), "dense mass matrix (sampler = \"nuts\")"),
        "init": (ListOf(NUMBERS), "chain starts [num_chains, k], unconstrained"),
        "init_from": (Str(("prior", "minimiser")), "where the chains start"),
        "fold_squared": (Bool(), "fold parameters that enter squared (models with squared_indices)"),
    })
    keys["loss"] = Key("loss", Str(("dfd", "ksd")), "dfd", "discrete Fisher divergence or kernel Stein discrepancy")
    return {**keys, **EXECUTION}


def _score_mh() -> dict[str, Key]:
    return _keys(_signature(score_mh), {
        "score_model": (Str(SCORE_METHODS), "score matching objective"),
        "proposal": (Str(PROPOSALS), "MH proposal"),
        "acceptance": (Str(ACCEPTANCES), "acceptance probability from the learned score"),
        "step_size": (POSF, "proposal step size (pcn: beta in (0, 1); none: tuned)"),
        "chains": (POS, "chains"), "steps": (POS, "steps per chain"),
        "keep": (POS, "last steps kept per chain (<= steps)"),
        "init": (Str(("normal", "data")), "where the chains start"),
        "score_hidden": (POS, "hidden width of the score network"),
        "score_epochs": (POS, "training epochs of the score network"),
        "acceptance_hidden": (POS, "hidden width of the acceptance network"),
        "acceptance_epochs": (POS, "training epochs of the acceptance network"),
        "lam": (NONNEGF, "regularisation of the acceptance model"),
        "learned_form": (Str(("direct", "ratio")), "form of the learned acceptance"),
    })


OPTIONS: dict[str, dict[str, Key]] = {"score-langevin": _langevin(), "dfd-bayes": _dfd(),
                                      "score-mh": _score_mh(), **_baselines()}

_NO_TABLE = ("abc-pmc keeps no reference table and has no fault handling (a non-finite summary is never "
             "kept; a raising simulator stops the run, resumable with --out DIR)")
_IN_CHAIN = ("bsl simulates inside its Markov chain, one proposal at a time; these options are for abc "
             "and npe")
#: keys of other methods that a method refuses, with the reason
REFUSED: dict[str, dict[str, str]] = {
    "abc-pmc": {k: _NO_TABLE for k in FAULTS},
    "bsl": {k: _IN_CHAIN for k in (*EXECUTION, "stream_tables")},
}
#: npe keys that only one estimator takes
NPE_ONLY = {"gaussian": ("num_layers", "weight_decay", "patience"),
            "maf": ("num_transforms", "stop_after_epochs", "max_sampling_rounds")}
