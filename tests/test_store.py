"""The run directory: atomic files, manifests, memory-mapped arrays, safe checkpoints."""

import json

import numpy as np
import pytest
import torch

from scorebayes.store import RunStore, StoreError, atomic_write, config_fingerprint


def test_arrays_json_checkpoints_and_stages_round_trip(tmp_path):
    store = RunStore(tmp_path / "run", config={"a": 1}, seed=0)
    x = torch.randn(5, 3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    store.save_array("tables/x", x)
    loaded = store.load_array("tables/x")
    assert isinstance(loaded, np.memmap) and not loaded.flags.writeable
    assert np.array_equal(loaded, x.numpy())
    store.save_json("meta", {"k": [1, 2]})
    assert store.load_json("meta") == {"k": [1, 2]} and store.load_json("missing") is None
    net = torch.nn.Linear(2, 1)
    g = torch.Generator().manual_seed(3)
    store.save_checkpoint("net", {"net": net.state_dict(), "generator": g.get_state(), "epoch": 4})
    state = store.load_checkpoint("net")
    assert torch.equal(state["net"]["weight"], net.weight) and state["epoch"] == 4
    assert torch.equal(state["generator"], g.get_state())
    assert not store.is_done("stage") and store.stage_info("stage") is None
    store.mark_done("stage", {"n": 1})
    assert store.is_done("stage") and store.resumed_stages == []  # done in this run
    again = RunStore(tmp_path / "run", config={"a": 1}, seed=0)
    assert again.is_done("stage") and again.resumed_stages == ["stage"]
    assert again.stage_info("stage") == {"n": 1}


def test_checkpoints_refuse_arbitrary_objects(tmp_path):
    from fractions import Fraction  # picklable, but not on torch's weights-only allow list

    store = RunStore(tmp_path, config={}, seed=0)
    store.save_checkpoint("bad", {"obj": Fraction(1, 3)})
    with pytest.raises(Exception, match="(?i)weights_only|unsupported|global"):
        store.load_checkpoint("bad")


def test_changed_config_or_seed_is_refused_unless_fresh(tmp_path):
    store = RunStore(tmp_path, config={"a": 1, "b": [1, 2]}, seed=0)
    store.save_array("x", np.zeros(3))
    RunStore(tmp_path, config={"b": [1, 2], "a": 1}, seed=0)  # key order does not matter
    with pytest.raises(StoreError, match="--fresh"):
        RunStore(tmp_path, config={"a": 2, "b": [1, 2]}, seed=0)
    with pytest.raises(StoreError, match="seed"):
        RunStore(tmp_path, config={"a": 1, "b": [1, 2]}, seed=1)
    fresh = RunStore(tmp_path, config={"a": 2}, seed=1, fresh=True)
    assert not fresh.has_array("x")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["fingerprint"] == config_fingerprint({"a": 2}, 1) and manifest["seed"] == 1


def test_atomic_write_leaves_old_file_when_writer_fails(tmp_path):
    path = tmp_path / "f.bin"
    atomic_write(path, lambda fh: fh.write(b"old"))

    def broken(fh):
        fh.write(b"partial")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write(path, broken)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]  # no temporary left behind
