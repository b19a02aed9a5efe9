"""Trust-region table rounds for the single-model (``scorebayes.sbi.rounds.trust_region``,
``ScoreLangevin.move_tables``)."""

import types

import pytest
import torch

from scorebayes.models import get_model
from scorebayes.parallel import make_generator
from scorebayes.priors import ParameterSpace
from scorebayes.sbi import ScoreLangevin
from scorebayes.scores.training import TrainingSchedule
from scorebayes.sbi.rounds.trust_region import laplace_step, trust_region_fit


def _gaussian_case(n=50):
    model = get_model("gaussian_mean")
    model.n_obs = n
    x_obs = model.observed(make_generator(11, "gaussian_mean"))
    return model, x_obs


def _stub(model, score):
    """An object with what laplace_step reads: the prior's space and a likelihood score in u."""
    return types.SimpleNamespace(space=ParameterSpace(model.prior),
                                 likelihood_score=lambda u, x=None, compiled=False: score(u))


def test_one_newton_step_lands_on_the_exact_gaussian_posterior():
    """With the true likelihood score the posterior is Gaussian: one step from anywhere reaches
    its mean, and the Laplace SDs are its SDs (the normal prior's score included)."""
    model, x_obs = _gaussian_case()
    exact = model.posterior_distribution(x_obs)
    stub = _stub(model, lambda u: model.true_score(u, x_obs.expand(len(u), *x_obs.shape)))
    start = torch.tensor([2.0, -3.0], dtype=torch.float64)
    move = laplace_step(stub, start, torch.full((2,), 10.0, dtype=torch.float64))
    torch.testing.assert_close(start + move.step, exact.mean, atol=1e-8, rtol=0)
    torch.testing.assert_close(move.sd, exact.variance.sqrt(), atol=1e-10, rtol=1e-8)
    assert (move.curvature > 0).all()


def test_step_is_clipped_to_the_region():
    model, x_obs = _gaussian_case()
    stub = _stub(model, lambda u: model.true_score(u, x_obs.expand(len(u), *x_obs.shape)))
    start = torch.tensor([2.0, -3.0], dtype=torch.float64)
    region = torch.tensor([0.1, 0.2], dtype=torch.float64)
    move = laplace_step(stub, start, region, max_step=1.5)
    # the exact mean is more than 1.5 region SDs away in both coordinates, towards (-1, 1)
    torch.testing.assert_close(move.step, torch.tensor([-0.15, 0.3], dtype=torch.float64))


def test_no_step_and_no_shrink_along_negative_curvature():
    """Coordinate 0: curvature 100 about 1; coordinate 1: the likelihood pushes away from 0
    faster than the N(0, 9) prior pulls back (a saddle)."""
    model, _ = _gaussian_case()
    stub = _stub(model, lambda u: torch.stack([-100.0 * (u[:, 0] - 1.0), 5.0 * u[:, 1]], -1))
    move = laplace_step(stub, torch.tensor([0.0, 0.5], dtype=torch.float64),
                        torch.full((2,), 10.0, dtype=torch.float64))
    prior_precision = 1 / 9
    assert move.step[1] == 0 and torch.isinf(move.sd[1])
    torch.testing.assert_close(move.step[0], torch.tensor(100.0 / (100.0 + prior_precision),
                                                         dtype=torch.float64))
    torch.testing.assert_close(move.sd[0], torch.tensor((100.0 + prior_precision) ** -0.5,
                                                        dtype=torch.float64))


SINGLE = dict(mode="single", table_size=6000, num_groups=1000, group_size=100,
              schedule=TrainingSchedule(epochs=40, penalty_epochs=10, patience=10),
              mean_schedule=TrainingSchedule(epochs=80, penalty_epochs=10, batch_size=16, patience=20),
              curvature_penalties=(0.0, 1e-3), mean_penalties=(0.0, 1e-3),
              localization={"replicates": 30, "iterations": 150}, seed=3, progress=False)


def test_trust_region_rounds_reach_the_exact_posterior():
    """Round 0 on the localized q inflated 8x (about 8 posterior SDs), then two rounds centred on
    the chains, each halving the region down to 4 Laplace SDs. The last region must contain the
    exact posterior mean, be narrower than q, and no narrower than the floor (two halvings
    without it: 2 SDs); the final posterior meets the criterion of test_sbi_exact (mean within
    0.3 posterior sd, sd within 25%)."""
    model, x_obs = _gaussian_case(100)
    exact = model.posterior_distribution(x_obs)
    mean, sd = exact.mean, exact.variance.sqrt()
    est = trust_region_fit(ScoreLangevin.from_options(model.prior, model.simulator, proposal_inflation=8.0, **SINGLE),
                           x_obs, rounds=3)
    first, *_, last = (r["proposal"] for r in est.table_rounds_)
    assert len(est.table_rounds_) == 3 and len(est.trust_steps_) == 2
    assert ((last.mean - mean).abs() < 0.5 * sd).all(), (last.mean, mean)
    assert (last.sd < first.sd).all() and (last.sd > 3 * sd).all(), (last.sd, first.sd, sd)
    assert {"table_S2", "table_R2"} <= set(est.simulations_)
    low, high = est.training_region_
    assert (low < mean).all() and (mean < high).all()
    posterior = est.sample(2000)
    z = (posterior.mean() - mean) / sd
    ratio = posterior.sd() / sd
    assert (z.abs() < 0.3).all(), f"mean error {z.tolist()} posterior sds"
    assert ((ratio - 1).abs() < 0.25).all(), f"sd ratio {ratio.tolist()}"


def test_bad_input_is_rejected_before_any_simulation():
    model, x_obs = _gaussian_case(10)
    n_model = ScoreLangevin.from_options(model.prior, model.simulator, mode="n", progress=False)
    with pytest.raises(ValueError, match="mode='single'"):
        trust_region_fit(n_model, x_obs)
    unlocalized = ScoreLangevin.from_options(model.prior, model.simulator, localize=False, progress=False)
    with pytest.raises(ValueError, match="localize=True"):
        trust_region_fit(unlocalized, x_obs)
    est = ScoreLangevin.from_options(model.prior, model.simulator, progress=False)
    for bad in ({"rounds": 0}, {"rounds": 1.5}, {"shrink": 1.0}, {"floor": -1.0}, {"edge_limit": 1.0},
                {"draws": 1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            trust_region_fit(est, x_obs, **bad)
    with pytest.raises(RuntimeError, match="fit"):
        est.move_tables(torch.zeros(2), torch.ones(2))


def _tiny_fit(model, x_obs):
    """A single-model fitted on prior tables in a second (one epoch each): bookkeeping only."""
    return ScoreLangevin.from_options(model.prior, model.simulator, localize=False, table_size=64, num_groups=8,
                         group_size=4, progress=False,
                         schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=32),
                         mean_schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=4),
                         curvature_penalties=(0.0,), mean_penalties=(0.0,)).fit(x_obs)


def test_move_tables_checks_its_region():
    model, x_obs = _gaussian_case(10)
    est = _tiny_fit(model, x_obs)
    with pytest.raises(ValueError, match="2 entries"):
        est.move_tables(torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="positive"):
        est.move_tables(torch.zeros(2), torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="finite"):
        est.move_tables(torch.tensor([float("nan"), 0.0]), torch.ones(2))
    est.move_tables(torch.tensor([5.0, 5.0]), torch.tensor([0.1, 0.1]))
    low, high = est.training_region_
    assert (low > 4.0).all() and (high < 6.0).all()  # the new table lies in the new region
    assert est.simulations_["table_S1"] == 64 / 10 and len(est.table_rounds_) == 2


def test_compiled_drift_follows_the_new_round(monkeypatch):
    """likelihood_score(compiled=True) caches the compiled sum; a later round's network must
    replace it (torch.compile stubbed by the identity: the cache alone is under test)."""
    monkeypatch.setattr(torch, "compile", lambda fn: fn)
    model, x_obs = _gaussian_case(10)
    est = _tiny_fit(model, x_obs)
    u = torch.zeros(3, 2, dtype=torch.float64)
    with torch.no_grad():
        before = est.likelihood_score(u, compiled=True)
    est.move_tables(torch.tensor([1.0, 1.0]), torch.tensor([0.5, 0.5]))
    with torch.no_grad():
        after, plain = est.likelihood_score(u, compiled=True), est.likelihood_score(u)
    torch.testing.assert_close(after, plain)
    assert not torch.allclose(before, after)
