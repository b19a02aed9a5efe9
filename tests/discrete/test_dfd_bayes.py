import math

import pytest
import torch

from scorebayes.discrete import DFDLoss, GeneralisedPosterior, PoissonModel, dfd_bayes, minimise
from scorebayes.priors import ParameterSpace

D64 = torch.float64


def _grid_posterior(loss, prior, beta, grid):
    logp = GeneralisedPosterior(loss, prior, beta).log_prob(grid[:, None])
    w = torch.softmax(logp, 0)
    mean = (w * grid).sum()
    return mean, ((w * (grid - mean) ** 2).sum()).sqrt()


def test_posterior_concentrates_at_the_rate_of_theorem_1():
    """sd * sqrt(n) -> sqrt(1 / (beta H)) with H the Hessian of DFD(p_theta || p) at theta_*."""
    model, prior = PoissonModel(), PoissonModel().default_prior()
    rate = 4.0
    # population Hessian of E[(X/t)^2 - 2 (X+1)/t] at t = rate: 6 E[X^2]/t^4 - 4 E[X+1]/t^3
    h = 6 * (rate + rate**2) / rate**4 - 4 * (rate + 1) / rate**3
    g = torch.Generator().manual_seed(0)
    scaled = []
    for n in (250, 4000):
        x = torch.poisson(torch.full((n, 1), rate, dtype=D64), generator=g)
        loss = DFDLoss(model, x)
        grid = torch.linspace(2.5, 6.0, 20001, dtype=D64)
        mean, sd = _grid_posterior(loss, prior, 1.0, grid)
        assert abs(mean - rate) < 4 * sd
        scaled.append(float(sd) * math.sqrt(n))
    # CLT: sd of the grid posterior is sqrt(1 / (n h)) up to O(n^-1/2) terms
    assert scaled[1] == pytest.approx(1 / math.sqrt(h), rel=0.06)
    assert scaled[0] == pytest.approx(1 / math.sqrt(h), rel=0.2)


def test_dfd_bayes_end_to_end_matches_grid_posterior():
    x = torch.poisson(torch.full((300, 1), 3.0, dtype=D64), generator=torch.Generator().manual_seed(1))
    post = dfd_bayes(PoissonModel(), x, num_bootstrap=40, num_chains=4, num_samples=500, burn_in=500, thin=2, seed=0)
    beta = post.info["beta"]
    assert 0.05 < beta < 20
    mean, sd = _grid_posterior(DFDLoss(PoissonModel(), x), PoissonModel().default_prior(), beta,
                               torch.linspace(1.0, 6.0, 20001, dtype=D64))
    ess = post.summary()[0]["ess"]
    assert float(post.mean()) == pytest.approx(float(mean), abs=5 * float(sd) / math.sqrt(ess))
    assert float(post.sd()) == pytest.approx(float(sd), rel=0.15)
    assert post.summary()[0]["rhat"] < 1.05
    # reproducible
    again = dfd_bayes(PoissonModel(), x, num_bootstrap=40, num_chains=4, num_samples=500, burn_in=500, thin=2, seed=0)
    assert torch.equal(post.samples, again.samples)


def test_minimiser_of_bootstrap_weights_equals_resampled_data():
    x = torch.poisson(torch.full((50, 1), 3.0, dtype=D64), generator=torch.Generator().manual_seed(4))
    loss = DFDLoss(PoissonModel(), x)
    idx = torch.randint(0, 50, (50,), generator=torch.Generator().manual_seed(5))
    resampled = DFDLoss(PoissonModel(), x[idx])
    weights = torch.zeros(1, loss.rows.shape[0], dtype=D64)
    for v in x[idx, 0]:
        weights[0, (loss.rows[:, 0] == v).nonzero()[0, 0]] += 1
    th = torch.tensor([[2.5]], dtype=D64)
    assert torch.allclose(loss.reweighted(weights)(th), resampled(th))
    space = ParameterSpace(PoissonModel().default_prior())
    assert torch.allclose(minimise(loss.reweighted(weights), th, space), minimise(resampled, th, space))
