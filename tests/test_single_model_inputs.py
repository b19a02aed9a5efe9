"""What the single-model's networks take: theta instead of u (``network_coordinates``,
scorebayes.scores.coordinates) and summaries of the observation (``data_features``).

Truths: the chain rule checked against autograd, and Gaussian posteriors whose per-observation
score a *linear* network represents exactly only with the right inputs, so each end-to-end run
must match the analytic posterior with them and miss it without:
- x_i ~ N(theta, I) under a uniform box prior 8 SDs away: the score x - theta is linear in theta,
  not in u = logit(box);
- x_i = exp(z_i), z_i ~ N(theta, I) under a N(0, 2^2) prior: the score log x - theta is linear in
  the summary log x, not in x.
"""

import pytest
import torch
from torch.distributions import Exponential, Normal, Uniform

from scorebayes.priors import ParameterSpace, independent
from scorebayes.sbi import ScoreLangevin
from scorebayes.scores.coordinates import ConstrainedScoreNet
from scorebayes.scores.losses import evaluate_score
from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.training import TrainingSchedule

D, N_OBS = 2, 20


def box_prior(low=-3.0, high=3.0):
    return independent([Uniform(torch.tensor(low, dtype=torch.float64), torch.tensor(high, dtype=torch.float64))
                        for _ in range(D)])


def mixed_prior():
    """A logit box and a log transform (rate), so both curvatures T'' enter."""
    return independent([Uniform(torch.tensor(0.0, dtype=torch.float64), torch.tensor(10.0, dtype=torch.float64)),
                        Exponential(torch.tensor(1.0, dtype=torch.float64))])


@pytest.mark.parametrize("activation", ["tanh", "silu", "elu"])
def test_forward_mode_chain_rule_equals_autograd(activation):
    torch.manual_seed(0)
    net = ConstrainedScoreNet(ParameterSpace(mixed_prior()), ScoreNet(D, 3, (16, 8), activation)).double()
    u = torch.randn(5, D, dtype=torch.float64)
    x = torch.randn(5, 7, 3, dtype=torch.float64)
    s, jac = net.score_and_jacobian(u, x)
    leaf = u.clone().requires_grad_(True)
    per_obs = net(leaf[:, None, :], x)
    total = per_obs.sum(1)
    auto = torch.stack([torch.autograd.grad(total[:, j].sum(), leaf, retain_graph=True)[0] for j in range(D)], 1)
    assert torch.allclose(s, per_obs, atol=1e-12)
    assert torch.allclose(jac, auto, atol=1e-10)
    assert (auto - torch.diag_embed(torch.diagonal(auto, dim1=1, dim2=2))).abs().max() > 1e-3  # off-diagonal too
    # evaluate_score takes the forward mode: the same values as the autograd path
    ev = evaluate_score(net, u, x)
    assert torch.allclose(ev.jacobian, auto, atol=1e-10)


def test_chain_rule_falls_back_without_a_closed_form_activation():
    net = ConstrainedScoreNet(ParameterSpace(mixed_prior()), ScoreNet(D, 3, (8,), torch.nn.GELU))
    assert net.score_and_jacobian(torch.zeros(2, D), torch.zeros(2, 3, 3)) is None


def gaussian_simulator(theta, n, generator=None):
    return theta[:, None, :] + torch.randn(len(theta), n, theta.shape[1], generator=generator, dtype=theta.dtype)


def lognormal_simulator(theta, n, generator=None):
    return gaussian_simulator(theta, n, generator).exp()


def linear_single_model_matches(prior, simulator, x_obs, mean, sd, **options) -> bool:
    """Fit the single-model with linear networks (hidden=()) and sample: do the draws' means lie
    within 0.35 sd of ``mean`` and their SDs within 20% of ``sd``? (Monte Carlo SE of the mean is
    about sd / 20 with 400 draws; the rest leaves room for the fit.)"""
    est = ScoreLangevin.from_options(prior, simulator, preset="paper", mode="single", localize=False,
                        table_size=20_000, num_groups=100, group_size=20, hidden=(), seed=5, progress=False, **options,
                        schedule=TrainingSchedule(epochs=30, penalty_epochs=0, batch_size=256, lr=(5e-2, 1e-3)),
                        mean_schedule=TrainingSchedule(epochs=30, penalty_epochs=0, batch_size=20))
    draws = est.fit(x_obs).sample(400, chains=200, max_steps=2000).draws.reshape(-1, x_obs.shape[1])
    return bool(((draws.mean(0) - mean).abs() < 0.35 * sd).all() and ((draws.std(0) / sd - 1).abs() < 0.2).all())


@pytest.mark.parametrize("coordinates, fits", [("constrained", True), ("unconstrained", False)])
def test_linear_network_in_theta_gives_the_analytic_posterior(coordinates, fits):
    """Posterior N(mean x, 1/n) per coordinate: a linear network in theta is exact; the same
    network in u must miss, which shows the coordinates are honoured."""
    truth = torch.tensor([0.7, -1.2], dtype=torch.float64)
    x_obs = gaussian_simulator(truth[None], N_OBS, torch.Generator().manual_seed(4))[0]
    assert linear_single_model_matches(box_prior(), gaussian_simulator, x_obs, x_obs.mean(0), N_OBS ** -0.5,
                                       network_coordinates=coordinates) == fits


@pytest.mark.filterwarnings("ignore:.*edge of the region")  # the run without log x misses by design
@pytest.mark.parametrize("features, fits", [(torch.log, True), (None, False)])
def test_single_mode_features_reach_both_networks(features, fits):
    """Posterior N(sum log x / (n + 1/4), 1 / (n + 1/4)) per coordinate, learned only when the
    networks see log x: the summaries must reach the score-matching table, the debiasing table D^R
    and the observed data."""
    truth = torch.tensor([0.5, -1.0], dtype=torch.float64)
    x_obs = lognormal_simulator(truth[None], N_OBS, torch.Generator().manual_seed(3))[0]
    precision = N_OBS + 0.25
    normal_prior = independent([Normal(torch.tensor(0.0, dtype=torch.float64), 2.0) for _ in range(D)])
    assert linear_single_model_matches(normal_prior, lognormal_simulator, x_obs, x_obs.log().sum(0) / precision,
                                       precision ** -0.5, data_features=features) == fits


@pytest.mark.parametrize("mode", ["single", "full", "markov"])
def test_table_view_with_features_is_built_in_chunks(mode):
    """A table's view with ``data_features`` is the same whether built at once or a few rows at a
    time (chunks that do not divide the table), in float32, the networks' training dtype."""
    est = ScoreLangevin.from_options(box_prior(), gaussian_simulator, mode=mode, localize=False, progress=False,
                        data_features=lambda v: torch.stack([v.pow(2).sum(-1), v.sin().prod(-1)], -1))
    x = torch.randn(23, 6, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    whole = est.view.table(x, chunk_elements=10**9)
    chunked = est.view.table(x, chunk_elements=5 * x[0].numel())  # 5 rows a chunk
    assert whole.dtype == chunked.dtype == torch.float32
    assert torch.equal(whole, chunked)
    rows = x.reshape(23, 1, -1) if mode == "full" else torch.cat([x[:, :-1], x[:, 1:]], -1) if mode == "markov" else x
    direct = torch.cat([rows, torch.stack([rows.pow(2).sum(-1), rows.sin().prod(-1)], -1)], -1)
    assert torch.equal(chunked, direct.float())
