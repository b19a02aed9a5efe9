"""Shared helpers of the benchmarks on the suite of models with exact posteriors.

Used by ``defaults.py`` and ``peers.py`` (``scorebayes bench defaults|peers``):

``observed(model, rep) -> x_obs [n, p]``
    repetition ``rep``'s observed data set: ``model.observed`` seeded with ``rep``.
``accuracy(model, x_obs, posterior) -> dict``
    ``mean_error`` (max over the parameters of |mean - exact mean| / exact SD), ``sd_ratio``
    ([min, max] over the parameters of SD / exact SD), ``passed`` (``check_posterior``: mean
    within 0.3 SD, SD within 25%) and ``covered`` (the truth inside every 95% interval).
``model_names(parser, text) -> list[str]``
    the comma-separated ``--models`` value, checked against the suite.
``write_json(path, rows, **extra)``
    ``{"machine", "threads", **extra, "rows"}`` written to ``path`` (folders created).
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scorebayes.models.base import Model
from scorebayes.models.suite import SUITE, check_posterior
from scorebayes.posterior import Posterior

__all__ = ["accuracy", "model_names", "observed", "write_json"]


def observed(model: Model, rep: int) -> Tensor:
    """Repetition ``rep``'s observed data set ``[n, p]`` at the model's true parameters."""
    return model.observed(torch.Generator().manual_seed(rep))


def accuracy(model: Model, x_obs: Tensor, posterior: Posterior) -> dict[str, Any]:
    """The posterior against the exact one: mean error, SD ratio, passed, covered."""
    check = check_posterior(model, x_obs, posterior)
    low, high = posterior.quantile(0.025), posterior.quantile(0.975)
    truth = model.true_parameters
    return {"mean_error": float(check.mean_error.max()),
            "sd_ratio": [float(check.sd_ratio.min()), float(check.sd_ratio.max())],
            "passed": check.passed, "covered": bool(((low <= truth) & (truth <= high)).all())}


def model_names(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """The suite models named in ``text`` (comma-separated); a parser error for unknown ones."""
    names = [m for m in text.split(",") if m]
    unknown = sorted(set(names) - set(SUITE))
    if unknown:
        parser.error(f"unknown models {unknown}; the suite has {sorted(SUITE)}")
    return names


def write_json(path: str | Path, rows: list[dict], **extra: Any) -> Path:
    """Write ``{"machine", "threads", **extra, "rows"}`` to ``path``; return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "threads": torch.get_num_threads(),
                               **extra, "rows": rows}, indent=1))
    return out
