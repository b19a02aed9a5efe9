"""W1-ABC: exact distances, convergence to the analytic posterior, pi/q weights, streaming."""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import ot
import pytest
import scipy.stats
import torch
from scipy.optimize import linear_sum_assignment

from scorebayes.baselines import abc_w1, importance_weights, wasserstein1
from scorebayes.priors import ParameterSpace, independent
from scorebayes.proposal import GaussianProposal, PriorSampler
from scorebayes.tables import simulate_table

F64 = torch.float64


def normal(loc, scale):
    return torch.distributions.Normal(torch.tensor(float(loc), dtype=F64),
                                      torch.tensor(float(scale), dtype=F64))


def location_simulator(theta, n, generator):
    """x_i = theta + N(0, I), ``[B, n, d]`` (module level: picklable)."""
    return theta[:, None, :] + torch.randn(theta.shape[0], n, theta.shape[1],
                                           generator=generator, dtype=F64)


def test_w1_one_dimension_matches_scipy(generator):
    x = torch.randn(6, 40, 1, generator=generator, dtype=F64) * 2
    for m in (40, 17):  # the sort fast path (equal sizes) and the CDF formula
        y = torch.randn(m, 1, generator=generator, dtype=F64) + 0.3
        ours = wasserstein1(x, y)
        ref = [scipy.stats.wasserstein_distance(a[:, 0], y[:, 0].numpy()) for a in x.numpy()]
        np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-12, atol=1e-12)


def test_w1_two_dimensions_matches_pot_and_assignment(generator):
    x = torch.randn(4, 30, 2, generator=generator, dtype=F64)
    y = torch.randn(30, 2, generator=generator, dtype=F64) + 0.5
    ours = wasserstein1(x, y)
    w = np.full(30, 1 / 30)
    pot = [ot.emd2(w, w, ot.dist(a, y.numpy(), metric="euclidean")) for a in x.numpy()]
    np.testing.assert_allclose(ours.numpy(), pot, rtol=1e-10)
    # uniform weights and equal sizes: an optimal assignment (independent solver)
    for a, d in zip(x.numpy(), ours):
        cost = ot.dist(a, y.numpy(), metric="euclidean")
        r, c = linear_sum_assignment(cost)
        assert math.isclose(cost[r, c].mean(), float(d), rel_tol=1e-10)
    # unequal sizes go through the transport plan with weights 1/m, 1/n
    y2 = y[:13]
    pot2 = ot.emd2(w, np.full(13, 1 / 13), ot.dist(x[0].numpy(), y2.numpy()
                                                    , metric="euclidean"))
    assert math.isclose(float(wasserstein1(x[0], y2)), pot2, rel_tol=1e-10)


def test_abc_approaches_analytic_posterior():
    r"""n = 1, p = 1: W1 = |x_sim - x_obs|, so ABC with radius eps targets
    pi(theta) [Phi(x - theta + eps) - Phi(x - theta - eps)], the exact posterior as eps -> 0.

    Prior N(0, 2^2), x ~ N(theta, 1): posterior N(0.8 x, 0.8). With N = 2e5 and k = 400,
    eps ~ k / (2 N p(x)) ~ 0.005 adds eps^2/3 ~ 1e-5 to the variance (negligible), and the
    k i.i.d. kept draws have Monte Carlo sd sd/sqrt(k) for the mean and about
    sd/sqrt(2k) for the sd; the tolerances are 4 of those.
    """
    prior = independent([normal(0, 2)])
    x_obs = torch.tensor([[1.3]], dtype=F64)
    post = abc_w1(x_obs, prior, simulator=location_simulator, num_simulations=200_000, k=400,
                  generator=torch.Generator().manual_seed(1))
    mean, sd = 0.8 * 1.3, math.sqrt(0.8)
    assert post.info["epsilon"] < 0.02
    assert post.samples.shape == (1, 400, 1) and post.weights is None
    assert abs(float(post.mean()[0]) - mean) < 4 * sd / math.sqrt(400)
    assert abs(float(post.sd()[0]) / sd - 1) < 4 / math.sqrt(2 * 400)
    assert post.info["simulations"] == 200_000 and post.info["method"] == "abc"


def test_abc_from_proposal_is_reweighted_to_the_posterior():
    """Table drawn from q = N(0.5, 1.5^2) (not the prior): pi/q weights recover N(0.8x, 0.8);
    the tolerance is 4 Monte Carlo sds with the Kish effective sample size."""
    prior = independent([normal(0, 2)])
    q = GaussianProposal(ParameterSpace(prior), torch.tensor([0.5]), torch.tensor([1.5]))
    table = simulate_table(location_simulator, q, 100_000, 1, seed=3)
    x_obs = torch.tensor([[-0.7]], dtype=F64)
    post = abc_w1(x_obs, prior, table=table, sampler=q, k=1000)
    assert post.weights is not None and post.info["weighted"]
    ess = post.info["ess"]
    assert 300 < ess < 1000
    mean, sd = 0.8 * -0.7, math.sqrt(0.8)
    assert abs(float(post.mean()[0]) - mean) < 4 * sd / math.sqrt(ess)
    assert abs(float(post.sd()[0]) / sd - 1) < 4 / math.sqrt(2 * ess)


def test_importance_weights_exact():
    """Uniform(0, 1) prior, q = N(0.3, 0.5^2) on the real line: w ∝ 1{0<θ<1} / q(θ)."""
    prior = independent([torch.distributions.Uniform(torch.tensor(0.0, dtype=F64),
                                                     torch.tensor(1.0, dtype=F64))])

    class NormalSampler:
        dist = normal(0.3, 0.5)

        def sample(self, num, generator=None):
            return 0.3 + 0.5 * torch.randn(num, 1, generator=generator, dtype=F64)

        def log_prob(self, theta):
            return self.dist.log_prob(theta[:, 0])

    theta = NormalSampler().sample(500, torch.Generator().manual_seed(0))
    w = importance_weights(theta, prior, NormalSampler())
    inside = (theta[:, 0] > 0) & (theta[:, 0] < 1)
    expected = torch.where(inside, 1 / NormalSampler.dist.log_prob(theta[:, 0]).exp(),
                           torch.zeros(500, dtype=F64))
    torch.testing.assert_close(w, expected / expected.sum())
    assert (w[~inside] == 0).all() and (~inside).any()
    # a proposal Gaussian in logit space: q(θ) = N(logit θ; m, s) / (θ (1 - θ))
    q = GaussianProposal(ParameterSpace(prior), torch.tensor([0.2]), torch.tensor([0.7]))
    theta = q.sample(300, torch.Generator().manual_seed(1))
    t = theta[:, 0]
    q_pdf = torch.tensor(scipy.stats.norm.pdf(np.log(t / (1 - t)), 0.2, 0.7)) / (t * (1 - t))
    torch.testing.assert_close(importance_weights(theta, prior, q), (1 / q_pdf) / (1 / q_pdf).sum())
    assert importance_weights(theta, prior, PriorSampler(prior)) is None
    assert importance_weights(theta, prior, None) is None


def test_streamed_table_equals_stored_table_and_executor():
    prior = independent([normal(0, 2), normal(1, 1)])
    x_obs = location_simulator(torch.tensor([[0.2, 1.5]], dtype=F64), 12,
                               torch.Generator().manual_seed(5))[0]
    post = abc_w1(x_obs, prior, simulator=location_simulator, num_simulations=700, k=20,
                  block_size=64, chunk_size=128, generator=torch.Generator().manual_seed(2))
    seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(2)))
    table = simulate_table(location_simulator, PriorSampler(prior), 700, 12, seed=seed,
                           tag="abc", block_size=64)
    stored = abc_w1(x_obs, prior, table=table, k=20)
    torch.testing.assert_close(post.samples, stored.samples)
    with ThreadPoolExecutor(2) as pool:
        threaded = abc_w1(x_obs, prior, simulator=location_simulator, num_simulations=700, k=20,
                          block_size=64, chunk_size=256, executor=pool,
                          generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(post.samples, threaded.samples)
    assert post.info["epsilon"] == pytest.approx(stored.info["epsilon"])


def test_abc_input_errors():
    prior = independent([normal(0, 1)])
    x_obs = torch.zeros(5, 1, dtype=F64)
    table = simulate_table(location_simulator, PriorSampler(prior), 10, 5, seed=0)
    with pytest.raises(ValueError, match="k must be"):
        abc_w1(x_obs, prior, table=table, k=11)
    with pytest.raises(ValueError, match="either a reference"):
        abc_w1(x_obs, prior, table=table, simulator=location_simulator, k=1)
    with pytest.raises(ValueError, match="either a reference"):
        abc_w1(x_obs, prior, k=1)
    with pytest.raises(ValueError, match="num_simulations"):
        abc_w1(x_obs, prior, simulator=location_simulator, num_simulations=0)
    with pytest.raises(ValueError, match="columns"):
        abc_w1(torch.zeros(5, 2), prior, table=table, k=1)
    with pytest.raises(ValueError, match="non-finite"):
        abc_w1(torch.tensor([[float("nan")]]), prior, table=table, k=1)
    with pytest.raises(ValueError, match="same p"):
        wasserstein1(torch.zeros(2, 3, 2), torch.zeros(3, 1))


def test_simulate_reduced_rejects_bad_block_size():
    from scorebayes.baselines._common import simulate_reduced

    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        simulate_reduced(lambda th, n, g: th[:, None, :], None, 10, 1, lambda x: x, seed=0, block_size=0)
