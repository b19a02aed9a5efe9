import math

import pytest
import torch

from scorebayes.scoremh.datasets import GEV, TOY_DATASETS, GaussianMixture, gaussian_target, make_toy, pinwheel


@pytest.mark.parametrize("name", TOY_DATASETS)
def test_toys_shapes_and_seeds(name):
    a = make_toy(name, 500, generator=torch.Generator().manual_seed(0))
    b = make_toy(name, 500, generator=torch.Generator().manual_seed(0))
    assert a.shape == (500, 2 if name in ("moons", "pinwheel") else 3) and a.dtype == torch.float64
    torch.testing.assert_close(a, b)


def test_pinwheel_algorithm_3(generator):
    # without noise, points lie at angle 2 pi k / K + rate * r at radius r, K = 5 arms
    x = pinwheel(2000, radial_std=0.3, tangential_std=0.0, generator=generator)
    r = x.norm(dim=1)
    arm = (torch.atan2(x[:, 1], x[:, 0]) - 0.25 * r) * 5 / (2 * math.pi)
    assert torch.allclose(arm, arm.round(), atol=1e-6) or torch.all(x[:, 0] * 0 == 0)
    frac = (arm - arm.round()).abs().max()
    assert frac < 1e-6 and len(torch.unique(arm.round() % 5)) == 5
    assert pinwheel(10, variant="johnson", generator=generator).shape == (10, 2)


def test_mixture_score_and_weights(generator):
    mix = GaussianMixture.paper()
    x = 4 * torch.randn(100, 2, generator=generator, dtype=torch.float64)
    xg = x.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(mix.log_prob(xg).sum(), xg)
    torch.testing.assert_close(mix.score(x), ref)
    w = mix.mode_weights(mix.sample(20000, generator=generator))
    assert abs(float(w[0]) - 0.8) < 4.5 * math.sqrt(0.16 / 20000)
    g = gaussian_target()
    assert g.sample(20000, generator=generator).var() == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("xi", [-0.2, 0.0, 0.4])
def test_gev(xi, generator):
    gev = GEV(xi)
    x = gev.sample(50000, generator=generator)
    assert gev.in_support(x).all()
    xs = x[:200].clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(gev.log_prob(xs).sum(), xs)
    torch.testing.assert_close(gev.score(x[:200]), ref)
    # total probability of the density integrates to 1 (trapezoid on a wide grid)
    grid = torch.linspace(-5, 60, 200001, dtype=torch.float64)[:, None]
    assert torch.trapezoid(gev.log_prob(grid).exp(), grid[:, 0]) == pytest.approx(1.0, abs=2e-3)
    if xi == 0:  # Gumbel mean is Euler's gamma
        assert float(x.mean()) == pytest.approx(0.5772, abs=0.02)
    if xi != 0:
        outside = torch.tensor([[-1 / xi - 0.5 if xi > 0 else -1 / xi + 0.5]], dtype=torch.float64)
        assert gev.log_prob(outside).item() == -math.inf and not gev.in_support(outside).any()
