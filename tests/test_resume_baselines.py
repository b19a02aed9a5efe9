"""`scorebayes run --out DIR` resumes bsl chains and the DFD bootstrap bit-identically, bsl
survives simulator faults, and bad option values fail before any table or chain (issue 6)."""

import json
import textwrap

import numpy as np
import pytest
import torch

from scorebayes.cli import main
from scorebayes.discrete import DFDLoss, PoissonModel
from scorebayes.discrete import calibrate as calibrate_module
from scorebayes.discrete.calibrate import bootstrap_minimisers, calibrate_beta, persisting
from scorebayes.store import RunStore

SIM = '''
import os
import time
import torch
STATE = {"key": None, "calls": 0, "max_batch": 0}

def simulate(theta, n, generator=None):
    """x_i = theta + N(0, 1); KeyboardInterrupt at call $SB_STOP_AT (counted from when it is set);
    raises for theta > $SB_FAIL_ABOVE; refuses batches above $SB_MAX_BATCH (fail-fast tests)."""
    key = os.environ.get("SB_STOP_AT")
    if key != STATE["key"]:
        STATE.update(key=key, calls=0)
    STATE["calls"] += 1
    if key and STATE["calls"] == int(key):
        raise KeyboardInterrupt
    limit = os.environ.get("SB_MAX_BATCH")
    if limit and theta.shape[0] > int(limit):
        raise AssertionError(f"simulated a batch of {theta.shape[0]}")
    if os.environ.get("SB_SLEEP"):
        time.sleep(float(os.environ["SB_SLEEP"]))
    above = os.environ.get("SB_FAIL_ABOVE")
    if above and (theta > float(above)).any():
        raise RuntimeError("solver diverged")
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator,
                                           dtype=theta.dtype)
'''

BASE = '''
method = "{method}"
seed = 2
[model]
simulator = "sim.py:simulate"
parameters = ["mu"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 2.0
[data]
observed = "x.csv"
[options]
'''

BSL = "num_chains = 3\nnum_steps = 80\nburn_in = 20\nnum_sims = 10\ncheckpoint_every = 9\n"


def _write(folder, method, options):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sim.py").write_text(SIM)
    x = np.random.default_rng(0).normal(0.6, 1.0, size=(12, 1))
    np.savetxt(folder / "x.csv", x, delimiter=",")
    cfg = folder / "run.toml"
    cfg.write_text(BASE.format(method=method) + textwrap.dedent(options))
    return str(cfg)


def _run(cfg, out):
    return main(["run", cfg, "--out", str(out), "--quiet"])


@pytest.mark.parametrize("stop_at", [4, 41])
def test_bsl_interrupted_run_resumes_bit_identically(tmp_path, monkeypatch, stop_at):
    """Call 1 is the pilot simulation, 2 the chains' start, 2 + t iteration t (the option
    check uses a stand-in simulator); checkpoints after iterations 9, 18, ..."""
    reference = tmp_path / "ref"
    assert _run(_write(tmp_path / "a", "bsl", BSL), reference) == 0
    cfg = _write(tmp_path / "b", "bsl", BSL)
    out = tmp_path / "out"
    monkeypatch.setenv("SB_STOP_AT", str(stop_at))
    assert _run(cfg, out) == 130  # KeyboardInterrupt: "re-run the same command to resume"
    assert not (out / "samples.csv").exists()
    monkeypatch.delenv("SB_STOP_AT")
    assert _run(cfg, out) == 0
    assert (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    last = stop_at - 3  # the last completed iteration
    done = 9 * (last // 9) + 1 if last >= 9 else 0  # states restored from the checkpoint
    assert summary["resumed_simulations"] == 3 * 10 * done
    assert summary["simulations"] == 3 * 80 * 10
    assert summary["failed_simulations"] == 0


@pytest.mark.slow
def test_bsl_killed_with_sigkill_resumes_bit_identically(tmp_path, monkeypatch):
    import os
    import signal
    import subprocess
    import sys
    import time

    reference = tmp_path / "ref"
    assert _run(_write(tmp_path / "a", "bsl", BSL), reference) == 0
    cfg, out = _write(tmp_path / "b", "bsl", BSL), tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), SB_SLEEP="0.02")
    proc = subprocess.Popen([sys.executable, "-m", "scorebayes.cli", "run", cfg, "--out",
                             str(out), "--quiet"], env=env)
    marker, start = out / "checkpoints" / "bsl" / "chain.pt", time.time()
    while not marker.exists() and proc.poll() is None and time.time() - start < 120:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL and not (out / "samples.csv").exists()
    assert _run(cfg, out) == 0
    assert json.loads((out / "summary.json").read_text())["resumed_simulations"] > 0
    assert (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()


def test_bsl_simulator_faults_are_rejected_and_counted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SB_FAIL_ABOVE", "1.5")
    out = tmp_path / "out"
    cfg = _write(tmp_path, "bsl", BSL + "max_failure_fraction = 0.5\n")
    with pytest.warns(UserWarning, match="biased"):
        assert _run(cfg, out) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed_simulations"] > 0
    samples = np.loadtxt(out / "samples.csv", delimiter=",", skiprows=1)
    assert samples[:, 0].max() <= 1.5  # columns mu, chain, draw
    cfg = _write(tmp_path / "raise", "bsl", BSL + 'on_simulator_error = "raise"\n')
    capsys.readouterr()
    assert _run(cfg, tmp_path / "out_raise") == 2  # the user's simulator raised: named, with its file
    err = capsys.readouterr().err
    assert "diverged" in err and ".py:" in err and "Traceback" not in err


@pytest.mark.parametrize("method, options, message", [
    ("abc", "num_simulations = 5000\nk = 0\n", "[options] k = 0"),
    ("abc", "num_simulations = 5000\nk = 6000\n", "[options] k = 6000"),
    ("npe", 'estimator = "gaussian"\nnum_simulations = 5000\nmax_epochs = 0\n', "max_epochs"),
    ("npe", 'estimator = "gaussian"\nnum_simulations = 5000\nvalidation_fraction = 2.0\n',
     "validation_fraction"),
    ("bsl", "num_sims = 1\n", "num_sims"),
    ("bsl", "num_steps = 10\nburn_in = 10\n", "burn_in"),
    ("bsl", "checkpoint_every = 0\n", "checkpoint_every"),
])
def test_bad_option_values_fail_before_any_simulation(tmp_path, monkeypatch, capsys, method,
                                                       options, message):
    monkeypatch.setenv("SB_MAX_BATCH", "2")  # only the two-draw pilot simulation may run
    assert _run(_write(tmp_path, method, options), tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert message in err and "simulated a batch" not in err


DFD = '''
method = "dfd-bayes"
seed = 4
[model]
model = "builtin:poisson"
[data]
observed = "counts.csv"
[options]
num_bootstrap = 12
num_chains = 2
num_samples = 50
burn_in = 100
thin = 1
'''


def _dfd(folder, extra=""):
    folder.mkdir(parents=True, exist_ok=True)
    x = np.random.default_rng(1).poisson(3.0, size=(300, 1))
    np.savetxt(folder / "counts.csv", x, fmt="%d", delimiter=",")
    (folder / "run.toml").write_text(DFD + extra)
    return str(folder / "run.toml")


def test_dfd_bootstrap_interrupted_run_resumes_bit_identically(tmp_path, monkeypatch):
    reference = tmp_path / "ref"
    assert _run(_dfd(tmp_path / "a"), reference) == 0
    ref_summary = json.loads((reference / "summary.json").read_text())
    assert ref_summary["bootstrap_replicates"] == 12 and ref_summary["resumed_bootstrap"] == 0

    original, calls = calibrate_module._bootstrap_unit, []

    def interrupted(unit):  # stop at the 4th task of replicates (replicate 6 of 12)
        calls.append(unit[3][0])
        if len(calls) == 4:
            raise KeyboardInterrupt
        return original(unit)

    monkeypatch.setattr(calibrate_module, "_bootstrap_unit", interrupted)
    cfg, out = _dfd(tmp_path / "b"), tmp_path / "out"
    assert _run(cfg, out) == 130
    assert calls == [0, 2, 4, 6]  # tasks of ceil(12 / 8) = 2 replicates
    calls.clear()
    monkeypatch.setattr(calibrate_module, "_bootstrap_unit", original)
    assert _run(cfg, out) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_bootstrap"] == 6 and summary["bootstrap_replicates"] == 12
    assert summary["beta"] == ref_summary["beta"]
    assert (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()


def test_bootstrap_persistence_is_bit_identical_and_executor_independent(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    loss = DFDLoss(PoissonModel(), np.random.default_rng(2).poisson(2.0, size=(200, 1)))
    prior = torch.distributions.Gamma(torch.tensor([2.0], dtype=torch.float64),
                                      torch.tensor([1.0], dtype=torch.float64))
    with persisting(RunStore(tmp_path / "s1", config=None, seed=0)):
        serial = calibrate_beta(loss, prior, num_bootstrap=9, seed=3)
    with persisting(RunStore(tmp_path / "s2", config=None, seed=0)) as record, \
            ThreadPoolExecutor(2) as pool:
        threaded = calibrate_beta(loss, prior, num_bootstrap=9, seed=3, executor=pool)
    assert record.computed == 9 and record.resumed == 0
    assert torch.equal(serial.bootstrap, threaded.bootstrap) and serial.beta == threaded.beta
    with persisting(RunStore(tmp_path / "s1", config=None, seed=0)) as record:
        again = calibrate_beta(loss, prior, num_bootstrap=9, seed=3)
    assert record.resumed == 9 and record.computed == 0
    assert torch.equal(again.bootstrap, serial.bootstrap)
    with persisting(RunStore(tmp_path / "s1", config=None, seed=0)), \
            pytest.raises(ValueError, match="another calibration"):
        bootstrap_minimisers(loss, prior, serial.minimiser, num_bootstrap=10, seed=3)


@pytest.mark.parametrize("old, new, message", [
    ("", "steps = 0\n", "[options] steps = 0: must be an integer >= 1"),
    ("", 'method = "bfgs"\n', "[options] method = \"bfgs\": must be one of"),
    ("", 'sampler = "gibbs"\n', "[options] sampler = \"gibbs\": must be one of"),
    ("thin = 1", "thin = 0", "thin"),  # the sampler's options, checked before the calibration
    ("num_samples = 50", "num_samples = 0", "num_samples"),
    ("", "beta = -1.0\n", "[options] beta = -1.0: must be a number > 0"),
])
def test_dfd_bad_option_values_fail_before_the_calibration(tmp_path, monkeypatch, capsys,
                                                           old, new, message):
    def never(*args, **kwargs):
        raise AssertionError("the calibration started")

    monkeypatch.setattr(calibrate_module, "minimise", never)
    cfg = _dfd(tmp_path)
    (tmp_path / "run.toml").write_text(DFD.replace(old, new) if old else DFD + new)
    assert _run(cfg, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert message in err and "calibration started" not in err, err
