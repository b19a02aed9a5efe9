"""Sliced-Wasserstein localization: exact 1-D distances, n^{-1/2} rate, fallback, validation."""

import math
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor

import numpy as np
import pytest
import scipy.stats
import torch

from scorebayes.sbi.localization.minimum_distance import localize, random_directions, sliced_wasserstein
from scorebayes.models._utils import smooth_indicator
from scorebayes.priors import independent
from scorebayes.proposal import GaussianProposal
from scorebayes.simulators import Simulator

F64 = torch.float64


def _t(value):
    return torch.tensor(float(value), dtype=F64)


def _gaussian_latent(batch, n, generator):
    return torch.randn(batch, n, 2, generator=generator, dtype=F64)


def _shift(theta, z):
    return theta[:, None, :] + z


class _CountingGaussian:
    """Direct (not reparametrised) simulator x_i ~ N(theta, I_2) that counts datasets."""

    def __init__(self):
        self.datasets = 0

    def __call__(self, theta, n, generator):
        self.datasets += theta.shape[0]
        return theta[:, None, :] + torch.randn(theta.shape[0], n, 2, generator=generator,
                                               dtype=F64)


GAUSSIAN = Simulator(latent=_gaussian_latent, transform=_shift)
WIDE_PRIOR = independent([torch.distributions.Normal(_t(0), _t(2))] * 2)
TRUTH = torch.tensor([1.0, -2.0], dtype=F64)


def _observed(n, seed):
    g = torch.Generator().manual_seed(seed)
    return TRUTH + torch.randn(n, 2, generator=g, dtype=F64)


# ---------------------------------------------------------------- sliced Wasserstein


@pytest.mark.parametrize("m,n", [(40, 40), (37, 50), (90, 7), (1, 3)])
def test_sliced_wasserstein_is_exact_w1_in_one_dimension(m, n):
    g = torch.Generator().manual_seed(m * 100 + n)
    a = torch.randn(3, m, 1, generator=g, dtype=F64)
    b = 2 * torch.randn(n, 1, generator=g, dtype=F64) + 0.5
    for sign in (1.0, -1.0):
        out = sliced_wasserstein(a, b, torch.full((1, 1), sign, dtype=F64))
        assert out.shape == (3,)
        for k in range(3):
            ref = scipy.stats.wasserstein_distance(a[k, :, 0].numpy(), b[:, 0].numpy())
            assert float(out[k]) == pytest.approx(ref, rel=1e-12, abs=1e-14)


def test_sliced_wasserstein_zero_for_identical_sets_and_exact_for_shifts():
    g = torch.Generator().manual_seed(0)
    b = torch.randn(30, 3, generator=g, dtype=F64)
    directions = random_directions(25, 3, generator=g)
    assert torch.allclose(directions.norm(dim=-1), torch.ones(25, dtype=F64))
    permuted = b[torch.randperm(30, generator=g)]
    assert float(sliced_wasserstein(b, b, directions)) == 0.0
    assert float(sliced_wasserstein(permuted, b, directions)) == pytest.approx(0, abs=1e-14)
    # a translation by c moves every projection by w.c: SW = mean_l |w_l . c|
    shift = torch.tensor([0.3, -1.0, 2.0], dtype=F64)
    expected = (directions @ shift).abs().mean()
    assert float(sliced_wasserstein(b + shift, b, directions)) == pytest.approx(float(expected))
    # m != n: duplicating every point leaves the empirical distribution unchanged
    doubled = sliced_wasserstein(torch.cat([b, b]), b, directions)
    assert float(doubled) == pytest.approx(0, abs=1e-14)


def test_sliced_wasserstein_batched_directions_and_gradient():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(4, 9, 2, generator=g, dtype=F64, requires_grad=True)
    b = torch.randn(6, 2, generator=g, dtype=F64)
    directions = random_directions(5, 2, batch=(4,), generator=g)
    out = sliced_wasserstein(a, b, directions)
    for k in range(4):
        single = sliced_wasserstein(a[k], b, directions[k])
        assert float(out[k].detach()) == pytest.approx(float(single.detach()))
    assert torch.autograd.gradcheck(lambda t: sliced_wasserstein(t, b, directions), (a,))
    a_equal = torch.randn(4, 6, 2, generator=g, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: sliced_wasserstein(t, b, directions), (a_equal,))


# ---------------------------------------------------------------- localization


def _standardised(n, seed):
    """X* = theta* + e with e exactly centred and whitened (no data noise left)."""
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(n, 2, generator=g, dtype=F64)
    e = e - e.mean(0)
    chol = torch.linalg.cholesky(e.T @ e / n)
    return TRUTH + torch.linalg.solve_triangular(chol, e.T, upper=False).T


def _rate(ns, errors):
    rms = np.array([float(e.pow(2).mean().sqrt()) for e in errors])
    return np.polyfit(np.log(ns), np.log(rms), 1)[0], rms * np.sqrt(ns)


def test_localization_error_shrinks_like_root_n():
    # Theorem 2: |theta_hat - theta*| = O_p(n^{-1/2} + m^{-1/2}). With standardised data
    # (mean(X*) = theta* exactly) only the m = n latent part is left:
    # theta_hat ~ theta* - mean(Z), E|error|^2 = d/m = 2/n, so sqrt(n) * rms ~ 1.4.
    # 32 replicates per n: log-rms sd ~0.09, slope sd ~0.045 (5 seeds gave -0.47..-0.55).
    ns = np.array([50, 200, 800])
    errors = []
    for n in ns:
        result = localize(GAUSSIAN, _standardised(n, 10), WIDE_PRIOR, replicates=32,
                          iterations=200, num_directions=4, seed=0)
        errors.append((result.theta_hat - TRUTH).norm(dim=1))
    slope, scaled = _rate(ns, errors)
    assert abs(slope + 0.5) < 0.15, (slope, scaled)
    assert np.all((scaled > 1.0) & (scaled < 2.2)), scaled


@pytest.mark.slow
def test_localization_error_shrinks_like_root_n_with_data_noise():
    # Fresh data sets: E|error|^2 ~ 2 d / n (data + latents), sqrt(n) * rms ~ 2.
    ns = np.array([100, 400, 1600])
    errors = []
    for n in ns:
        per_n = []
        for k in range(16):
            x = _observed(int(n), 1000 * int(n) + k)
            result = localize(GAUSSIAN, x, WIDE_PRIOR, replicates=4, iterations=250,
                              num_directions=4, seed=k)
            per_n.append((result.theta_hat - TRUTH).norm(dim=1))
        errors.append(torch.cat(per_n))
    slope, scaled = _rate(ns, errors)
    assert abs(slope + 0.5) < 0.2, (slope, scaled)
    assert np.all((scaled > 1.2) & (scaled < 3.0)), scaled


def _exp_latent(batch, n, generator):
    return 1.0 - torch.rand(batch, n, 1, generator=generator, dtype=F64)


def _exp_transform(theta, z):
    return -torch.log(z) / theta.reshape(theta.shape[0], 1, 1)


def test_positive_parameter_lands_near_truth():
    # X ~ Exp(rate 2), rate ~ Gamma(2, 1): optimised in u = log(rate)
    sim = Simulator(latent=_exp_latent, transform=_exp_transform)
    prior = independent([torch.distributions.Gamma(_t(2), _t(1))])
    n, rate = 400, 2.0
    x = _exp_transform(torch.tensor([[rate]], dtype=F64),
                       _exp_latent(1, n, torch.Generator().manual_seed(3)))[0]
    result = localize(sim, x, prior, replicates=8, iterations=200, num_directions=1, seed=1)
    # sd of one replicate ~ rate * sqrt(2 / n) = 0.14 (data + latent noise)
    assert (result.theta_hat > 0).all()
    assert abs(float(result.theta_hat.mean()) - rate) < 0.3
    assert torch.allclose(result.u_hat, result.theta_hat.log())
    assert isinstance(result.proposal, GaussianProposal)
    assert torch.allclose(result.proposal.mean, result.u_hat.mean(0))
    assert torch.allclose(result.proposal.sd, result.u_hat.std(0))
    assert abs(float(result.proposal.mean) - math.log(rate)) < 3 * float(result.proposal.sd) + 0.1
    assert result.simulations == pytest.approx(8 * 200)
    assert result.history.shape == (200,)
    assert result.history[-20:].mean() < result.history[:20].mean()
    assert result.method == "adam" and result.loss.shape == (8,) and result.seconds > 0
    again = localize(sim, x, prior, replicates=8, iterations=200, num_directions=1, seed=1)
    assert torch.equal(again.theta_hat, result.theta_hat)


def _uniform_latent(batch, n, generator):
    return torch.rand(batch, n, 1, generator=generator, dtype=F64)


def _bernoulli(theta, z):
    return (z <= theta[:, None, :]).to(F64)


def _bernoulli_smooth(theta, z):
    return smooth_indicator(theta[:, None, :] - z)


def test_smooth_indicator_bernoulli_localizes():
    prior = independent([torch.distributions.Uniform(_t(0), _t(1))])
    n, p_true = 400, 0.3
    x = _bernoulli(torch.tensor([[p_true]], dtype=F64),
                   _uniform_latent(1, n, torch.Generator().manual_seed(5)))[0]
    sim = Simulator(latent=_uniform_latent, transform=_bernoulli,
                    smooth_transform=_bernoulli_smooth)
    result = localize(sim, x, prior, replicates=8, iterations=150, num_directions=1, seed=2)
    # one replicate: sd ~ sqrt(2 p (1 - p) / n) = 0.032 around the observed frequency
    assert abs(float(result.theta_hat.mean()) - float(x.mean())) < 0.04
    assert abs(float(result.theta_hat.mean()) - p_true) < 0.08
    hard = Simulator(latent=_uniform_latent, transform=_bernoulli)
    with pytest.raises(ValueError, match="not differentiable"):
        localize(hard, x, prior, replicates=2, iterations=2, num_directions=1)


def test_derivative_free_fallback_on_location_family():
    counting = _CountingGaussian()
    sim = Simulator(counting)
    n = 400
    x = _observed(n, 7)
    result = localize(sim, x, WIDE_PRIOR, replicates=6, num_directions=20, seed=3, m=200)
    assert result.method == "nelder-mead"
    pilot = 2
    assert result.simulations == pytest.approx((counting.datasets - pilot) * 200 / n)
    assert result.simulations <= 6 * 400 * 200 / n
    errors = (result.theta_hat - TRUTH).norm(dim=1)
    # sqrt(n) * error ~ sqrt(2 (1/n + 1/m) n) ~ 1.7 per coordinate; allow 4 sd
    assert float(errors.max()) < 4 * math.sqrt(2 * (1 / n + 1 / 200)) * math.sqrt(2)
    assert result.history[-1] <= result.history[0]
    again = localize(Simulator(_CountingGaussian()), x, WIDE_PRIOR, replicates=6,
                     num_directions=20, seed=3, m=200)
    assert torch.equal(again.theta_hat, result.theta_hat)


def test_derivative_free_replicates_in_a_process_pool():
    x = _observed(100, 8)
    kwargs = dict(replicates=3, num_directions=5, seed=4, max_evaluations=60)
    serial = localize(Simulator(_CountingGaussian()), x, WIDE_PRIOR, **kwargs)
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as pool:
        pooled = localize(Simulator(_CountingGaussian()), x, WIDE_PRIOR, executor=pool, **kwargs)
    assert torch.equal(serial.theta_hat, pooled.theta_hat)
    assert pooled.simulations == serial.simulations <= 3 * 60
    closure = Simulator(lambda theta, n, g: _CountingGaussian()(theta, n, g))
    with pytest.raises(TypeError, match="simulator cannot be sent"):
        localize(closure, x, WIDE_PRIOR, executor=_RefusingExecutor(), **kwargs)


class _RefusingExecutor(Executor):
    def submit(self, fn, *args, **kwargs):  # pragma: no cover - must never be reached
        raise AssertionError("work was submitted")


def test_clear_errors_before_work():
    x = _observed(20, 0)
    with pytest.raises(ValueError, match="non-finite"):
        localize(GAUSSIAN, torch.cat([x, torch.tensor([[math.nan, 0.0]])]), WIDE_PRIOR)
    with pytest.raises(ValueError, match="p=3 columns"):
        localize(GAUSSIAN, torch.zeros(20, 3), WIDE_PRIOR)
    with pytest.raises(ValueError, match="x_obs must be"):
        localize(GAUSSIAN, torch.zeros(2, 3, 4), WIDE_PRIOR)
    prior_3d = independent([torch.distributions.Normal(_t(0), _t(1))] * 3)
    with pytest.raises(ValueError, match="prior's dimension"):
        localize(Simulator(latent=_exp_latent, transform=_exp_transform), x[:, :1], prior_3d)
    with pytest.raises(ValueError, match="latent and transform"):
        localize(Simulator(_CountingGaussian()), x, WIDE_PRIOR, method="adam")


def _wiggly_simulator() -> Simulator:
    """x = g(theta) + 0.3 z, g(theta) = theta + 2 sin(2 theta): |g - g*| has local minima."""
    return Simulator(
        latent=lambda B, n, gen: torch.randn(B, n, 1, generator=gen, dtype=torch.float64),
        transform=lambda th, z: (th + 2 * torch.sin(2 * th))[:, None, :] + 0.3 * z)


def test_restarts_escape_local_minima_and_are_counted():
    # theta* = 3.5 is the only solution of g(theta) = g(3.5) on (-4, 4), but about 3/4 of prior
    # starts stall at local maxima of g (theta ~ 0.9 or -2.2) where the SW loss is ~2 higher
    sim = _wiggly_simulator()
    prior = independent([torch.distributions.Uniform(torch.tensor(-4.0, dtype=torch.float64),
                                                     torch.tensor(4.0, dtype=torch.float64))])
    g = torch.Generator().manual_seed(3)
    x_obs = sim(torch.tensor([[3.5]], dtype=torch.float64), 300, g)[0]
    kw = dict(replicates=20, iterations=150, num_directions=1, seed=4)
    single = localize(sim, x_obs, prior, **kw)
    multi = localize(sim, x_obs, prior, restarts=16, **kw)
    near = lambda loc: float(((loc.theta_hat[:, 0] - 3.5).abs() < 0.3).double().mean())  # noqa: E731
    # P(a start reaches the global basin) ~ 1/4: single ~ Bin(20, 1/4); 16 starts: P(fail) ~ 1%
    assert near(single) <= 0.5
    assert near(multi) >= 0.9
    assert multi.simulations == 20 * 16 * (150 + 1)
    assert multi.theta_hat.shape == (20, 1) and multi.loss.shape == (20,)
    with pytest.raises(ValueError, match="restarts > 1 needs"):
        localize(sim, x_obs, prior, restarts=2, init=torch.tensor([1.0]), **kw)


def test_fixed_length_simulator_passes_the_pilot():
    # a simulator that only produces series of the observed length (like the epidemic model)
    T = 20

    def latent(B, n, gen):
        if n != T:
            raise ValueError(f"this simulator returns T={T} rows; got n={n}")
        return torch.randn(B, n, 1, generator=gen, dtype=torch.float64)

    sim = Simulator(latent=latent, transform=lambda th, z: th[:, None, :] + z)
    prior = independent([torch.distributions.Normal(torch.tensor(0.0, dtype=torch.float64), 3.0)])
    x_obs = 1.0 + torch.randn(T, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    loc = localize(sim, x_obs, prior, replicates=4, iterations=20, num_directions=1)
    assert loc.theta_hat.shape == (4, 1)


def _clamped_latent(batch, n, generator):
    return 0.1 * torch.randn(batch, n, 1, generator=generator, dtype=F64)


def _clamped_transform(theta, z):
    return theta.clamp(-1.0, 1.0)[:, None, :] + z  # no gradient at all where |theta| > 1


def test_median_start_moves_replicates_that_prior_draws_strand_on_a_flat_loss():
    """Replicates started at prior draws with |theta| > 1 get no gradient and stay where they
    started (q prior-wide); started at the prior median, every replicate reaches theta* = 0.5,
    and they differ only through their latents (sd ~ 0.1 sqrt(2 / n) = 0.007)."""
    sim = Simulator(latent=_clamped_latent, transform=_clamped_transform)
    prior = independent([torch.distributions.Normal(_t(0), _t(3))])
    x_obs = _clamped_transform(torch.tensor([[0.5]], dtype=F64),
                               _clamped_latent(1, 400, torch.Generator().manual_seed(2)))[0]
    kw = dict(replicates=20, iterations=150, num_directions=1, seed=3)
    drawn = localize(sim, x_obs, prior, **kw)
    median = localize(sim, x_obs, prior, init="median", **kw)
    stranded = (drawn.theta_hat[:, 0] - 0.5).abs() > 0.4
    assert stranded.sum() >= 5  # P(|N(0, 9)| > 1) = 0.74: about 15 of 20
    assert float(drawn.proposal.sd) > 1.0
    assert float((median.theta_hat[:, 0] - 0.5).abs().max()) < 0.05
    assert float(median.proposal.sd) < 0.05
    with pytest.raises(ValueError, match="restarts > 1 needs"):
        localize(sim, x_obs, prior, restarts=2, init="median", **kw)
    with pytest.raises(ValueError, match="init must be 'prior', 'median' or a tensor"):
        localize(sim, x_obs, prior, init="mean", **kw)


def _ridge_simulator() -> Simulator:
    """x = theta_1 + theta_2 + z: only the sum is identified (a ridge, as M/G/1's theta1/width)."""
    return Simulator(
        latent=lambda B, n, gen: torch.randn(B, n, 1, generator=gen, dtype=F64),
        transform=lambda th, z: (th[:, 0] + th[:, 1])[:, None, None] + z)


def test_support_box_confines_the_replicates_to_the_constrained_minimiser():
    # x ~ N(3, 1), theta ~ U(-10, 10): the SW loss is convex in the location, so on the box
    # theta <= 2 its minimiser is the bound 2 itself; unconstrained, the replicates land at 3
    # (sd ~ sqrt(2 / n) = 0.1). Starts above 2 are clamped first.
    sim = Simulator(latent=lambda B, n, gen: torch.randn(B, n, 1, generator=gen, dtype=F64),
                    transform=lambda th, z: th[:, None, :] + z)
    prior = independent([torch.distributions.Uniform(_t(-10), _t(10))])
    x_obs = 3.0 + torch.randn(200, 1, generator=torch.Generator().manual_seed(5), dtype=F64)
    kw = dict(replicates=10, iterations=150, num_directions=1, seed=2)
    free = localize(sim, x_obs, prior, **kw)
    boxed = localize(sim, x_obs, prior, support=(torch.tensor([-10.0]), torch.tensor([2.0])), **kw)
    assert (free.theta_hat - 3.0).abs().max() < 0.5
    assert float(boxed.theta_hat.max()) <= 2.0 + 1e-9
    assert float(boxed.theta_hat.min()) > 1.95


def test_support_box_collapses_a_ridge_onto_its_admissible_end():
    # truth (0.8, 2.2) on the ridge theta1 + theta2 = 3: unconstrained, the replicates spread
    # along it (theta1 anywhere in (0, 3)); confined to theta1 <= 1 (the analogue of M/G/1's
    # theta1 <= min x), theta1 stays below 1 and theta2 takes up the rest of the sum
    sim = _ridge_simulator()
    prior = independent([torch.distributions.Uniform(_t(0), _t(4))] * 2)
    x_obs = 3.0 + torch.randn(300, 1, generator=torch.Generator().manual_seed(6), dtype=F64)
    kw = dict(replicates=20, iterations=150, num_directions=1, seed=3)
    free = localize(sim, x_obs, prior, **kw)
    box = (torch.tensor([0.0, 0.0]), torch.tensor([1.0, 4.0]))
    boxed = localize(sim, x_obs, prior, support=box, **kw)
    assert float(free.theta_hat[:, 0].max()) > 1.5  # the spread the box removes
    assert float(boxed.theta_hat[:, 0].max()) <= 1.0 + 1e-9
    assert float((boxed.theta_hat.sum(1) - 3.0).abs().max()) < 0.3
    assert float(boxed.theta_hat[:, 1].min()) > 1.7


def test_support_box_errors_before_work():
    x = _observed(20, 0)
    ridge_prior = independent([torch.distributions.Uniform(_t(0), _t(4))] * 2)
    for bad, match in [((torch.zeros(3), torch.ones(3)), "low \\[2\\], high \\[2\\]"),
                       ((torch.ones(2), torch.zeros(2)), "low < high"),
                       ((torch.tensor([5.0, 5.0]), torch.tensor([6.0, 6.0])), "does not meet"),
                       ("data", "must be \\(low")]:
        with pytest.raises(ValueError, match=match):
            localize(_ridge_simulator(), x[:, :1], ridge_prior, support=bad)
    with pytest.raises(ValueError, match="support needs method='adam'"):
        localize(Simulator(_CountingGaussian()), x, WIDE_PRIOR,
                 support=(torch.full((2,), -1.0), torch.ones(2)))
