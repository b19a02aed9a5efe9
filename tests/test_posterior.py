import json

import numpy as np
import pytest
import torch

from scorebayes.diagnostics import ess, rhat
from scorebayes.posterior import Posterior


def test_summary_matches_numpy(tmp_path):
    g = torch.Generator().manual_seed(0)
    samples = torch.randn(4, 500, 2, generator=g) * torch.tensor([1.0, 3.0]) + torch.tensor([0.0, 5.0])
    post = Posterior(samples, ["a", "b"])
    rows = post.summary()
    flat = samples.reshape(-1, 2).double().numpy()
    assert rows[1]["mean"] == pytest.approx(flat[:, 1].mean())
    assert rows[1]["sd"] == pytest.approx(flat[:, 1].std(ddof=1))
    assert rows[0]["q2.5"] == pytest.approx(np.quantile(flat[:, 0], 0.025))
    assert rows[0]["rhat"] < 1.01 and rows[0]["ess"] > 1000
    post.save(tmp_path / "p.npz")
    back = Posterior.load(tmp_path / "p.npz")
    assert torch.equal(back.samples, post.samples) and back.names == ["a", "b"]
    post.to_csv(tmp_path / "s.csv")
    header = open(tmp_path / "s.csv").readline().strip()
    assert header == "a,b,chain,draw"
    json.dumps(rows)


def test_rhat_flags_unmixed_chains_and_ess_flags_autocorrelation():
    g = np.random.default_rng(0)
    good = g.normal(size=(4, 1000))
    bad = good + np.array([0, 0, 0, 3.0])[:, None]
    assert rhat(good) < 1.01 and rhat(bad) > 1.1
    # AR(1) with phi=0.9 has ESS ~ N (1-phi)/(1+phi) ~ 0.053 N
    ar = np.zeros((4, 4000))
    for t in range(1, 4000):
        ar[:, t] = 0.9 * ar[:, t - 1] + g.normal(size=4)
    e = ess(ar)
    assert 0.03 * ar.size < e < 0.08 * ar.size


def test_rhat_ess_agree_with_arviz():
    az = pytest.importorskip("arviz")
    g = np.random.default_rng(1)
    x = np.zeros((4, 2000))
    for t in range(1, 2000):
        x[:, t] = 0.9 * x[:, t - 1] + g.normal(size=4)
    x[0] += 0.3  # a little between-chain disagreement
    assert rhat(x) == pytest.approx(float(az.rhat(x)), rel=1e-6)
    assert ess(x) == pytest.approx(float(az.ess(x)), rel=1e-3)


def test_weighted_posterior():
    draws = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    post = Posterior(draws, weights=torch.tensor([0.0, 0.0, 1.0, 1.0]))
    assert float(post.mean()[0]) == pytest.approx(2.5)
    assert post.effective_sample_size() == pytest.approx(2.0)
    assert post.summary()[0]["rhat"] is None


def test_pairplot_and_arviz(tmp_path):
    post = Posterior(torch.randn(2, 100, 3))
    post.pairplot(tmp_path / "pp.png", truth=[0, 0, 0])
    assert (tmp_path / "pp.png").stat().st_size > 1000
    pytest.importorskip("arviz")
    idata = post.to_arviz()
    assert idata.posterior["theta0"].shape == (2, 100)
