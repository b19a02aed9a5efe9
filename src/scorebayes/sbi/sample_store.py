"""Samples of ``ScoreLangevin.sample`` kept in a run store, named by what determines them.

A re-run of the same call on the same fitted estimator finds its samples instead of sampling
again. The name hashes the call's arguments and everything else that changes the draws: the
number and kind of local debiasing corrections, the chain box, and a warm start's draws.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
from torch import Tensor

from ..posterior import Posterior
from .likelihood import LearnedLikelihoodScore

__all__ = ["samples_name", "load_samples", "save_samples"]


def exact_value(value: Any) -> Any:
    """``value`` with tensors and arrays as nested lists of Python numbers, whose repr is exact:
    torch prints ``tensor(0.0010)`` for 0.00101 and 0.00104, and elides large tensors with
    ``...``, so a repr-based name would give one call's samples back to another."""
    if isinstance(value, Tensor):
        return ("tensor", value.detach().cpu().tolist())
    if isinstance(value, np.ndarray):
        return ("array", value.tolist())
    if isinstance(value, (list, tuple)):
        return type(value)(exact_value(v) for v in value)
    return value


def samples_name(arguments: dict[str, Any], likelihood: LearnedLikelihoodScore) -> str:
    """Store name of the samples of one ``sample`` call with ``arguments`` (its keyword values)."""
    arguments = dict(arguments)
    if not arguments.get("adapt_steps"):  # the default: the names of samples stored before it existed
        arguments.pop("adapt_steps", None)
    if not (arguments.get("adapt_steps") and arguments.get("reset_stragglers")):
        arguments.pop("reset_stragglers", None)  # no restarts
    if isinstance(arguments.get("init"), Posterior):  # warm start: named by its draws
        draws = np.ascontiguousarray(np.asarray(arguments["init"].draws, dtype=np.float64))
        arguments["init"] = f"posterior-{hashlib.sha256(draws.tobytes()).hexdigest()[:12]}"
    refinements = likelihood.refinements
    arguments["refinements"] = len(refinements)  # refined drift, new samples
    kernel = [(r["bandwidth"], [float(f"{v:.6g}") for v in r["intercept"].tolist()])
              for r in refinements if r.get("kind") == "kernel"]
    if kernel:  # another kernel refit (bandwidth, posterior) must not get these samples back
        arguments["kernel_refits"] = kernel
    arguments["chain_starts"] = "redrawn-in-box"
    # the box the chains are reflected in: another support_fn (or none) draws other samples
    arguments["chain_box"] = [[float(f"{v:.6g}") for v in side.tolist()] for side in likelihood.chain_box()]
    text = repr(sorted((k, repr(exact_value(v))) for k, v in arguments.items()))
    return f"samples_{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def load_samples(store: Any, name: str, copies: int) -> Posterior | None:
    """The stored samples called ``name``, or ``None``."""
    if not store.is_done(name):
        return None
    stored = Posterior.load(store.file("arrays", name, ".npz"))
    if "chain_copies" not in stored.info and not stored.info.get("diverged_chains"):
        # stored before chain_copies was recorded: each copy ran an equal block, in order
        per_copy = stored.samples.shape[0] // copies
        stored.info["chain_copies"] = [c for c in range(copies) for _ in range(per_copy)]
    return stored


def save_samples(store: Any, name: str, posterior: Posterior) -> None:
    """Save atomically (a temporary file, renamed), then mark ``name`` done."""
    path = store.file("arrays", name, ".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp.npz")
    posterior.save(partial)
    os.replace(partial, path)
    store.mark_done(name)
