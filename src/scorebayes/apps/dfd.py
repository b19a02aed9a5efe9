r"""CLI method ``dfd-bayes``: a TOML config onto [`scorebayes.discrete.generalised_bayes()`][scorebayes.discrete.bayes.generalised_bayes].

```toml
method = "dfd-bayes"
[model]
log_unnormalized = "model.py:logp"   # logp(theta [B, k], x [n, d]) -> [B, n]
domain = [[0, "inf"]]                # one [low, high] per data column; "inf"/"-inf" allowed
parameters = ["theta1", "theta2"]
# or: model = "builtin:cmp" (bernoulli, poisson, cmp, poisson-mixture, ising, pgm, cmp-gm),
#     with keyword arguments of the model (side, coding, edge_count, boundary, rate1, rate2)
[[prior]]                            # optional for built-ins (their paper prior)
dist = "gamma"
...
[data]
observed = "sales.csv"               # integer data [n, d] (CSV or .npy)
counts = "stores"                    # optional: a frequency table; this column holds the counts
# or simulate: true_parameters = [4.0, 0.75] and n = 2000 (bernoulli, poisson, cmp)
[options]                            # generalised_bayes keywords, plus loss = "dfd" | "ksd"
num_bootstrap = 100                  # executor = "processes" | "dask", workers = N (bootstrap)
max_distance = 20.0                  # robust calibration (calibrate_beta): max_step = 1.0,
max_flagged = 0.1                    # max_distance = 20.0 (inf: no bound), max_flagged = 0.1
```

Extra ``summary.json`` keys: ``beta`` (the calibrated or given loss weight), ``n``, the
calibration's full-data minimiser, and ``bootstrap_replicates`` / ``resumed_bootstrap``
(replicates computed / reused from ``--out DIR``: every completed task of bootstrap
replicates is saved there and reused on a re-run, bit-identically). Option values are
checked before the calibration and the sampler start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import (ConfigError, UserCodeError, check_keys, check_options, load_array, load_callable,
                      user_frame)
from ..discrete import (
    BernoulliModel, CMPGraphicalModel, CMPModel, DFDLoss, IsingModel, KSDLoss, PoissonGraphicalModel,
    PoissonMixtureModel, PoissonModel, UserModel, generalised_bayes, sample_cmp,
)
from ..discrete.calibrate import CalibrationError, calibrate_beta, persisting
from ..priors import PriorError, prior_from_spec
from ..priors import sample as sample_prior
from . import AppResult
from .common import current_store, pop_execution

__all__ = ["run", "BUILTINS"]

BUILTINS = {
    "bernoulli": BernoulliModel, "poisson": PoissonModel, "cmp": CMPModel, "poisson-mixture": PoissonMixtureModel,
    "ising": IsingModel, "pgm": PoissonGraphicalModel, "cmp-gm": CMPGraphicalModel,
}
MODEL_OPTIONS = {"side", "coding", "edge_count", "boundary", "rate1", "rate2"}
MODEL_KEYS = {"model", "log_unnormalized", "domain", "parameters"} | MODEL_OPTIONS
DATA_KEYS = {"observed", "counts", "columns", "true_parameters", "n"}


def _load_data(data: dict, base_dir: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """``(values [n, d], counts [n] or None)`` from ``[data]`` (observed file, optional count column)."""
    arr, header = load_array(data["observed"], base_dir, what="[data] observed")
    counts = None
    if "counts" in data:
        col = data["counts"]
        if isinstance(col, str):
            if header is None or col not in header:
                raise ConfigError(f"[data] counts: no column named {col!r} in {data['observed']} "
                                  f"(columns: {header})")
            col = header.index(col)
        if not isinstance(col, int) or not 0 <= col < arr.shape[1]:
            raise ConfigError(f"[data] counts must name a column (or give its index), got {data['counts']!r}")
        counts = arr[:, col]
        if np.any(counts < 0) or np.any(counts != np.round(counts)):
            raise ConfigError("[data] counts: the count column must hold non-negative integers")
        arr = np.delete(arr, col, axis=1)
        if header is not None:
            header = [h for k, h in enumerate(header) if k != col]
    if "columns" in data:
        if header is None:
            raise ConfigError("[data] columns needs a CSV with a header")
        missing = [c for c in data["columns"] if c not in header]
        if missing:
            raise ConfigError(f"[data] columns: {missing} not found (columns: {header})")
        arr = arr[:, [header.index(c) for c in data["columns"]]]
    bad = np.argwhere(arr != np.round(arr))
    if len(bad):
        i, j = bad[0]
        raise ConfigError(f"[data] observed must hold integers: value {arr[i, j]:g} at row {i}, column {j}")
    return arr, counts


def _build_model(model_cfg: dict, base_dir: Path, data_dim: int | None) -> Any:
    check_keys(model_cfg, MODEL_KEYS, "[model]")
    kwargs = {k: model_cfg[k] for k in MODEL_OPTIONS if k in model_cfg}
    if "model" in model_cfg:
        name = str(model_cfg["model"])
        if not name.startswith("builtin:") or name[len("builtin:"):] not in BUILTINS:
            raise ConfigError(f"[model] model must be one of {['builtin:' + b for b in BUILTINS]}, got {name!r}")
        key = name[len("builtin:"):]
        if key in ("pgm", "cmp-gm"):
            if data_dim is None:
                raise ConfigError(f"builtin:{key} needs observed data (its dimension is that of the data)")
            kwargs["d"] = data_dim
        try:
            model = BUILTINS[key](**kwargs)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"[model] builtin:{key}: {err}") from None
        if "parameters" in model_cfg:
            if len(model_cfg["parameters"]) != model.num_params:
                raise ConfigError(f"[model] parameters: builtin:{key} has {model.num_params} parameters "
                                  f"({model.names}), got {len(model_cfg['parameters'])} names")
            model.names = [str(p) for p in model_cfg["parameters"]]
        return model
    if kwargs:
        raise ConfigError(f"[model] {sorted(kwargs)} only apply to built-in models")
    for key in ("log_unnormalized", "domain", "parameters"):
        if key not in model_cfg:
            raise ConfigError(f"[model] needs `{key}` (or `model = \"builtin:...\"`)")
    fn = load_callable(model_cfg["log_unnormalized"], base_dir, what="[model] log_unnormalized")
    domain = model_cfg["domain"]
    if not isinstance(domain, list) or not all(isinstance(b, list) and len(b) == 2 for b in domain):
        raise ConfigError("[model] domain must be a list of [low, high] pairs, e.g. [[0, \"inf\"]]")
    try:
        return UserModel(fn, domain, [str(p) for p in model_cfg["parameters"]])
    except ValueError as err:
        raise ConfigError(f"[model] domain: {err}") from None


def _check_model(model: Any, prior: Any, rows: torch.Tensor, seed: int) -> None:
    """Evaluate the model once at a prior draw: right shape, finite on the data and their neighbours."""
    theta = sample_prior(prior, 2, generator=torch.Generator().manual_seed(seed)).to(torch.float64)
    try:
        value = model.log_unnormalized(theta, rows)
        lm, lp, valid = model.log_ratios(theta, rows)
    except Exception as err:  # noqa: BLE001 - user code may raise anything
        if isinstance(err, ValueError) and user_frame(err) is None:  # the model's checks of its output
            raise ConfigError(f"[model] {err}") from None
        raise UserCodeError("[model] evaluating the model", err) from err
    if not bool(torch.isfinite(value).all()):
        i = int(torch.nonzero(~torch.isfinite(value))[0, 1])
        raise ConfigError(f"[model] the model returned a non-finite value at data row {rows[i].tolist()} "
                          f"for theta = {theta[0].tolist()}")
    if not bool(torch.isfinite(torch.where(valid, lm, 0.0)).all() and torch.isfinite(lp).all()):
        raise ConfigError("[model] the model returned non-finite values at neighbours of the data "
                          f"(for theta = {theta[0].tolist()})")


def run(config: dict, *, base_dir: Path, out_dir: Path, seed: int, progress: bool) -> AppResult:
    """Run DFD-Bayes (or KSD-Bayes with ``[options] loss = "ksd"``) from a config; see the module docstring."""
    model_cfg = dict(config.get("model", {}))
    data = dict(config.get("data", {}))
    options = dict(config.get("options", {}))
    check_keys(data, DATA_KEYS, "[data]")
    loss_kind = options.pop("loss", "dfd")
    if loss_kind not in ("dfd", "ksd"):
        raise ConfigError(f"[options] loss must be 'dfd' or 'ksd', got {loss_kind!r}")
    execution = pop_execution(options, faults=False, base_dir=base_dir)  # executor, workers, dask
    check_options(options, generalised_bayes, exclude={"loss", "prior", "names", "seed", "progress", "executor"})
    truth = None
    if "observed" in data:
        values, counts = _load_data(data, base_dir)
        model = _build_model(model_cfg, base_dir, values.shape[1])
    elif "true_parameters" in data:
        model = _build_model(model_cfg, base_dir, None)
        values, counts, truth = _simulate(model, data, seed), None, [float(v) for v in data["true_parameters"]]
    else:
        raise ConfigError("[data] needs `observed` (a file) or `true_parameters` and `n`")
    if values.shape[1] != model.dim:
        raise ConfigError(f"[model] the domain has {model.dim} coordinate(s) but the data have "
                          f"{values.shape[1]} column(s)")
    try:
        prior = prior_from_spec(config["prior"]) if "prior" in config else model.default_prior()
    except PriorError as err:
        raise ConfigError(str(err)) from None
    if prior is None:
        raise ConfigError("this model needs [[prior]] tables (one per parameter)")
    if prior.event_shape[0] != model.num_params:
        raise ConfigError(f"the prior has {prior.event_shape[0]} parameters but the model has "
                          f"{model.num_params} ({model.names})")
    try:
        loss = DFDLoss(model, values, counts) if loss_kind == "dfd" else KSDLoss(model, values, counts)
    except ValueError as err:
        raise ConfigError(f"[data] {err}") from None
    _check_model(model, prior, loss.rows, seed)
    _check_values(loss, prior, options)
    try:
        with execution.executor() as executor, persisting(current_store()) as record:
            post = generalised_bayes(loss, prior, names=model.names, seed=seed,
                                     progress=progress, executor=executor, **options)
    except CalibrationError as err:
        raise ConfigError(f"beta calibration failed: {err}") from None
    post.info["method"] = "dfd-bayes" if loss_kind == "dfd" else "ksd-bayes"
    extra: dict[str, Any] = {"beta": post.info["beta"], "n": int(loss.n), "loss": loss_kind}
    if record is not None:
        extra.update(bootstrap_replicates=record.computed + record.resumed,
                     resumed_bootstrap=record.resumed)
    if "calibration" in post.info:
        extra["minimiser"] = post.info["calibration"]["minimiser"]
    return AppResult(post, extra, truth)


class _Checked(BaseException):
    """Raised by `_StopLoss`: the options were accepted."""


class _StopLoss:
    """A stand-in loss that stops the calibration or the sampler at its first evaluation."""

    def __init__(self, loss: Any):
        self.n, self.row_counts, self.model = loss.n, loss.row_counts, loss.model

    def __call__(self, theta: torch.Tensor) -> torch.Tensor:
        raise _Checked


def _check_values(loss: Any, prior: Any, options: dict) -> None:
    """Check the option values of [`generalised_bayes()`][scorebayes.discrete.bayes.generalised_bayes] before any expensive work: the
    calibration and the sampler validate their arguments, then evaluate the loss, which
    here stops them (``ConfigError`` for a bad value)."""
    calibration = ("num_bootstrap", "method", "init_steps", "init_lr", "steps", "lr", "max_step", "max_distance",
                   "max_flagged")
    probes = [dict(options, beta=options.get("beta") or 1.0)]  # the sampler's options
    if options.get("init_from") == "minimiser":
        if options.get("beta") is not None:
            raise ConfigError("[options] init_from = \"minimiser\" needs the calibration: "
                              "drop beta")
        probes[0]["init_from"] = "prior"  # the minimiser comes from the calibration
    if options.get("beta") is None:
        probes.append({"calibration": {k: options[k] for k in calibration if k in options}})
    for probe in probes:
        try:
            if "calibration" in probe:
                calibrate_beta(_StopLoss(loss), prior, **probe["calibration"])
            else:
                generalised_bayes(_StopLoss(loss), prior, **probe)
        except _Checked:
            continue
        except (TypeError, ValueError) as err:
            raise ConfigError(f"[options]: {err}") from None


def _simulate(model: Any, data: dict, seed: int) -> np.ndarray:
    if "n" not in data:
        raise ConfigError("[data] true_parameters needs `n` (number of observations)")
    theta = torch.as_tensor(data["true_parameters"], dtype=torch.float64)
    if theta.numel() != model.num_params:
        raise ConfigError(f"[data] true_parameters needs {model.num_params} values")
    n = int(data["n"])
    g = torch.Generator().manual_seed(seed)
    if isinstance(model, CMPModel):
        return sample_cmp(theta, n, generator=g).numpy()
    if isinstance(model, PoissonModel):
        return torch.poisson(theta.expand(n, 1).clone(), generator=g).numpy()
    if isinstance(model, BernoulliModel):
        return (torch.rand(n, 1, generator=g, dtype=torch.float64) < theta).to(torch.float64).numpy()
    raise ConfigError("simulating data ([data] true_parameters) is available for builtin:bernoulli, "
                      "builtin:poisson and builtin:cmp; give observed data otherwise")

