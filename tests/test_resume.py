"""`scorebayes run --out DIR` resumes after kill -9 with bit-identical samples (issue 6)."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from scorebayes.cli import main
from scorebayes.run_status import read_status

SIM = '''
import time
import torch
def simulate(theta, n, generator=None):
    time.sleep(0.05)  # slow enough to be killed mid-table
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator,
                                           dtype=theta.dtype)
'''

CONFIG = '''
method = "score-langevin"
seed = 3
[model]
simulator = "sim.py:simulate"
parameters = ["mu"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 5.0
[data]
true_parameters = [1.0]
n = 30
[options]
table_size = 1200
block_size = 50
num_groups = 100
group_size = 30
localize = false
curvature_penalties = [0.0]
mean_penalties = [0.0]
schedule = {{ epochs = {epochs}, patience = 100, batch_size = 64 }}
mean_schedule = {{ epochs = 2, batch_size = 32 }}
num_samples = 100
remedy = false
'''


def _write(folder: Path, epochs: int = 2, seed_line: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sim.py").write_text(SIM)
    cfg = folder / "run.toml"
    cfg.write_text(CONFIG.format(epochs=epochs) + seed_line)
    return cfg


def _kill_when(cfg: Path, out: Path, marker: Path, timeout: float = 120.0) -> bool:
    """Start `scorebayes run` in a subprocess, kill -9 it once ``marker`` exists."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "scorebayes.cli", "run", str(cfg), "--out",
                             str(out), "--quiet"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    start = time.time()
    try:
        while time.time() - start < timeout:
            if proc.poll() is not None:
                return False  # finished before the marker: nothing was interrupted
            if marker.exists():
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.01)
        raise AssertionError(f"{marker} did not appear within {timeout} s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ref")
    cfg = _write(folder, epochs=12)
    assert main(["run", str(cfg), "--out", str(folder / "out"), "--quiet"]) == 0
    return folder / "out"


def test_kill_during_simulation_then_resume_is_bit_identical(tmp_path, reference):
    cfg = _write(tmp_path, epochs=12)
    out = tmp_path / "out"
    killed = _kill_when(cfg, out, out / "json" / "table_S" / "000004.json")
    assert killed and not (out / "samples.csv").exists()
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_simulations"] > 0
    assert summary["resumed_simulations"] < summary["simulations"]
    assert (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()


def test_kill_during_training_then_resume_is_bit_identical(tmp_path, reference):
    cfg = _write(tmp_path, epochs=12)
    out = tmp_path / "out"
    killed = _kill_when(cfg, out, out / "checkpoints" / "train" / "phase000.pt")
    assert killed and not (out / "samples.csv").exists()
    # `scorebayes status` reads how far the killed run got
    status = read_status(out)
    assert [t.rows for t in status.tables if t.tag == "S"] == [1200]
    (phase,) = [p for p in status.training if p.name == "train/phase000"]
    assert phase.epochs == 12 and 1 <= phase.epochs_done <= 12
    assert phase.finished == (phase.epochs_done == 12)  # patience 100: no early stop
    assert phase.last is not None and phase.best <= phase.last
    assert not any(s.startswith("samples_") for s in status.stages)
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    # every simulation of the killed run is resumed; only the calibration (after training) and the
    # table round it asks for (tables S1, R1: this config's table comes from the prior) are new
    fresh = sum(v for k, v in summary["simulations_by_stage"].items()
                if k.startswith("calibration") or k in ("table_S1", "table_R1"))
    assert fresh > 0 and summary["resumed_simulations"] == pytest.approx(summary["simulations"] - fresh)
    assert (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()
    # the killed process's time, to its last checkpoint, is in the summary (not this one's)
    import scorebayes.store as store_module

    killed_seconds = [v for k, v in store_module.ledger(out).items() if k != store_module._THIS_RUN]
    assert len(killed_seconds) == 1 and killed_seconds[0] > 0
    assert summary["seconds_earlier_processes"] == pytest.approx(killed_seconds[0], abs=1e-3)
    # a complete run re-run: every stage comes from disk, same bytes
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert any(s.startswith("samples_") for s in summary["resumed_stages"])
    assert (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()


def test_changed_config_is_refused_unless_fresh(tmp_path, reference, capsys):
    cfg = _write(tmp_path, epochs=12)
    out = tmp_path / "out"
    (out / "manifest.json").parent.mkdir(parents=True)
    (out / "manifest.json").write_bytes((reference / "manifest.json").read_bytes())
    assert main(["run", str(cfg), "--out", str(out), "--quiet", "--seed", "4"]) == 2
    assert "--fresh" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(out), "--quiet", "--seed", "4", "--fresh"]) == 0
    assert json.loads((out / "summary.json").read_text())["seed"] == 4


def test_copy_without_tables_resumes_on_redrawn_tables_bit_identical(tmp_path, reference):
    """A run killed mid-training, copied without its tables' rows (as when moved to another
    machine), redraws the same tables and finishes with the reference's samples."""
    from scorebayes.store import StoreError, copy_without_tables

    cfg = _write(tmp_path, epochs=12)
    out = tmp_path / "out"
    killed = _kill_when(cfg, out, out / "checkpoints" / "train" / "phase000.pt")
    assert killed and not (out / "samples.csv").exists()
    moved = copy_without_tables(out, tmp_path / "moved")
    assert (moved / "checkpoints" / "train" / "phase000.pt").is_file()
    assert not list((moved / "arrays").rglob("table_*/*.npy"))
    assert [p.name for p in (moved / "json" / "table_S").iterdir()] == ["recipe.json"]
    assert main(["run", str(cfg), "--out", str(moved), "--quiet"]) == 0
    summary = json.loads((moved / "summary.json").read_text())
    assert summary["resumed_simulations"] == 0  # every table row was drawn again
    assert (moved / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()
    # the copied checkpoint is what training continues from: perturbed, the samples change
    tampered = copy_without_tables(out, tmp_path / "tampered")
    phase = tampered / "checkpoints" / "train" / "phase000.pt"
    state = torch.load(phase, weights_only=True)
    for weights in (state["net"], state["best_state"]):
        for value in weights.values():
            if value.is_floating_point():  # not the data view's knot counts
                value.add_(0.5)
    torch.save(state, phase)
    with warnings.catch_warnings():  # the perturbed net's draws may reach the table's edge
        warnings.simplefilter("ignore", UserWarning)
        assert main(["run", str(cfg), "--out", str(tampered), "--quiet"]) == 0
    assert (tampered / "samples.csv").read_bytes() != (reference / "samples.csv").read_bytes()
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text('{"fingerprint": "another"}')
    with pytest.raises(StoreError, match="another run"):
        copy_without_tables(out, other)
    assert sorted(p.name for p in other.iterdir()) == ["manifest.json"]
    with pytest.raises(StoreError, match="not a run directory"):
        copy_without_tables(tmp_path / "nothing", tmp_path / "x")


def test_status_of_a_finished_and_a_partly_drawn_run(tmp_path, reference, capsys):
    """`scorebayes status DIR`: tables, training phases and stages from the files on disk."""
    import shutil

    status = read_status(reference)
    assert status.seed == 3
    # num_groups = 100 groups of 30 in R; R1 and S1 are the calibration's table round
    assert [(t.tag, t.rows, t.target, t.blocks) for t in status.tables] == [
        ("R", 100, 100, 2), ("R1", 100, 100, 2), ("S", 1200, 1200, 24), ("S1", 1200, 1200, 24)]
    assert status.training and all(p.finished for p in status.training)
    (phase,) = [p for p in status.training if p.name == "train/phase000"]
    assert (phase.epochs_done, phase.epochs) == (12, 12)
    assert any(s.startswith("samples_") for s in status.stages)
    assert main(["status", str(reference)]) == 0
    out = capsys.readouterr().out
    assert "table S: 1,200 of 1,200 rows (24 blocks)" in out
    assert "training train/phase000: finished, 12 of 12 epochs" in out
    # the compute time of the process that wrote it (scorebayes.store's ledger); the ledger,
    # rewritten on every write, is never itself the "last write"
    assert len(status.compute_seconds) == 1 and 0 < sum(status.compute_seconds.values()) < 600
    assert "compute time " in out and "over 1 process (" in out
    assert "ledger" not in status.last_write[1]
    # a table whose last blocks are not drawn yet
    partial = tmp_path / "partial"
    shutil.copytree(reference, partial)
    for block in ("000022.json", "000023.json"):
        (partial / "json" / "table_S" / block).unlink()
    assert [t.rows for t in read_status(partial).tables] == [100, 100, 1100, 1200]  # R, R1, S, S1
    # a folder that is not a run directory is named before anything is printed
    assert main(["status", str(reference), str(tmp_path / "nothing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "nothing" in captured.err and "manifest.json" in captured.err
