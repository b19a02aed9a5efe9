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


class _Clock:
    """Stands in for the store module's ``time``: a perf_counter the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now

    @staticmethod
    def strftime(fmt):
        return "2026-01-01T00:00:00"


def test_ledger_sums_earlier_processes_up_to_their_last_write(tmp_path, monkeypatch):
    import scorebayes.store as store_module
    from scorebayes.store import ledger

    clock = _Clock()
    monkeypatch.setattr(store_module, "time", clock)

    def new_process(name):
        monkeypatch.setattr(store_module, "_THIS_RUN", name)
        monkeypatch.setattr(store_module, "_OPENED", {})

    new_process("first")
    first = RunStore(tmp_path, config={}, seed=0)
    assert first.earlier_seconds == 0 and ledger(tmp_path) == {}  # nothing written yet
    clock.now += 30
    first.save_array("x", np.zeros(2))
    clock.now += 1000  # work after the last save produced nothing kept: not counted
    new_process("second")
    second = RunStore(tmp_path, config={}, seed=0)
    assert second.earlier_seconds == 30
    also = RunStore(tmp_path, config={}, seed=0)  # the same process again: one start, one entry
    clock.now += 12
    second.save_checkpoint("c", {"k": 1})
    late = RunStore(tmp_path, config={}, seed=0)  # opened after this process wrote: own time not earlier
    assert late.earlier_seconds == 30 and late.elapsed_seconds == 42.0
    clock.now += 3
    also.mark_done("stage")
    assert ledger(tmp_path) == {"first": 30.0, "second": 15.0}
    assert also.elapsed_seconds == 45.0 and second.earlier_seconds == 30  # own entry not earlier
    clock.now += 1
    second.save_json("meta", {})  # within LOG_EVERY of the last entry: not rewritten yet
    assert ledger(tmp_path)["second"] == 15.0
    clock.now += 4
    second.mark_done("other")  # a stage's end always logs
    assert ledger(tmp_path)["second"] == 20.0  # rewritten, not appended
    new_process("third")
    assert RunStore(tmp_path, config={}, seed=0).earlier_seconds == 50.0
    (tmp_path / "json" / "ledger" / "broken.json").write_text("{")  # skipped, not fatal
    assert RunStore(tmp_path, config={}, seed=0).earlier_seconds == 50.0
    clock.now += 7
    fresh = RunStore(tmp_path, config={}, seed=0, fresh=True)  # started over: so is its time
    assert fresh.earlier_seconds == 0 and fresh.elapsed_seconds == 0
