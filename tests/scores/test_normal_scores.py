"""The networks' view of heavy-tailed data columns (`scorebayes.scores.normal_scores`)."""

import math

import pytest
import torch
from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.normal_scores import NormalScores
from scorebayes.scores.training import TrainingSchedule, fit_score_network
from scorebayes.scores.views import CoordinateViewScoreNet


def _columns(g: torch.Generator, n: int = 20_000) -> dict[str, torch.Tensor]:
    return {"lognormal": (2 * torch.randn(n, generator=g)).exp(),
            "cauchy": torch.distributions.Cauchy(0.0, 1.0).sample((n,)),
            "normal": 5 + 2 * torch.randn(n, generator=g),
            "exponential": torch.empty(n).exponential_(generator=g),
            "poisson": torch.poisson(torch.full((n,), 3.0), generator=g)}


def test_heavy_tailed_columns_become_standard_normal_scores_and_light_ones_pass_through():
    torch.manual_seed(0)
    columns = _columns(torch.Generator().manual_seed(0))
    view = NormalScores(len(columns))
    data = torch.stack(list(columns.values()), 1)
    out = view.fit(data)
    assert view.transformed == [0, 1]  # lognormal and Cauchy; normal, exponential, counts kept
    assert torch.equal(out[:, 2:], data[:, 2:])
    # mid-rank normal scores of N = 20,000 values: mean 0, SD 1 within their Monte Carlo error
    for k in (0, 1):
        assert abs(float(out[:, k].mean())) < 0.01
        assert abs(float(out[:, k].std()) - 1) < 0.01


@pytest.mark.parametrize("name", ["lognormal", "cauchy"])
def test_the_map_is_a_continuous_increasing_bijection_with_logarithmic_tails(name):
    values = _columns(torch.Generator().manual_seed(1))[name]
    view = NormalScores(1)
    view.fit(values[:, None])
    grid = torch.cat([-torch.logspace(13, -3, 2_000).flip(0), torch.linspace(-1e-3, 1e-3, 11),
                      torch.logspace(-3, 13, 2_000)]).double().unique()[:, None]
    z = view(grid)[:, 0]
    assert torch.all(z[1:] > z[:-1])  # strictly increasing: a bijection onto its range
    knots = view.knots[0, : view.used[0]]
    for eps in (1e-10, -1e-10):  # continuous at every knot, the outer ones included
        gap = view((knots + eps * knots.abs())[:, None])[:, 0] - view(knots[:, None])[:, 0]
        assert float(gap.abs().max()) < 1e-6
    # far out, a decade more of x moves the view by log(10): logarithmic, not linear, growth
    far = view(torch.tensor([[-1e13], [-1e12], [1e12], [1e13]], dtype=torch.float64))[:, 0]
    assert abs(float(far[1] - far[0]) - math.log(10)) < 1e-3 and abs(float(far[3] - far[2]) - math.log(10)) < 1e-3


def test_tied_values_get_the_normal_score_of_their_mid_rank():
    # 60% zeros and a heavy right tail: the zeros get the normal score of rank 0.3
    g = torch.Generator().manual_seed(2)
    values = torch.where(torch.rand(10_000, generator=g) < 0.6, 0.0, (3 * torch.randn(10_000, generator=g)).exp())
    view = NormalScores(2)
    data = torch.stack([values, torch.full_like(values, 7.0)], 1)
    out = view.fit(data)
    assert view.transformed == [0]  # a constant column is not heavy-tailed
    zeros = out[values == 0, 0]
    share = float((values == 0).double().mean())  # 0.6 up to its Monte Carlo error
    expected = torch.special.ndtri(torch.tensor(share / 2, dtype=torch.float64))
    assert torch.allclose(zeros, zeros[0]) and abs(float(zeros[0]) - float(expected)) < 1e-6


def test_pooled_columns_share_one_map():
    g = torch.Generator().manual_seed(3)
    data = (2 * torch.randn(5_000, 3, generator=g)).exp()
    data[:, 1] *= 100
    view = NormalScores(3)
    view.fit(data, pools=[[0, 1]])
    assert torch.equal(view.knots[0], view.knots[1]) and not torch.equal(view.knots[0], view.knots[2])


def _lognormal_table(rows: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    theta = torch.randn(rows, 1, generator=g)
    return theta, (theta + SIGMA * torch.randn(rows, 1, generator=g)).exp()


SIGMA = 3.0


@pytest.mark.parametrize("net_class", [ScoreNet, CoordinateViewScoreNet])
def test_score_matching_learns_the_likelihood_score_of_heavy_tailed_data(net_class):
    """x = exp(theta + 3 e): the raw data span 1e-8..1e8. The likelihood score
    d/dtheta log p(x | theta) = (log x - theta) / 9 is unchanged by the view (a theta-free
    bijection of x), so score matching on the view must learn it. With the view switched off
    the same training leaves a relative RMS error of about 0.5 (checked)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    theta, x = _lognormal_table(4_000, g)
    net = ScoreNet(1, 1, hidden=(32, 32)) if net_class is ScoreNet else net_class(1, 1, [[0]], hidden=(32, 32))
    fit_score_network(net, theta, x[:, None, :], -theta, generator=g,
                      schedule=TrainingSchedule(epochs=60, penalty_epochs=0, patience=10))
    assert net.x_marginal.transformed == [0]
    theta_test, x_test = _lognormal_table(2_000, g)
    exact = (x_test.log() - theta_test) / SIGMA**2
    with torch.no_grad():
        error = net(theta_test, x_test) - exact
    # 0.12 measured with the view (ScoreNet, this seed), 0.53 without it: the bound sits between
    assert float(error.std() / exact.std()) < 0.25
    assert abs(float(error.mean() / exact.std())) < 0.1


def test_the_paper_preset_keeps_the_standardised_view():
    """preset="paper" reproduces the papers' networks: no column becomes normal scores."""
    from torch.distributions import Normal

    from scorebayes.priors import ParameterSpace, independent
    from scorebayes.sbi import ScoreLangevin

    prior = independent([Normal(0.0, 1.0)])
    for preset, enabled in (("paper", False), ("default", True)):
        est = ScoreLangevin.from_options(prior, lambda t, n, g: t[:, None, :].expand(-1, n, -1), preset=preset)
        net = est.networks.score_network(ParameterSpace(prior), 1)
        assert net.x_marginal.enabled is enabled
        net.fit_standardisation(torch.randn(500, 1), (3 * torch.randn(500, 1, 1)).exp())
        assert net.x_marginal.transformed == ([0] if enabled else [])
