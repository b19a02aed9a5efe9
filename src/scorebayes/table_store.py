r"""Reference-table blocks in a run directory, and tables memory-mapped from disk.

A table drawn with a [`RunStore`][scorebayes.store.RunStore] keeps every block as it completes:

```text
arrays/table_<tag>/<block>_theta.npy, <block>_x.npy   the block's rows
json/table_<tag>/<block>.json                         its counts; written last = complete
json/table_<tag>/recipe.json                          size, block size, seed, sampler hash
```

**Streaming** (``simulate_table(..., in_memory=False)``): the blocks are copied, one at a
time, into one file per array, ``arrays/table_<tag>/theta.npy`` and ``x.npy``, and the table
is returned as tensors *memory-mapped* over them (``np.load(mmap_mode="r")``): the operating
system pages rows in as they are read, so a table larger than the memory can be trained on.
Minibatches ``x[idx]`` gather only their rows. `as_training_tensor()` (used by the
training loops) converts a mapped table to the network's dtype into another mapped file
(``x.float32.npy``), block by block, instead of into memory; the values, and so the
minibatches and the trained networks, are bit-identical to an in-memory table.

The mapped tensors are **read-only**: writing into them in place crashes the process
(operations that return new tensors, ``x + 1``, ``x[idx]``, ``x.float()``, are fine, but
allocate their result in memory).
"""

from __future__ import annotations

import os
import tempfile
import warnings
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["BlockStore", "load_mapped", "mapped_source", "as_training_tensor", "write_mapped"]

# data_ptr -> (file, bytes, dtype, weak reference to the numpy memmap that owns the memory)
_MAPPED: dict[int, tuple[Path, int, torch.dtype, weakref.ref]] = {}


def write_mapped(path: Path, parts: Iterable[np.ndarray], shape: tuple[int, ...],
                 dtype: Any) -> Path:
    """Write the row blocks ``parts`` (concatenated along axis 0 = ``shape``) into the ``.npy``
    file ``path`` through a memory map, atomically (temporary file + ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=tuple(shape))
        row = 0
        for part in parts:
            out[row : row + len(part)] = part  # numpy casts elementwise (exact for float64->32)
            row += len(part)
        if row != shape[0]:
            raise ValueError(f"write_mapped: {row} rows written, expected {shape[0]}")
        out.flush()
        del out
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_mapped(path: str | Path) -> Tensor:
    """A read-only tensor memory-mapped over the ``.npy`` file ``path`` (nothing is read yet)."""
    path = Path(path)
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    with warnings.catch_warnings():  # read-only on purpose: the table on disk is never written
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        tensor = torch.from_numpy(array)
    if tensor.numel():
        _MAPPED[tensor.data_ptr()] = (path, array.nbytes, tensor.dtype, weakref.ref(array))
    return tensor


def mapped_source(tensor: Tensor) -> Path | None:
    """The file a tensor from `load_mapped()` maps (also for a contiguous reshape of it),
    or ``None`` for an ordinary tensor."""
    if not isinstance(tensor, Tensor) or tensor.numel() == 0 or tensor.device.type != "cpu":
        return None
    entry = _MAPPED.get(tensor.data_ptr())
    if entry is None:
        return None
    path, nbytes, dtype, owner = entry
    if owner() is None:  # unmapped: the address may since belong to another tensor
        del _MAPPED[tensor.data_ptr()]
        return None
    if tensor.dtype != dtype or not tensor.is_contiguous() \
            or tensor.numel() * tensor.element_size() != nbytes:
        return None
    return path


def as_training_tensor(tensor: Tensor, device: Any, dtype: torch.dtype,
                       chunk_bytes: int = 1 << 26) -> Tensor:
    """``tensor.to(device, dtype)``, except that a memory-mapped table (`load_mapped()`)
    converted to another dtype on the CPU becomes another memory-mapped file
    (``<name>.<dtype>.npy``, written ``chunk_bytes`` at a time) instead of an array in memory.
    The values are the same, so training gives bit-identical results either way."""
    source = mapped_source(tensor)
    device = torch.device(device)
    if source is None or device.type != "cpu" or tensor.dtype == dtype:
        return tensor.to(device, dtype)
    name = str(dtype).replace("torch.", "")
    target = source.with_name(f"{source.stem}.{name}.npy")
    flat = np.load(source, mmap_mode="r", allow_pickle=False).reshape(-1)
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    if not target.is_file():  # derived data: a complete file (atomic) is always valid
        step = max(1, chunk_bytes // max(1, flat.itemsize))
        write_mapped(target, (flat[s : s + step] for s in range(0, flat.size, step)),
                     (flat.size,), np_dtype)
    return load_mapped(target).reshape(tensor.shape)


class BlockStore:
    """The blocks of one table in a [`RunStore`][scorebayes.store.RunStore].

    Raises:
        ValueError: the store holds this table drawn with another ``recipe``.
    """

    def __init__(self, store: Any, tag: str, recipe: dict):
        self.store, self.prefix = store, f"table_{tag}"
        old = store.load_json(f"{self.prefix}/recipe")
        if old is not None and old != recipe:
            raise ValueError(
                f"table {tag!r} in {store.path} was drawn with another recipe ({old}); "
                "re-run with --fresh (fresh=True) to start over")
        if old is None:
            store.save_json(f"{self.prefix}/recipe", recipe)

    def meta(self, k: int) -> dict | None:
        """Block ``k``'s counts ``{"kept", "failed", "nonfinite"}``, or ``None`` if not complete."""
        return self.store.load_json(f"{self.prefix}/{k:06d}")

    def completed(self, num_blocks: int, *, in_memory: bool) -> dict[int, tuple]:
        """The complete blocks among ``0 .. num_blocks - 1``, in order, as `load()` returns
        them (``in_memory``), else only their counts ``(None, None, failed, nonfinite)``."""
        found = {}
        for k in range(num_blocks):
            if in_memory:
                block = self.load(k)
            else:  # only the counts: the rows stay on disk
                meta = self.meta(k)
                block = None if meta is None else (None, None, meta["failed"], meta["nonfinite"])
            if block is not None:
                found[k] = block
        return found

    def load(self, k: int) -> tuple[Tensor, Tensor | None, int, int] | None:
        """Block ``k`` in memory: ``(theta [r, d], x [r, n, p] or None, failed, nonfinite)``."""
        meta = self.meta(k)
        if meta is None:
            return None
        theta = torch.from_numpy(np.array(self.store.load_array(f"{self.prefix}/{k:06d}_theta")))
        x = (torch.from_numpy(np.array(self.store.load_array(f"{self.prefix}/{k:06d}_x")))
             if meta["kept"] else None)
        return theta, x, int(meta["failed"]), int(meta["nonfinite"])

    def save(self, k: int, theta: Tensor, x: Tensor | None, failed: int, nonfinite: int) -> None:
        self.store.save_array(f"{self.prefix}/{k:06d}_theta", theta)
        if x is not None:
            self.store.save_array(f"{self.prefix}/{k:06d}_x", x)
        # the block's JSON is written last: it marks the block complete
        self.store.save_json(f"{self.prefix}/{k:06d}", {
            "kept": int(theta.shape[0]) if x is not None else 0, "failed": failed,
            "nonfinite": nonfinite})

    def mapped(self, blocks: list[int]) -> tuple[Tensor, Tensor]:
        """The kept rows of ``blocks`` (complete, in this order) as memory-mapped tensors
        ``theta [N', d]``, ``x [N', n, p]`` over ``theta.npy`` / ``x.npy``, written block by
        block on first use (at most one block is in memory at a time)."""
        from .simulators import SimulatorError

        kept = [k for k in blocks if self.meta(k)["kept"]]
        out = []
        for name in ("theta", "x"):
            path = self.store.file("arrays", f"{self.prefix}/{name}", ".npy")
            arrays = [self.store.load_array(f"{self.prefix}/{k:06d}_{name}") for k in kept]
            first = arrays[0]
            for k, a in zip(kept, arrays):
                if a.shape[1:] != first.shape[1:] or a.dtype != first.dtype:
                    raise SimulatorError(
                        f"block {k} returned {name} {a.shape} ({a.dtype}), but block {kept[0]} "
                        f"had {('*',) + first.shape[1:]} ({first.dtype})")
            shape = (sum(len(a) for a in arrays),) + first.shape[1:]
            del arrays
            if path.is_file():
                mapped = np.load(path, mmap_mode="r", allow_pickle=False)
                if mapped.shape != shape or mapped.dtype != first.dtype:
                    path.unlink()  # left by another set of blocks: rebuild
            if not path.is_file():
                write_mapped(path, (self.store.load_array(f"{self.prefix}/{k:06d}_{name}")
                                    for k in kept), shape, first.dtype)
            out.append(load_mapped(path))
        return out[0], out[1]
