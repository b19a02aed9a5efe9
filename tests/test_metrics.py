"""Metrics against hand-computed values, scipy.stats and brute force."""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from scorebayes import metrics
from scorebayes.posterior import Posterior


def test_bias_interval_coverage_by_hand():
    # 101 equally spaced draws 0..100: quantiles are exact grid points
    draws = np.stack([np.arange(101.0), 10 + np.arange(101.0)], axis=1)
    assert np.allclose(metrics.posterior_mean(draws), [50.0, 60.0])
    assert np.allclose(metrics.bias(draws, [49.0, 62.0]), [1.0, 2.0])
    low, high = metrics.credible_interval(draws)
    assert np.allclose(low, [2.5, 12.5]) and np.allclose(high, [97.5, 107.5])
    assert np.allclose(metrics.ci_width(draws, level=0.5), [50.0, 50.0])
    assert metrics.covers(draws, [2.0, 100.0]).tolist() == [False, True]
    # [C, S, d] and Posterior inputs give the same answers
    post = Posterior(torch.as_tensor(draws).reshape(1, 101, 2))
    assert np.allclose(metrics.bias(post, [49.0, 62.0]), [1.0, 2.0])


def test_weighted_versions():
    draws = np.array([[0.0], [1.0], [2.0], [10.0]])
    w = np.array([1.0, 1.0, 2.0, 0.0])
    assert np.allclose(metrics.posterior_mean(draws, w), [(0 + 1 + 4) / 4])
    post = Posterior(torch.as_tensor(draws), weights=torch.as_tensor(w))
    assert np.allclose(metrics.posterior_mean(post), [1.25])
    # a weight-0 draw never enters the interval; weighted quantiles follow posterior.weighted_quantile
    low, high = metrics.credible_interval(post)
    assert high[0] <= 2.0 and low[0] >= 0.0
    with pytest.raises(ValueError):
        metrics.posterior_mean(draws, -w)


def test_repetition_summary():
    truth = [0.0]
    reps = [np.linspace(-1, 1, 201)[:, None] + s for s in (0.5, -0.5, 2.0)]
    out = metrics.repetition_summary(reps, truth)
    assert np.allclose(out["bias_mean"], [1.0]) and np.allclose(out["bias_sd"], [np.std([0.5, 0.5, 2.0], ddof=1)])
    assert np.allclose(out["width_mean"], [1.9]) and np.allclose(out["width_sd"], [0.0], atol=1e-12)
    assert np.allclose(out["coverage"], [2 / 3])


def test_ks_and_w1_against_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=300), rng.normal(0.3, 1.2, size=200)
    assert math.isclose(metrics.ks_1d(a, b), stats.ks_2samp(a, b).statistic, rel_tol=1e-12)
    assert math.isclose(metrics.w1_1d(a, b), stats.wasserstein_distance(a, b), rel_tol=1e-12)
    # integer weights = replicated draws
    w = rng.integers(0, 4, size=300).astype(float)
    rep = np.repeat(a, w.astype(int))
    assert math.isclose(metrics.ks_1d(a, b, w), stats.ks_2samp(rep, b).statistic, rel_tol=1e-12)
    assert math.isclose(metrics.w1_1d(a, b, w), stats.wasserstein_distance(rep, b), rel_tol=1e-10)


def test_function_distances_and_band():
    rng = np.random.default_rng(1)
    f = rng.normal(size=(1000, 5))
    assert metrics.function_distances(f, f) == {"ks": 0.0, "w1": 0.0}
    out = metrics.function_distances(f + 0.3, f)
    assert math.isclose(out["w1"], 0.3, rel_tol=1e-9)
    ks_by_hand = np.mean([stats.ks_2samp(f[:, j] + 0.3, f[:, j]).statistic for j in range(5)])
    assert math.isclose(out["ks"], ks_by_hand, rel_tol=1e-12)
    grid_draws = np.linspace(0, 1, 101)[:, None] * np.ones((1, 4))  # same band at 4 points
    band = metrics.band_coverage(grid_draws, [0.5, 0.5, 0.99, -1.0])
    assert band == {"coverage": 0.5, "width": pytest.approx(0.95)}


def test_score_losses():
    def true_score(theta, x):
        return (x - theta[:, None, :]).sum(1)

    def shifted(theta, x):
        return true_score(theta, x) + 1.0

    g = torch.Generator().manual_seed(0)
    theta = torch.randn(50, 3, generator=g, dtype=torch.float64)
    x = torch.randn(50, 10, 3, generator=g, dtype=torch.float64)
    assert metrics.loss_one(true_score, true_score, theta, x[:, 0]) == 0.0
    assert math.isclose(metrics.loss_one(shifted, true_score, theta, x[:, 0], batch_size=7), 3.0)
    assert math.isclose(metrics.loss_n(shifted, true_score, theta, x, batch_size=9), 3.0)
    assert math.isclose(metrics.loss_n_posterior(shifted, true_score, theta, x[0]), 3.0)
    assert math.isclose(metrics.score_loss(torch.zeros(2, 2), torch.tensor([[1.0, 1.0], [0.0, 2.0]])), 3.0)
    with pytest.raises(ValueError):
        metrics.loss_n(true_score, true_score, theta, x[0])


def test_wasserstein_exact():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(200, 1)), rng.normal(1.0, 2.0, size=(200, 1))
    assert math.isclose(metrics.wasserstein(a, b), stats.wasserstein_distance(a[:, 0], b[:, 0]), rel_tol=1e-8)
    w2 = math.sqrt(np.mean((np.sort(a[:, 0]) - np.sort(b[:, 0])) ** 2))
    assert math.isclose(metrics.wasserstein(a, b, order=2), w2, rel_tol=1e-8)
    # 2-D, equal sizes: optimal transport is the best permutation
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    cost = np.linalg.norm(x[:, None] - y[None], axis=-1)
    brute = min(cost[range(5), list(p)].mean() for p in itertools.permutations(range(5)))
    assert math.isclose(metrics.wasserstein(x, y), brute, rel_tol=1e-9)
    sub = metrics.wasserstein(a, b, max_samples=50)
    assert 0 < sub < 5
    with pytest.raises(ValueError, match="order"):
        metrics.wasserstein(a, b, order=3)


def test_mmd2_unbiased_brute_force():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(6, 2)), rng.normal(0.5, 1.0, size=(5, 2))
    h = 0.7

    def k(u, v):
        return math.exp(-np.sum((u - v) ** 2) / (2 * h**2))

    kxx = sum(k(x[i], x[j]) for i in range(6) for j in range(6) if i != j) / 30
    kyy = sum(k(y[i], y[j]) for i in range(5) for j in range(5) if i != j) / 20
    kxy = sum(k(x[i], y[j]) for i in range(6) for j in range(5)) / 30
    assert math.isclose(metrics.mmd2_unbiased(x, y, bandwidth=h, block=4), kxx + kyy - 2 * kxy,
                        rel_tol=1e-9)
    same = metrics.mmd2_unbiased(rng.normal(size=(500, 2)), rng.normal(size=(500, 2)))
    diff = metrics.mmd2_unbiased(rng.normal(size=(500, 2)), rng.normal(1.0, 1.0, size=(500, 2)))
    assert abs(same) < 0.01 < diff
