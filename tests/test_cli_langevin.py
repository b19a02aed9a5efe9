"""The `scorebayes run` contract for method = "score-langevin" (DESIGN.md section 4)."""

import json

import pytest

from scorebayes.cli import main

SIM = '''
import torch
def simulate(theta, n, generator=None):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator, dtype=theta.dtype)
def bad_shape(theta, n, generator=None):
    return torch.zeros(theta.shape[0], n + 1, 1)
'''

CONFIG = '''
method = "score-langevin"
seed = 2
[model]
simulator = "sim.py:{fn}"
parameters = ["mu"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 5.0
[data]
{data}
[options]
table_size = 2000
num_groups = 200
group_size = 50
localize = false
curvature_penalties = [0.0]
mean_penalties = [0.0]
schedule = {{ epochs = 8, patience = 8 }}
mean_schedule = {{ epochs = 10, batch_size = 32 }}
num_samples = 200
{extra}
'''


def write(tmp_path, fn="simulate", data="true_parameters = [1.5]\nn = 40", extra=""):
    (tmp_path / "sim.py").write_text(SIM)
    cfg = tmp_path / "run.toml"
    cfg.write_text(CONFIG.format(fn=fn, data=data, extra=extra))
    return cfg


@pytest.mark.parametrize("calibrate", [None, False])
def test_run_writes_the_contract_outputs(tmp_path, calibrate):
    cfg = write(tmp_path, extra="" if calibrate is None else f"calibrate = {str(calibrate).lower()}")
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "score-langevin" and summary["seed"] == 2
    assert summary["simulations"] > 0 and summary["seconds"] > 0
    assert summary["check"]["verdict"] in ("pass", "warn", "fail")
    if calibrate is None:  # the default: the calibrated posterior, its rounds counted per stage
        assert summary["check"]["details"]["rounds"] >= 1
        assert any(stage.startswith("calibration") for stage in summary["simulations_by_stage"])
    else:  # Langevin chains: the sampler's checks reach the summary (4 chains: start memory null)
        assert summary["start_memory"] is None and 0 <= summary["edge_fraction"] <= 1
        assert summary["starts_reflected"] == 0
    row = summary["parameters"][0]
    assert set(row) == {"name", "mean", "sd", "q2.5", "q97.5", "rhat", "ess"} and row["name"] == "mu"
    assert abs(row["mean"] - 1.5) < 5 * (row["sd"] + 0.2)
    header = (out / "samples.csv").read_text().splitlines()[0]
    assert header == "mu,chain,draw"
    assert (out / "pairplot.png").stat().st_size > 1000
    assert (out / "posterior.nc").exists()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"extra": "not_an_option = 3"}, "[options] not_an_option = 3: unknown key"),
        ({"fn": "bad_shape"}, "shape"),
        ({"fn": "missing_function"}, "no attribute"),
        ({"data": 'observed = "nothere.csv"'}, "not found"),
        ({"extra": 'mode = "sideways"'}, 'mode = "sideways": must be one of "single"'),
        ({"data": "true_parameters = [1.0, 2.0]\nn = 10"}, "true_parameters = [1.0, 2.0]: has 2 values for 1 parameters"),
        ({"extra": "localize_in_support = true"}, "localize_in_support = true: needs support_fn"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, capsys, kwargs, message):
    cfg = write(tmp_path, **kwargs)
    code = main(["run", str(cfg), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err, err
    assert "Traceback" not in err


def test_non_finite_observed_data(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("x\n1.0\nnan\n2.0\n")
    cfg = write(tmp_path, data='observed = "x.csv"')
    assert main(["run", str(cfg), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "non-finite" in capsys.readouterr().err


def test_two_functions_from_one_file_are_one_module(tmp_path):
    """A config naming two functions of one file gets both from a single, picklable module."""
    import pickle

    from scorebayes.config import load_callable

    (tmp_path / "funcs.py").write_text("def simulate(theta, n, g):\n    return theta\n\n"
                                       "def summary(x):\n    return x\n")
    simulate = load_callable("funcs.py:simulate", tmp_path)
    summary = load_callable("funcs.py:summary", tmp_path)
    assert pickle.loads(pickle.dumps(simulate)) is simulate
    assert pickle.loads(pickle.dumps(summary)) is summary


def test_option_calibration_writes_its_report(tmp_path):
    cfg = write(tmp_path, extra="calibration = {num_data_sets = 20, chains = 4, draws_per_chain = 5, "
                               "burn_in = 20, thin = 2}")
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["calibration"]["num_data_sets"] == 20 and len(summary["calibration"]["coverage"]) == 1
    assert "| mu |" in (out / "calibration.md").read_text()
    assert (out / "calibration_ranks.png").stat().st_size > 1000 and (out / "samples.csv").exists()


@pytest.mark.parametrize("calibration, message", [
    ('"yes"', 'calibration = "yes": must be true or false or a table'),
    ("{data_sets = 20}", "data_sets"),
    ("{num_data_sets = 1}", "calibration num_data_sets = 1: must be an integer >= 2"),
    ("{at = [1.0, 2.0]}", "calibration at = [1.0, 2.0]: must be a list of 1 parameter values"),
])
def test_bad_calibration_options_fail_before_the_fit(tmp_path, capsys, calibration, message):
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, extra=f"calibration = {calibration}")), "--out", str(out), "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not (out / "summary.json").exists()


def test_a_failed_calibration_loses_nothing_else(tmp_path, monkeypatch):
    import scorebayes.sbi.checks.calibration as calibration

    def broken(*args, **kwargs):
        raise RuntimeError("chains diverged")

    monkeypatch.setattr(calibration, "calibrate", broken)
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="calibration failed"):
        assert main(["run", str(write(tmp_path, extra="calibration = true")), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["calibration_error"] == "RuntimeError: chains diverged"
    assert (out / "samples.csv").exists() and "calibration" not in summary
