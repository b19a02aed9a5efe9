"""MH kernels leave a Gaussian target invariant; ULA does not (its bias is what MH removes)."""

import math

import pytest
import torch

from scorebayes.samplers.acceptance import ExactRule, QuadratureRule, TaylorRule
from scorebayes.samplers.mh import build_kernel, run
from scorebayes.samplers.proposals import LangevinProposal, PCNProposal, RandomWalkProposal

MEAN = torch.tensor([1.0, -2.0], dtype=torch.float64)
SD = torch.tensor([0.5, 2.0], dtype=torch.float64)
CHAINS = 4000


def log_p(x):
    return -0.5 * (((x - MEAN) / SD) ** 2).sum(-1)


def score(x):
    return -(x - MEAN) / SD**2


KERNELS = {
    "rw": lambda rule: build_kernel(RandomWalkProposal(0.8), rule, score=score),
    "mala": lambda rule: build_kernel(LangevinProposal(score, 0.1), rule),
    "pcn": lambda rule: build_kernel(PCNProposal(0.5), rule, score=score),
}
RULES = {
    "exact": lambda: ExactRule(log_p),
    "taylor": lambda: TaylorRule(),  # exact for a quadratic log-density
    "quadrature": lambda: QuadratureRule(score, 3),
}


def exact_draws(n, generator):
    return MEAN + SD * torch.randn(n, 2, generator=generator, dtype=torch.float64)


def assert_gaussian(x, mean, sd, z=4.5):
    """Mean and variance of independent draws x [n, d] within z Monte Carlo standard errors."""
    n = x.shape[0]
    m, v = x.mean(0), x.var(0)
    assert torch.all((m - mean).abs() < z * sd / math.sqrt(n)), (m, mean)
    assert torch.all((v - sd**2).abs() < z * sd**2 * math.sqrt(2 / (n - 1))), (v, sd**2)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernels_leave_gaussian_invariant(kernel, rule, generator):
    k = KERNELS[kernel](RULES[rule]())
    # start in the target: every stored state is then exactly distributed if the kernel is invariant;
    # the final states of independent chains are iid
    draws, stats = run(k, exact_draws(CHAINS, generator), 30, generator=generator)
    assert 0.2 < stats["acceptance_rate"] < 1.0
    assert_gaussian(draws[:, -1], MEAN, SD)


def test_chains_converge_from_far(generator):
    k = KERNELS["mala"](RULES["exact"]())
    draws, _ = run(k, torch.full((CHAINS, 2), 6.0, dtype=torch.float64), 300, generator=generator)
    assert_gaussian(draws[:, -1], MEAN, SD)


def test_ula_is_biased_and_mh_removes_it(generator):
    # ULA with step h on N(0, s^2): stationary variance s^2 / (1 - h / (2 s^2)) (per coordinate)
    h = 0.2
    ula = build_kernel(LangevinProposal(score, h), None)
    draws, stats = run(ula, exact_draws(CHAINS, generator), 200, generator=generator)
    assert stats["acceptance_rate"] == 1.0
    inflated = SD / torch.sqrt(1 - h / (2 * SD**2))
    assert_gaussian(draws[:, -1], MEAN, inflated)
    with pytest.raises(AssertionError):
        assert_gaussian(draws[:, -1], MEAN, SD)
    mala = build_kernel(LangevinProposal(score, h), ExactRule(log_p))
    draws, _ = run(mala, exact_draws(CHAINS, generator), 200, generator=generator)
    assert_gaussian(draws[:, -1], MEAN, SD)


def test_support_rejects_outside(generator):
    k = build_kernel(RandomWalkProposal(1.0), ExactRule(log_p), support=lambda x: x[:, 0] > 0.9)
    draws, _ = run(k, torch.ones(200, 2, dtype=torch.float64), 20, generator=generator)
    assert torch.all(draws[..., 0] > 0.9)


def test_run_is_reproducible_and_shapes():
    k = KERNELS["mala"](RULES["exact"]())
    x0 = torch.zeros(7, 2, dtype=torch.float64)
    a, stats = run(k, x0, 10, generator=torch.Generator().manual_seed(1), thin=2, keep=3)
    b, _ = run(k, x0, 10, generator=torch.Generator().manual_seed(1), thin=2, keep=3)
    assert a.shape == (7, 3, 2) and stats["acceptance_rate_per_chain"].shape == (7,)
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match=r"\[C, d\]"):
        k.init(torch.zeros(2))


def test_quadrature_rule_weighs_separated_modes_from_the_score_alone(generator):
    # 0.8 N((3,3), I) + 0.2 N((-3,-3), I), chains started evenly between the modes: RW jumps between
    # them are accepted by the integrated score alone. The score switches component sharply midway,
    # so the quadrature needs enough nodes; with k = 2 (Taylor-1 averaging) the weights stay wrong.
    from scorebayes.scoremh import GaussianMixture

    mix = GaussianMixture(torch.tensor([[3.0, 3.0], [-3.0, -3.0]]), torch.tensor([0.8, 0.2]))
    chains = 2000
    x0 = 2.0 * torch.randn(chains, 2, generator=generator, dtype=torch.float64)
    se = math.sqrt(0.8 * 0.2 / chains)
    weights = {}
    for k in (2, 16):
        draws, _ = run(build_kernel(RandomWalkProposal(5.0), QuadratureRule(mix.score, k)), x0, 300,
                       generator=generator, keep=1)
        weights[k] = float(mix.mode_weights(draws[:, -1])[0])
    assert abs(weights[16] - 0.8) < 4 * se, weights
    assert abs(weights[2] - 0.8) > 10 * se, weights
