"""The exact M/G/1 likelihood by sequential importance sampling (scorebayes.models.mg1_exact)."""

import math

import numpy as np
import pytest
import torch

from scorebayes.models import MG1
from scorebayes.models.mg1_exact import (T_DEGREES, _student_t_draws, log_likelihood, log_likelihood_per_observation,
                                         reference_posterior)


def test_one_customer_matches_the_closed_form():
    """p = 1: x = U[theta1, theta2] + Exp(rate), density (e^{-r (x-theta2)+} - e^{-r (x-theta1)}) / w,
    and the importance sampler is exact (one deterministic weight)."""
    theta1, width, rate = 1.0, 4.0, 0.2
    x = torch.tensor([[0.7], [1.1], [2.5], [6.0], [12.0]], dtype=torch.float64)
    closed = [math.log((math.exp(-rate * max(0.0, v - theta1 - width)) - math.exp(-rate * (v - theta1))) / width)
              if v >= theta1 else -math.inf for v in x[:, 0].tolist()]
    got = log_likelihood_per_observation(torch.tensor([[theta1, width, rate]]), x, particles=3,
                                         generator=torch.Generator().manual_seed(0))
    assert torch.allclose(got[0], torch.tensor(closed, dtype=torch.float64))


def test_two_customer_density_integrates_to_one():
    """The joint density of (x1, x2) sums to 1 over a midpoint grid (support x_k >= theta1; the
    exponential tail beyond x = 25 holds < 1e-4). A wrong arrival interval breaks this: widening
    L_k by 0.3 gives 1.22."""
    phi = torch.tensor([[1.0, 2.0, 0.5]], dtype=torch.float64)
    h = 0.04
    grid = 1.0 + h / 2 + h * torch.arange(int(24 / h), dtype=torch.float64)
    x = torch.cartesian_prod(grid, grid)
    dens = torch.exp(log_likelihood_per_observation(phi, x, particles=16,
                                                    generator=torch.Generator().manual_seed(1)))[0]
    # the grid's Riemann error (jumps at x_k = theta1 + width) and the tail, both < 5e-3
    assert float(dens.sum()) * h * h == pytest.approx(1.0, abs=5e-3)


def test_likelihood_ratio_has_mean_one_under_the_truth():
    """E_{x ~ p(.|phi*)}[p(x|phi') / p(x|phi*)] = 1 when phi' puts no mass where phi* puts none
    (theta1' >= theta1*), < 1 otherwise; five customers, tolerance 4 Monte Carlo SEs plus the
    ratio-of-estimates bias (about 0.2 / particles at the truth)."""
    model = MG1()
    phi = model.true_parameters
    g = torch.Generator().manual_seed(2)
    n = 4000
    x = model.simulator(phi[None], n, g)[0]
    alternatives = torch.tensor([[1.05, 3.9, 0.2], [1.02, 4.2, 0.18], [0.95, 4.0, 0.2]], dtype=torch.float64)
    log_p = log_likelihood_per_observation(torch.cat([alternatives, phi[None]]), x, particles=512, generator=g)
    ratio = torch.exp(log_p[:-1] - log_p[-1])
    mean, se = ratio.mean(-1), ratio.std(-1) / math.sqrt(n)
    assert (mean[:2] - 1).abs().max() <= float(4 * se[:2].max() + 1e-3), (mean, se)
    # theta1' = 0.95 < 1: the mass of x_k in [0.95, 1) is missing from the expectation
    assert mean[2] < 1 - 4 * se[2], (mean, se)


def test_support_and_batching():
    """Data simulated at phi* have a finite log-likelihood there and -inf beyond the support
    theta1 <= min x; computing in chunks of parameters gives each parameter its own value (chunks
    of 1 and of 3 agree within the Monte Carlo error, about 0.3 here)."""
    model = MG1(n_obs=50)
    phi = model.true_parameters
    x = model.simulator(phi[None], 50, torch.Generator().manual_seed(3))[0]
    beyond = phi.clone()
    beyond[0] = float(x.min()) + 1e-6
    slower = phi * torch.tensor([1.0, 1.0, 1.5], dtype=torch.float64)
    params = torch.stack([phi, beyond, slower])
    chunked = log_likelihood(params, x, particles=256, generator=torch.Generator().manual_seed(4), batch=1)
    whole = log_likelihood(params, x, particles=256, generator=torch.Generator().manual_seed(5), batch=3)
    assert torch.isfinite(chunked[0]) and chunked[1] == -math.inf == whole[1]
    assert (chunked[0] - chunked[2]).abs() > 5, chunked  # the parameters' values differ ...
    assert torch.allclose(chunked[[0, 2]], whole[[0, 2]], atol=1.0)  # ... and chunking keeps them apart


@pytest.mark.parametrize("phi, x, message", [
    (torch.ones(3), torch.ones(4, 5), "phi must be"),
    (torch.ones(1, 3), torch.ones(5), "x must be"),
    (torch.ones(1, 3), -torch.ones(4, 5), "non-negative"),
])
def test_bad_input_is_refused(phi, x, message):
    with pytest.raises(ValueError, match=message):
        log_likelihood(phi, x)


def test_reference_posterior_matches_grid_quadrature():
    """The adaptive importance sampler against brute force: the same likelihood on a 20^3 grid of
    theta (uniform prior: unit Jacobian from phi), on 30 two-customer observations (a wide posterior
    the grid resolves). Means within 4 importance-sampling SEs (sd / sqrt(ESS)) plus half a grid step.
    Four rounds: the last round's ESS was 387-1,527 over seeds 1-20 (median 1,390; with three rounds,
    22-1,590). Seed 1 is the low end, and one full-suite run gave it 142 (not reproduced alone: the
    rounds amplify rounding differences), so the guard against a degenerate sampler is ESS > 100;
    the tolerances below scale with 1/sqrt(ESS). One or two rounds give ESS 91 and 36 on this seed
    and fail it."""
    from scorebayes import metrics

    model = MG1(n_obs=30, customers=2)
    x = model.simulator(model.true_parameters[None], 30, torch.Generator().manual_seed(7))[0]
    post = reference_posterior(x, draws=3000, rounds=4, particles=64, seed=1)
    s, w = post.samples.reshape(-1, 3).numpy(), post.weights.reshape(-1).numpy()
    ess = post.info["ess"][-1]
    assert ess > 100, post.info
    mean, sd = metrics.posterior_mean(s, w), np.sqrt(metrics.posterior_mean((s - metrics.posterior_mean(s, w)) ** 2, w))
    low, high = metrics.credible_interval(s, w, level=0.999)
    axes = [torch.linspace(max(1e-3, low[k] - 0.2 * (high[k] - low[k])),
                           min(float(x.min()) if k == 0 else 0.5 if k == 2 else 20.0, high[k] + 0.2 * (high[k] - low[k])),
                           20, dtype=torch.float64) for k in range(3)]
    theta = torch.cartesian_prod(*axes)
    phi = torch.stack([theta[:, 0], theta[:, 1] - theta[:, 0], theta[:, 2]], dim=-1)
    log_lik = log_likelihood(phi, x, particles=128, generator=torch.Generator().manual_seed(3), batch=1000)
    log_post = torch.where((phi[:, 1] > 0) & (phi[:, 1] <= 10), log_lik, torch.tensor(-math.inf, dtype=torch.float64))
    grid_w = torch.softmax(log_post, 0).numpy()
    grid_mean = metrics.posterior_mean(theta.numpy(), grid_w)
    grid_sd = np.sqrt(metrics.posterior_mean((theta.numpy() - grid_mean) ** 2, grid_w))
    step = np.array([float(a[1] - a[0]) for a in axes])
    assert (np.abs(mean - grid_mean) <= 4 * sd / math.sqrt(ess) + step / 2).all(), (mean, grid_mean, sd, step)
    # the spread too (SE of an SD about sd / sqrt(2 ESS)); unweighted proposal draws are 1.2-1.5x wider
    assert (np.abs(sd - grid_sd) <= 4 * sd / math.sqrt(2 * ess) + step / 2).all(), (sd, grid_sd, step)


def test_reference_posterior_ignores_the_global_random_state():
    """Its draws come from ``seed`` alone (the proposal's draws once came from torch's global
    generator, so a test's result depended on the tests run before it)."""
    model = MG1(n_obs=10, customers=2)
    x = model.simulator(model.true_parameters[None], 10, torch.Generator().manual_seed(3))[0]
    runs = []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)
        runs.append(reference_posterior(x, draws=200, rounds=1, particles=8, seed=5).samples)
    assert torch.equal(runs[0], runs[1])


def test_student_t_proposal_draws_have_the_t_law():
    """Projections of the proposal's draws, standardised, are t with T_DEGREES degrees of freedom
    (Kolmogorov-Smirnov at 20,000 draws, p > 1e-3), with mean loc; a normal (chi2 -> its mean)
    fails the KS test."""
    from scipy import stats

    loc = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    a = torch.tensor([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [-0.3, 0.2, 0.1]], dtype=torch.float64)
    draws = _student_t_draws(loc, a, 20_000, torch.Generator().manual_seed(0))
    cov = a @ a.T
    for direction in torch.eye(3, dtype=torch.float64).unbind() + (torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64),):
        z = ((draws - loc) @ direction / (direction @ cov @ direction).sqrt()).numpy()
        assert stats.kstest(z, stats.t(T_DEGREES).cdf).pvalue > 1e-3
        assert stats.kstest(z, stats.norm.cdf).pvalue < 1e-3
