"""Pareto-smoothed pi/q weights (baselines._common.pareto_smooth) against exact expectations."""

import math

import pytest
import torch

from scorebayes.baselines import npe
from scorebayes.baselines._common import pareto_smooth
from scorebayes.priors import independent
from torch.distributions import Normal


def _snis(proposal_sd, num, generator):
    """Self-normalised weights of N(0, 1) from N(0, proposal_sd^2) draws, and the draws."""
    x = proposal_sd * torch.randn(num, generator=generator, dtype=torch.float64)
    log_w = -0.5 * x**2 + 0.5 * (x / proposal_sd) ** 2
    return torch.softmax(log_w, 0), x


def test_psis_lowers_the_error_of_a_heavy_tailed_estimate():
    # q = N(0, 0.75^2) for p = N(0, 1): w grows like exp(0.39 x^2), infinite variance (k ~ 0.6).
    g = torch.Generator().manual_seed(0)
    plain, smoothed, ks = [], [], []
    for _ in range(300):
        w, x = _snis(0.75, 1000, g)
        ws, k = pareto_smooth(w)
        plain.append(float((w * x**2).sum()))
        smoothed.append(float((ws * x**2).sum()))
        ks.append(k)
    rmse = lambda v: math.sqrt(sum((e - 1.0) ** 2 for e in v) / len(v))  # E_p[x^2] = 1
    assert rmse(smoothed) < 0.9 * rmse(plain)
    assert sorted(ks)[len(ks) // 2] > 0.4  # the heavy tail is diagnosed


def test_psis_leaves_light_tailed_weights_nearly_unchanged():
    w, _ = _snis(1.5, 2000, torch.Generator().manual_seed(1))  # bounded ratio
    ws, k = pareto_smooth(w)
    assert k < 0.5
    assert float((ws - w).abs().sum()) < 0.05
    assert float(ws.sum()) == pytest.approx(1.0)


def test_pareto_smooth_options():
    w = torch.full((10,), 0.1, dtype=torch.float64)
    assert pareto_smooth(None) == (None, None)
    assert pareto_smooth(w, None)[0] is w
    with pytest.raises(ValueError, match="None or 'psis'"):
        pareto_smooth(w, "truncate")


def test_npe_rejects_a_bad_smoothing_option_before_simulating():
    def simulator(theta, n, generator):
        raise AssertionError("simulated before the option check")

    with pytest.raises(ValueError, match="None or 'psis'"):
        npe(torch.zeros(5, 1), independent([Normal(0.0, 1.0)]), simulator=simulator,
            num_simulations=100, weight_smoothing="clip")


def test_sample_in_support_keeps_drawing_up_to_max_rounds():
    """A flow leaking 90% of its draws outside the box: 100 kept draws need ~10 rounds of 100."""
    from torch.distributions import Uniform

    from scorebayes.baselines._common import sample_in_support
    from scorebayes.priors import independent

    box = independent([Uniform(0.0, 1.0)])
    gen = torch.Generator().manual_seed(0)

    def leaky(m):  # 10% inside (0, 1)
        return torch.rand(m, 1, generator=gen, dtype=torch.float64) * 10.0

    with pytest.raises(ValueError, match="fell inside the prior's support"):
        sample_in_support(leaky, box, 100, max_rounds=3)
    draws, rate = sample_in_support(leaky, box, 100, max_rounds=100)
    assert draws.shape == (100, 1) and bool(((draws > 0) & (draws < 1)).all())
    assert 0.05 < rate < 0.15
