"""Toy models and the Beta-Binomial: analytic posteriors, exact scores, reparametrised simulators."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from scorebayes.models import BetaBinomial, ExponentialRate, GaussianMean, LinearRegression


def _loglik(model, theta, x):
    """Exact log-likelihood [B] from torch.distributions (independent of the models' formulas)."""
    if isinstance(model, GaussianMean):
        return torch.distributions.Normal(theta[:, None, :], model.sigma).log_prob(x).sum((1, 2))
    if isinstance(model, ExponentialRate):
        return torch.distributions.Exponential(theta[:, None, :]).log_prob(x).sum((1, 2))
    if isinstance(model, LinearRegression):
        mean = theta[:, None, 0] + theta[:, None, 1] * x[..., 0]
        return torch.distributions.Normal(mean, model.sigma).log_prob(x[..., 1]).sum(1)
    return torch.distributions.Binomial(model.trials, probs=theta[:, None, :]).log_prob(x).sum((1, 2))


MODELS = [GaussianMean(sigma=1.5), ExponentialRate(), LinearRegression(), BetaBinomial(n_obs=5)]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_true_score_matches_autograd(model):
    g = torch.Generator().manual_seed(0)
    theta = model.true_parameters[None].repeat(4, 1) * torch.linspace(0.8, 1.2, 4, dtype=torch.float64)[:, None]
    x = model.simulator(theta, 7, g)
    th = theta.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(_loglik(model, th, x).sum(), th)
    assert torch.allclose(model.true_score(theta, x), auto, rtol=1e-10, atol=1e-10)
    one = model.true_score(theta, x[:, 0])
    assert one.shape == theta.shape and torch.allclose(one, model.true_score(theta, x[:, :1]))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_reference_posterior_matches_analytic(model):
    g = torch.Generator().manual_seed(1)
    x_obs = model.observed(g)
    assert x_obs.shape == (model.n_obs, model.obs_dim)
    post = model.reference_posterior(x_obs, 20_000, g)
    dist = model.posterior_distribution(x_obs)
    mean, sd = dist.mean.reshape(-1), dist.variance.reshape(-1).sqrt()
    assert torch.allclose(post.mean(), mean, atol=4 * sd.max().item() / math.sqrt(20_000))
    assert torch.allclose(post.sd(), sd, rtol=0.03)


@pytest.mark.parametrize("model", [ExponentialRate(), BetaBinomial(n_obs=3)], ids=lambda m: m.name)
def test_one_dimensional_posterior_by_quadrature(model):
    """Posterior mean and SD by numerical integration of prior x likelihood."""
    x_obs = model.observed(torch.Generator().manual_seed(2))
    lo, hi = (1e-6, 10.0) if isinstance(model, ExponentialRate) else (1e-9, 1 - 1e-9)

    grid = np.linspace(lo, hi, 20001)
    th = torch.as_tensor(grid)[:, None]
    x = x_obs[None].expand(len(grid), *x_obs.shape)
    logp = (model.prior.log_prob(th) + _loglik(model, th, x)).numpy()
    dens = np.exp(logp - logp.max())
    z = integrate.trapezoid(dens, grid)
    m1 = integrate.trapezoid(dens * grid, grid) / z
    m2 = integrate.trapezoid(dens * grid**2, grid) / z
    dist = model.posterior_distribution(x_obs)
    assert abs(float(dist.mean) - m1) < 1e-5
    assert abs(float(dist.variance) - (m2 - m1**2)) < 1e-6


def test_gaussian_models_against_textbook_formulas():
    model = LinearRegression()
    x = model.observed(torch.Generator().manual_seed(3)).numpy()
    D = np.column_stack([np.ones(len(x)), x[:, 0]])
    prec = np.eye(2) / 9.0 + D.T @ D / 0.25
    dist = model.posterior_distribution(torch.as_tensor(x))
    np.testing.assert_allclose(dist.covariance_matrix.numpy(), np.linalg.inv(prec), rtol=1e-10)
    np.testing.assert_allclose(dist.mean.numpy(), np.linalg.solve(prec, D.T @ x[:, 1] / 0.25), rtol=1e-10)
    gm = GaussianMean(dim=1, sigma=2.0, prior_loc=1.0, prior_scale=3.0, n_obs=4)
    xs = torch.tensor([[0.0], [1.0], [2.0], [5.0]], dtype=torch.float64)
    # precision 1/9 + 4/4 = 10/9; mean = (1/9 + 8/4) / (10/9) = 1.9
    d = gm.posterior_distribution(xs)
    assert abs(float(d.mean) - 1.9) < 1e-12 and abs(float(d.variance) - 0.9) < 1e-12


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_simulator_moments_and_gradients(model):
    g = torch.Generator().manual_seed(4)
    theta = model.true_parameters[None]
    x = model.simulator(theta, 20_000, g)[0]
    assert x.dtype == torch.float64
    if isinstance(model, GaussianMean):
        expect_mean, expect_sd = theta[0], torch.full_like(theta[0], model.sigma)
    elif isinstance(model, ExponentialRate):
        expect_mean, expect_sd = 1 / theta[0], 1 / theta[0]
    elif isinstance(model, BetaBinomial):
        p = theta[0]
        expect_mean, expect_sd = 100 * p, (100 * p * (1 - p)).sqrt()
        assert torch.equal(x, x.round())
    else:
        resid = x[:, 1] - theta[0, 0] - theta[0, 1] * x[:, 0]
        x, expect_mean, expect_sd = resid[:, None], torch.zeros(1), torch.full((1,), model.sigma)
    assert torch.allclose(x.mean(0), expect_mean.to(x), atol=(5 * expect_sd / math.sqrt(20_000)).max().item())
    assert torch.allclose(x.std(0), expect_sd.to(x), rtol=0.03)
    # gradient through the (smooth) transform vs central finite differences
    sim = model.simulator
    z = sim.latent(1, 10, g)
    transform = sim.smooth_transform
    th = theta.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(transform(th, z).sum(), th)
    eps = 1e-7
    for k in range(model.dim):
        e = torch.zeros_like(theta)
        e[0, k] = eps
        fd = (transform(theta + e, z).sum() - transform(theta - e, z).sum()) / (2 * eps)
        assert torch.allclose(grad[0, k], fd, rtol=1e-4, atol=1e-4)


def test_betabinomial_smooth_transform_close_and_settings():
    model = BetaBinomial()
    assert model.n_obs == 1 and model.paper_settings["trials"] == 100
    z = model.simulator.latent(200, 1, torch.Generator().manual_seed(5))
    theta = torch.full((200, 1), 0.3, dtype=torch.float64)
    hard = model.simulator.transform(theta, z)
    soft = model.simulator.smooth_transform(theta, z)
    assert (hard - soft).abs().mean() < 0.5
    assert stats.binom(100, 0.3).mean() == 30
