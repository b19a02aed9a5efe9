import math

import pytest
import torch
from torch.distributions import Normal, Uniform

from scorebayes.priors import ParameterSpace, PriorError, independent, prior_from_spec, sample


def test_spec_builds_every_family():
    specs = [
        {"dist": "uniform", "low": 0, "high": 10},
        {"dist": "normal", "loc": 0, "scale": 2},
        {"dist": "lognormal", "loc": -3, "scale": 1},
        {"dist": "gamma", "concentration": 2, "rate": 1},
        {"dist": "beta", "concentration1": 2, "concentration0": 3},
        {"dist": "halfnormal", "scale": 1},
        {"dist": "exponential", "rate": 1},
    ]
    prior = prior_from_spec(specs)
    theta = sample(prior, 50, generator=torch.Generator().manual_seed(1))
    assert theta.shape == (50, 7)
    assert torch.isfinite(prior.log_prob(theta)).all()


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"dist": "weibull"}, "unknown dist"),
        ({"dist": "normal", "loc": 0}, "missing"),
        ({"dist": "normal", "loc": 0, "scale": 1, "sd": 2}, "unknown"),
        ({"dist": "normal", "loc": 0, "scale": -1}, "invalid"),
    ],
)
def test_bad_spec_errors(spec, match):
    with pytest.raises(PriorError, match=match):
        prior_from_spec([spec])


def test_log_prob_outside_support_is_minus_inf():
    prior = independent([Uniform(0.0, 1.0), Normal(0.0, 1.0)])
    lp = prior.log_prob(torch.tensor([[2.0, 0.0], [0.5, 0.0]]))
    assert lp[0] == -math.inf and torch.isfinite(lp[1])


def test_sample_reproducible_and_leaves_global_rng_alone():
    prior = prior_from_spec([{"dist": "gamma", "concentration": 2, "rate": 1}])
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = sample(prior, 10, generator=torch.Generator().manual_seed(5))
    after = torch.rand(1)
    b = sample(prior, 10, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and torch.equal(before, after)


def test_unconstrained_density_is_change_of_variables():
    """Monte Carlo: u = T^{-1}(theta) with theta ~ prior has density log_prob_unconstrained."""
    prior = prior_from_spec([{"dist": "uniform", "low": 0, "high": 10},
                             {"dist": "gamma", "concentration": 3, "rate": 2}])
    space = ParameterSpace(prior)
    u = torch.linspace(-3, 3, 2001, dtype=torch.float64)
    grid = torch.stack([u, u], dim=-1)
    dens = space.log_prob_unconstrained(grid).exp()
    # each marginal integrates to one (the product factorises coordinate-wise here)
    lp0 = prior.marginals[0].log_prob(space.to_constrained(grid)[:, 0])
    ladj0 = space.log_abs_det_jacobian(torch.stack([u, torch.zeros_like(u)], -1)) - \
        space.log_abs_det_jacobian(torch.zeros(1, 2, dtype=torch.float64))
    assert dens.shape == (2001,)
    u_wide = torch.linspace(-40, 40, 40001, dtype=torch.float64)
    for k in range(2):
        pts = torch.zeros(len(u_wide), 2, dtype=torch.float64)
        pts[:, k] = u_wide
        theta = space.to_constrained(pts)
        t = space._per_coordinate[k]
        marg = prior.marginals[k].log_prob(theta[:, k]) + t.log_abs_det_jacobian(u_wide, theta[:, k])
        integral = torch.trapezoid(marg.exp(), u_wide)
        assert abs(float(integral) - 1.0) < 1e-4
    assert torch.isfinite(lp0).all() and torch.isfinite(ladj0).all()


def test_grad_and_pushforward_match_autograd():
    prior = prior_from_spec([{"dist": "lognormal", "loc": 0, "scale": 1},
                             {"dist": "uniform", "low": -1, "high": 2}])
    space = ParameterSpace(prior)
    u = torch.randn(5, 2, dtype=torch.float64)
    g = space.grad_log_prob_unconstrained(u)
    eps = 1e-6
    for k in range(2):
        du = torch.zeros_like(u)
        du[:, k] = eps
        fd = (space.log_prob_unconstrained(u + du) - space.log_prob_unconstrained(u - du)) / (2 * eps)
        assert torch.allclose(g[:, k], fd, atol=1e-6)
    s_theta = torch.randn(5, 2, dtype=torch.float64)
    push = space.pushforward_score(u, s_theta)
    jac_diag = torch.stack([u[:, 0].exp(), 3 * torch.sigmoid(u[:, 1]) * (1 - torch.sigmoid(u[:, 1]))], -1)
    assert torch.allclose(push, s_theta * jac_diag)


def test_boxuniform_from_sbi_works():
    sbi_utils = pytest.importorskip("sbi.utils")
    box = sbi_utils.BoxUniform(torch.zeros(2), torch.ones(2) * 3)
    space = ParameterSpace(box)
    u = torch.randn(4, 2)
    theta = space.to_constrained(u)
    assert ((theta > 0) & (theta < 3)).all()
    assert torch.allclose(space.to_unconstrained(theta), u, atol=1e-5)
