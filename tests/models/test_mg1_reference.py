"""The particle reference score of the smoothed M/G/1 likelihood (scorebayes.models.mg1_reference)."""

import math

import pytest
import torch

from scorebayes.models import MG1
from scorebayes.models.mg1_reference import smoothed_score

SD = 0.25


def quadrature_log_density(phi: torch.Tensor, x_tilde: torch.Tensor) -> torch.Tensor:
    r"""Exact :math:`\log \tilde p` for one customer: :math:`x = \theta_1 + wU + E`, ``E ~ Exp(rate)``,
    plus N(0, SD^2) noise; the density of ``x`` is closed form, the convolution a fine Riemann sum."""
    theta1, width, rate = phi
    y = theta1 + torch.linspace(0.0, float(width) + 80.0 / float(rate), 400_001, dtype=torch.float64)
    t = y - theta1
    inside = (1 - torch.exp(-rate * t)) / width
    beyond = torch.exp(-rate * (t - width)) * (1 - torch.exp(-rate * width)) / width
    f = torch.where(t <= width, inside, beyond)
    step = y[1] - y[0]
    kernel = torch.exp(-0.5 * ((x_tilde[:, None] - y[None]) / SD) ** 2) / (SD * math.sqrt(2 * math.pi))
    return torch.log((f[None] * kernel).sum(1) * step)


def test_one_customer_score_matches_quadrature():
    phi = torch.tensor([1.0, 4.0, 0.2], dtype=torch.float64)
    x = torch.tensor([0.7, 1.1, 2.5, 6.0, 12.0], dtype=torch.float64)
    eps = 1e-4
    exact = torch.stack([(quadrature_log_density(phi + eps * e, x) - quadrature_log_density(phi - eps * e, x))
                         / (2 * eps) for e in torch.eye(3, dtype=torch.float64)], dim=-1)
    reps = 16  # independent filters per point: their spread is the Monte Carlo error
    est = smoothed_score(phi, x.repeat(reps)[:, None], noise_sd=SD, particles=20_000,
                         generator=torch.Generator().manual_seed(0))
    score = est.score.reshape(reps, len(x), 3)
    mean, se = score.mean(0), score.std(0) / math.sqrt(reps)
    assert ((mean - exact).abs() <= 4 * se + 1e-3).all(), (mean, exact, se)
    # the log-likelihood estimate too (one customer: plain importance sampling)
    log_lik = est.log_likelihood.reshape(reps, len(x)).mean(0)
    assert torch.allclose(log_lik, quadrature_log_density(phi, x), atol=0.02)


def test_five_customer_score_has_mean_zero_at_the_truth():
    model = MG1()
    phi = model.true_parameters
    g = torch.Generator().manual_seed(1)
    n = 400
    x = model.simulator(phi[None], n, g)[0] + SD * torch.randn(n, 5, generator=g, dtype=torch.float64)
    s = smoothed_score(phi, x, noise_sd=SD, particles=2_000, generator=g).score
    # E_{x~ ~ p~_phi}[score] = 0; the spread over observations includes the particle noise
    z = s.mean(0) / (s.std(0) / math.sqrt(n))
    assert (z.abs() < 4).all(), z
    # and it carries information: every component varies (Fisher information > 0)
    assert (s.std(0) > torch.tensor([0.5, 0.3, 5.0], dtype=torch.float64)).all(), s.std(0)


def test_rejects_bad_input():
    x = torch.ones(3, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match="phi must be"):
        smoothed_score(torch.ones(2), x)
    with pytest.raises(ValueError, match="x_tilde must be"):
        smoothed_score(torch.tensor([1.0, 4.0, 0.2]), torch.ones(5))
    with pytest.raises(ValueError, match="positive"):
        smoothed_score(torch.tensor([1.0, 0.0, 0.2]), x)


def importance_score(phi: torch.Tensor, x_tilde: torch.Tensor, particles: int, seed: int) -> torch.Tensor:
    """An independent estimator for comparison: importance sampling from the simulator with fixed
    latents (reparametrised in all three parameters), differentiated by autograd; ``[n, 3]``."""
    sim = MG1(customers=x_tilde.shape[-1]).simulator
    leaf = phi.clone().requires_grad_(True)
    z = sim.latent(1, particles, torch.Generator().manual_seed(seed))
    x = sim.transform(leaf[None], z)[0]  # [M, p]
    log_w = (-0.5 * ((x_tilde[:, None, :] - x[None]) / SD) ** 2).sum(-1)  # [n, M]
    log_p = torch.logsumexp(log_w, 1)
    return torch.stack([torch.autograd.grad(v, leaf, retain_graph=True)[0] for v in log_p])


def test_two_customer_score_with_idle_server_matches_importance_sampling():
    # two customers: the second waits for an arrival (idle server) in most draws, so the
    # derivative of the previous departure time enters the score
    phi = torch.tensor([1.0, 4.0, 0.2], dtype=torch.float64)
    x = torch.tensor([[3.0, 2.0], [6.0, 1.5], [2.0, 8.0], [1.2, 1.0]], dtype=torch.float64)
    reps = 12
    smc = smoothed_score(phi, x.repeat(reps, 1), noise_sd=SD, particles=100_000,
                         generator=torch.Generator().manual_seed(2)).score.reshape(reps, len(x), 3)
    imp = torch.stack([importance_score(phi, x, 1_000_000, seed) for seed in range(reps)])
    diff = smc.mean(0) - imp.mean(0)
    se = (smc.var(0) / reps + imp.var(0) / reps).sqrt()
    assert (diff.abs() <= 4 * se + 1e-3).all(), (smc.mean(0), imp.mean(0), se)


def test_one_parameter_per_observation():
    # rows at two different parameters in one call: each matches its own quadrature score
    phis = torch.tensor([[1.0, 4.0, 0.2], [0.5, 2.0, 0.4]], dtype=torch.float64)
    x = torch.tensor([1.1, 2.5], dtype=torch.float64)
    reps = 16
    rows_phi = phis.repeat_interleave(len(x), 0).repeat(reps, 1)  # [reps * 4, 3]
    rows_x = x.repeat(len(phis)).repeat(reps)[:, None]
    est = smoothed_score(rows_phi, rows_x, noise_sd=SD, particles=20_000,
                         generator=torch.Generator().manual_seed(4)).score.reshape(reps, len(phis), len(x), 3)
    eps = 1e-4
    for a, phi in enumerate(phis):
        exact = torch.stack([(quadrature_log_density(phi + eps * e, x) - quadrature_log_density(phi - eps * e, x))
                             / (2 * eps) for e in torch.eye(3, dtype=torch.float64)], dim=-1)
        mean, se = est[:, a].mean(0), est[:, a].std(0) / math.sqrt(reps)
        assert ((mean - exact).abs() <= 4 * se + 1e-3).all(), (a, mean, exact, se)
    with pytest.raises(ValueError, match="phi must be"):
        smoothed_score(phis, torch.ones(3, 1))
