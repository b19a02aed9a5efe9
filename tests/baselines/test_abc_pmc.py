"""ABC-PMC: exact conjugate posteriors under a prior that pulls, a constrained prior, bad input.

Tolerances come from the Monte Carlo error of the weighted draws: the posterior SD over the
square root of the run's Kish ESS. Over 8 seeds the Gaussian case's errors were within 3.0 such
units (their SD about 1.4: eps and the adjustment add a little to the Kish error), the Poisson
case's within 0.7 (there eps = 0). Broken on purpose, the same runs miss by far more: without
the pi/q weights the Gaussian means land 0.45 (25-35 units) off, at the likelihood's centre,
and without the log-Jacobian of u = log(lambda) the Poisson mean is 8-10 units low.
"""

import importlib

import pytest
import torch

from scorebayes.baselines import abc_pmc
from scorebayes.priors import independent

F64 = torch.float64
abc_pmc_module = importlib.import_module("scorebayes.baselines.abc_pmc")


def normal(loc, scale):
    return torch.distributions.Normal(torch.tensor(float(loc), dtype=F64), torch.tensor(float(scale), dtype=F64))


def location_simulator(theta, n, generator):
    """x_i = theta + N(0, I), ``[B, n, d]``."""
    return theta[:, None, :] + torch.randn(theta.shape[0], n, theta.shape[1], generator=generator, dtype=F64)


def poisson_simulator(theta, n, generator):
    return torch.poisson(theta[:, None, :].expand(-1, n, -1).contiguous(), generator=generator)


def column_means(x):
    return x.mean(1)


GAUSS_X = torch.tensor([[-0.5, 1.0], [0.2, 0.5], [0.1, 0.8], [0.2, 0.7]], dtype=F64)
GAUSS_PRIOR = independent([normal(3, 1), normal(3, 1)])


def gaussian_run(seed=0, metric="residual"):
    return abc_pmc(GAUSS_X, GAUSS_PRIOR, location_simulator, column_means, rounds=3, metric=metric,
                   simulations_per_round=10_000, k=1000, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("metric", ["residual", "spread"])
def test_conjugate_gaussian_posterior_under_a_prior_that_pulls(metric):
    # N(3, 1) prior, 4 observations with unit noise: the exact posterior is N((3 + 4 xbar) / 5, 1/5),
    # 0.45-0.6 away from xbar, so a sampler that forgets pi/q (the posterior under its proposals)
    # lands at the likelihood's centre instead; either metric is valid
    posterior = gaussian_run(metric=metric)
    assert posterior.info["metric"] == metric
    n = len(GAUSS_X)
    exact_mean, exact_sd = (3 + n * GAUSS_X.mean(0)) / (1 + n), (1 / (1 + n)) ** 0.5
    ess = posterior.info["ess"]
    assert ess > 150, posterior.info
    assert posterior.info["k_hat"] < 0.7
    error = (posterior.mean() - exact_mean).abs() / (exact_sd / ess**0.5)
    assert (error < 5).all(), (posterior.mean(), exact_mean, ess)
    assert ((posterior.sd() / exact_sd - 1).abs() < 3.5 / (2 * ess) ** 0.5).all(), posterior.sd()  # SE of an SD
    assert posterior.info["simulations"] == 40_000 and len(posterior.info["rounds"]) == 4
    assert posterior.samples.shape == (1, 1000, 2)


def test_without_importance_weights_the_same_run_fails(monkeypatch):
    # the check above can fail: drop pi/q (keep the kernel only) and the means miss by > 20 units
    monkeypatch.setattr(abc_pmc_module, "pareto_smooth", lambda w: (torch.full_like(w, 1 / len(w)), 0.0))
    posterior = gaussian_run()
    n = len(GAUSS_X)
    exact_mean, exact_sd = (3 + n * GAUSS_X.mean(0)) / (1 + n), (1 / (1 + n)) ** 0.5
    error = (posterior.mean() - exact_mean).abs() / (exact_sd / posterior.info["ess"] ** 0.5)
    assert (error > 20).all()


POISSON_X = torch.tensor([[0.0], [1], [0], [2], [1], [0], [0], [1], [0], [1]], dtype=F64)


def poisson_run(seed=0):
    prior = independent([torch.distributions.Gamma(torch.tensor(2.0, dtype=F64), torch.tensor(1.0, dtype=F64))])
    return abc_pmc(POISSON_X, prior, poisson_simulator, column_means, rounds=3, simulations_per_round=10_000,
                   k=1000, generator=torch.Generator().manual_seed(seed))


def test_constrained_prior_gamma_poisson_is_exact():
    # Gamma(2, 1) prior on a Poisson rate, sampled in u = log(lambda): the sum is sufficient and
    # discrete, so the kept rows match it exactly (eps = 0) and the posterior is Gamma(2 + sum, 1 + n)
    posterior = poisson_run()
    exact = torch.distributions.Gamma(2 + POISSON_X.sum(), torch.tensor(1.0 + len(POISSON_X), dtype=F64))
    ess, sd = posterior.info["ess"], float(exact.stddev)
    assert posterior.info["epsilon"] == 0.0
    assert abs(float(posterior.mean()) - float(exact.mean)) < 4 * sd / ess**0.5
    assert abs(float(posterior.sd()) / sd - 1) < 0.12
    # the 2.5% and 97.5% quantiles, against the exact ones (their SE: sqrt(p (1 - p) / ESS) / density)
    for p in (0.025, 0.975):
        exact_q = float(_gamma_quantile(exact, p))
        density = float(exact.log_prob(torch.tensor(exact_q, dtype=F64)).exp())
        assert abs(float(posterior.quantile(p)) - exact_q) < 4 * (p * (1 - p) / ess) ** 0.5 / density


def _gamma_quantile(gamma, p):
    import scipy.stats

    return scipy.stats.gamma(float(gamma.concentration), scale=1 / float(gamma.rate)).ppf(p)


def test_without_the_jacobian_the_poisson_run_fails(monkeypatch):
    monkeypatch.setattr(abc_pmc_module.ParameterSpace, "log_abs_det_jacobian",
                        lambda self, u: torch.zeros(u.shape[0], dtype=F64))
    posterior = poisson_run()
    exact = torch.distributions.Gamma(2 + POISSON_X.sum(), torch.tensor(1.0 + len(POISSON_X), dtype=F64))
    assert float(exact.mean) - float(posterior.mean()) > 6 * float(exact.stddev) / posterior.info["ess"] ** 0.5


def test_same_seed_same_draws():
    a, b = poisson_run(3), poisson_run(3)
    assert torch.equal(a.samples, b.samples) and torch.equal(a.weights, b.weights)


class CountingSimulator:
    def __init__(self, shape_error=False):
        self.calls, self.shape_error = 0, shape_error

    def __call__(self, theta, n, generator):
        self.calls += 1
        x = location_simulator(theta, n, generator)
        return x[:, :-1] if self.shape_error else x


@pytest.mark.parametrize("kwargs, summary, message", [
    ({"rounds": 0}, column_means, "rounds must be an integer >= 1"),
    ({"simulations_per_round": 10}, column_means, "simulations_per_round must be an integer >= 20"),
    ({"k": 5}, column_means, "k must be an integer in \\[10"),
    ({"k": 10_000}, column_means, "k must be an integer in \\[10"),
    ({"metric": "euclidean"}, column_means, "metric must be 'residual' or 'spread'"),
    ({"block_size": 0}, column_means, "block_size must be a positive integer"),
    ({}, lambda x: x.mean((1, 2)), "summary must map x \\[B, n, p\\] to t \\[B, s\\]"),
    ({}, lambda x: x.mean(1) / 0 * 0, "non-finite"),
])
def test_bad_settings_are_refused_before_any_simulation(kwargs, summary, message):
    simulator = CountingSimulator()
    with pytest.raises(ValueError, match=message):
        abc_pmc(GAUSS_X, GAUSS_PRIOR, simulator, summary, **{"simulations_per_round": 1000, "k": 100, **kwargs})
    assert simulator.calls == 0


def test_bad_data_and_simulators_are_refused_with_their_shapes():
    with pytest.raises(ValueError, match="x_obs must be one data set"):
        abc_pmc(GAUSS_X[None], GAUSS_PRIOR, location_simulator, column_means)
    simulator = CountingSimulator(shape_error=True)
    with pytest.raises(ValueError, match="simulator must return x \\[B, n=4, p=2\\].*\\(2, 3, 2\\)"):
        abc_pmc(GAUSS_X, GAUSS_PRIOR, simulator, column_means, simulations_per_round=1000, k=100)
    assert simulator.calls == 1  # the two-row probe only, not a round


def test_a_localized_start_gives_the_same_posterior():
    # round 0 from a Gaussian in u around the likelihood's centre (not the prior's): weights pi/q0
    # from the first round on, the same exact posterior
    from scorebayes.priors import ParameterSpace
    from scorebayes.proposal import GaussianProposal

    start = GaussianProposal(ParameterSpace(GAUSS_PRIOR), GAUSS_X.mean(0), torch.full((2,), 0.8, dtype=F64))
    posterior = abc_pmc(GAUSS_X, GAUSS_PRIOR, location_simulator, column_means, rounds=3, sampler=start,
                        simulations_per_round=10_000, k=1000, generator=torch.Generator().manual_seed(0))
    n = len(GAUSS_X)
    exact_mean, exact_sd = (3 + n * GAUSS_X.mean(0)) / (1 + n), (1 / (1 + n)) ** 0.5
    ess = posterior.info["ess"]
    assert ess > 50 and posterior.info["rounds"][0]["k_hat"] is not None
    assert ((posterior.mean() - exact_mean).abs() / (exact_sd / ess**0.5) < 5).all(), posterior.mean()
    assert ((posterior.sd() / exact_sd - 1).abs() < 3.5 / (2 * ess) ** 0.5).all(), posterior.sd()  # SE of an SD
    with pytest.raises(TypeError, match="sampler must have sample"):
        abc_pmc(GAUSS_X, GAUSS_PRIOR, location_simulator, column_means, sampler=object())


def test_non_finite_simulations_are_never_kept_and_too_many_stop_the_run():
    def sometimes_nan(theta, n, generator):  # NaN data for theta_0 > 3.5: about 30% of the prior
        x = location_simulator(theta, n, generator)
        x[theta[:, 0] > 3.5] = float("nan")
        return x

    posterior = abc_pmc(GAUSS_X, GAUSS_PRIOR, sometimes_nan, column_means, rounds=1,
                        simulations_per_round=2000, k=100, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(posterior.samples).all()

    def always_nan(theta, n, generator):
        return torch.full((theta.shape[0], n, 2), float("nan"), dtype=F64)

    with pytest.raises(ValueError, match="every summary of round 0 is non-finite"):
        abc_pmc(GAUSS_X, GAUSS_PRIOR, always_nan, column_means, simulations_per_round=1000, k=100)

    def mostly_nan(theta, n, generator):
        x = location_simulator(theta, n, generator)
        x[theta[:, 0] > 1.0] = float("nan")  # about 98% of the prior
        return x

    with pytest.raises(ValueError, match="simulated summaries are finite, k = 100 are kept"):
        abc_pmc(GAUSS_X, GAUSS_PRIOR, mostly_nan, column_means, simulations_per_round=1000, k=100)


def test_a_failed_run_resumes_from_its_last_round_with_the_same_numbers(tmp_path):
    from scorebayes.store import RunStore

    def run(store, simulator, rounds=3):
        return abc_pmc(GAUSS_X, GAUSS_PRIOR, simulator, column_means, rounds=rounds, simulations_per_round=2000,
                       k=200, store=store, block_size=2000, generator=torch.Generator().manual_seed(5))

    whole = run(None, location_simulator)

    class FailsInRound2(CountingSimulator):
        def __call__(self, theta, n, generator):
            if self.calls == 3:  # the probe, round 0, round 1, then round 2 fails
                raise RuntimeError("cluster node lost")
            return super().__call__(theta, n, generator)

    store = RunStore(tmp_path / "run")
    with pytest.raises(RuntimeError, match="node lost"):
        run(store, FailsInRound2())
    again = CountingSimulator()
    resumed = run(RunStore(tmp_path / "run"), again)
    assert again.calls == 1 + 2  # the probe, then rounds 2 and 3 only
    assert resumed.info["resumed_simulations"] == 2 * 2000
    # the same draws up to rounding (BLAS reductions over reloaded arrays may differ in the last bits)
    assert torch.allclose(resumed.samples, whole.samples, rtol=0, atol=1e-12)
    assert torch.allclose(resumed.weights, whole.weights, rtol=1e-9, atol=0)
    # more rounds continue the same pool; other settings, or fewer rounds, are refused
    more = run(RunStore(tmp_path / "run"), location_simulator, rounds=4)
    assert len(more.info["rounds"]) == 5
    with pytest.raises(ValueError, match="holds 4 rounds, more than rounds=3"):
        run(RunStore(tmp_path / "run"), location_simulator)
    with pytest.raises(ValueError, match="other settings \\(k\\)"):
        abc_pmc(GAUSS_X, GAUSS_PRIOR, location_simulator, column_means, rounds=3, simulations_per_round=2000,
                k=300, store=RunStore(tmp_path / "run"), block_size=2000,
                generator=torch.Generator().manual_seed(5))


def test_a_failure_inside_a_round_keeps_the_blocks_already_simulated(tmp_path):
    from scorebayes.store import RunStore

    def run(store, simulator):
        return abc_pmc(GAUSS_X, GAUSS_PRIOR, simulator, column_means, rounds=3, simulations_per_round=2000,
                       k=200, store=store, block_size=500, generator=torch.Generator().manual_seed(5))

    whole = run(None, location_simulator)

    class FailsInRound2Block2(CountingSimulator):
        def __call__(self, theta, n, generator):
            if self.calls == 1 + 4 + 4 + 2:  # the probe, rounds 0-1 (4 blocks each), 2 blocks of round 2
                raise RuntimeError("cluster node lost")
            return super().__call__(theta, n, generator)

    store = RunStore(tmp_path / "run")
    with pytest.raises(RuntimeError, match="node lost"):
        run(store, FailsInRound2Block2())
    blocks = sorted(p.name for p in (tmp_path / "run" / "arrays" / "abc_pmc" / "blocks").iterdir())
    assert blocks == [f"round002_block{b:06d}_{part}.npy" for b in (0, 1) for part in ("t", "theta")]
    again = CountingSimulator()
    resumed = run(RunStore(tmp_path / "run"), again)
    assert again.calls == 1 + 2 + 4  # the probe, round 2's last two blocks, round 3
    assert resumed.info["resumed_simulations"] == 2 * 2000 + 2 * 500
    assert torch.allclose(resumed.samples, whole.samples, rtol=0, atol=1e-12)
    assert torch.allclose(resumed.weights, whole.weights, rtol=1e-9, atol=0)
    assert not any((tmp_path / "run" / "arrays" / "abc_pmc" / "blocks").iterdir())  # all in the pool now


def test_an_executor_gives_the_in_process_draws():
    from scorebayes.parallel import make_executor

    def run(executor, simulator=location_simulator):
        return abc_pmc(GAUSS_X, GAUSS_PRIOR, simulator, column_means, rounds=2, simulations_per_round=1500,
                       k=100, block_size=400, executor=executor, generator=torch.Generator().manual_seed(9))

    here = run(None)
    with make_executor("processes", workers=2) as pool:
        there = run(pool)
        with pytest.raises(TypeError, match="cannot be sent to worker processes"):
            run(pool, lambda theta, n, generator: location_simulator(theta, n, generator))
    # one generator per block, wherever it runs: the same simulations, so the same draws
    assert torch.allclose(there.samples, here.samples, rtol=0, atol=1e-12)
    assert torch.allclose(there.weights, here.weights, rtol=1e-9, atol=0)
