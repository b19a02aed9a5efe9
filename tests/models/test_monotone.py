"""Monotone regression: Bernstein basis, simulator, true score, and the exact Gibbs sampler."""

import math

import numpy as np
import pytest
import torch
from scipy import special
from scipy.stats import truncnorm

from scorebayes.models import Monotone
from scorebayes.posterior import Posterior
from scorebayes.models.monotone import bernstein_design
from scorebayes.models.monotone_gibbs import gibbs_truncated_normal, sample_truncated_normal


def test_bernstein_design_is_binomial_tail():
    x = torch.linspace(0, 1, 11, dtype=torch.float64)
    D = bernstein_design(x, 10)
    assert D.shape == (11, 11)
    assert torch.equal(D[:, 0], torch.ones(11, dtype=torch.float64))
    for k in range(1, 11):  # b_M(x, k) = P(Bin(M, x) >= k) = I_x(k, M - k + 1)
        np.testing.assert_allclose(D[:, k].numpy(), special.betainc(k, 11 - k, x.numpy()),
                                   atol=1e-12)


def test_simulator_observed_and_summary():
    model = Monotone()
    assert model.dim == 11 and model.n_obs == 1000 and model.obs_dim == 2
    assert model.prior.log_prob(model.true_parameters).isfinite()
    theta = model.true_parameters[None].repeat(2, 1)
    g = torch.Generator().manual_seed(0)
    x = model.simulator(theta, 4000, g)
    assert x.shape == (2, 4000, 2) and x.dtype == torch.float64
    resid = x[0, :, 1] - model.regression_function(theta[:1], x[0, :, 0])[0]
    assert abs(resid.std() - 0.1) < 0.005 and abs(resid.mean()) < 0.005
    x_obs = model.observed(torch.Generator().manual_seed(1))
    assert x_obs.shape == (1000, 2)
    resid = x_obs[:, 1] - torch.tanh(4 * x_obs[:, 0] + 2)
    assert abs(resid.std() - 0.1) < 0.01
    D = model.design(x[..., 0])
    assert torch.allclose(model.summary_fn(x), (D * x[..., 1:]).sum(1))
    # the pseudo-truth is a close monotone fit of tanh(4x+2)
    err = model.regression_function(model.true_parameters[None])[0] - model.true_function(model.grid)
    assert err.abs().max() < 5e-3


def test_design_features_carry_one_observations_score():
    """``design_features`` gives b_M(x, 1..M) per observation, on any batch shape: with 1 they
    rebuild one observation's true score, (y - [1, f] theta) [1, f] / sigma^2 (degree 3 here)."""
    model = Monotone(degree=3, n_obs=20)
    g = torch.Generator().manual_seed(4)
    theta = model.true_parameters[None].repeat(5, 1) + 0.02
    x = model.simulator(theta, 20, g)  # [5, 20, 2]
    f = model.design_features(x)
    assert f.shape == (5, 20, 3)
    row = torch.cat([torch.ones_like(f[..., :1]), f], -1)  # [1, f] = the design row
    resid = x[..., 1] - (row * theta[:, None]).sum(-1)
    for i in (0, 7, 19):
        assert torch.allclose(resid[:, i, None] * row[:, i] / model.sigma**2, model.true_score(theta, x[:, i]))
    assert torch.allclose(model.design_features(x[0, 0]), f[0, 0])
    with pytest.raises(ValueError, match=r"\(x, y\) \[\.\.\., 2\]"):
        model.design_features(x[..., :1])


def test_true_score_matches_autograd_and_transform_gradient():
    model = Monotone(n_obs=50)
    g = torch.Generator().manual_seed(2)
    theta = model.true_parameters[None].repeat(3, 1) + 0.01
    x = model.simulator(theta, 50, g)
    th = theta.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(model.log_likelihood(th, x).sum(), th)
    assert torch.allclose(model.true_score(theta, x), auto, rtol=1e-10, atol=1e-8)
    assert torch.allclose(model.true_score(theta, x[:, 0]), model.true_score(theta, x[:, :1]))
    # y is linear in theta, so d sum(y)/d theta_k = sum_i b_M(U_i, k) exactly
    z = model.simulator.latent(3, 50, g)
    (grad,) = torch.autograd.grad(model.simulator.transform(th, z)[..., 1].sum(), th)
    assert torch.allclose(grad, bernstein_design(z[0], 10).sum(1))


@pytest.mark.parametrize(("a", "b"), [(-1.0, 2.0), (3.0, 4.0), (-6.0, -5.5), (40.0, 41.0),
                                      (-math.inf, -45.0), (0.5, math.inf)])
def test_truncated_normal_sampler_matches_scipy(a, b):
    g = torch.Generator().manual_seed(3)
    n = 40_000
    z = sample_truncated_normal(torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64),
                                torch.tensor(a), torch.tensor(b), generator=g)
    assert torch.isfinite(z).all() and (z >= a).all() and (z <= b).all()
    mean, var = truncnorm.stats(a, b, moments="mv")
    sd = math.sqrt(var)
    assert abs(z.mean().item() - mean) < 5 * sd / math.sqrt(n) + 1e-3 * sd
    assert abs(z.std().item() - sd) < 0.03 * sd + 1e-4


def _rejection(model, x_obs, num, g):
    """Independent exact sampler: untruncated Gaussian posterior, keep draws inside the box."""
    Q, b = model.posterior_parameters(x_obs)
    cov = torch.linalg.inv(Q)
    L = torch.linalg.cholesky(0.5 * (cov + cov.T))
    mean = cov @ b
    kept = []
    total = 0
    while total < num:
        z = torch.randn(200_000, model.dim, generator=g, dtype=torch.float64) @ L.T + mean
        z = z[((z >= model.low) & (z <= model.high)).all(1)]
        kept.append(z)
        total += z.shape[0]
    return torch.cat(kept)[:num]


@pytest.mark.parametrize("degree", [2, 3])
def test_gibbs_matches_rejection_sampling(degree):
    model = Monotone(degree=degree, n_obs=100)
    g = torch.Generator().manual_seed(10 + degree)
    x_obs = model.observed(g)
    exact = _rejection(model, x_obs, 8000, g)
    # the truncation matters: the untruncated mean is outside the box
    Q, b = model.posterior_parameters(x_obs)
    assert (torch.linalg.solve(Q, b)[1:] < 0).any() or (torch.linalg.solve(Q, b)[1:] > 1).any()
    post = model.reference_posterior(x_obs, 8000, g, num_chains=400, burn_in=300, thin=5)
    assert post.samples.shape == (400, 20, degree + 1)
    gibbs = post.draws
    assert ((gibbs >= model.low) & (gibbs <= model.high)).all()
    sd = exact.std(0)
    # near-independent thinned draws; allow for residual autocorrelation (ESS >= ~2000)
    se = sd * math.sqrt(1 / 8000 + 1 / 2000)
    assert ((gibbs.mean(0) - exact.mean(0)).abs() < 4 * se).all()
    assert ((gibbs.std(0) / sd - 1).abs() < 0.06).all()


def test_gibbs_input_validation():
    Q = torch.eye(2, dtype=torch.float64)
    b = torch.zeros(2, dtype=torch.float64)
    low, high = torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="inside the box"):
        gibbs_truncated_normal(Q, b, low, high, init=torch.full((3, 2), 2.0), num_samples=5)
    with pytest.raises(ValueError, match="init"):
        gibbs_truncated_normal(Q, b, low, high, init=torch.zeros(3), num_samples=5)
    draws = gibbs_truncated_normal(Q, b, low, high, init=torch.full((3, 2), 0.5), num_samples=5,
                                   burn_in=2, thin=2, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (3, 5, 2)


@pytest.mark.slow
def test_gibbs_paper_scale_converges_from_dispersed_starts():
    """M = 10, n = 1000: default reference run vs a long run started from prior draws."""
    from scorebayes.diagnostics import rhat
    from scorebayes.priors import sample

    model = Monotone()
    g = torch.Generator().manual_seed(20)
    x_obs = model.observed(g)
    ref = model.reference_posterior(x_obs, 10_000, g, num_chains=100)
    Q, b = model.posterior_parameters(x_obs)
    init = sample(model.prior, 100, generator=g)
    long = gibbs_truncated_normal(Q, b, model.low, model.high, init=init, num_samples=100,
                                  burn_in=20_000, thin=20, generator=g)
    for k in range(model.dim):
        assert rhat(long[:, :, k].numpy()) < 1.02
    a, c = ref.draws, long.reshape(-1, model.dim)
    se = a.std(0) * math.sqrt(1 / 2000 + 1 / 2000)
    assert ((a.mean(0) - c.mean(0)).abs() < 4 * se).all()
    assert ((a.std(0) / c.std(0) - 1).abs() < 0.1).all()


def test_table2_metrics():
    model = Monotone(degree=3, n_obs=200)
    g = torch.Generator().manual_seed(7)
    x_obs = model.observed(g)
    ref = model.reference_posterior(x_obs, 2000, g, num_chains=100, burn_in=200, thin=2)
    same = model.table2_metrics(ref, ref)
    assert same["ks"] == 0.0 and same["w1"] == 0.0
    assert 0.0 <= same["cover95"] <= 1.0 and 0.0 < same["ci95_width"] < 0.2
    shifted = ref.samples.clone()
    shifted[..., 0] += 0.01  # theta_0 shifts B_M(x) by 0.01 everywhere
    out = model.table2_metrics(Posterior(shifted, model.parameter_names), ref)
    assert abs(out["w1"] - 0.01) < 1e-9 and out["ks"] > 0.1
