"""The fit's verdict (scorebayes.sbi.checks.verdict) on exact and deliberately broken likelihood scores.

A Gaussian mean model (d = 2, sigma = 1, n = 100, prior N(0, 3^2)) has the exact score
S(u; X) = sum_i (x_i - u); the broken fits scale it by 3, shift it by one posterior SD, or pair it
with a table whose proposal misses the posterior.
"""

import math
import warnings

import pytest
import torch
from torch.distributions import Normal

from scorebayes.posterior import Posterior
from scorebayes.priors import independent
from scorebayes.proposal import GaussianProposal
from scorebayes.sbi import ScoreLangevin
from scorebayes.sbi.checks.verdict import check_fit
from scorebayes.sbi.likelihood import LearnedLikelihoodScore
from scorebayes.scores.training import TrainingSchedule

N_OBS, DIM = 100, 2
POSTERIOR_SD = 1 / math.sqrt(N_OBS + 1 / 9)


class ExactGaussianScore(LearnedLikelihoodScore):
    """``scale * sum_i (x_i - u) + shift``: the exact score (scale 1, shift 0) or a broken one."""

    def __init__(self, fitted: LearnedLikelihoodScore, scale: float = 1.0, shift: float = 0.0):
        box = (torch.full((DIM,), -50.0, dtype=torch.float64), torch.full((DIM,), 50.0, dtype=torch.float64))
        super().__init__(fitted.space, fitted.view, fitted.score_net, None, fitted.x_obs, training_region=box)
        self.scale, self.shift = scale, shift

    def _score(self, u, x):  # u [C, d], x [n, p] -> [C, d];  u [M, C, d], x [M, n, p] -> [M, C, d]
        return self.scale * (x.sum(-2)[..., None, :] - x.shape[-2] * u) + self.shift

    def __call__(self, u, x_obs=None, *, compiled=False):
        return self._score(u, (self.x_obs if x_obs is None else x_obs).to(torch.float64))

    def for_data_sets(self, views):
        data = torch.stack(views).to(torch.float64)
        return lambda u: self._score(u, data)


def _estimator(x_obs, seed=0, **options):
    prior = independent([Normal(torch.tensor(0.0, dtype=torch.float64), 3.0)] * DIM)

    def simulate(th, n, g):
        return th[:, None, :] + torch.randn(len(th), n, DIM, generator=g, dtype=th.dtype)

    options = {"table_size": 16, **options}
    est = ScoreLangevin.from_options(prior, simulate, mode="n", localize=False, progress=False, seed=seed, calibrate=False, **options,
                                     schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=8))
    est.fit(x_obs)
    center = x_obs.mean(0).double()
    est.proposal_ = GaussianProposal(est.space, center, torch.full((DIM,), 2 * POSTERIOR_SD))
    return est


def _x_obs(seed=1):
    return torch.tensor([0.5, -1.0]) + torch.randn(N_OBS, DIM, generator=torch.Generator().manual_seed(seed))


def _checked(est, fails=False):
    """Sample with the check on; a failed check must warn, a passed one must not."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        posterior = est.sample(1000, chains=20, check=True, remedy=False)
    assert any("failed its check" in str(w.message) for w in caught) == fails
    return posterior, posterior.info["check"]


def test_an_exact_score_passes_and_its_statistics_are_right():
    est = _estimator(_x_obs())
    est.likelihood_ = ExactGaussianScore(est.likelihood_)
    posterior, check = _checked(est)
    assert check["verdict"] == "pass", check
    se = 1 / math.sqrt(check["details"]["num_data_sets"])
    assert all(abs(b) < 4 * se for b in check["details"]["bias_sd"])
    assert all(abs(math.log(r)) < 4 * se for r in check["details"]["sd_ratio"])
    assert posterior.info["simulations_by_stage"]["check"] == 200.0


def test_a_score_three_times_too_large_fails_on_its_scale():
    est = _estimator(_x_obs())
    est.likelihood_ = ExactGaussianScore(est.likelihood_, scale=3.0)
    _, check = _checked(est, fails=True)
    assert check["verdict"] == "fail"
    assert any("SD of" in r for r in check["reasons"]) and check["advice"]
    se_log = 1 / math.sqrt(2 * check["details"]["num_data_sets"])
    for r in check["details"]["sd_ratio"]:  # r = 3 ** -0.5
        assert abs(math.log(r) - math.log(3 ** -0.5)) < 4 * se_log


def test_a_score_shifted_by_one_posterior_sd_fails_on_its_bias():
    est = _estimator(_x_obs())
    est.likelihood_ = ExactGaussianScore(est.likelihood_, shift=1 / POSTERIOR_SD)  # moves the mean 1 SD
    _, check = _checked(est, fails=True)
    assert check["verdict"] == "fail"
    assert sum("biased by" in r for r in check["reasons"]) == DIM
    se = 1 / math.sqrt(check["details"]["num_data_sets"])
    assert all(abs(b - 1.0) < 4 * se + 0.05 for b in check["details"]["bias_sd"])


def test_a_table_that_misses_the_posterior_fails():
    est = _estimator(_x_obs())
    est.likelihood_ = ExactGaussianScore(est.likelihood_)
    est.proposal_ = GaussianProposal(est.space, est.proposal_.mean + 6 * POSTERIOR_SD,
                                     torch.full((DIM,), POSTERIOR_SD))
    _, check = _checked(est, fails=True)
    assert check["verdict"] == "fail"
    assert check["details"]["table_outside"] > 0.5
    assert any("table's proposal" in r for r in check["reasons"])


def test_no_false_alarm_over_repeated_data_sets_with_the_exact_score():
    # the statistics only (check_fit on the exact posterior's draws): with the exact score a
    # fail needs a 3-standard-error excursion beyond the limits
    verdicts = []
    for seed in range(12):
        x = _x_obs(100 + seed)
        est = _estimator(x, seed=seed)
        est.likelihood_ = ExactGaussianScore(est.likelihood_)
        mean = x.sum(0).double() / (N_OBS + 1 / 9)
        draws = mean + POSTERIOR_SD * torch.randn(20, 50, DIM, generator=torch.Generator().manual_seed(seed),
                                                  dtype=torch.float64)
        verdicts.append(check_fit(est, Posterior(draws, ["a", "b"])).verdict)
    assert verdicts.count("fail") == 0 and verdicts.count("warn") <= 1, verdicts


def test_check_fit_refuses_too_few_data_sets():
    est = _estimator(_x_obs())
    est.likelihood_ = ExactGaussianScore(est.likelihood_)
    posterior = est.sample(100, chains=20, check=False)
    with pytest.raises(ValueError, match="num_data_sets"):
        check_fit(est, posterior, num_data_sets=5)


def test_a_failed_check_runs_a_second_table_round_and_says_so():
    est = _estimator(_x_obs(), num_simulations=200)  # tables 16 + 16, checks 84 + 84
    est.likelihood_ = ExactGaussianScore(est.likelihood_, scale=5.0)  # fails clearly with 84 data sets
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior = est.sample(400, chains=20, max_steps=400)  # the refitted 1-epoch score mixes slowly
    check = posterior.info["check"]
    assert check["remedies"] == ["a second table round around the posterior (16 data sets)"]
    assert posterior.info["simulations_by_stage"]["table_N1"] == 16.0
    assert not isinstance(est.likelihood_, ExactGaussianScore)  # refitted on the pooled table
    assert posterior.info["simulations_by_stage"]["check"] == 2 * 84
    assert sum(posterior.info["simulations_by_stage"].values()) <= 200


def test_no_second_round_beyond_the_budget():
    # a budget that holds the table and one check (of 64 data sets), not a second round
    est = _estimator(_x_obs(), num_simulations=80, table_size=16)
    assert not est.plan_.reserve and est.plan_.check == 64
    est.likelihood_ = ExactGaussianScore(est.likelihood_, scale=5.0)
    with pytest.warns(UserWarning, match="failed its check"):
        posterior = est.sample(400, chains=20)
    check = posterior.info["check"]
    assert check["verdict"] == "fail" and check["remedies"] == []
    assert any("no second table round" in r for r in check["reasons"])
    assert sum(posterior.info["simulations_by_stage"].values()) <= 80
