"""Local linear refinement of the debiasing network (scores/local_debias.py, ScoreLangevin.refine_debiasing
and ScoreLangevin.refit_debiasing).

Truth: a Gaussian location model with a conjugate prior, where the score network is replaced by
the exact score plus a known bias b(u) with E_x[s] = b(u), and the debiasing network by zero. The
unrefined posterior is then shifted by many posterior SDs; refinement must recover the analytic
posterior (mean within 0.2 SD, SD within 15%: Monte Carlo error of ~1,000 Langevin draws is
about 0.05 SD in the mean and 5% in the SD).
"""

import copy
import functools
import math

import pytest
import torch
from torch import nn
from torch.distributions import Normal

from torch.distributions import Uniform

from scorebayes.priors import ParameterSpace, independent
from scorebayes.sbi import ScoreLangevin, TrainingSchedule
from scorebayes.sbi.debias import group_means
from scorebayes.sbi.views import IIDDataSet
from scorebayes.scores.coordinates import theta_and_jacobian
from scorebayes.scores.local_debias import (LocalLinearCorrection, ThetaLinearCorrection, fit_kernel_correction,
                                            fit_local_correction)
from scorebayes.simulators import Simulator

PRIOR_SD, N_OBS = 3.0, 200


def bias(u):  # a smooth, non-linear error of the score network's mean
    return 0.5 + 0.3 * u + 0.2 * torch.sin(2 * u)


class BiasedScore(nn.Module):
    """Exact per-observation score x - u plus a bias that does not depend on x."""

    def forward(self, theta, x):
        return (x - theta) + bias(theta)

    def sum_over_observations(self, theta, x):
        return self(theta[:, None, :], x[None]).sum(1)


class Zero(nn.Module):
    def forward(self, u):
        return torch.zeros_like(u)


def _fitted(seed=0):
    sim = Simulator(lambda th, n, g: th[:, None, :] + torch.randn(len(th), n, 1, generator=g, dtype=th.dtype))
    est = ScoreLangevin.from_options(independent([Normal(0.0, PRIOR_SD)]), sim, localize=False, calibrate=False, table_size=400,
                        num_groups=40, group_size=20, schedule=TrainingSchedule(epochs=1, penalty_epochs=0),
                        mean_schedule=TrainingSchedule(epochs=1, penalty_epochs=0),
                        curvature_penalties=(0.0,), mean_penalties=(0.0,), progress=False, seed=seed)
    x_obs = 1.0 + torch.randn(N_OBS, 1, generator=torch.Generator().manual_seed(seed))
    est.fit(x_obs)
    est.likelihood_.score_net, est.likelihood_.mean_net = BiasedScore(), Zero()
    est.likelihood_.training_region = (torch.tensor([-10.0], dtype=torch.float64),
                                       torch.tensor([10.0], dtype=torch.float64))
    # the biased networks are the set-up: a failed fit check must not retrain them away (the
    # remedy of ScoreLangevin.sample moves the tables and refits both networks)
    est.sample = functools.partial(est.sample, remedy=False)
    precision = N_OBS + 1 / PRIOR_SD**2
    return est, float(x_obs.sum()) / precision, 1 / math.sqrt(precision)


def test_fit_local_correction_recovers_a_linear_residual_exactly():
    g = torch.Generator().manual_seed(0)
    u = torch.randn(50, 3, generator=g, dtype=torch.float64)
    a, B, c = torch.tensor([0.1, -0.2, 0.3]), torch.randn(3, 3, generator=g), torch.tensor([1.0, 0.0, -1.0])
    r = a + (u - c) @ B.double().T
    intercept, slope, sd = fit_local_correction(u, r, c)
    assert torch.allclose(intercept.float(), a, atol=1e-6) and torch.allclose(slope.float(), B, atol=1e-6)
    assert float(sd.max()) < 1e-8
    corrected = LocalLinearCorrection(Zero(), intercept, slope, c)
    assert torch.allclose(corrected(u.float()), r.float(), atol=1e-5)


def test_fit_local_correction_rejects_too_few_groups():
    with pytest.raises(ValueError, match="at least 8 groups"):
        fit_local_correction(torch.zeros(5, 3), torch.zeros(5, 3), torch.zeros(3))


def test_refinement_recovers_the_analytic_posterior():
    est, mean, sd = _fitted()
    before = est.sample(1000, chains=20)
    shift = (float(before.draws.mean()) - mean) / sd
    assert abs(shift) > 10, "the biased set-up must be visibly wrong before refinement"
    post = before
    for _ in range(5):  # the first rounds walk from the biased posterior, 20 SDs away (chains stay
        # within 4 spreads of the last correction); the last ones are local
        post = est.refine_debiasing(post, num_groups=200, group_size=50).sample(1000, chains=20)
    draws = post.draws.reshape(-1)
    assert abs(float(draws.mean()) - mean) < 0.2 * sd
    assert abs(float(draws.std()) / sd - 1) < 0.15
    assert set(est.simulations_) >= {"refine0", "refine4"} and len(est.refinements_) == 5
    assert post.info["simulations"] == pytest.approx(sum(est.simulations_.values()))


def test_refinement_moves_rather_than_shrinks_when_draws_pile_at_the_edge():
    # After the first refinement the chains pile up at the side of the (4-spread) region that
    # confines them. Their MAD is then truncation, not posterior width: the next region keeps the
    # confining size and moves. Shrinking it (the old behaviour) collapsed the chains onto the edge
    # (3 rounds: 2.3 SD off with 0.4 x the posterior SD); moving reaches the posterior in 3 rounds.
    est, mean, sd = _fitted()
    post = est.sample(1000, chains=20)
    spreads, edges = [], []
    for _ in range(3):
        edges.append(post.info["edge_fraction"])
        post = est.refine_debiasing(post, num_groups=200, group_size=50).sample(1000, chains=20)
        spreads.append(float(est.refinements_[-1]["spread"]))
    assert edges[1] > 0.01 and spreads[1] >= spreads[0] * (1 - 1e-12)  # piled up, so the region kept its size
    draws = post.draws.reshape(-1)
    assert abs(float(draws.mean()) - mean) < 0.5 * sd
    assert abs(float(draws.std()) / sd - 1) < 0.3


def test_support_bounds_are_not_counted_as_edges():
    # a posterior piling up at a support bound (theta <= min x for M/G/1) is legitimate; only the
    # sides of the trained region count towards edge_fraction
    est, mean, sd = _fitted()
    est.likelihood_.support_fn = lambda x: (torch.tensor([-10.0]), torch.tensor([mean - 2 * sd]))
    post = est.sample(1000, chains=20)
    assert float(post.draws.max()) <= mean - 2 * sd + 1e-9
    assert post.info["edge_fraction"] == 0.0


def test_refinement_needs_the_single_model_with_debiasing():
    est, _, _ = _fitted()
    est.view = IIDDataSet()  # as an n-mode estimator
    with pytest.raises(ValueError, match="mode='single'"):
        est.refine_debiasing(est.sample(50, chains=4))


def test_refinement_over_the_proposal_needs_a_localized_one():
    est, _, _ = _fitted()  # prior tables: no Gaussian proposal to refine over
    with pytest.raises(ValueError, match="localized proposal"):
        est.refine_debiasing(None)


def test_a_store_does_not_return_pre_refinement_samples(tmp_path):
    from scorebayes.store import RunStore

    est, _, _ = _fitted()
    est.store = RunStore(tmp_path / "run", config=None, seed=0)
    first = est.sample(200, chains=4)
    assert torch.equal(est.sample(200, chains=4).draws, first.draws)  # cached: same call, same draws
    refined = est.refine_debiasing(first, num_groups=40, group_size=20).sample(200, chains=4)
    assert not torch.allclose(refined.draws.mean(), first.draws.mean(), atol=0.05)  # new drift, new draws


# --------------------------------------------------------------- kernel refit on D^R (no new simulations)
def _with_groups(est, num=20_000, m=50, seed=1):
    """D^R as the fit would keep it: groups spread well beyond the posterior, means of the current net."""
    g = torch.Generator().manual_seed(seed)
    u_r = torch.rand(num, 1, generator=g, dtype=torch.float64) * 7 - 2  # [-2, 5]: truth ~1, biased ~2.5
    x_r = u_r[:, None, :] + torch.randn(num, m, 1, generator=g, dtype=torch.float64)
    est.debias_groups_ = (u_r.float(), group_means(est.score_net_, u_r, x_r, device=est.device))
    return est


def test_group_means_are_each_groups_mean_of_the_score_net():
    # 150 groups: two full chunks of 64 and a partial one, written into one preallocated tensor
    est, _, _ = _fitted()
    g = torch.Generator().manual_seed(2)
    u_r = torch.randn(150, 1, generator=g, dtype=torch.float64)
    x_r = u_r[:, None, :] + torch.randn(150, 7, 1, generator=g, dtype=torch.float64)
    means = group_means(est.score_net_, u_r, x_r, device=est.device)
    with torch.no_grad():
        direct = torch.stack([est.score_net_(u_r[k].float().expand(7, 1), x_r[k].float()).mean(0)
                              for k in range(150)])
    assert means.shape == (150, 1) and means.dtype == torch.float32
    assert torch.allclose(means, direct, rtol=1e-5, atol=1e-6)


def test_fit_kernel_correction_recovers_a_linear_residual_exactly():
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(200, 3, generator=g, dtype=torch.float64)
    a, B, c = torch.tensor([0.1, -0.2, 0.3]), torch.randn(3, 3, generator=g), torch.tensor([0.5, 0.0, -0.5])
    r = a + (theta - c) @ B.double().T
    intercept, slope, sd, effective = fit_kernel_correction(theta, r, c, torch.eye(3), bandwidth=1.0)
    assert torch.allclose(intercept.float(), a, atol=1e-6) and torch.allclose(slope.float(), B, atol=1e-6)
    assert float(sd.max()) < 1e-8 and 8 <= effective < 200


def test_fit_kernel_correction_is_local():
    # linear near the centre, a large quadratic departure away from it: the kernel fit recovers the
    # local line, an (effectively) unweighted fit does not
    g = torch.Generator().manual_seed(1)
    theta = torch.randn(5000, 1, generator=g, dtype=torch.float64) * 10
    r = 2.0 + 3.0 * theta + 0.5 * theta**2
    local = fit_kernel_correction(theta, r, torch.zeros(1), torch.eye(1), bandwidth=0.5)
    wide = fit_kernel_correction(theta, r, torch.zeros(1), torch.eye(1), bandwidth=1e3)
    assert abs(float(local[0]) - 2.0) < 0.2 and abs(float(local[1]) - 3.0) < 0.1
    assert abs(float(wide[0]) - 2.0) > 10  # the global line misses the local value (by ~E[theta^2]/2)


def test_fit_kernel_correction_refuses_an_empty_neighbourhood():
    theta = torch.linspace(10, 20, 100, dtype=torch.float64)[:, None]
    with pytest.raises(ValueError, match="effective groups"):
        fit_kernel_correction(theta, theta, torch.zeros(1), torch.eye(1), bandwidth=0.5)
    with pytest.raises(ValueError, match="bandwidth"):
        fit_kernel_correction(theta, theta, torch.zeros(1), torch.eye(1), bandwidth=0.0)


def test_theta_linear_correction_is_pushed_to_u_by_the_jacobian():
    space = ParameterSpace(independent([Uniform(0.0, 1.0), Uniform(-5.0, 5.0)]))
    u = torch.randn(7, 2, generator=torch.Generator().manual_seed(2))
    a, B, c = torch.tensor([0.3, -1.0]), torch.tensor([[1.0, 2.0], [0.0, -0.5]]), torch.tensor([0.2, 1.0])
    theta, jac = theta_and_jacobian(space, u)
    expected = jac * (a + (theta - c) @ B.T)
    assert torch.allclose(ThetaLinearCorrection(Zero(), space, a, B, c)(u), expected, atol=1e-6)
    assert not torch.allclose(jac, torch.ones_like(jac), atol=0.05)  # the Jacobian matters here


def test_kernel_refit_recovers_the_analytic_posterior_without_new_simulations():
    est, mean, sd = _fitted()
    _with_groups(est)
    before = est.sample(1000, chains=20)
    assert abs(float(before.draws.mean()) - mean) / sd > 10, "the biased set-up must be visibly wrong"
    cost = dict(est.simulations_)
    low, high = est.likelihood_.sampling_region()
    post = before
    # Each refit re-centres on the last posterior. A linear fit over a kernel of b posterior SDs
    # misses a curved bias by ~f''(b sd)^2/2 at the centre, i.e. f'' b^2 sd / 2 posterior SDs here
    # (0.2 sin(2u): f'' ~ 0.7 near the truth): 0.6 SD for b = 5, 0.1 SD for b = 2 (noise: 0.05 SD)
    for _ in range(3):
        post = est.refit_debiasing(post, bandwidth=2.0).sample(1000, chains=20, init=post)  # as the README
    draws = post.draws.reshape(-1)
    assert abs(float(draws.mean()) - mean) < 0.2 * sd
    assert abs(float(draws.std()) / sd - 1) < 0.15
    # D^R reused: nothing simulated but the samples' fit checks
    assert {k: v for k, v in est.simulations_.items() if k != "check"} == {k: v for k, v in cost.items() if k != "check"}
    assert [r["kind"] for r in est.refinements_] == ["kernel"] * 3
    assert all(torch.equal(a, b) for a, b in zip(est.likelihood_.sampling_region(), (low, high)))  # region not cut


def test_kernel_refit_validates_its_input():
    est, _, _ = _fitted()
    _with_groups(est)
    post = est.sample(50, chains=4)
    with pytest.raises(ValueError, match="bandwidth"):
        est.refit_debiasing(post, bandwidth=-1.0)
    est.view = IIDDataSet()  # as an n-mode estimator
    with pytest.raises(ValueError, match="mode='single'"):
        est.refit_debiasing(post)


def test_a_store_tells_kernel_refits_apart(tmp_path):
    from scorebayes.store import RunStore

    est, _, _ = _fitted()
    _with_groups(est)
    est.store = RunStore(tmp_path / "run", config=None, seed=0)
    first = est.sample(200, chains=4)
    est_wide = copy.deepcopy(est)
    narrow = est.refit_debiasing(first, bandwidth=2.0).sample(200, chains=4)
    wide = est_wide.refit_debiasing(first, bandwidth=50.0).sample(200, chains=4)
    assert torch.equal(est.sample(200, chains=4).draws, narrow.draws)  # same refit: cached draws
    assert not torch.equal(wide.draws, narrow.draws)  # one refit each, but not the same one
