"""BSL: exact synthetic likelihood on Gaussian models recovers the analytic posterior."""

import math

import numpy as np
import pytest
import scipy.stats
import torch

from scorebayes.baselines import bsl, gaussian_synthetic_loglik, mean_sd_summary
from scorebayes.diagnostics import ess
from scorebayes.priors import ParameterSpace, independent
from scorebayes.proposal import GaussianProposal
from scorebayes.simulators import SimulatorError

F64 = torch.float64


def normal(loc, scale):
    return torch.distributions.Normal(torch.tensor(float(loc), dtype=F64),
                                      torch.tensor(float(scale), dtype=F64))


def location_simulator(theta, n, generator):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, theta.shape[1],
                                           generator=generator, dtype=F64)


def sample_mean(x):
    return x.mean(1)


def mc_tolerance(post, k):
    """4 Monte Carlo sds of the posterior mean of coordinate k (bulk ESS of the chains)."""
    e = ess(post.samples[:, :, k].numpy())
    return 4 * float(post.sd()[k]) / math.sqrt(e), e


def test_synthetic_loglik_matches_scipy(generator):
    s = torch.randn(3, 40, 4, generator=generator, dtype=F64) * torch.tensor([1, 2, 0.5, 3])
    s_obs = torch.tensor([0.1, -0.3, 0.2, 1.0], dtype=F64)
    ours = gaussian_synthetic_loglik(s_obs, s)
    for c in range(3):
        ref = scipy.stats.multivariate_normal(s[c].mean(0).numpy(),
                                              np.cov(s[c].numpy().T)).logpdf(s_obs.numpy())
        assert math.isclose(float(ours[c]), ref, rel_tol=1e-10)
    bad = s.clone()
    bad[1, 0, 0] = float("nan")
    assert gaussian_synthetic_loglik(s_obs, bad)[1] == -math.inf


def test_bsl_gaussian_mean_recovers_posterior():
    """x_i ~ N(theta, I_2), n = 20, prior N(0, 2^2 I): the sample mean is sufficient and
    exactly N(theta, I/n), so the synthetic likelihood is exact up to the estimation of its
    moments from M = 50 draws (sd inflation ~ 1/(2M) = 1%). Posterior N(n xbar / (n + 1/4),
    1/(n + 1/4)); tolerance 4 MC sds of the chain mean (ESS) and 4/sqrt(2 ESS) + 2% on the sd.
    """
    n = 20
    prior = independent([normal(0, 2), normal(0, 2)])
    x_obs = location_simulator(torch.tensor([[0.5, -1.0]], dtype=F64), n,
                               torch.Generator().manual_seed(0))[0]
    post = bsl(x_obs, location_simulator, prior, summary=sample_mean, num_chains=4,
               num_steps=1500, burn_in=500, num_sims=50, generator=torch.Generator().manual_seed(1))
    precision = n + 0.25
    mean, sd = n * x_obs.mean(0) / precision, precision**-0.5
    assert post.samples.shape == (4, 1000, 2)
    for k in range(2):
        tol, e = mc_tolerance(post, k)
        assert abs(float(post.mean()[k]) - float(mean[k])) < tol
        assert abs(float(post.sd()[k]) / sd - 1) < 4 / math.sqrt(2 * e) + 0.02
    assert post.info["simulations"] == 4 * 1500 * 50
    assert 0.1 < post.info["acceptance_rate"] < 0.5


def test_bsl_positive_parameter_uses_the_jacobian():
    """Exponential(1) prior on theta > 0, x_i ~ N(theta, 1), n = 5: the posterior is
    N(xbar - 1/n, 1/n) truncated to theta > 0. The chain runs on u = log theta; dropping
    the log-Jacobian would target a different density (mean off by several MC sds)."""
    n = 5
    prior = independent([torch.distributions.Exponential(torch.tensor(1.0, dtype=F64))])
    x_obs = torch.tensor([[0.1], [0.6], [-0.4], [0.5], [0.2]], dtype=F64)
    post = bsl(x_obs, location_simulator, prior, summary=sample_mean, num_chains=4,
               num_steps=2000, burn_in=500, num_sims=40, generator=torch.Generator().manual_seed(2))
    loc, scale = float(x_obs.mean()) - 1 / n, math.sqrt(1 / n)
    truth = scipy.stats.truncnorm(-loc / scale, np.inf, loc=loc, scale=scale)
    tol, e = mc_tolerance(post, 0)
    assert abs(float(post.mean()[0]) - truth.mean()) < tol
    assert abs(float(post.sd()[0]) / truth.std() - 1) < 4 / math.sqrt(2 * e) + 0.02
    assert (post.draws > 0).all()


def test_bsl_localized_start_and_reproducible():
    prior = independent([normal(0, 2), normal(0, 2)])
    x_obs = location_simulator(torch.tensor([[1.0, 0.0]], dtype=F64), 10,
                               torch.Generator().manual_seed(3))[0]
    q = GaussianProposal(ParameterSpace(prior), x_obs.mean(0), torch.full((2,), 0.3))
    runs = [bsl(x_obs, location_simulator, prior, num_chains=3, num_steps=60, burn_in=20,
                num_sims=10, sampler=q, generator=torch.Generator().manual_seed(4))
            for _ in range(2)]
    torch.testing.assert_close(runs[0].samples, runs[1].samples)
    assert runs[0].info["simulations"] == 3 * 60 * 10
    assert runs[0].info["summary_dim"] == 4  # mean and sd of 2 columns
    init = bsl(x_obs, location_simulator, prior, num_chains=2, num_steps=3, burn_in=0,
               num_sims=10, init=torch.tensor([0.3, 0.4]), adapt=False,
               generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(init.samples[:, 0], torch.tensor([[0.3, 0.4]] * 2, dtype=F64))


def test_mean_sd_summary():
    x = torch.arange(12, dtype=F64).reshape(1, 4, 3)
    torch.testing.assert_close(mean_sd_summary(x)[0, :3], x[0].mean(0))
    torch.testing.assert_close(mean_sd_summary(x)[0, 3:], x[0].std(0))


def test_bsl_input_errors():
    prior = independent([normal(0, 1)])
    x_obs = torch.zeros(5, 1, dtype=F64)
    with pytest.raises(ValueError, match="must exceed the summary dimension"):
        bsl(x_obs, location_simulator, prior, num_sims=2)
    with pytest.raises(ValueError, match="burn_in"):
        bsl(x_obs, location_simulator, prior, num_steps=10, burn_in=10)
    with pytest.raises(ValueError, match="summary"):
        bsl(x_obs, location_simulator, prior, summary=lambda x: x.mean((1, 2)))
    with pytest.raises(ValueError, match="outside the prior"):
        bsl(x_obs, location_simulator,
            independent([torch.distributions.Exponential(torch.tensor(1.0, dtype=F64))]),
            init=torch.tensor([-1.0]))
    with pytest.raises(ValueError, match="num_chains"):
        bsl(x_obs, location_simulator, prior, num_chains=0)


# ------------------------------------------------------------- issue 6: store and faults
class _Interrupt:
    """The location simulator, interrupted (KeyboardInterrupt) at its ``at``-th call."""

    def __init__(self, at):
        self.at, self.calls = at, 0

    def __call__(self, theta, n, generator):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return location_simulator(theta, n, generator)


def _bsl_run(simulator, store=None, **kw):
    prior = independent([normal(0, 2)])
    x_obs = location_simulator(torch.tensor([[0.7]], dtype=F64), 10,
                               torch.Generator().manual_seed(1))[0]
    options = dict(num_chains=3, num_steps=60, burn_in=20, num_sims=10, summary=sample_mean,
                   generator=torch.Generator().manual_seed(5), store=store)
    options.update(kw)
    return bsl(x_obs, simulator, prior, **options)


@pytest.mark.parametrize("at", [2, 25, 58])
def test_bsl_interrupted_then_resumed_is_bit_identical(tmp_path, at):
    from scorebayes.store import RunStore

    ref = _bsl_run(location_simulator)
    store = RunStore(tmp_path, config={"bsl": 1}, seed=0)
    with pytest.raises(KeyboardInterrupt):
        _bsl_run(_Interrupt(at), store=store, checkpoint_every=7)
    resumed = _bsl_run(location_simulator, store=RunStore(tmp_path, config={"bsl": 1}, seed=0),
                       checkpoint_every=7)
    assert torch.equal(resumed.samples, ref.samples)
    expected = 3 * 10 * (7 * ((at - 2) // 7) + 1) if at > 8 else 0
    assert resumed.info["resumed_simulations"] == expected
    assert resumed.info["acceptance_rate"] == ref.info["acceptance_rate"]
    with pytest.raises(ValueError, match="other settings"):
        _bsl_run(location_simulator, store=store, num_sims=12)


def _fails_above(limit, nan=False):
    def simulate(theta, n, generator):
        x = location_simulator(theta, n, generator)
        if nan:
            x[theta[:, 0] > limit] = float("nan")
        elif (theta > limit).any():
            raise RuntimeError("solver diverged")
        return x
    return simulate


@pytest.mark.parametrize("nan", [False, True])
def test_bsl_rejects_failing_proposals_and_counts_them(nan):
    """Simulations fail above theta = 1.2 (posterior mean ~0.7, sd ~0.3): those proposals
    are rejected and counted, so no draw lies above 1.2."""
    with pytest.raises(RuntimeError if not nan else SimulatorError):
        _bsl_run(_fails_above(1.2, nan))
    with pytest.warns(UserWarning, match="biased"):
        post = _bsl_run(_fails_above(1.2, nan), on_simulator_error="skip",
                        max_failure_fraction=0.5)
    key = "nonfinite_simulations" if nan else "failed_simulations"
    assert post.info[key] > 0 and post.info["failed_simulations" if nan else
                                           "nonfinite_simulations"] == 0
    assert float(post.samples.max()) <= 1.2
    with pytest.raises(SimulatorError, match="max_failure_fraction"):
        _bsl_run(_fails_above(0.5, nan), on_simulator_error="retry", max_failure_fraction=0.01)


def test_bsl_covariance_adaptation_with_a_diagonal_q():
    """x_i ~ N(A theta, I_2), A = [[1, 0.9], [0.9, 1]], n = 20, prior N(0, 3^2 I): the
    posterior is Gaussian with sds 1.8 and 0.12 along the diagonals (correlation -0.98).
    q's diagonal shape is round, so the walk's step is set by the short axis and crawls along
    the long one; ``adapt_covariance=True`` re-shapes it from the burn-in. Both target the
    same posterior (mean within 4 MC sds, sd within 4/sqrt(2 ESS) + 3%), and the adapted walk
    mixes several times faster along the long axis."""
    A = torch.tensor([[1.0, 0.9], [0.9, 1.0]], dtype=F64)
    n, prior_sd = 20, 3.0

    def simulator(theta, n, generator):
        return (theta @ A.T)[:, None, :] + torch.randn(theta.shape[0], n, 2, generator=generator,
                                                       dtype=F64)

    prior = independent([normal(0, prior_sd), normal(0, prior_sd)])
    truth = torch.tensor([[1.0, -0.5]], dtype=F64)
    x_obs = simulator(truth, n, torch.Generator().manual_seed(5))[0]
    precision = n * A.T @ A + torch.eye(2, dtype=F64) / prior_sd**2
    cov = torch.linalg.inv(precision)
    mean = cov @ (n * A.T @ x_obs.mean(0))
    q = GaussianProposal(ParameterSpace(prior), mean, torch.full((2,), 0.3))
    long_axis = torch.tensor([1.0, -1.0], dtype=F64) / math.sqrt(2)
    results = {}
    for adapt_cov in (None, True):
        post = bsl(x_obs, simulator, prior, summary=sample_mean, num_chains=4, num_steps=2500,
                   burn_in=500, num_sims=30, sampler=q, adapt_covariance=adapt_cov,
                   generator=torch.Generator().manual_seed(6))
        along = (post.samples @ long_axis).numpy()
        results[adapt_cov] = float(ess(along))
        if adapt_cov:
            sd_long = float(long_axis @ cov @ long_axis) ** 0.5
            e = results[adapt_cov]
            assert abs(float(along.mean()) - float(mean @ long_axis)) < 4 * sd_long / math.sqrt(e)
            assert abs(float(along.std()) / sd_long - 1) < 4 / math.sqrt(2 * e) + 0.03
            for k in range(2):
                tol, _ = mc_tolerance(post, k)
                assert abs(float(post.mean()[k]) - float(mean[k])) < tol
    assert results[True] > 3 * results[None], results
