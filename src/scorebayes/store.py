r"""A resumable run directory: arrays, JSON, checkpoints and stage markers, written atomically.

Layout of a run directory ``DIR``:

```text
DIR/manifest.json          fingerprint of (config, seed, scorebayes version)
DIR/arrays/<name>.npy      tables and samples (``np.load(mmap_mode="r")``-able)
DIR/json/<name>.json       metadata (stage results, table block counts)
DIR/checkpoints/<name>.pt  torch state dicts, read back with ``weights_only=True``
DIR/stages/<name>.done     completion markers (written last)
DIR/json/ledger/<run>.json compute time: one file per process that wrote to the store
```

Every file is written to a temporary file in the same folder and moved into place with
`os.replace()`, so a run killed at any instant (``kill -9`` included) leaves each file
either complete or absent. A directory whose manifest names another configuration or seed
is refused unless ``fresh=True`` (which deletes the store's folders and starts over).

The fingerprint is $H(\mathrm{json}(\text{config}), \text{seed}, \text{version})$
with $H$ = SHA-256 and keys sorted, so reordering a TOML file does not change it.

The ledger: a run resumed over several processes (a session limit, a crash) has cost the sum of
their times, not the last one's. Every write through a [`RunStore`][scorebayes.store.RunStore] also rewrites this
process's ledger file with the seconds from when the process first opened the directory to that
write, so `RunStore.earlier_seconds` sums the earlier processes' work up to the last thing
each of them saved (work after a process's last save produced nothing kept and is not counted).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["RunStore", "StoreError", "config_fingerprint", "atomic_write", "copy_without_tables", "ledger"]

_FOLDERS = ("arrays", "json", "checkpoints", "stages", "tables")
LEDGER = "ledger"  # json/ledger/<run>.json: seconds per process (module docstring)
#: this process's name in the ledgers, and when it first opened each run directory
_THIS_RUN = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
_OPENED: dict[str, float] = {}
_LOGGED: dict[str, float] = {}  # when this process last wrote each directory's ledger entry
LOG_EVERY = 5.0  # seconds between ledger writes, except at a stage's end (mark_done), which always logs


class StoreError(ValueError):
    """A run directory that cannot be used (other config or seed, corrupt manifest)."""


def config_fingerprint(config: Any, seed: int) -> str:
    """SHA-256 of the config (sorted JSON), the seed and the scorebayes version."""
    from . import __version__

    text = json.dumps({"config": config, "seed": int(seed), "version": __version__},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def atomic_write(path: str | Path, write: Any) -> Path:
    """Call ``write(fh)`` on a temporary file next to ``path``, then ``os.replace`` it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


class RunStore:
    r"""A run directory that survives crashes.

    Arguments:
        path: the directory (created if missing).
        config: the run's configuration (any JSON-able dict); with ``seed`` it fixes the
            fingerprint stored in ``manifest.json``.
        seed: the run seed.
        fresh: delete whatever the store holds in ``path`` and start over.

    Raises:
        StoreError: ``path`` holds a run of another config or seed (and ``fresh`` is false).

    Attributes:
        resumed_stages: names of stages found complete on disk (filled by [`is_done()`][scorebayes.store.RunStore.is_done]).
        earlier_seconds: compute seconds the earlier processes logged in the ledger (module
            docstring), read when the store is opened; 0 for a new run.
        stream_tables: reference tables drawn into this store are memory-mapped from disk
            instead of loaded (``simulate_table(in_memory=None)``; ``[options]
            stream_tables``). Default ``False``.
    """

    def __init__(self, path: str | Path, *, config: Any = None, seed: int = 0, fresh: bool = False):
        self.path = Path(path)
        self.fingerprint = config_fingerprint(config, seed)
        self.resumed_stages: list[str] = []
        self.stream_tables = False
        self._done_here: set[str] = set()
        manifest = self.path / "manifest.json"
        if fresh:
            for name in _FOLDERS:
                shutil.rmtree(self.path / name, ignore_errors=True)
            manifest.unlink(missing_ok=True)
        if manifest.is_file():
            try:
                old = json.loads(manifest.read_text())
            except (OSError, ValueError) as err:
                raise StoreError(f"{manifest} is unreadable ({err}); re-run with --fresh") from None
            if old.get("fingerprint") != self.fingerprint:
                raise StoreError(
                    f"{self.path} holds a run with another config or seed (seed "
                    f"{old.get('seed')}); re-run with --fresh to start over, or choose another "
                    "--out directory")
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            from . import __version__

            self.save_json_file(manifest, {"fingerprint": self.fingerprint, "seed": int(seed),
                                           "version": __version__, "config": config})
        # all stores of one process on one directory share its start: its time is counted once
        self._key = str(self.path.resolve())
        if fresh:  # a run started over: its time starts now
            _OPENED.pop(self._key, None)
            _LOGGED.pop(self._key, None)
        self._opened = _OPENED.setdefault(self._key, time.perf_counter())
        self.earlier_seconds = sum(seconds for run, seconds in ledger(self.path).items()
                                   if run != _THIS_RUN)

    def _log_time(self, *, always: bool = False) -> None:
        """Rewrite this process's ledger file: seconds since it first opened the directory. At most
        every LOG_EVERY seconds unless ``always`` (a table's blocks are saved many times a second,
        and a ledger write costs about as much as a small array's)."""
        now = time.perf_counter()
        if not always and now - _LOGGED.get(self._key, -float("inf")) < LOG_EVERY:
            return
        _LOGGED[self._key] = now
        self.save_json_file(self.file("json", f"{LEDGER}/{_THIS_RUN}", ".json"),
                            {"seconds": now - self._opened,
                             "written": time.strftime("%Y-%m-%dT%H:%M:%S")})

    @property
    def elapsed_seconds(self) -> float:
        """Compute seconds of this run over all its processes: the earlier ones' (ledger) and
        this process's so far."""
        return self.earlier_seconds + time.perf_counter() - self._opened

    # ---------------------------------------------------------------- paths
    def file(self, folder: str, name: str, suffix: str) -> Path:
        """``DIR/folder/name+suffix`` (``name`` may contain ``/`` for sub-folders)."""
        return self.path / folder / f"{name}{suffix}"

    # --------------------------------------------------------------- arrays
    def save_array(self, name: str, array: Any) -> Path:
        """Save ``array`` (tensor or ndarray) as ``arrays/<name>.npy``, atomically."""
        if isinstance(array, torch.Tensor):
            array = array.detach().cpu().numpy()
        array = np.ascontiguousarray(array)
        path = atomic_write(self.file("arrays", name, ".npy"),
                            lambda fh: np.save(fh, array, allow_pickle=False))
        self._log_time()
        return path

    def delete_array(self, name: str) -> None:
        """Remove ``arrays/<name>.npy`` if it exists (e.g. a partial result now checkpointed)."""
        self.file("arrays", name, ".npy").unlink(missing_ok=True)

    def has_array(self, name: str) -> bool:
        return self.file("arrays", name, ".npy").is_file()

    def load_array(self, name: str, *, mmap: bool = True) -> np.ndarray:
        """The saved array, memory-mapped read-only by default (no unpickling)."""
        return np.load(self.file("arrays", name, ".npy"), mmap_mode="r" if mmap else None,
                       allow_pickle=False)

    # ----------------------------------------------------------------- json
    @staticmethod
    def save_json_file(path: Path, obj: Any) -> Path:
        data = json.dumps(obj, indent=2, sort_keys=True, default=str).encode()
        return atomic_write(path, lambda fh: fh.write(data))

    def save_json(self, name: str, obj: Any) -> Path:
        """Save JSON metadata as ``json/<name>.json``, atomically."""
        path = self.save_json_file(self.file("json", name, ".json"), obj)
        self._log_time()
        return path

    def load_json(self, name: str, default: Any = None) -> Any:
        path = self.file("json", name, ".json")
        return json.loads(path.read_text()) if path.is_file() else default

    # ---------------------------------------------------------- checkpoints
    def save_checkpoint(self, name: str, state: dict[str, Any]) -> Path:
        """``torch.save`` a dict of tensors / state dicts / numbers as ``checkpoints/<name>.pt``."""
        path = atomic_write(self.file("checkpoints", name, ".pt"), lambda fh: torch.save(state, fh))
        self._log_time()
        return path

    def has_checkpoint(self, name: str) -> bool:
        return self.file("checkpoints", name, ".pt").is_file()

    def load_checkpoint(self, name: str) -> dict[str, Any] | None:
        """The checkpoint, loaded with ``weights_only=True`` (no arbitrary unpickling), or None."""
        path = self.file("checkpoints", name, ".pt")
        if not path.is_file():
            return None
        return torch.load(path, map_location="cpu", weights_only=True)

    # --------------------------------------------------------------- stages
    def mark_done(self, stage: str, info: Any = None) -> None:
        """Record that ``stage`` completed (with JSON ``info``); written after its outputs."""
        self.save_json_file(self.file("stages", stage, ".done"), {"info": info})
        self._done_here.add(stage)
        self._log_time(always=True)

    def is_done(self, stage: str) -> bool:
        """Whether ``stage`` completed in this or an earlier run (earlier ones are recorded
        in `resumed_stages`)."""
        done = self.file("stages", stage, ".done").is_file()
        if done and stage not in self.resumed_stages and stage not in self._done_here:
            self.resumed_stages.append(stage)
        return done

    def stage_info(self, stage: str) -> Any:
        path = self.file("stages", stage, ".done")
        return json.loads(path.read_text())["info"] if path.is_file() else None

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"


def ledger(path: str | Path) -> dict[str, float]:
    """The run directory's ledger: ``{process name: seconds}``, one entry per process that wrote
    to it (module docstring); empty for directories written before the ledger existed."""
    out = {}
    for file in sorted((Path(path) / "json" / LEDGER).glob("*.json")):
        try:
            out[file.stem] = float(json.loads(file.read_text())["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable entries are skipped, not fatal: the ledger is informative
    return out


def copy_without_tables(src: str | Path, dest: str | Path) -> Path:
    """Copy the run directory ``src`` to ``dest`` without its tables' rows; returns ``dest``.

    Checkpoints, stage markers, samples and metadata are copied; the tables' blocks
    (``arrays/table_*`` and their block markers ``json/table_*/NNNNNN.json``) are not, so the
    copy is small enough to commit or move to another machine. A run resumed from the copy
    redraws the tables: each block is seeded by the run seed and its index, so the rows are the
    same and the training checkpoints continue on the same data (tests/test_resume.py).

    Safe while the run is still writing: stage markers are copied before the outputs they vouch
    for (which [`RunStore.mark_done()`][scorebayes.store.RunStore.mark_done] writes first), and every file is complete or absent
    ([`atomic_write()`][scorebayes.store.atomic_write]).

    Raises:
        StoreError: ``src`` is not a run directory, or ``dest`` holds another run.
    """
    src, dest = Path(src), Path(dest)
    manifest = src / "manifest.json"
    if not manifest.is_file():
        raise StoreError(f"{src} is not a run directory (no manifest.json)")
    if (dest / "manifest.json").is_file() and \
            (dest / "manifest.json").read_bytes() != manifest.read_bytes():
        raise StoreError(f"{dest} holds another run; choose an empty folder")

    def is_table_row(rel: Path) -> bool:
        if len(rel.parts) < 3 or not rel.parts[1].startswith("table_"):
            return False
        return rel.parts[0] == "arrays" or rel.stem.isdigit()

    for folder in ("stages", "json", "checkpoints", "arrays"):
        for path in sorted((src / folder).rglob("*")):
            rel = path.relative_to(src)
            if path.is_file() and not path.name.startswith(".") and not is_table_row(rel):
                data = path.read_bytes()
                atomic_write(dest / rel, lambda fh, data=data: fh.write(data))
    atomic_write(dest / "manifest.json", lambda fh: fh.write(manifest.read_bytes()))
    return dest
