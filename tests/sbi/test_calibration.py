"""Simulation-based calibration of a fitted ScoreLangevin (scorebayes.sbi.checks.calibration).

With the exact likelihood score in place of the network (a Gaussian mean, score (x - theta)/sigma^2)
the posterior under the table's proposal is exact, so over M data sets every parameter's coverage
is Binomial(M, 0.95)/M and the mean standardised error has mean 0: the checks allow 3.5 Monte
Carlo standard errors. The same check must reject a score 3x too large (posteriors sqrt(3) too
narrow) and a shifted score (a shared bias). Also: the batched network sums, the score-mean test,
and the errors (the CLI option ``calibration``: tests/test_cli_langevin.py).
"""

import math

import pytest
import torch
from torch import nn

from scorebayes.sbi.checks.calibration import calibrate
from scorebayes.models import get_model
from scorebayes.parallel import make_generator
from scorebayes.sbi import DataSmoothing, ScoreLangevin
from scorebayes.scores.networks import CoordinateViewScoreNet, ScoreNet
from scorebayes.scores.training import TrainingSchedule

M = 200  # data sets


class _ExactGaussianScore(nn.Module):
    """sum_i (X_i - u)/sigma^2 * scale + shift, as ScoreNet.sum_over_observations would return it."""

    def __init__(self, sigma: float, scale: float = 1.0, shift: float = 0.0):
        super().__init__()
        self.sigma, self.scale, self.shift = sigma, scale, shift

    def sum_over_observations(self, theta, x):
        return self.scale * (x[None] - theta[:, None, :]).sum(1) / self.sigma**2 + self.shift


@pytest.fixture(scope="module")
def fitted():
    """An n-model fitted on a 2-d Gaussian mean as in test_sbi_exact.py (there its posterior is
    within 0.3 sd and 25% of the exact one)."""
    model = get_model("gaussian_mean")
    model.n_obs = 20
    x_obs = model.observed(make_generator(11, "calibration"))
    est = ScoreLangevin.from_options(model.prior, model.simulator, mode="n", table_size=400, seed=3, progress=False,
                        localization={"replicates": 30, "iterations": 150},
                        schedule=TrainingSchedule(epochs=60, penalty_epochs=10, batch_size=16, patience=15),
                        curvature_penalties=(0.0, 1e-2), parameter_names=model.parameter_names)
    return model, est.fit(x_obs)


def _with_score(est, net):
    est.likelihood_.score_net = net
    return est


def test_the_exact_score_is_calibrated(fitted):
    model, est = fitted
    learned = est.likelihood_.score_net
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(model.sigma)), M, chains=10,
                        draws_per_chain=10, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net = learned
    se = math.sqrt(0.95 * 0.05 / M)
    assert ((cal.coverage() - 0.95).abs() < 3.5 * se).all(), cal.summary()
    assert (cal.mean_z().abs() < 3.5 / math.sqrt(M)).all(), cal.summary()  # sd of z is about 1
    assert ((cal.z.std(0) - 1).abs() < 0.2).all(), cal.summary()
    assert cal.half_shift.median() < 0.3
    assert cal.ranks.shape == (M, 2) and cal.names == model.parameter_names
    # the interval width in theta: 2 x 1.96 posterior sds, v = 1/(1/s_q^2 + n/sigma^2) per coordinate
    v = 1 / (1 / est.proposal_.sd**2 + model.n_obs / model.sigma**2)
    assert torch.allclose(cal.width.mean(0), 2 * 1.96 * v.sqrt(), rtol=0.1)


@pytest.mark.parametrize("scale, shift, broken", [(3.0, 0.0, "coverage"), (1.0, 5.0, "mean_z")])
def test_a_wrong_score_fails_the_check(fitted, scale, shift, broken):
    model, est = fitted
    learned = est.likelihood_.score_net
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(model.sigma, scale, shift)), M, chains=10,
                        draws_per_chain=10, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net = learned
    if broken == "coverage":  # sqrt(3) too narrow: P(|z| < 1.96/sqrt(3)) = 0.74
        assert (cal.coverage() < 0.85).all(), cal.summary()
    else:  # the posterior mean moves by shift * v = 5/20 = 0.25 = 1.1 posterior sds
        assert (cal.mean_z() > 0.7).all(), cal.summary()


def test_at_a_parameter_draws_every_data_set_there_under_the_model_prior(fitted):
    model, est = fitted
    learned = est.likelihood_.score_net
    at = model.true_parameters  # inside the trained region (the chains stay in it)
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(model.sigma)), 100, at=at, chains=10,
                        draws_per_chain=4, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net = learned
    assert torch.equal(cal.theta, at.expand(100, 2))
    assert cal.settings["prior"] == "PriorSampler" and cal.settings["at"] == at.tolist()
    # a N(0, 3^2) prior against n = 20 unit-variance observations: the interval's frequentist
    # coverage at theta is 0.95 up to the prior's pull (<1% here)
    se = math.sqrt(0.95 * 0.05 / 100)
    assert ((cal.coverage() - 0.95).abs() < 3.5 * se).all(), cal.summary()


def test_given_data_sets_replace_the_simulated_ones(fitted):
    # data sets simulated 1 above ``at`` on both coordinates: the chains must see them. The exact
    # posterior mean of each is n xbar / (n + 1/9) (N(0, 3^2) prior, sigma = 1, n = 20), about 1
    # above ``at``, i.e. +4.4 posterior sds (1/sqrt(20.1) = 0.22), where data sets simulated at
    # ``at`` itself would give a mean z near 0 (test above); z's sd comes from 40 draws a data
    # set, so its mean runs above 4.4
    model, est = fitted
    learned = est.likelihood_.score_net
    at = model.true_parameters
    data = model.simulator((at + 1.0).expand(50, 2).clone(), model.n_obs, make_generator(5, "given-data"))
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(model.sigma)), 50, at=at, data=data, chains=10,
                        draws_per_chain=4, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net = learned
    assert cal.settings["data"] == "given" and torch.equal(cal.theta, at.expand(50, 2))
    exact = data.sum(1) / (model.n_obs + 1 / 9)  # [50, 2]
    assert (cal.mean_z() > 3.5).all() and (cal.coverage() < 0.1).all(), cal.summary()
    # each data set's posterior mean against its exact one: the exact means vary over data sets
    # with sd 1/sqrt(20) = 0.22, the chains' 40 correlated draws (about 10 effective) add a Monte
    # Carlo error of about 0.07 (measured mean |error| 0.05-0.06), so the correlation is about
    # 0.9; data sets the chains did not see would give about 0
    error = (cal.posterior_mean - exact).abs().mean(0)
    assert (error < 0.09).all(), error
    for j in range(2):
        assert torch.corrcoef(torch.stack([cal.posterior_mean[:, j], exact[:, j]]))[0, 1] > 0.8


def test_at_one_parameter_per_data_set(fitted):
    # a region of parameters (here 0.3 around the truth): frequentist coverage holds at each, so
    # over the region too; the draws come back per data set
    model, est = fitted
    learned = est.likelihood_.score_net
    g = torch.Generator().manual_seed(4)
    at = model.true_parameters + 0.3 * torch.randn(100, 2, generator=g, dtype=torch.float64)
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(model.sigma)), 100, at=at, chains=10,
                        draws_per_chain=4, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net = learned
    assert torch.equal(cal.theta, at) and cal.settings["at"] == "per data set"
    assert cal.draws.shape == (100, 40, 2)
    # the ranks are those of theta among the returned draws
    below = (cal.draws < at[:, None]).sum(1)
    assert ((cal.ranks * 41 - below) >= 0).all() and ((cal.ranks * 41 - below) <= 1).all()
    se = math.sqrt(0.95 * 0.05 / 100)
    assert ((cal.coverage() - 0.95).abs() < 3.5 * se).all(), cal.summary()


def test_the_learned_score_passes(fitted):
    """The fixture's network against the same check (4 Monte Carlo SEs: it is learned)."""
    model, est = fitted
    cal = calibrate(est, M, chains=10, draws_per_chain=10, burn_in=100, thin=5, progress=False)
    se = math.sqrt(0.95 * 0.05 / M)
    assert ((cal.coverage() - 0.95).abs() < 4 * se).all(), cal.summary()


def test_summary_plot_and_dict(fitted, tmp_path):
    model, est = fitted
    cal = calibrate(est, 20, chains=4, draws_per_chain=5, burn_in=20, thin=2, progress=False)
    assert "| mu0 |" in cal.summary() and "coverage" in cal.summary()
    cal.plot(tmp_path / "ranks.png")
    assert (tmp_path / "ranks.png").stat().st_size > 1000
    d = cal.to_dict()
    assert d["num_data_sets"] == 20 and len(d["coverage"]) == 2


@pytest.mark.parametrize("kwargs, error, match", [
    ({"num_data_sets": 1}, ValueError, "num_data_sets"),
    ({"chains": 0}, ValueError, "chains"),
    ({"thin": 1.5}, ValueError, "thin"),
    ({"chains": 2, "draws_per_chain": 5}, ValueError, "resolve a rank"),
    ({"level": 1.0}, ValueError, "level"),
    ({"step_size_factor": 2.5}, ValueError, "step_size_factor"),
    ({"at": [0.1, 0.2, 0.3]}, ValueError, r"at must be \[2\]"),
    ({"at": torch.zeros(9, 2)}, ValueError, "num_data_sets = 10"),
    ({"at": [float("nan"), 0.0]}, ValueError, "inside the prior's support"),
    ({"prior": object()}, TypeError, "sample"),
    ({"data": torch.zeros(10, 20, 2)}, ValueError, "data needs at"),
    ({"at": [0.0, 0.0], "data": torch.zeros(10, 19, 2)}, ValueError, r"data must have shape \[num_data_sets, n, p\] = \[10, 20, 2\]"),
    ({"at": [0.0, 0.0], "data": torch.full((10, 20, 2), float("inf"))}, ValueError, "data must be finite"),
])
def test_bad_arguments_are_refused_before_any_simulation(fitted, kwargs, error, match):
    model, est = fitted
    kwargs = {"num_data_sets": 10, **kwargs}
    with pytest.raises(error, match=match):
        calibrate(est, **kwargs)


def test_an_unfitted_estimator_is_refused():
    model = get_model("gaussian_mean")
    with pytest.raises(RuntimeError, match="fit"):
        calibrate(ScoreLangevin.from_options(model.prior, model.simulator, progress=False))


@pytest.mark.parametrize("options", [{}, {"tied": [[0, 1, 2]]}, {"embedding": 3}])
def test_view_networks_sum_over_many_data_sets_as_over_each(options):
    torch.manual_seed(0)
    views = [[0, 1], [2, 3], [4, 5], [0, 5]]
    net = CoordinateViewScoreNet(4, 6, views, hidden=(8, 5), **options)
    theta, x = torch.randn(3, 7, 4), torch.randn(3, 2, 6)
    together = net.sum_over_data_sets(theta, x)
    apart = torch.stack([net.sum_over_observations(theta[m], x[m]) for m in range(3)])
    assert torch.allclose(together, apart, atol=1e-5)


@pytest.mark.parametrize("hidden", [(8, 5), ()])
def test_score_networks_sum_over_many_data_sets_as_over_each(hidden):
    torch.manual_seed(0)
    net = ScoreNet(3, 4, hidden=hidden)
    theta, x = torch.randn(5, 7, 3), torch.randn(5, 6, 4)
    together = net.sum_over_data_sets(theta, x)
    apart = torch.stack([net.sum_over_observations(theta[m], x[m]) for m in range(5)])
    assert torch.allclose(together, apart, atol=1e-5)


def test_the_chains_use_the_given_prior(fitted):
    """A Gaussian location posterior with a flat prior has exact frequentist coverage, so the
    checks above would pass without the prior's score; here a prior 0.05 wide, centred 1 above
    theta*, holds the posterior about 19 posterior sds from theta*."""
    from scorebayes.proposal import GaussianProposal

    model, est = fitted
    learned = est.likelihood_.score_net
    truth = model.true_parameters
    prior = GaussianProposal(est.space, truth + 1, torch.full((2,), 0.05))
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(model.sigma)), 20, at=truth, prior=prior,
                        chains=10, draws_per_chain=4, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net = learned
    assert cal.settings["prior"] == "GaussianProposal"
    assert (cal.coverage() == 0).all() and (cal.mean_z() > 10).all(), cal.summary()


@pytest.mark.parametrize("score_sigma, calibrated", [(math.sqrt(2.0), True), (1.0, False)])
def test_noise_smoothed_estimators_are_checked_on_noisy_data(fitted, score_sigma, calibrated):
    """With noise_sd = sigma = 1 the network learns the score of X + N(0, 1) noise, a Gaussian mean
    with variance 2: that exact score is calibrated on the noisy data, the noiseless one (1/sqrt(2)
    too narrow, coverage about 0.83) is not."""
    model, est = fitted
    learned = est.likelihood_.score_net
    est.likelihood_.smoothing = DataSmoothing(1.0, 3, est.seed)
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(score_sigma)), M, chains=10,
                        draws_per_chain=10, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net, est.likelihood_.smoothing = learned, None
    se = math.sqrt(0.95 * 0.05 / M)
    assert ((cal.coverage() - 0.95).abs() < 3.5 * se).all() == calibrated, cal.summary()


@pytest.mark.parametrize("scale, shift, biased", [(1.0, 0.0, False), (3.0, 0.0, False), (1.0, 1.0, True)])
def test_score_mean_test_finds_a_biased_score_not_a_scaled_one(fitted, scale, shift, biased):
    """E[s(theta, x)] = 0 under x ~ p(x|theta) for the exact score, and for it times 3; a shift of
    1 per data set against a score sd of sqrt(20) = 4.5 gives t = 1 / (4.5 / sqrt(4000)) = 14 (+-1)."""
    from scorebayes.sbi.checks.calibration import score_mean_test

    model, est = fitted
    learned = est.likelihood_.score_net
    try:
        result = score_mean_test(_with_score(est, _ExactGaussianScore(model.sigma, scale, shift)),
                                 model.true_parameters, 4000)
    finally:
        est.likelihood_.score_net = learned
    if biased:
        assert (result.t > 7).all(), result.summary()
        # the implied shift: I^-1 E[s] = 1 / 20 per coordinate (Monte Carlo SE 0.0035)
        assert torch.allclose(result.shift, torch.full((2,), 0.05, dtype=torch.float64), rtol=0.25)
    else:
        assert (result.t.abs() < 4).all(), result.summary()
    assert "| mu0 |" in result.summary() and len(result.to_dict()["t"]) == 2


@pytest.mark.parametrize("scale", [0.1, 3.0])
def test_score_mean_test_gives_the_exact_posteriors_prior_pull(fitted, scale):
    """Prior N(0, 3^2), n = 20, sigma = 1, score scaled by c: information I = c^2 n, posterior
    precision H = I + 1/9, so the exact posterior's mean sits (-theta*/9) / H from theta*, i.e.
    (-theta*/9) / sqrt(H) posterior SDs: +-0.199 (c = 0.1, where the prior's curvature is a third
    of H), +-0.0083 (c = 3). I is estimated from 4,000 scores (relative SE sqrt(2/4000) = 2.2%, so
    about 1.1% on the pull, plus ~1.6% from the off-diagonal noise): 8% is 4 SEs."""
    from scorebayes.sbi.checks.calibration import score_mean_test

    model, est = fitted
    learned = est.likelihood_.score_net
    theta = model.true_parameters
    try:
        result = score_mean_test(_with_score(est, _ExactGaussianScore(model.sigma, scale)), theta, 4000)
    finally:
        est.likelihood_.score_net = learned
    H = scale**2 * model.n_obs / model.sigma**2 + 1 / 9
    expected = (-theta / 9) / math.sqrt(H)
    assert torch.allclose(result.prior_pull_sd, expected, rtol=0.08), result.summary()
    assert torch.allclose(result.prior_pull, (-theta / 9) / H, rtol=0.08)
    # the Laplace covariance behind it: H^-1 on the diagonal, the information c^2 n / sigma^2
    assert torch.allclose(result.posterior_cov.diagonal(), torch.full((2,), 1 / H, dtype=torch.float64), rtol=0.08)
    assert torch.allclose(result.information.diagonal(), torch.full((2,), H - 1 / 9, dtype=torch.float64), rtol=0.08)
    assert "prior pull" in result.summary() and len(result.to_dict()["prior_pull_sd"]) == 2


def test_score_mean_test_refuses_bad_input(fitted):
    from scorebayes.sbi.checks.calibration import score_mean_test

    model, est = fitted
    with pytest.raises(ValueError, match="theta must be 2"):
        score_mean_test(est, [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="theta must lie inside"):
        score_mean_test(est, [float("nan"), 1.0])
    with pytest.raises(ValueError, match="num_data_sets"):
        score_mean_test(est, model.true_parameters, 5)


def test_the_chains_stay_in_each_data_sets_support(fitted):
    """support_fn cuts every data set's chain box (ScoreLangevin.chain_box(x)): with the support
    starting 0.3 above theta*, no draw lies below theta*, so every rank is below 1/(L + 1)."""
    model, est = fitted
    learned = est.likelihood_.score_net
    truth = model.true_parameters
    calls = []

    def support(x):
        calls.append(x.shape)
        return (truth + 0.3).tolist(), [math.inf, math.inf]

    est.likelihood_.support_fn = support
    try:
        cal = calibrate(_with_score(est, _ExactGaussianScore(model.sigma)), 20, at=truth, chains=10,
                        draws_per_chain=4, burn_in=100, thin=5, progress=False)
    finally:
        est.likelihood_.score_net, est.likelihood_.support_fn = learned, None
    assert len(calls) == 20 and calls[0] == (model.n_obs, 2)
    assert (cal.ranks < 1 / 41).all() and (cal.coverage() == 0).all()
    assert (cal.posterior_mean >= truth + 0.3).all()
