"""The calibration stage against conjugate posteriors: the synthetic likelihood and MALA on an
exact summary, the whole stage on a biased score, faults, the budget and the verdict."""

import math
import warnings

import pytest
import torch
from torch.distributions import Normal

from scorebayes.priors import ParameterSpace, independent
from scorebayes.proposal import GaussianProposal
from scorebayes.sbi.budget import MAX_ROUNDS, Ledger, plan_budget
from scorebayes.sbi.calibrated import calibrated_posterior, fit_synthetic_likelihood
from scorebayes.sbi.calibrated.sampling import sample_mala
from scorebayes.sbi.calibrated.stage import CalibrationReport
from scorebayes.sbi.calibrated.statistics import DataStatistics, fit_projection
from scorebayes.sbi.checks.calibrated import check_calibrated
from scorebayes.sbi.reference_tables import TableSource
from scorebayes.sbi.settings import Simulation
from scorebayes.posterior import Posterior
from scorebayes.simulators import Simulator

PRIOR_SD, NOISE_SD, N = 3.0, 1.0, 50


def conjugate(x_mean: float) -> tuple[float, float]:
    """Posterior mean and SD of a normal mean (prior N(0, 3^2), N observations of SD 1)."""
    precision = 1 / PRIOR_SD**2 + N / NOISE_SD**2
    return (N * x_mean / NOISE_SD**2) / precision, precision**-0.5


def test_synthetic_likelihood_and_mala_give_the_conjugate_posterior():
    g = torch.Generator().manual_seed(0)
    space = ParameterSpace(independent([Normal(0.0, PRIOR_SD)]))
    u = 1.0 + 0.5 * torch.randn(2000, 1, generator=g, dtype=torch.float64)
    t = u + torch.randn(2000, 1, generator=g, dtype=torch.float64) / math.sqrt(N)  # the data mean
    fitted = fit_synthetic_likelihood(u, t, torch.tensor([1.0]), torch.tensor([0.2]), bandwidth=None)
    t_obs = torch.tensor([1.1], dtype=torch.float64)
    draws, info = sample_mala(lambda v: space.log_prob_unconstrained(v) + fitted.log_prob(t_obs, v),
                              torch.tensor([1.0]), torch.eye(1) * 0.04, 4000, generator=g)
    mean, sd = conjugate(1.1)
    flat = draws.reshape(-1)
    # Monte Carlo: ~1,000 effective draws (SE 0.03 SD) and 2,000 regression rows (SE ~0.03 SD)
    assert abs(float(flat.mean()) - mean) / sd < 0.15
    assert abs(float(flat.std()) / sd - 1) < 0.1
    assert 0.3 < info["acceptance_rate"] < 0.9


class _BiasedScore:
    """The exact per-observation score of a normal mean plus a constant ``bias``, as a
    ``LearnedLikelihoodScore`` presents it to the stage (views are the data)."""

    smoothing = None

    def __init__(self, x_obs, bias):
        self.x_obs, self.n_obs, self.bias = x_obs, len(x_obs), bias

    def observed_view(self, x):
        return x

    def for_data_sets(self, views):
        data = torch.stack(views).to(torch.float64)  # [M, n, 1]

        def score(u):  # [M, C, 1]
            return ((data[:, None, :, 0] - u) / NOISE_SD**2 + self.bias).sum(-1, keepdim=True)
        return score


class _UselessScore(_BiasedScore):
    """A "score" that carries no information: a deterministic pseudo-random number per data set."""

    def for_data_sets(self, views):
        data = torch.stack(views).to(torch.float64)  # [M, n, 1]

        def score(u):  # [M, C, 1], the same for every u
            return torch.sin(1e3 * data.sum((1, 2)))[:, None, None].expand(-1, u.shape[1], 1) * self.n_obs
        return score


class _Estimator:
    def __init__(self, x_obs, bias, simulator, *, calibration=400, total=None, on_error="raise"):
        self.prior = independent([Normal(torch.tensor(0.0, dtype=torch.float64),
                                         torch.tensor(PRIOR_SD, dtype=torch.float64))])
        self.space = ParameterSpace(self.prior)
        self.seed, self.progress, self.store, self.mode = 0, False, None, "single"
        self.likelihood_ = _BiasedScore(x_obs, bias)
        self.simulations_, self.faults = {}, None
        self.source_ = TableSource(simulator, self.space, Simulation(on_simulator_error=on_error), seed=0, smoothing=None,
                                   store=None, progress=False, n_data=len(x_obs))
        self.ledger_ = Ledger(self.simulations_, False, faults=self.source_.faults)
        self.plan_ = type("Plan", (), {"calibration": calibration, "total": total})()
        self.proposal_ = GaussianProposal(self.space, torch.tensor([0.5]), torch.tensor([1.0]))


def _normal_simulator(theta, n, g):
    return theta[:, None, :] + NOISE_SD * torch.randn(len(theta), n, 1, generator=g, dtype=theta.dtype)


def _x_obs():
    return 0.8 + torch.randn(N, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def test_calibration_removes_a_bias_that_moves_the_summed_score_posterior():
    x_obs = _x_obs()
    bias = 0.5  # per observation: the summed score's root moves by 0.5 * NOISE_SD^2 = 3.5 posterior SDs
    est = _Estimator(x_obs, bias, Simulator(_normal_simulator, obs_dim=1))
    posterior, report = calibrated_posterior(est, 2000, seed=0, names=["mu"])
    mean, sd = conjugate(float(x_obs.mean()))
    summed_root = float(x_obs.mean()) + bias * NOISE_SD**2  # without calibration (flat prior)
    assert abs(summed_root - mean) / sd > 3  # the summed score is biased here
    got = posterior.draws.reshape(-1)
    assert abs(float(got.mean()) - mean) / sd < 0.2
    assert abs(float(got.std()) / sd - 1) < 0.15
    assert report.converged and len(report.rounds) >= 2
    assert est.simulations_["calibration"] == 400 * len(report.rounds)
    low, high = report.information_ratio
    assert 0.7 < low <= high < 1.4  # the exact score's slope equals its spread
    verdict = check_calibrated(report, posterior, posterior.draws)
    assert verdict.verdict == "pass", verdict.line()


def test_calibration_stops_within_the_budget():
    est = _Estimator(_x_obs(), 0.0, Simulator(_normal_simulator, obs_dim=1), calibration=300, total=700)
    _, report = calibrated_posterior(est, 400, seed=0, names=["mu"])
    assert len(report.rounds) == 2 and est.simulations_["calibration"] == 600


def test_a_flaky_simulator_through_the_calibration():
    calls = {"n": 0}

    def flaky(theta, n, g):
        calls["n"] += 1
        if calls["n"] % 7 == 0:
            raise RuntimeError("transient failure")
        x = _normal_simulator(theta, n, g)
        x[torch.rand(len(theta), generator=g) < 0.05] = float("nan")
        return x

    est = _Estimator(_x_obs(), 0.0, Simulator(flaky, obs_dim=1), on_error="retry")
    with pytest.warns(UserWarning, match="calibration"):
        posterior, report = calibrated_posterior(est, 1000, seed=0, names=["mu"])
    mean, sd = conjugate(float(_x_obs().mean()))
    assert abs(float(posterior.draws.mean()) - mean) / sd < 0.3
    dropped = est.ledger_.dropped
    assert sum(v["nonfinite"] for k, v in dropped.items() if k.startswith("calibration")) > 0
    assert all(r["data_sets"] < 400 for r in report.rounds)


def test_nonfinite_data_sets_are_dropped_under_raise_in_the_calibration():
    def overflowing(theta, n, g):
        x = _normal_simulator(theta, n, g)
        x[theta[:, 0] > 2.5] = float("inf")  # overflows far out, a property of the model
        return x

    est = _Estimator(_x_obs(), 0.0, Simulator(overflowing, obs_dim=1))
    with pytest.warns(UserWarning):
        calibrated_posterior(est, 400, seed=0, names=["mu"])
    assert est.source_.faults["nonfinite"] > 0


def test_the_budget_plan_holds_the_calibration_rounds():
    plan = plan_budget(3000.0, 200, single=True, localize=True, fixed={}, calibrate=True)
    costs = plan.costs()
    assert "check" not in costs and costs["calibration"] == plan.calibration * MAX_ROUNDS
    assert plan.planned() == pytest.approx(3000.0, rel=0.01)
    default = plan_budget(None, 200, single=True, localize=True, fixed={}, calibrate=True)
    assert default.calibration == 1000
    with pytest.raises(ValueError, match="too small"):
        plan_budget(500.0, 200, single=True, localize=True, fixed={}, calibrate=True)


def _report(z_mean, z_sd, held=200, moved=0.05, information=(1.0, 1.0), sharpening=(), projection_gain=()):
    report = CalibrationReport(rounds=[{"moved": 1.0}, {"moved": moved}],
                               coverage={"z_mean": z_mean, "z_sd": z_sd, "coverage_90": [0.9], "num_data_sets": held},
                               observed_distance=1.0, converged=True, proposal=(torch.zeros(1), torch.ones(1)),
                               table_rounds=len(sharpening), sharpening=list(sharpening),
                               projection_gain=list(projection_gain))
    report.information_ratio = information
    return report


@pytest.mark.parametrize("report, expected", [
    (_report([0.05], [1.0]), "pass"),
    (_report([0.5], [1.0]), "warn"),       # 0.5 SD off: not a pass
    (_report([0.9], [1.0]), "fail"),
    (_report([0.0], [1 / 0.72]), "warn"),  # SD ratio 0.72: not a pass
    (_report([0.0], [1.0], moved=2.0), "fail"),
    (_report([0.0], [1.0], information=(1.0, 4.0)), "fail"),
    (_report([0.0], [1.0], held=5), "warn"),
    # the last table round still moved the posterior, or narrowed it: the summary may not be efficient
    (_report([0.0], [1.0], sharpening=[{"moved": 2.0, "sd_ratio": 0.5}, {"moved": 0.6, "sd_ratio": 0.9}]), "warn"),
    (_report([0.0], [1.0], sharpening=[{"moved": 0.1, "sd_ratio": 0.7}]), "warn"),
    (_report([0.0], [1.0], sharpening=[{"moved": 2.0, "sd_ratio": 0.5}, {"moved": 0.1, "sd_ratio": 0.95}]), "pass"),
    # a projected summary is reported, not graded (it may be efficient, as on a regression)
    (_report([0.0], [1.0], projection_gain=[[0.5, 0.1]]), "pass"),
])
def test_the_verdict_on_broken_calibrations(report, expected):
    draws = 0.1 * torch.randn(400, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    posterior = Posterior(draws.reshape(4, 100, 1), ["mu"])
    assert check_calibrated(report, posterior, draws).verdict == expected


def test_data_statistics_are_the_quantiles_means_and_products_of_the_standardised_columns():
    g = torch.Generator().manual_seed(0)
    observed = torch.randn(500, 2, generator=g, dtype=torch.float64) * torch.tensor([1.0, 3.0]) + 5
    statistics = DataStatistics(observed)
    views = [torch.randn(500, 2, generator=g, dtype=torch.float64) * torch.tensor([1.0, 3.0]) + 5 for _ in range(3)]
    s = statistics(views)
    assert s.shape == (3, 7 * 2 + 2 + 3)  # octiles and mean per column, products z0^2, z0 z1, z1^2
    z = (views[0] - statistics.norm.shift) / statistics.norm.scale  # light tails: no normal scores
    assert torch.allclose(s[0, 14:16], z.mean(0)) and torch.allclose(s[0, 16], (z[:, 0] ** 2).mean())
    assert torch.allclose(statistics(views[:1] + [views[1][:100]])[0], s[0])  # unequal sizes one by one


def test_data_statistics_of_many_large_data_sets_are_computed_in_chunks(monkeypatch):
    """torch.quantile takes at most 2**24 elements: many large data sets go in chunks, and the
    chunks give the statistics of all at once."""
    import scorebayes.sbi.calibrated.statistics as statistics_module

    g = torch.Generator().manual_seed(2)
    views = [torch.randn(300, 2, generator=g, dtype=torch.float64) for _ in range(7)]
    statistics = DataStatistics(views[0])
    whole = statistics(views)
    monkeypatch.setattr(statistics_module, "CHUNK_ELEMENTS", 1_300)  # two data sets per chunk
    assert torch.allclose(statistics(views), whole)


def test_the_statistics_join_the_regression_only_when_they_add_information():
    """u ~ N(0, 1); the score summary T sees u through noise of SD 2, the statistic S through noise
    of SD 0.3. (T, S) predicts u far better than T: S joins, with a gain near
    1 - (0.3^2 / (1 + 0.3^2)) / (4 / (1 + 4)) = 0.90. With S pure noise the gain is about 0:
    the regression on T alone stays."""
    g = torch.Generator().manual_seed(1)
    m = 3000
    u = torch.randn(m, 1, generator=g, dtype=torch.float64)
    t = u + 2 * torch.randn(m, 1, generator=g, dtype=torch.float64)
    held = torch.rand(m, generator=g) < 0.2
    fold = torch.arange(m) % 2
    center, scale = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    informative = torch.cat([u + 0.3 * torch.randn(m, 1, generator=g, dtype=torch.float64),
                             torch.randn(m, 3, generator=g, dtype=torch.float64)], 1)
    projection = fit_projection(u, t, informative, held, fold, center, scale, bandwidth=100.0)
    assert projection.statistics and abs(float(projection.gain[0]) - 0.90) < 0.03
    projected = projection(t, informative, fold)
    assert float(torch.corrcoef(torch.cat([projected, u], 1).T)[0, 1]) > 0.95
    noise = torch.randn(m, 4, generator=g, dtype=torch.float64)
    assert fit_projection(u, t, noise, held, fold, center, scale, bandwidth=100.0) is None  # T stays
    alone = fit_projection(u, t, noise, held, fold, center, scale, bandwidth=100.0, quadratic=True)
    assert alone.quadratic and not alone.statistics and abs(float(alone.gain[0])) < 0.03
    # on T alone: the regression E[u | T] = T / 5 (u ~ N(0, 1), T = u + N(0, 2^2)), within its
    # Monte Carlo error (2,400 rows: SE of the slope about 0.01)
    slope = (alone(t, noise) - alone(torch.zeros_like(t), noise)) / t
    assert torch.allclose(slope.median(), torch.tensor(0.2, dtype=torch.float64), atol=0.04)


class _CurvedScore(_BiasedScore):
    """A sufficient summary whose mean curves in the parameter: exp(mean of the data)."""

    def for_data_sets(self, views):
        data = torch.stack(views).to(torch.float64)  # [M, n, 1]

        def score(u):  # [M, C, 1]; the stage divides by n
            return (torch.exp(data.mean((1, 2)))[:, None, None] * self.n_obs).expand(-1, u.shape[1], 1)
        return score


def test_the_lack_of_fit_of_a_curved_summary_is_large_and_of_a_straight_one_about_one():
    """A quadratic mean fitted to exp(u) + noise over u ~ N(0, 2^2) leaves residuals much larger
    than the noise (the pure error from nearest neighbours); to 0.5 u + noise it does not."""
    from scorebayes.sbi.calibrated.synthetic_likelihood import lack_of_fit

    g = torch.Generator().manual_seed(4)
    u = 2 * torch.randn(2000, 1, generator=g, dtype=torch.float64)
    noise = 0.05 * torch.randn(2000, 1, generator=g, dtype=torch.float64)
    zero, one = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    for t, low, high in ((0.5 * u + noise, 0.85, 1.2), (torch.exp(u) + noise, 3.0, math.inf)):
        fitted = fit_synthetic_likelihood(u, t, zero, one)
        assert low < float(lack_of_fit(fitted, u, t)[0]) < high


def test_a_curved_summary_is_calibrated_through_its_regression_onto_the_parameter(monkeypatch):
    """T = exp(mean of the data) is sufficient, but its mean curves over the calibration's
    window: the synthetic likelihood's lack of fit asks for the regression of T onto u, and the
    calibrated posterior through it is the conjugate one (data statistics kept out: they hold
    the data mean itself); the bounds are those of the Monte Carlo error."""
    from scorebayes.sbi.calibrated import statistics as statistics_module

    monkeypatch.setattr(statistics_module, "GAIN", math.inf)
    x_obs = _x_obs()
    mean, sd = conjugate(float(x_obs.mean()))
    est = _Estimator(x_obs, 0.0, Simulator(_normal_simulator, obs_dim=1))
    est.likelihood_ = _CurvedScore(x_obs, 0.0)
    posterior, report = calibrated_posterior(est, 2000, seed=1, names=["mu"])
    assert report.curved and max(report.lack_of_fit[0]) > 1.4
    draws = posterior.draws.reshape(-1)
    # Monte Carlo: ~500 effective draws (SE 0.05 SD) and the local fits' error (~0.1 SD)
    assert abs(float(draws.mean()) - mean) / sd < 0.25 and abs(float(draws.std()) / sd - 1) < 0.2


def test_the_report_says_when_a_table_round_should_follow():
    report = _report([0.0], [1.0])
    assert not report.still_sharpening() and not report.score_inefficient()
    report.projection_gain = [[0.5], None]
    assert not report.score_inefficient()  # the last round's score summary was kept
    report.projection_gain.append([0.5])
    assert report.score_inefficient()
    report.sharpening = [{"moved": 0.1, "sd_ratio": 0.9}]
    assert not report.still_sharpening()
    report.sharpening.append({"moved": 0.1, "sd_ratio": 0.7})
    assert report.still_sharpening()


def test_a_summary_that_misses_everything_is_replaced_by_its_projection_on_the_data_statistics():
    """The learned summary carries no information; the data statistics hold the data mean, which is
    sufficient: the projected summary gives the conjugate posterior. Without the projection the
    posterior is 21 times as wide as the conjugate one and 7 of its SDs off (checked)."""
    x_obs = _x_obs()
    est = _Estimator(x_obs, 0.0, Simulator(_normal_simulator, obs_dim=1), calibration=1000)
    est.likelihood_ = _UselessScore(x_obs, 0.0)
    posterior, report = calibrated_posterior(est, 2000, seed=0, names=["mu"])
    mean, sd = conjugate(float(x_obs.mean()))
    got = posterior.draws.reshape(-1)
    assert report.projection_gain[-1] is not None and report.projection_gain[-1][0] > 0.5
    assert abs(float(got.mean()) - mean) / sd < 0.25
    assert abs(float(got.std()) / sd - 1) < 0.2


def test_a_table_round_follows_a_broad_table_within_the_budget():
    """A real single-mode fit whose table spans the broad prior (no localization): the first
    calibration (tables 140 data sets, two rounds of 300) finds the table far wider than the
    posterior, so a table round follows (140 more and one more calibration round, 1,180 in all),
    recorded with how it changed the posterior, within the smallest num_simulations these
    settings accept (1,340: the tables and MAX_ROUNDS calibration rounds). The posterior is the
    conjugate one."""
    budget, table_rounds = 1_340, 1
    from scorebayes.sbi import ScoreLangevin, TrainingSchedule

    prior = independent([Normal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(PRIOR_SD, dtype=torch.float64))])
    x_obs = _x_obs()
    est = ScoreLangevin.from_options(prior, _normal_simulator, localize=False, num_simulations=budget,
                                     table_size=2000, num_groups=100, group_size=50, calibration_size=300,
                                     schedule=TrainingSchedule(epochs=10, penalty_epochs=0, patience=10),
                                     mean_schedule=TrainingSchedule(epochs=10, penalty_epochs=0, batch_size=32),
                                     curvature_penalties=(0.0,), mean_penalties=(0.0,), progress=False, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 10 epochs: the score's scale is off, and the verdict says so
        posterior = est.fit(x_obs).sample(1000)
    calibration = posterior.info["calibration"]
    assert calibration["table_rounds"] == table_rounds and len(calibration["sharpening"]) == table_rounds
    assert posterior.info["simulations"] <= budget
    assert ("table_S1" in posterior.info["simulations_by_stage"]) == (table_rounds > 0)
    mean, sd = conjugate(float(x_obs.mean()))
    draws = posterior.draws.reshape(-1)
    assert abs(float(draws.mean()) - mean) / sd < 0.3 and abs(float(draws.std()) / sd - 1) < 0.25


def test_the_summed_score_comparison_finds_the_gaussian_posterior_of_a_known_score(known_score_estimator):
    """Known likelihood score -P (u - m) and prior N(0, 3^2 I): the summed-score posterior is
    N((P + I/9)^-1 P m, (P + I/9)^-1), and Newton's method from far away finds it."""
    from scorebayes.sbi.calibrated.summed import summed_score_comparison

    precision = torch.tensor([[40.0, 12.0], [12.0, 25.0]], dtype=torch.float64)
    m = torch.tensor([1.0, -2.0], dtype=torch.float64)
    est = known_score_estimator(precision, m)
    cov = torch.linalg.inv(precision + torch.eye(2, dtype=torch.float64) / 9)
    exact_mean, exact_sd = cov @ precision @ m, cov.diagonal().sqrt()
    start, scale = exact_mean + 4 * exact_sd, 2 * exact_sd  # 4 SDs off, a calibrated SD twice too wide
    result = summed_score_comparison(est, start, scale)
    assert torch.allclose(torch.tensor(result["mean"], dtype=torch.float64), exact_mean, atol=1e-5)
    assert torch.allclose(torch.tensor(result["sd"], dtype=torch.float64), exact_sd, rtol=1e-4)
    assert result["distance_sd"] == pytest.approx(2.0, rel=1e-4) and result["sd_ratio"] == pytest.approx([0.5, 0.5], rel=1e-4)
