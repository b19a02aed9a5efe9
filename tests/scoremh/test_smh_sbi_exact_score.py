"""The smh-sbi benchmark's exact-score wrapper (benchmarks/smh_sbi.py: ExactScore).

The wrapper pushes a known likelihood score to the unconstrained ``u`` of a box prior. Its
curvature drives MH-corrected Langevin's automatic step size and preconditioner, so the
posterior score built on it must be differentiable in ``u`` with the *likelihood's* curvature,
not only the prior's. Reference: autograd of the exact log posterior in ``u``,
:math:`\\log p(y\\mid T(u)) + \\log\\pi_u(u)`, of a small monotone regression.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from scorebayes.models.monotone import Monotone
from scorebayes.priors import ParameterSpace
from scorebayes.samplers.langevin import curvature_step_size
from scorebayes.samplers.sbi_mh import posterior_score


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("smh_sbi.py", "smh_sbi_bench")


@pytest.fixture(scope="module")
def setting(bench):
    model = Monotone(degree=4, n_obs=200)
    x_obs = model.observed(torch.Generator().manual_seed(0))
    space = ParameterSpace(model.prior)
    est = SimpleNamespace(space=space, proposal_=None, parameter_names=model.parameter_names, seed=0)
    scores = bench.monotone_scores(model, x_obs, bias_sd=2.0, sd0=0.05)
    exact = bench.ExactScore(est, scores["exact"])
    post = model.reference_posterior(x_obs, 8, torch.Generator().manual_seed(1), num_chains=8, burn_in=200)
    u = space.to_unconstrained(post.draws.double())

    def log_post(v: torch.Tensor) -> torch.Tensor:  # [C, d] -> [C]
        theta = space.to_constrained(v)
        return model.log_likelihood(theta, x_obs[None].expand(len(v), *x_obs.shape)) + space.log_prob_unconstrained(v)

    return model, x_obs, space, exact, scores, u, log_post


def test_exact_score_matches_model_true_score(setting):
    model, x_obs, space, exact, scores, u, _ = setting
    theta = space.to_constrained(u)
    s_theta = model.true_score(theta, x_obs[None].expand(len(u), *x_obs.shape))
    assert torch.allclose(scores["exact"](theta), s_theta, rtol=1e-9, atol=1e-6 * float(s_theta.abs().max()))
    assert torch.allclose(exact.likelihood_score(u), space.pushforward_score(u, s_theta), rtol=1e-8, atol=1e-8)


def test_posterior_score_jacobian_is_the_log_posterior_hessian(setting):
    """Fails for a wrapper that detaches ``u`` (its Jacobian is then the prior's alone)."""
    _, _, _, exact, _, u, log_post = setting
    score = posterior_score(exact)
    for point in u[:3]:
        jac = torch.autograd.functional.jacobian(lambda v: score(v[None])[0], point)
        hess = torch.autograd.functional.hessian(lambda v: log_post(v[None])[0], point)
        assert torch.allclose(jac, hess, rtol=1e-6, atol=1e-6 * float(hess.abs().max())), (jac - hess).abs().max()
        grad = torch.autograd.functional.jacobian(lambda v: log_post(v[None])[0], point)
        assert torch.allclose(score(point[None])[0], grad, rtol=1e-8, atol=1e-6)
    # hence the automatic step of MH-corrected Langevin comes from the posterior's curvature
    step = curvature_step_size(score, u[:4], kappa=1.0)
    lam = max(float(torch.linalg.eigvalsh(-torch.autograd.functional.hessian(lambda v: log_post(v[None])[0], p))[-1])
              for p in u[:4])
    assert step.max_curvature == pytest.approx(lam, rel=1e-6)


def test_perturbed_score_is_a_constant_tilt_of_theta0(setting):
    _, _, space, _, scores, u, _ = setting
    theta = space.to_constrained(u)
    diff = scores["perturbed"](theta) - scores["exact"](theta)
    expected = torch.zeros(theta.shape[1], dtype=torch.float64)
    expected[0] = 2.0 / 0.05
    assert torch.allclose(diff, expected.expand_as(diff), rtol=1e-9, atol=1e-9)
