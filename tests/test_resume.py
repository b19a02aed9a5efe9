"""`scorebayes run --out DIR` resumes after kill -9 with bit-identical samples (issue 6)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scorebayes.cli import main

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
num_simulations = 1200
block_size = 50
num_groups = 100
group_size = 30
localize = false
curvature_penalties = [0.0]
mean_penalties = [0.0]
schedule = {{ epochs = {epochs}, patience = 100, batch_size = 64 }}
mean_schedule = {{ epochs = 2, batch_size = 32 }}
num_samples = 100
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
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_simulations"] == pytest.approx(summary["simulations"])
    assert (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()
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
