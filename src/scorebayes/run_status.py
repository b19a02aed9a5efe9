r"""What a run directory holds and how far its run got, read without disturbing the run.

``scorebayes status DIR`` prints this for a run started by ``scorebayes run`` or a benchmark
(any [`RunStore`][scorebayes.store.RunStore] directory), e.g. one running in the background,
whose progress bars are off because its output is not a terminal:

```text
runs/bench/monotone-single-model-paper-scale-1234  seed 1234, scorebayes 0.1.0
  stages done: localization
  table S: 2,000,000 of 2,000,000 rows (7,813 blocks)
  training train/phase000: finished, 100 of 100 epochs, best validation -293.46
  training train/phase001: epoch 13 of 50, best validation -292.67, last -292.61
  last write 2 min ago (checkpoints/train/phase001.pt)
  compute time 3.2 h over 3 processes (to each one's last write)
```

Everything is read from the files the run writes atomically (``manifest.json``, the stage
markers, the table blocks' counts, the checkpoints), so a status taken mid-run is consistent
with some instant of the run. Checkpoints are read with ``weights_only=True``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .store import LEDGER, StoreError, ledger

__all__ = ["RunStatus", "TableStatus", "TrainingStatus", "read_status", "format_status"]


@dataclass
class TableStatus:
    """A reference table drawn block by block (`scorebayes.table_store`)."""

    tag: str
    rows: int  # rows kept in the completed blocks
    target: int | None  # rows asked for (``recipe.json``), None if unknown
    blocks: int
    failed: int  # simulations that raised or returned non-finite values (dropped)


@dataclass
class TrainingStatus:
    """One training phase's per-epoch checkpoint ([`scorebayes.scores.training.checkpointing()`][scorebayes.scores.training.checkpointing])."""

    name: str
    epochs_done: int
    epochs: int | None  # the phase's length; None in checkpoints written before it was saved
    finished: bool
    best: float
    last: float | None  # the last epoch's validation loss, if the checkpoint records it


@dataclass
class RunStatus:
    path: Path
    seed: int | None
    version: str | None
    stages: list[str] = field(default_factory=list)
    tables: list[TableStatus] = field(default_factory=list)
    training: list[TrainingStatus] = field(default_factory=list)
    other_checkpoints: list[str] = field(default_factory=list)
    last_write: tuple[float, str] | None = None  # (mtime, path relative to the run directory)
    compute_seconds: dict[str, float] = field(default_factory=dict)  # the store's ledger


def read_status(path: str | Path) -> RunStatus:
    """Read the state of the run directory ``path``.

    Raises:
        FileNotFoundError: ``path`` is not a run directory (no ``manifest.json``).
        StoreError: its manifest is unreadable.
    """
    path = Path(path)
    manifest_file = path / "manifest.json"
    if not manifest_file.is_file():
        raise FileNotFoundError(
            f"{path} is not a run directory (no manifest.json); give the --out folder of "
            "'scorebayes run' or a folder under runs/bench/")
    try:
        manifest = json.loads(manifest_file.read_text())
    except ValueError as err:
        raise StoreError(f"{manifest_file} is unreadable ({err})") from None
    status = RunStatus(path=path, seed=manifest.get("seed"), version=manifest.get("version"))
    status.stages = sorted(str(p.relative_to(path / "stages").with_suffix(""))
                           for p in (path / "stages").rglob("*.done"))
    status.tables = _tables(path)
    checkpoints = path / "checkpoints"
    for file in sorted(checkpoints.rglob("*.pt")):
        name = str(file.relative_to(checkpoints).with_suffix(""))
        state = _load(file)
        if state is not None and {"done", "best", "finished"} <= state.keys():
            history = state.get("history") or []
            last = state.get("last", history[-1] if history else None)
            status.training.append(TrainingStatus(
                name=name, epochs_done=int(state["done"]),
                epochs=int(state["epochs"]) if "epochs" in state else None,
                finished=bool(state["finished"]), best=float(state["best"]),
                last=float(last) if last is not None else None))
        else:
            status.other_checkpoints.append(name)
    ledger_folder = path / "json" / LEDGER  # rewritten on every write: not itself news
    newest = max(((f.stat().st_mtime, f) for f in path.rglob("*") if f.is_file()
                  and not f.name.startswith(".") and f.parent != ledger_folder), default=None)
    if newest is not None:
        status.last_write = (newest[0], str(newest[1].relative_to(path)))
    status.compute_seconds = ledger(path)
    return status


def _load(file: Path) -> dict[str, Any] | None:
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception:  # a checkpoint of another format: listed by name only
        return None
    return state if isinstance(state, dict) else None


def _tables(path: Path) -> list[TableStatus]:
    tables = []
    for folder in sorted((path / "json").glob("table_*")):
        if not folder.is_dir():
            continue
        recipe_file = folder / "recipe.json"
        recipe = json.loads(recipe_file.read_text()) if recipe_file.is_file() else {}
        rows = blocks = failed = 0
        for block in folder.glob("*.json"):
            if block.name == "recipe.json":
                continue
            counts = json.loads(block.read_text())
            rows += int(counts.get("kept", 0))
            failed += int(counts.get("failed", 0)) + int(counts.get("nonfinite", 0))
            blocks += 1
        tables.append(TableStatus(tag=folder.name.removeprefix("table_"), rows=rows,
                                  target=recipe.get("num"), blocks=blocks, failed=failed))
    return tables


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.1f} days ago"


def format_status(status: RunStatus, *, now: float | None = None) -> str:
    """A few readable lines (the example in this module's docstring)."""
    now = time.time() if now is None else now
    lines = [f"{status.path}  seed {status.seed}, scorebayes {status.version}",
             f"  stages done: {', '.join(status.stages) if status.stages else 'none'}"]
    for table in status.tables:
        target = f" of {table.target:,}" if table.target is not None else ""
        failed = f", {table.failed:,} failed simulations dropped" if table.failed else ""
        lines.append(f"  table {table.tag}: {table.rows:,}{target} rows ({table.blocks:,} blocks{failed})")
    for phase in status.training:
        of = f" of {phase.epochs}" if phase.epochs is not None else ""
        state = (f"finished, {phase.epochs_done}{of} epochs" if phase.finished
                 else f"epoch {phase.epochs_done}{of}")
        last = f", last {phase.last:.6g}" if phase.last is not None and not phase.finished else ""
        lines.append(f"  training {phase.name}: {state}, best validation {phase.best:.6g}{last}")
    if status.other_checkpoints:
        lines.append(f"  other checkpoints: {', '.join(status.other_checkpoints)}")
    if status.last_write is not None:
        mtime, name = status.last_write
        lines.append(f"  last write {_ago(max(0.0, now - mtime))} ({name})")
    if status.compute_seconds:
        total, runs = sum(status.compute_seconds.values()), len(status.compute_seconds)
        lines.append(f"  compute time {_duration(total)} over {runs} process{'es' * (runs > 1)} "
                     "(to each one's last write)")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return (f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 90 * 60
            else f"{seconds / 3600:.1f} h")
