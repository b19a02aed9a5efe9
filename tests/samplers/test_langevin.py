"""Langevin chains with an exact score: automatic step size, tempering, bounds, divergence."""

import math

import pytest
import torch

from scorebayes.samplers.langevin import (ChainsDivergedError, adaptation_windows, covariance_preconditioner,
                                         curvature_step_size, run_langevin)


def _gaussian(precision_diag):
    prec = torch.tensor(precision_diag, dtype=torch.float64)

    def lik(u):
        return -u * prec

    def prior(u):
        return torch.zeros_like(u)

    return prec, lik, prior


def test_auto_step_size_is_kappa_over_largest_curvature():
    prec, lik, prior = _gaussian([400.0, 25.0])
    est = curvature_step_size(lambda u: lik(u) + prior(u), torch.randn(4, 2, dtype=torch.float64), kappa=0.1)
    assert est.step_size == pytest.approx(0.1 / 400.0, rel=1e-6)
    assert est.min_curvature == pytest.approx(25.0, rel=1e-6)


def test_ula_with_auto_step_recovers_gaussian_moments():
    """With kappa = 0.1 the stationary variance is 1/(lam (1 - kappa/2)) in the stiffest direction:
    within 6% of the truth; means and variances checked against Monte Carlo error."""
    prec, lik, prior = _gaussian([400.0, 25.0])
    g = torch.Generator().manual_seed(0)
    init = torch.randn(2000, 2, generator=g, dtype=torch.float64) * 2
    est = curvature_step_size(lambda u: lik(u) + prior(u), init[:8])
    relax = est.relaxation_steps()
    draws, info = run_langevin(lik, prior, init, step_size=est.step_size, num_draws=4,
                               burn_in=int(6 * relax), thin=int(relax), generator=g)
    flat = draws.reshape(-1, 2)
    var = flat.var(0)
    true_var = 1 / prec
    n_eff = flat.shape[0] / 2  # thinning at one relaxation time leaves some correlation
    se_var = true_var * math.sqrt(2 / n_eff)
    inflation = 1 / (1 - est.step_size * prec / 2)  # ULA's exact stationary variance on a Gaussian
    assert torch.all((var - true_var * inflation).abs() < 4 * se_var)
    assert torch.all((var / true_var - 1).abs() < 0.06)
    assert torch.all(flat.mean(0).abs() < 4 * (true_var / n_eff).sqrt())


def test_tempering_bounds_and_clipping():
    prec, lik, prior = _gaussian([1.0])
    g = torch.Generator().manual_seed(1)
    init = torch.full((500, 1), 0.5, dtype=torch.float64)
    low, high = torch.tensor([0.0], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64)
    draws, info = run_langevin(lambda u: lik(u - 0.5), prior, init, step_size=0.05, num_draws=5,
                               burn_in=100, thin=5, tempering=(0.1, 0.5), steps_per_stage=20,
                               clip_norm=1.0, bounds=(low, high), generator=g)
    assert ((draws >= 0) & (draws <= 1)).all()
    assert info.total_steps == 2 * 20 + 100 + 25


def test_divergence_detected():
    prec, lik, prior = _gaussian([100.0])
    init = torch.ones(10, 1, dtype=torch.float64)
    with pytest.raises(ChainsDivergedError, match="smaller step"):
        run_langevin(lik, prior, init, step_size=0.1, num_draws=2, burn_in=200,
                     generator=torch.Generator().manual_seed(0))


def test_same_generator_same_chain():
    prec, lik, prior = _gaussian([4.0, 1.0])
    init = torch.zeros(3, 2, dtype=torch.float64)
    a, _ = run_langevin(lik, prior, init, step_size=0.01, num_draws=3, burn_in=5,
                        generator=torch.Generator().manual_seed(3))
    b, _ = run_langevin(lik, prior, init, step_size=0.01, num_draws=3, burn_in=5,
                        generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_constrain_reflects_a_box_given_in_other_coordinates():
    # chains in v with u = 2 v (a whitening map); the box |u| <= 1 is enforced through `constrain`
    from scorebayes.samplers.langevin import reflect_into_box

    low, high = -torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    push = lambda v: torch.full_like(v, 50.0)  # noqa: E731  drift pushing out of the box
    zero = lambda v: torch.zeros_like(v)  # noqa: E731
    g = torch.Generator().manual_seed(0)
    v0 = torch.zeros(20, 2, dtype=torch.float64)
    draws, _ = run_langevin(push, zero, v0, step_size=0.01, num_draws=50, burn_in=50,
                            constrain=lambda v: reflect_into_box(2 * v, low, high) / 2, generator=g)
    assert (2 * draws).abs().max() <= 1.0
    free, _ = run_langevin(push, zero, v0, step_size=0.01, num_draws=50, burn_in=50, generator=g)
    assert (2 * free).abs().max() > 1.0  # without it the chains leave the box


def test_covariance_preconditioner_whitens_correlated_draws():
    g = torch.Generator().manual_seed(0)
    # SDs three orders of magnitude apart and a correlation of 0.99, as in the monotone posterior
    A = torch.tensor([[1e-3, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.99, (1 - 0.99**2) ** 0.5]],
                     dtype=torch.float64)
    x = 2.0 + torch.randn(20_000, 3, generator=g, dtype=torch.float64) @ A.T
    center, L = covariance_preconditioner(x)
    assert torch.equal(L, L.tril())
    v = torch.linalg.solve(L, (x - center).T).T
    cov = v.T @ v / (len(v) - 1)
    # sampling error of a covariance entry with 20,000 draws: ~0.007; the shrinkage adds < 0.02
    assert (cov - torch.eye(3, dtype=torch.float64)).abs().max() < 0.05, cov
    assert (center - 2.0).abs().max() < 0.05
    with pytest.raises(ValueError, match="N >= 2"):
        covariance_preconditioner(x[:1])


def test_adaptation_windows_double_and_sum_to_the_budget():
    assert adaptation_windows(7000) == [1000, 2000, 4000]
    assert sum(adaptation_windows(4321)) == 4321
    assert adaptation_windows(100) == [100]
    assert adaptation_windows(0) == []
