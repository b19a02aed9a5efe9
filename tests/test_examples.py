"""Every example runs: the Python scripts (via runpy, in a temporary folder) and the configs
(through the command line's entry point), and each writes its outputs."""

from __future__ import annotations

import json
import runpy
import warnings
from pathlib import Path

import pytest

from scorebayes.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = {"langevin_sbi.py": ["langevin_sbi_summary.txt", "langevin_sbi_pairplot.png"],
           "dfd_bayes.py": ["dfd_bayes_summary.txt", "dfd_bayes_samples.csv"],
           "score_mh.py": ["score_mh_samples.csv"]}
CONFIGS = {"langevin_sbi.toml": "score-langevin", "dfd_bayes.toml": "dfd-bayes", "score_mh.toml": "score-mh"}


def test_every_example_is_tested():
    assert {p.name for p in EXAMPLES.glob("*.py")} - {"linreg_sim.py"} == set(SCRIPTS)
    assert {p.name for p in EXAMPLES.glob("*.toml")} == set(CONFIGS)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_runs(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small settings trip the fit's own warnings
        runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    for name in SCRIPTS[script]:
        assert (tmp_path / name).stat().st_size > 0, name


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_config_runs(config, tmp_path):
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(EXAMPLES / config), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == CONFIGS[config]
    assert all(p["mean"] is not None for p in summary["parameters"])
    assert (out / "samples.csv").stat().st_size > 0 and (out / "pairplot.png").exists()
