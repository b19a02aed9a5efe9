"""Every Python block of the README runs as printed, and the quick starts give right answers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[1] / "README.md"


EXAMPLES = README.parent / "examples"


def _toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def _block(marker: str) -> str:
    found = [b for b in _python_blocks() if marker in b]
    assert len(found) == 1, f"one README block should call {marker}"
    return found[0]


def _run(code: str, tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - our own README
    return namespace


def test_every_python_block_is_tested():
    markers = ("ScoreLangevin(", "dfd_bayes(", "score_mh(")
    assert len(_python_blocks()) == len(markers)
    assert all(any(m in b for m in markers) for b in _python_blocks())


def test_quick_start_matches_the_exact_posterior(tmp_path, monkeypatch):
    """Normal(0, 3^2) prior on the mean of n = 50 rows N(theta, I): the posterior is
    N(sum x / (n + 1/9), 1 / (n + 1/9)) per coordinate. 1,000 Langevin draws put the mean within
    ~0.05 exact SDs by Monte Carlo alone; the tolerance allows a learned-score bias of 0.25 SD and
    15% in the SD, which a wrong score (or no data) would far exceed."""
    quick_start = _block("ScoreLangevin(")
    assert "x_obs =" in quick_start
    namespace = _run(quick_start, tmp_path, monkeypatch)
    posterior, x_obs = namespace["posterior"], namespace["x_obs"]
    precision = len(x_obs) + 1 / 9
    exact_mean, exact_sd = x_obs.sum(0) / precision, precision ** -0.5
    error = (torch.as_tensor(posterior.mean()) - exact_mean) / exact_sd
    assert error.abs().max() < 0.25, error
    assert torch.as_tensor(posterior.sd()) / exact_sd == pytest.approx(torch.ones(2), abs=0.15)
    assert (tmp_path / "pairplot.png").exists() and (tmp_path / "posterior.npz").exists()


def test_dfd_quick_start_covers_the_truth(tmp_path, monkeypatch):
    """500 CMP draws at (4, 0.75): the calibrated DFD posterior's 95% intervals hold the truth."""
    posterior = _run(_block("dfd_bayes("), tmp_path, monkeypatch)["posterior"]
    low, high = torch.as_tensor(posterior.quantile(0.025)), torch.as_tensor(posterior.quantile(0.975))
    truth = torch.tensor([4.0, 0.75], dtype=low.dtype)
    assert bool(((low < truth) & (truth < high)).all()), (low, high)
    assert 0 < posterior.info["beta"] < 20


def test_score_mh_quick_start_recovers_the_target(tmp_path, monkeypatch):
    """MH on a learned score of 1,000 samples of N((2, -1), [[1, .8], [.8, 1]]): the draws' mean
    within 0.25 of the target's and their variances within 35% (2,000 correlated draws from a
    small fit)."""
    namespace = _run(_block("score_mh("), tmp_path, monkeypatch)
    draws = namespace["draws"].reshape(-1, 2).double()
    assert namespace["draws"].shape == (100, 20, 2)
    assert torch.allclose(draws.mean(0), torch.tensor([2.0, -1.0], dtype=draws.dtype), atol=0.25)
    assert torch.allclose(draws.var(0), torch.ones(2, dtype=draws.dtype), rtol=0.35)
    assert 0.2 < namespace["info"]["acceptance_rate"] < 1


@pytest.mark.parametrize("index", range(3))
def test_every_toml_block_runs_beside_the_examples(tmp_path, capsys, index):
    """Each README config runs as printed with the example files it names and writes its outputs."""
    import json
    import shutil

    from scorebayes.cli import main

    blocks = _toml_blocks()
    assert len(blocks) == 3
    for name in ("linreg_sim.py", "dfd_cmp_counts.csv", "moons_samples.csv"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    config = tmp_path / "run.toml"
    config.write_text(blocks[index])
    assert main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"]) == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["method"] in ("score-langevin", "dfd-bayes", "score-mh")
    assert (tmp_path / "out" / "samples.csv").exists()
