"""Simulator faults in reference tables: raise / NaN / inf, skip / retry / raise (issue 6)."""

import pytest
import torch

from scorebayes.priors import independent
from scorebayes.proposal import PriorSampler
from scorebayes.simulators import Simulator, SimulatorError
from scorebayes.tables import simulate_table

F64 = torch.float64


def _prior():
    return independent([torch.distributions.Normal(torch.tensor(0.0, dtype=F64),
                                                   torch.tensor(1.0, dtype=F64))])


def _clean(theta, n, g):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=g, dtype=F64)


def _raises_above(theta, n, g):
    """Fails (for the whole batch) whenever some theta > 2: theta-dependent failures."""
    if (theta > 2.0).any():
        raise RuntimeError("solver diverged")
    return _clean(theta, n, g)


def _nan_above(theta, n, g):
    x = _clean(theta, n, g)
    x[theta[:, 0] > 1.5] = float("nan")
    x[theta[:, 0] < -1.8, 0] = float("inf")
    return x


class _Flaky:
    """Raises for a single parameter on the first try of each row's seed (random faults)."""

    def __call__(self, theta, n, g):
        u = torch.rand(theta.shape[0], generator=g, dtype=F64)
        if theta.shape[0] == 1 and u[0] < 0.5:
            raise OSError("transient")
        if theta.shape[0] > 1 and (theta > 1.0).any():
            raise OSError("transient batch failure")
        return _clean(theta, n, g)


def test_raise_mode_propagates_the_error():
    with pytest.raises(RuntimeError, match="diverged"):
        simulate_table(Simulator(_raises_above), PriorSampler(_prior()), 200, 2, seed=0,
                       block_size=50)


def test_skip_drops_only_the_failing_parameters_row_by_row():
    sampler = PriorSampler(_prior())
    ref = simulate_table(Simulator(_clean), sampler, 400, 2, seed=0, block_size=50)
    bad = (ref.theta[:, 0] > 2.0)
    with pytest.warns(UserWarning, match="biased"):
        table = simulate_table(Simulator(_raises_above), sampler, 400, 2, seed=0, block_size=50,
                               on_simulator_error="skip")
    assert table.failed == int(bad.sum()) > 0 and table.nonfinite == 0
    assert torch.equal(table.theta, ref.theta[~bad])  # every good parameter kept
    assert (table.theta <= 2.0).all() and torch.isfinite(table.x).all()
    # blocks without a failure are bit-identical to the clean table
    clean_blocks = [k for k in range(8) if not bad[50 * k: 50 * k + 50].any()]
    assert clean_blocks
    k = clean_blocks[0]
    start = int((~bad[: 50 * k]).sum())
    assert torch.equal(table.x[start: start + 50], ref.x[50 * k: 50 * k + 50])


def test_nonfinite_rows_are_dropped_and_counted():
    sampler = PriorSampler(_prior())
    ref = simulate_table(Simulator(_clean), sampler, 500, 3, seed=1, block_size=64)
    expected = int(((ref.theta[:, 0] > 1.5) | (ref.theta[:, 0] < -1.8)).sum())
    with pytest.warns(UserWarning):
        table = simulate_table(Simulator(_nan_above), sampler, 500, 3, seed=1, block_size=64,
                               on_simulator_error="skip", max_failure_fraction=0.2)
    assert table.nonfinite == expected > 0 and table.failed == 0
    assert len(table) == 500 - expected and torch.isfinite(table.x).all()
    with pytest.raises(SimulatorError, match="non-finite"):
        simulate_table(Simulator(_nan_above), sampler, 500, 3, seed=1, block_size=64)


def test_too_many_failures_is_a_clear_error():
    with pytest.raises(SimulatorError, match="max_failure_fraction"):
        simulate_table(Simulator(_raises_above), PriorSampler(_prior()), 400, 1, seed=0,
                       block_size=50, on_simulator_error="skip", max_failure_fraction=0.01)


def test_retry_recovers_transient_faults_deterministically():
    sampler = PriorSampler(_prior())
    kwargs = dict(seed=2, block_size=40, max_failure_fraction=1.0)
    with pytest.warns(UserWarning):
        skipped = simulate_table(Simulator(_Flaky()), sampler, 400, 1,
                                 on_simulator_error="skip", **kwargs)
    retried = simulate_table(Simulator(_Flaky()), sampler, 400, 1, on_simulator_error="retry",
                             retries=30, **kwargs)
    assert skipped.failed > 0 and retried.failed == 0 and len(retried) == 400
    again = simulate_table(Simulator(_Flaky()), sampler, 400, 1, on_simulator_error="retry",
                           retries=30, chunk_size=120, **kwargs)
    assert torch.equal(retried.x, again.x) and torch.equal(retried.theta, again.theta)


def test_cli_reports_fault_counts(tmp_path):
    import json

    from scorebayes.cli import main

    (tmp_path / "sim.py").write_text(
        "import torch\n"
        "def simulate(theta, n, generator=None):\n"
        "    x = theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator,"
        " dtype=theta.dtype)\n"
        "    x[theta[:, 0] > 4.0] = float('nan')\n"
        "    if (theta[:, 0] < -4.0).any():\n"
        "        raise RuntimeError('bad theta')\n"
        "    return x\n")
    (tmp_path / "run.toml").write_text('''
method = "score-langevin"
seed = 1
[model]
simulator = "sim.py:simulate"
[[prior]]
dist = "normal"
loc = 0.0
scale = 3.0
[data]
true_parameters = [1.0]
n = 20
[options]
table_size = 1000
num_groups = 100
group_size = 20
localize = false
curvature_penalties = [0.0]
mean_penalties = [0.0]
schedule = { epochs = 2 }
mean_schedule = { epochs = 2 }
num_samples = 50
on_simulator_error = "skip"
max_failure_fraction = 0.3
''')
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="biased"):
        assert main(["run", str(tmp_path / "run.toml"), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed_simulations"] > 0 and summary["nonfinite_simulations"] > 0
    assert summary["resumed_simulations"] == 0 and summary["resumed_stages"] == []
