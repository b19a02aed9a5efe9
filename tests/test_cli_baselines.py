"""The abc / abc-pmc / bsl / npe CLI methods on a tiny toy config, and their bad-input errors."""

import json
import textwrap

import numpy as np
import pytest

from scorebayes.cli import main

SIMS = '''
import torch

def simulate(theta, n, generator):
    """x_i = theta + N(0, I): [B, n, d]."""
    return theta[:, None, :] + torch.randn(theta.shape[0], n, theta.shape[1],
                                           generator=generator, dtype=torch.float64)

def flat(theta, n, generator):
    return simulate(theta, n, generator)[:, :, 0]  # [B, n]: read as p = 1

def two_columns(theta, n, generator):
    return simulate(theta, n, generator).repeat(1, 1, 2)

def first_column_mean(x):
    return x[:, :, :1].mean(1)
'''

BASE = """
seed = 1
[model]
simulator = "sims.py:simulate"
parameters = ["a", "b"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 2.0
[[prior]]
dist = "normal"
loc = 0.0
scale = 2.0
[data]
true_parameters = [0.5, -1.0]
n = 10
"""

OPTIONS = {
    "abc": "num_simulations = 2000\nk = 50\n",
    "abc-pmc": "rounds = 2\nsimulations_per_round = 2000\nk = 100\n",
    "bsl": "num_chains = 3\nnum_steps = 120\nburn_in = 40\nnum_sims = 15\n",
    "npe": 'estimator = "gaussian"\nnum_simulations = 400\nmax_epochs = 30\nnum_samples = 500\n'
           'summary = "mean_sd"\n',
}


def write(tmp_path, method, base=BASE, options=None, name="run.toml"):
    (tmp_path / "sims.py").write_text(SIMS)
    text = f'method = "{method}"\n' + textwrap.dedent(base)
    text += "[options]\n" + (OPTIONS[method] if options is None else options)
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("method", ["abc", "abc-pmc", "bsl", "npe"])
def test_cli_runs_each_baseline(tmp_path, method):
    out = tmp_path / "out"
    assert main(["run", write(tmp_path, method), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == method
    assert [p["name"] for p in summary["parameters"]] == ["a", "b"]
    expected = {"abc": 2000, "abc-pmc": 3 * 2000, "bsl": 3 * 120 * 15, "npe": 400}[method]
    assert summary["simulations"] == expected
    samples = np.genfromtxt(out / "samples.csv", delimiter=",", names=True)
    assert set(samples.dtype.names) >= {"a", "b", "chain", "draw"}
    # the posterior mean lies near the truth (n = 10: posterior sd about 0.3)
    means = [p["mean"] for p in summary["parameters"]]
    assert abs(means[0] - 0.5) < 1.2 and abs(means[1] + 1.0) < 1.2
    if method == "bsl":
        assert 0 < summary["acceptance_rate"] < 1 and len(np.unique(samples["chain"])) == 3


def test_cli_abc_observed_file_and_seed_reproducible(tmp_path):
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "x.csv", rng.normal(size=(8, 2)), delimiter=",", header="u,v",
               comments="")
    base = BASE.replace('true_parameters = [0.5, -1.0]\nn = 10', 'observed = "x.csv"')
    cfg = write(tmp_path, "abc", base, "num_simulations = 500\nk = 20\n")
    for out in ("o1", "o2"):
        assert main(["run", cfg, "--out", str(tmp_path / out), "--quiet", "--seed", "3"]) == 0
    a = (tmp_path / "o1" / "samples.csv").read_text()
    assert a == (tmp_path / "o2" / "samples.csv").read_text()


def test_cli_bsl_user_summary(tmp_path):
    cfg = write(tmp_path, "bsl", options='summary = "sims.py:first_column_mean"\n'
                "num_chains = 2\nnum_steps = 30\nburn_in = 10\nnum_sims = 5\n")
    out = tmp_path / "out"
    assert main(["run", cfg, "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "summary.json").read_text())["summary_dim"] == 1


@pytest.mark.parametrize("change, message", [
    (lambda b: b.replace('parameters = ["a", "b"]', 'parameters = ["a"]'),
     "[model] parameters = [\"a\"]: the prior has 2 parameter(s) but 1 are named"),
    (lambda b: b.replace('true_parameters = [0.5, -1.0]\nn = 10', 'observed = "missing.csv"'),
     "not found"),
    (lambda b: b.replace("sims.py:simulate", "sims.py:two_columns")
     .replace('true_parameters = [0.5, -1.0]\nn = 10', 'observed = "x.csv"'),
     "p=4 column(s)"),
    (lambda b: b.replace("sims.py:simulate", "nothere.py:simulate"), "file not found"),
    (lambda b: b.replace("n = 10", "n = 10\ncolumns = 3"), "[data] columns = 3: unknown key"),
    (lambda b: b.replace("n = 10", "n = 0"), "[data] n = 0: must be an integer >= 1"),
    (lambda b: b.replace('dist = "normal"', 'dist = "normall"', 1), "[[prior]] 1 dist = \"normall\": unknown distribution; did you mean normal?"),
    (lambda b: b.replace("[0.5, -1.0]", "[0.5]"), "true_parameters = [0.5]: has 1 values for 2 parameters"),
])
def test_cli_bad_input(tmp_path, capsys, change, message):
    np.savetxt(tmp_path / "x.csv", np.zeros((5, 2)), delimiter=",")
    cfg = write(tmp_path, "abc", change(BASE))
    assert main(["run", cfg, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("method, options, message", [
    ("abc", "num_simulation = 10\n", "[options] num_simulation = 10: unknown key; did you mean num_simulations?"),
    ("abc", "prior = 3\n", "[options] prior = 3: unknown key; allowed: block_size"),
    ("abc", "k = 0\n", "[options] k = 0: must be an integer >= 1"),
    ("npe", 'estimator = "nsf"\n', 'estimator = "nsf": must be one of "maf", "gaussian"'),
    ("bsl", 'summary = "flatten"\n', "for npe"),
    ("bsl", 'summary = "sims.py:nope"\n', "has no attribute"),
    ("abc", "workers = 0\n", "[options] workers = 0: must be an integer >= 1"),
    ("abc-pmc", "k = 5\n", "[options] k = 5: must be an integer >= 10"),
    ("abc-pmc", 'summary = "flatten"\n', "for npe; abc-pmc needs a summary"),
    ("abc-pmc", 'on_simulator_error = "retry"\n', "abc-pmc keeps no reference table and has no fault"),
    ("abc-pmc", "stream_tables = true\n", "abc-pmc keeps no reference table"),
    ("abc-pmc", "num_simulations = 10\n", "[options] num_simulations = 10: unknown key"),
])
def test_cli_bad_options(tmp_path, capsys, method, options, message):
    cfg = write(tmp_path, method, options=options)
    assert main(["run", cfg, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_cli_non_finite_data(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("1.0,2.0\nnan,1.0\n")
    base = BASE.replace('true_parameters = [0.5, -1.0]\nn = 10', 'observed = "x.csv"')
    assert main(["run", write(tmp_path, "abc", base), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 2
    assert "non-finite" in capsys.readouterr().err


def test_cli_builtin_model_and_prior_from_file(tmp_path):
    builtin = tmp_path / "builtin.toml"
    builtin.write_text(textwrap.dedent("""
        method = "bsl"
        [model]
        simulator = "builtin:gaussian_mean"
        options = { n_obs = 20 }
        [options]
        num_chains = 2
        num_steps = 40
        burn_in = 10
        num_sims = 10
    """))
    out = tmp_path / "o1"
    assert main(["run", str(builtin), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [p["name"] for p in summary["parameters"]] == ["mu0", "mu1"]
    (tmp_path / "sims.py").write_text(SIMS + textwrap.dedent('''
        def prior():
            return torch.distributions.Independent(
                torch.distributions.Normal(torch.zeros(2, dtype=torch.float64),
                                           torch.ones(2, dtype=torch.float64)), 1)
    '''))
    cfg = tmp_path / "file_prior.toml"
    cfg.write_text(textwrap.dedent("""
        method = "abc"
        prior = "sims.py:prior"
        [model]
        simulator = "sims.py:simulate"
        [data]
        true_parameters = [0.1, 0.2]
        n = 5
        [options]
        num_simulations = 200
        k = 10
    """))
    out = tmp_path / "o2"
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [p["name"] for p in summary["parameters"]] == ["theta0", "theta1"]


def test_cli_model_options_need_builtin(tmp_path, capsys):
    base = BASE.replace('parameters = ["a", "b"]', 'parameters = ["a", "b"]\noptions = { n = 3 }')
    assert main(["run", write(tmp_path, "abc", base), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 2
    assert "only for built-in models" in capsys.readouterr().err


def test_cli_abc_pmc_starts_from_the_localized_proposal(tmp_path):
    # localize = true: round 0 comes from q (weighted pi/q from the start, so it has a k-hat)
    out = tmp_path / "out"
    cfg = write(tmp_path, "abc-pmc", options=OPTIONS["abc-pmc"] + "localize = true\n")
    assert main(["run", cfg, "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["localization_simulations"] > 0 and "proposal" in summary
    assert summary["rounds"][0]["k_hat"] is not None
    means = [p["mean"] for p in summary["parameters"]]
    assert abs(means[0] - 0.5) < 1.2 and abs(means[1] + 1.0) < 1.2


def test_cli_abc_pmc_rerun_resumes_from_its_rounds(tmp_path):
    out = tmp_path / "out"
    cfg = write(tmp_path, "abc-pmc")
    assert main(["run", cfg, "--out", str(out), "--quiet"]) == 0
    first = json.loads((out / "summary.json").read_text())
    assert first["resumed_simulations"] == 0
    assert main(["run", cfg, "--out", str(out), "--quiet"]) == 0  # nothing left to simulate
    again = json.loads((out / "summary.json").read_text())
    assert again["resumed_simulations"] == 3 * 2000
    for a, b in zip(again["parameters"], first["parameters"]):  # equal up to rounding (reloaded arrays)
        assert a["name"] == b["name"]
        assert all(abs(a[key] - b[key]) <= 1e-12 * max(1.0, abs(b[key])) for key in ("mean", "sd", "q2.5", "q97.5"))


def test_cli_abc_pmc_in_worker_processes_gives_the_serial_posterior(tmp_path):
    runs = {}
    for name, extra in (("serial", ""), ("pooled", "workers = 2\n")):
        cfg = write(tmp_path, "abc-pmc", options=OPTIONS["abc-pmc"] + "block_size = 256\n" + extra,
                    name=f"{name}.toml")
        assert main(["run", cfg, "--out", str(tmp_path / name), "--quiet"]) == 0
        runs[name] = json.loads((tmp_path / name / "summary.json").read_text())["parameters"]
    # every block has its own generator wherever it runs: the same posterior up to rounding
    for a, b in zip(runs["pooled"], runs["serial"]):
        assert all(abs(a[key] - b[key]) <= 1e-12 * max(1.0, abs(b[key])) for key in ("mean", "sd", "q2.5", "q97.5"))
