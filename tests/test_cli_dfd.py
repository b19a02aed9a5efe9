import json

import numpy as np
import pytest

from scorebayes.cli import main

FAST = """
[options]
num_bootstrap = 10
num_chains = 2
num_samples = 100
burn_in = 200
thin = 1
"""

USER_MODEL = """
import torch

def log_p(theta, x):
    return x[:, 0] * theta[:, :1].log() - torch.lgamma(x[:, 0] + 1)

def wrong_shape(theta, x):
    return x[:, 0]

def not_finite(theta, x):
    return x[:, 0] * theta[:, :1].log() - torch.lgamma(x[:, 0] + 1) + torch.where(x[:, 0] > 3, torch.inf, 0.0)
"""

USER_CONFIG = """
method = "dfd-bayes"
[model]
log_unnormalized = "model.py:{fn}"
domain = {domain}
parameters = ["rate"]
[[prior]]
dist = "gamma"
concentration = 1.5
rate = 0.5
[data]
observed = "{data}"
""" + FAST


def _write(tmp_path, text, name="config.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def user_setup(tmp_path):
    (tmp_path / "model.py").write_text(USER_MODEL)
    x = np.random.default_rng(0).poisson(3.0, size=(400, 1))
    np.savetxt(tmp_path / "x.csv", x, fmt="%d", delimiter=",", header="count", comments="")
    return tmp_path


def test_user_model_end_to_end(user_setup):
    cfg = _write(user_setup, USER_CONFIG.format(fn="log_p", domain='[[0, "inf"]]', data="x.csv"))
    out = user_setup / "out"
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "dfd-bayes" and summary["beta"] > 0 and summary["n"] == 400
    row = summary["parameters"][0]
    assert row["name"] == "rate" and abs(row["mean"] - 3.0) < 0.5
    assert (out / "samples.csv").read_text().splitlines()[0] == "rate,chain,draw"
    assert (out / "pairplot.png").is_file()


def test_builtin_with_frequency_table(tmp_path):
    (tmp_path / "table.csv").write_text("sales,stores\n0,30\n1,60\n2,55\n3,30\n4,15\n5,6\n7,1\n")
    cfg = _write(tmp_path, 'method = "dfd-bayes"\n[model]\nmodel = "builtin:cmp"\n'
                 '[data]\nobserved = "table.csv"\ncounts = "stores"\n' + FAST)
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--quiet", "--seed", "3"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 197 and summary["seed"] == 3
    assert [p["name"] for p in summary["parameters"]] == ["theta1", "theta2"]


@pytest.mark.parametrize("fn, domain, data, message", [
    ("log_p", '[[0, "inf"]]', "frac.csv", "must hold integers"),
    ("log_p", '[[0, "inf"]]', "neg.csv", "outside the domain"),
    ("log_p", '[[0, "inf"], [0, 1]]', "x.csv", "domain has 2 coordinate(s) but the data have 1"),
    ("wrong_shape", '[[0, "inf"]]', "x.csv", "shape [B, n]"),
    ("not_finite", '[[0, "inf"]]', "x.csv", "non-finite"),
    ("log_p", '[["zero", "inf"]]', "x.csv", '[model] domain = [["zero", "inf"]]: must be a list of [low, high] pairs'),
])
def test_bad_input_gives_one_clear_line(user_setup, capsys, fn, domain, data, message):
    (user_setup / "frac.csv").write_text("1\n2.5\n3\n")
    (user_setup / "neg.csv").write_text("1\n-2\n3\n")
    cfg = _write(user_setup, USER_CONFIG.format(fn=fn, domain=domain, data=data))
    assert main(["run", str(cfg), "--out", str(user_setup / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_bad_counts_column(tmp_path, capsys):
    (tmp_path / "table.csv").write_text("sales,stores\n0,30\n1,60\n")
    cfg = _write(tmp_path, 'method = "dfd-bayes"\n[model]\nmodel = "builtin:cmp"\n'
                 '[data]\nobserved = "table.csv"\ncounts = "shops"\n' + FAST)
    assert main(["run", str(cfg), "--quiet"]) == 2
    assert "no column named 'shops'" in capsys.readouterr().err


def test_robust_calibration_options_reach_calibrate_beta(user_setup, monkeypatch, capsys):
    import scorebayes.discrete.bayes as bayes
    from scorebayes.discrete.calibrate import CalibrationError

    seen = {}

    def spy(loss, prior, **kwargs):
        seen.update(kwargs)
        raise CalibrationError("stopped by the test")

    monkeypatch.setattr(bayes, "calibrate_beta", spy)
    cfg = _write(user_setup, USER_CONFIG.format(fn="log_p", domain='[[0, "inf"]]', data="x.csv")
                 + "max_step = 0.5\nmax_distance = inf\nmax_flagged = 0.0\n")
    assert main(["run", str(cfg), "--out", str(user_setup / "out"), "--quiet"]) == 2
    assert "beta calibration failed: stopped by the test" in capsys.readouterr().err
    assert (seen["max_step"], seen["max_distance"], seen["max_flagged"]) == (0.5, float("inf"), 0.0)


@pytest.mark.parametrize("line, message", [
    ("max_flagged = 1.5", "[options] max_flagged = 1.5: must be a number in [0, 1)"),
    ("max_flagged = nan", "[options] max_flagged = nan: must be a number in [0, 1)"),
    ("max_distance = -2.0", "[options] max_distance = -2.0: must be a number > 0"),
    ("max_step = 0", "[options] max_step = 0: must be a number > 0"),
    ("max_step = \"big\"", "[options] max_step = \"big\": must be a number > 0"),
])
@pytest.mark.parametrize("beta", ["", "beta = 1.0\n"])
def test_bad_robust_calibration_options_fail_before_the_loss(user_setup, monkeypatch, capsys, line, message, beta):
    from scorebayes.discrete import DFDLoss

    def untouchable(self, theta, *args, **kwargs):
        raise AssertionError("the loss was evaluated")

    monkeypatch.setattr(DFDLoss, "__call__", untouchable)
    cfg = _write(user_setup, USER_CONFIG.format(fn="log_p", domain='[[0, "inf"]]', data="x.csv")
                 + beta + line + "\n")
    assert main(["run", str(cfg), "--out", str(user_setup / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
