"""The Langevin-SBI parts on their own: settings, data views, the learned likelihood score."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.distributions import Normal

from scorebayes.priors import ParameterSpace, independent
from scorebayes.sbi import (IIDDataSet, LearnedLikelihoodScore, Localization, MarkovBlocks, Networks,
                            ScoreLangevin, SingleObservation, Tables, Training, WholeDataSet, WithFeatures,
                            group_options)


def test_flat_options_map_onto_the_groups_and_the_rest_passes_through():
    grouped = group_options({"table_size": 500, "hidden": (8,), "localize": False,
                             "localization": {"replicates": 4}, "debias": "a1", "block_size": 32,
                             "network_coordinates": "constrained", "mode": "n", "seed": 3})
    assert grouped["tables"] == Tables(table_size=500)
    assert grouped["networks"] == Networks(hidden=(8,), coordinates="constrained")
    assert grouped["localization"] == Localization(enabled=False, options={"replicates": 4})
    assert grouped["training"].debias == "a1" and grouped["simulation"].block_size == 32
    assert grouped["mode"] == "n" and grouped["seed"] == 3


@pytest.mark.parametrize("make, message", [
    (lambda: Tables(noise_sd=-1.0), "noise_sd must be positive"),
    (lambda: Training(debias="maybe"), "debias must be"),
    (lambda: Training(curvature_penalties=()), "curvature_penalties must be a non-empty"),
    (lambda: Localization(inflation=0.0), "proposal_inflation must be positive"),
    (lambda: Networks(coordinates="polar"), "network_coordinates must be one of"),
    (lambda: Networks(tied_views=[[0, 1]]), "tied_views ties per-parameter networks"),
])
def test_bad_settings_are_refused_when_built(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_bad_setting_is_refused_before_any_simulation():
    calls = []

    def simulate(theta, n, g):
        calls.append(1)
        return theta[:, None, :] + torch.randn(len(theta), n, 1, generator=g, dtype=theta.dtype)

    with pytest.raises(ValueError, match="score_views needs mode"):
        ScoreLangevin(independent([Normal(0.0, 1.0)]), simulate, networks=Networks(score_views=[[0]]))
    assert calls == []


def test_views_cut_a_data_set_into_the_units_the_network_sees():
    x = torch.arange(12.0).reshape(2, 3, 2)  # 2 data sets of 3 observations, p = 2
    assert torch.equal(SingleObservation().table(x), x) and torch.equal(IIDDataSet().table(x), x)
    assert WholeDataSet().table(x).shape == (2, 1, 6)
    assert torch.equal(WholeDataSet().observed(x[0]), x[0].reshape(1, 6))
    markov = MarkovBlocks().table(x)
    assert markov.shape == (2, 2, 4) and torch.equal(markov[0, 1], torch.cat([x[0, 1], x[0, 2]]))
    with pytest.raises(ValueError, match="at least two observations"):
        MarkovBlocks().check(x[0, :1])
    featured = WithFeatures(MarkovBlocks(), lambda v: v.sum(-1, keepdim=True))
    assert torch.equal(featured.observed(x[0]), torch.cat([markov[0], markov[0].sum(-1, keepdim=True)], -1))
    assert featured.min_observations == 2 and featured.curvature_penalty and not featured.single_observations
    with pytest.raises(ValueError, match="data_features must map"):
        WithFeatures(IIDDataSet(), lambda v: v.sum(-1)).observed(x[0])


class _LinearScore(nn.Module):
    """s(u, x) = x - u per observation, so sum_i s(u, X_i) = sum X - n u."""

    def forward(self, u, x):
        return x - u

    def sum_over_observations(self, u, x):
        return x.sum(0) - len(x) * u


class _Constant(nn.Module):
    def forward(self, u):
        return torch.full_like(u, 0.5)


def test_the_likelihood_score_sums_units_and_subtracts_n_times_the_debiasing_mean():
    space = ParameterSpace(independent([Normal(0.0, 1.0)] * 2))
    x_obs = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]])
    box = (torch.full((2,), -5.0, dtype=torch.float64), torch.full((2,), 5.0, dtype=torch.float64))
    u = torch.tensor([[0.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    plain = LearnedLikelihoodScore(space, IIDDataSet(), _LinearScore(), None, x_obs, training_region=box)
    expected = x_obs.sum(0).double() - 3 * u
    assert torch.allclose(plain(u), expected) and plain(u).dtype == torch.float64
    debiased = LearnedLikelihoodScore(space, IIDDataSet(), _LinearScore(), _Constant(), x_obs, training_region=box)
    assert torch.allclose(debiased(u), expected - 3 * 0.5)
    # the batched form over data sets agrees with one data set at a time
    other = x_obs + 1.0
    batched = debiased.for_data_sets([debiased.observed_view(x_obs), debiased.observed_view(other)])
    both = batched(torch.stack([u, u]))
    assert torch.allclose(both[0], debiased(u)) and torch.allclose(both[1], debiased(u, other))


def test_the_chain_box_is_the_trained_region_cut_by_the_support_and_local_corrections():
    space = ParameterSpace(independent([Normal(0.0, 1.0)]))
    box = (torch.tensor([-5.0], dtype=torch.float64), torch.tensor([5.0], dtype=torch.float64))
    lik = LearnedLikelihoodScore(space, IIDDataSet(), _LinearScore(), None, torch.zeros(4, 1), training_region=box,
                                 support_fn=lambda x: (torch.tensor([-1.0]), torch.tensor([9.0])))
    low, high = lik.chain_box()
    assert float(low) == -1.0 and float(high) == 5.0
    lik.refinements.append({"center": torch.tensor([2.0], dtype=torch.float64),
                            "spread": torch.tensor([0.5], dtype=torch.float64)})
    assert [float(b) for b in lik.sampling_region()] == [0.0, 4.0]
    lik.refinements.append({"kind": "kernel"})  # kernel refits do not cut the region
    assert [float(b) for b in lik.sampling_region()] == [0.0, 4.0]
