"""A flaky simulator through every stage of a Langevin-SBI fit: localization, pilot, tables, the
fit's check, calibration and the CLI's observed data. Each stage drops and counts what fails
(``on_simulator_error = "skip"``/``"retry"``) instead of ending the run, and raises with ``"raise"``.
"""

import json
import math
import warnings

import pytest
import torch
from torch.distributions import Normal

from scorebayes.apps.common import Execution, load_observed
from scorebayes.cli import main
from scorebayes.priors import ParameterSpace, independent
from scorebayes.sbi.budget import Ledger
from scorebayes.sbi.localization import localize
from scorebayes.sbi.reference_tables import TableSource
from scorebayes.sbi.settings import Simulation
from scorebayes.simulators import Simulator, SimulatorError

F64 = torch.float64

FLAKY = '''
import torch

def simulate(theta, n, generator=None):
    """Gaussian mean; raises on about 5% of calls, NaN data sets for about 5% of parameters."""
    if float(torch.rand((), generator=generator)) < 0.05:
        raise RuntimeError("transient failure")
    x = theta[:, None, :] + torch.randn(theta.shape[0], n, theta.shape[1], generator=generator,
                                        dtype=theta.dtype)
    x[torch.rand(theta.shape[0], generator=generator) < 0.05] = float("nan")
    return x
'''

CONFIG = '''
method = "score-langevin"
seed = 3
[model]
simulator = "sims.py:simulate"
parameters = ["m1", "m2"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 3.0
[[prior]]
dist = "normal"
loc = 0.0
scale = 3.0
[data]
true_parameters = [0.5, -1.0]
n = 60
[options]
localize = {localize}
table_size = 3000
num_groups = 200
curvature_penalties = [0.0]
mean_penalties = [0.0]
schedule = {{ epochs = 10, patience = 10 }}
mean_schedule = {{ epochs = 10, batch_size = 32 }}
localization = {{ replicates = 12, iterations = 60 }}
num_samples = 400
calibrate = {calibrate}
'''


def _clean(theta, n, g):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, theta.shape[1], generator=g, dtype=F64)


def _prior(d=1):
    return independent([Normal(torch.tensor(0.0, dtype=F64), torch.tensor(3.0, dtype=F64))] * d)


@pytest.mark.parametrize("localize_first, calibrate", [(False, True), (True, False)])
def test_a_flaky_simulator_runs_to_a_posterior_through_the_cli_and_resumes(tmp_path, localize_first, calibrate):
    """Both posteriors: the calibrated one (the default) and Langevin chains with their check."""
    (tmp_path / "sims.py").write_text(FLAKY)
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.format(localize=str(localize_first).lower(), calibrate=str(calibrate).lower()))
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    dropped = summary["dropped_by_stage"]
    # the check's (or the calibration's) data sets met NaNs, and the tables' blocks raised or met NaNs too
    checking = [k for k in dropped if k.startswith("calibration" if calibrate else "check")]
    assert checking and all(dropped[k]["nonfinite"] > 0 for k in checking)
    assert sum(v["failed"] + v["nonfinite"] for k, v in dropped.items() if k.startswith("table")) > 0
    assert summary["failed_simulations"] == sum(v["failed"] for v in dropped.values())
    assert summary["nonfinite_simulations"] == sum(v["nonfinite"] for v in dropped.values())
    # a posterior, judged by the check (these small settings need not make it right)
    means = [row["mean"] for row in summary["parameters"]]
    assert all(math.isfinite(m) for m in means) and summary["check"]["verdict"] in ("pass", "warn", "fail")
    assert len((out / "samples.csv").read_text().splitlines()) == 1 + 400
    # a re-run in the same directory resumes and reaches the same posterior
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert [row["mean"] for row in again["parameters"]] == means


def test_the_check_simulations_go_through_the_fault_handling():
    space = ParameterSpace(_prior())
    theta = torch.full((400, 1), 0.5, dtype=F64)

    def nan_sometimes(th, n, g):
        x = _clean(th, n, g)
        x[torch.rand(th.shape[0], generator=g) < 0.05] = float("nan")
        return x

    def source(simulator, mode, fraction=0.1):
        return TableSource(Simulator(simulator), space, Simulation(on_simulator_error=mode, max_failure_fraction=fraction),
                           smoothing=None, seed=0, progress=False, store=None, n_data=20)

    clean = source(_clean, "skip")
    keep, x = clean.simulate(theta, 20, torch.Generator().manual_seed(1), "the fit's check")
    # no fault: the draws of a plain call
    assert keep.all() and torch.equal(x, _clean(theta, 20, torch.Generator().manual_seed(1)))
    flaky = source(nan_sometimes, "skip")
    with pytest.warns(UserWarning, match="the fit's check: dropped 0 failed and"):
        keep, x = flaky.simulate(theta, 20, torch.Generator().manual_seed(1), "the fit's check")
    assert 0 < int((~keep).sum()) < 40 and len(x) == int(keep.sum()) and torch.isfinite(x).all()
    assert flaky.faults["nonfinite"] == int((~keep).sum())
    with pytest.raises(SimulatorError, match="non-finite"):
        source(nan_sometimes, "raise").simulate(theta, 20, torch.Generator().manual_seed(1), "check")
    with pytest.raises(SimulatorError, match="max_failure_fraction"):
        source(nan_sometimes, "skip", fraction=0.01).simulate(theta, 20, torch.Generator().manual_seed(1), "check")


class _FailsFirst:
    """Raises on its first ``failures`` calls, then simulates."""

    def __init__(self, failures=1):
        self.calls, self.failures = 0, failures

    def __call__(self, theta, n, g):
        self.calls += 1
        if self.calls <= self.failures:
            raise OSError("transient")
        return _clean(theta, n, g)


@pytest.mark.parametrize("mode", ["skip", "retry"])
def test_a_pilot_that_fails_once_is_tried_again(mode):
    space = ParameterSpace(_prior())
    theta = torch.zeros(2, 1, dtype=F64)
    source = TableSource(Simulator(_FailsFirst()), space, Simulation(on_simulator_error=mode), smoothing=None,
                         seed=0, progress=False, store=None, n_data=20)
    assert source.pilot(theta, 20).shape == (2, 20, 1)
    strict = TableSource(Simulator(_FailsFirst()), space, Simulation(on_simulator_error="raise"), smoothing=None,
                         seed=0, progress=False, store=None, n_data=20)
    with pytest.raises(OSError, match="transient"):
        strict.pilot(theta, 20)


def test_the_observed_data_and_the_cli_pilot_are_tried_again():
    config = {"model": {"simulator": "sims.py:simulate"}, "data": {"true_parameters": [0.5], "n": 30}}
    simulator = Simulator(_FailsFirst(failures=2))
    x_obs, _ = load_observed(config, ".", simulator, _prior(), 0, Execution(on_simulator_error="skip"))
    assert x_obs.shape == (30, 1) and torch.isfinite(x_obs).all()
    from scorebayes.config import UserCodeError

    with pytest.raises(UserCodeError, match="transient"):
        load_observed(config, ".", Simulator(_FailsFirst()), _prior(), 0, Execution(on_simulator_error="raise"))


def _raises_above(theta, n, g):
    if (theta[:, 0] > 2.5).any():
        raise RuntimeError("solver diverged")
    return _clean(theta, n, g)


def test_the_localization_skips_failed_simulations_and_counts_them():
    x_obs = 1.0 + torch.randn(100, 1, generator=torch.Generator().manual_seed(0), dtype=F64)
    options = dict(replicates=12, num_directions=20, max_evaluations=60, seed=1)
    with pytest.raises(RuntimeError, match="diverged"):
        localize(Simulator(_raises_above), x_obs, _prior(), **options)
    loc = localize(Simulator(_raises_above), x_obs, _prior(), on_simulator_error="skip", **options)
    assert loc.failed > 0 and loc.dropped == 0
    assert abs(float(loc.proposal.mean[0]) - float(x_obs.mean())) < 0.3
    # a retry is counted as an evaluation: no fewer simulations than the skipping run
    retried = localize(Simulator(_raises_above), x_obs, _prior(), on_simulator_error="retry", **options)
    assert retried.simulations >= loc.simulations


def test_a_replicate_whose_every_simulation_fails_is_left_out_of_the_proposal():
    x_obs = 1.0 + torch.randn(100, 1, generator=torch.Generator().manual_seed(0), dtype=F64)

    def broken_far_out(theta, n, g):  # a replicate started beyond 6 never gets a simulation
        if (theta[:, 0].abs() > 6.0).any():
            raise RuntimeError("no solution")
        return _clean(theta, n, g)

    loc = localize(Simulator(broken_far_out), x_obs, _prior(), replicates=30, num_directions=20,
                   max_evaluations=40, seed=2, init=torch.linspace(-12.0, 12.0, 30)[:, None],
                   step_scale=0.01, on_simulator_error="skip")
    assert loc.dropped > 0
    assert torch.isfinite(loc.proposal.mean).all() and torch.isfinite(loc.proposal.sd).all()
    kept = loc.u_hat[torch.isfinite(loc.loss)]
    assert torch.allclose(loc.proposal.mean, kept.mean(0))


def test_the_ledger_reports_dropped_simulations_by_stage(capsys):
    faults = {"failed": 0, "nonfinite": 0}
    simulations: dict[str, float] = {}
    ledger = Ledger(simulations, progress=True, faults=faults)
    with ledger.stage("table_S"):
        faults["failed"] += 3
        simulations["table_S"] = 10.0
    with ledger.stage("check"):
        faults["nonfinite"] += 2
    with ledger.stage("sampling"):
        pass
    with ledger.stage("second round"):  # a table inside a round: counted once, in the table
        faults["failed"] += 1
        with ledger.stage("table_S2"):
            faults["failed"] += 4
    assert ledger.dropped == {"table_S": {"failed": 3, "nonfinite": 0}, "check": {"failed": 0, "nonfinite": 2},
                              "second round": {"failed": 1, "nonfinite": 0},
                              "table_S2": {"failed": 4, "nonfinite": 0}}
    err = capsys.readouterr().err
    assert "dropped 3 failed, 0 non-finite" in err and "dropped 0 failed, 2 non-finite" in err


def test_adam_drops_a_replicate_whose_loss_turns_non_finite():
    """Reparametrised simulator whose transform is NaN beyond theta = 4: replicates started there
    raise with "raise", and are left out of q with "skip"."""
    def transform(theta, z):
        x = theta[:, None, :] + z
        return torch.where(theta[:, None, :] > 4.0, torch.full_like(x, float("nan")), x)

    simulator = Simulator(latent=lambda B, n, g: torch.randn(B, n, 1, generator=g, dtype=F64), transform=transform)
    x_obs = 1.0 + torch.randn(100, 1, generator=torch.Generator().manual_seed(0), dtype=F64)
    init = torch.cat([torch.full((3, 1), 6.0), torch.linspace(-3.0, 3.0, 9)[:, None]]).to(F64)
    options = dict(replicates=12, iterations=80, num_directions=10, init=init, seed=0)
    with pytest.raises(ValueError, match="non-finite"):
        localize(simulator, x_obs, _prior(), **options)
    loc = localize(simulator, x_obs, _prior(), on_simulator_error="skip", **options)
    assert loc.dropped == 3 and torch.isinf(loc.loss[:3]).all() and torch.isfinite(loc.loss[3:]).all()
    assert abs(float(loc.proposal.mean[0]) - float(loc.u_hat[3:].mean())) < 1e-12
