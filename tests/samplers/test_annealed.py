import math

import pytest
import torch

from scorebayes.samplers.acceptance import QuadratureRule
from scorebayes.samplers.annealed import annealed_langevin, level_step_sizes

# data ~ N(0, I): the noised density p_sigma = N(0, (1 + sigma^2) I) has an analytic score


def score(x, sigma):
    return -x / (1 + sigma**2)


SIGMAS = torch.exp(torch.linspace(math.log(3.0), math.log(0.05), 10)).tolist()


def mala_rule(sigma, step):
    return QuadratureRule(lambda x: score(x, sigma), 3)


@pytest.mark.parametrize("step_rule,step_size", [("geometric", 2e-3), ("snr", 0.15)])
def test_annealed_mala_recovers_gaussian(step_rule, step_size, generator):
    x0 = SIGMAS[0] * torch.randn(4000, 2, generator=generator, dtype=torch.float64)
    x, info = annealed_langevin(score, x0, SIGMAS, steps_per_level=20, final_steps=100,
                                step_rule=step_rule, step_size=step_size, acceptance=mala_rule,
                                generator=generator)
    target_var = 1 + SIGMAS[-1] ** 2
    assert len(info["acceptance_rate"]) == len(SIGMAS) + 1
    assert (x.var(0) - target_var).abs().max() < 4.5 * target_var * math.sqrt(2 / 4000)
    assert x.mean(0).abs().max() < 4.5 * math.sqrt(target_var / 4000)


def test_annealed_ula_biased_with_large_steps(generator):
    x0 = SIGMAS[0] * torch.randn(4000, 1, generator=generator, dtype=torch.float64)
    kw = dict(steps_per_level=5, final_steps=100, step_rule="geometric", step_size=2e-3, generator=generator)
    # at the last level h = 2e-3 * 1 = 2e-3; the first level has h = 2e-3 * 3600 = 7.2 (far too big for ULA)
    x_ula, _ = annealed_langevin(score, x0, SIGMAS, **{**kw, "step_size": 0.6})
    x_mala, info = annealed_langevin(score, x0, SIGMAS, acceptance=mala_rule, **{**kw, "step_size": 0.6})
    target_var = 1 + SIGMAS[-1] ** 2
    # ULA at h = 0.6: stationary variance v / (1 - h / (2 v)) with v = 1.0025 -> about 1.43
    assert x_ula.var() > 1.25 * target_var
    assert abs(float(x_mala.var()) - target_var) < 4.5 * target_var * math.sqrt(2 / 4000)
    assert info["acceptance_rate"][-1] < 1.0


def test_step_rules_and_errors(generator):
    s = torch.ones(5, 2)
    assert level_step_sizes(2.0, 0.5, s, rule="geometric", step_size=0.1) == pytest.approx(1.6)
    h = level_step_sizes(2.0, 0.5, s, rule="snr", step_size=0.1, generator=generator)
    assert h == pytest.approx(2 * (0.1 * math.sqrt(2) / math.sqrt(2)) ** 2, rel=0.8)
    with pytest.raises(ValueError, match="step rule"):
        level_step_sizes(1.0, 1.0, s, rule="other", step_size=0.1)
    with pytest.raises(ValueError, match="decreasing"):
        annealed_langevin(score, torch.zeros(3, 1), [0.1, 1.0])
