"""Chains run until an ESS target: stopping, the draws kept, and what happens when chains do not mix."""

import math

import pytest
import torch

from scorebayes.samplers.base import run_chains
from scorebayes.samplers.ess_stopping import (
    EssStopping,
    burn_in_steps,
    checkpoint_steps,
    record_interval,
    rhat_limit,
    run_until_ess,
)
from scorebayes.samplers.ula import ULAState, build_kernel

TAU = 0.1


def gaussian_kernel(centres: torch.Tensor | float = 0.0):
    """ULA on N(centres, I): stationary variance 1 / (1 - tau/2) per coordinate."""
    return build_kernel(lambda u: -(u - centres), lambda u: torch.zeros_like(u), TAU)


def run(rule, chains=20, d=2, draws=25, seed=0, centres=0.0):
    kernel = gaussian_kernel(centres)
    state = kernel.init(torch.full((chains, d), 30.0, dtype=torch.float64))
    return run_until_ess(kernel, state, rule, draws_per_chain=draws, record_every=2,
                         generator=torch.Generator().manual_seed(seed))


def test_stops_at_the_target_with_draws_of_the_stationary_law():
    rule = EssStopping(target=400, max_steps=20_000, min_steps=200, max_rhat=rhat_limit(20, 400))
    draws, _, info, conv = run(rule)
    assert conv.met and conv.ess >= 400 and conv.rhat < rule.max_rhat
    # at the first recorded step (every 2nd) from a checkpoint on
    assert conv.steps == info.num_steps < 20_000
    assert any(0 <= conv.steps - c < 2 for c in checkpoint_steps(rule)), conv.steps
    assert draws.shape == (20, 25, 2)
    # the met target bounds the Monte Carlo error: se(mean) <= sd / sqrt(400), with the exact sd
    sd = (1 / (1 - TAU / 2)) ** 0.5
    flat = draws.reshape(-1, 2)
    assert (flat.mean(0).abs() < 4 * sd / 400**0.5).all(), flat.mean(0)
    # the chains started at 30 (30 SDs out): the burn-in must be gone from the draws
    assert ((flat.var(0) / sd**2 - 1).abs() < 4 * (2 / 400) ** 0.5).all(), flat.var(0)


def test_a_larger_target_runs_longer_and_an_unreachable_one_runs_to_max_steps():
    small = run(EssStopping(target=200, max_steps=20_000, min_steps=200, max_rhat=1.1))[3]
    large = run(EssStopping(target=2_000, max_steps=20_000, min_steps=200, max_rhat=1.1))[3]
    assert small.met and large.met and large.steps > 2 * small.steps
    never = run(EssStopping(target=10**7, max_steps=1_000, min_steps=200, max_rhat=1.1))[3]
    assert not never.met and never.steps == 1_000 and never.ess < 10**7


def test_chains_stuck_in_two_places_never_pass():
    """Half the chains sit at -3, half at +3 (a score that differs by chain): the within-chain draws
    look well mixed, but R-hat sees the two groups and the ESS target is not met."""
    centres = torch.cat([torch.full((10, 2), -3.0), torch.full((10, 2), 3.0)]).double()
    _, _, _, conv = run(EssStopping(target=100, max_steps=3_000, min_steps=200, max_rhat=1.1), centres=centres)
    assert not conv.met and conv.rhat > 1.5 and conv.steps == 3_000


def test_burn_in_is_a_quarter_within_its_limits():
    rule = EssStopping(target=1, max_steps=10_000, min_burn_in=200)
    assert [burn_in_steps(s, rule) for s in (300, 800, 4_000)] == [150, 200, 1_000]


def test_record_interval_leaves_enough_draws_in_the_first_test():
    rule = EssStopping(target=1, max_steps=20_000, min_steps=400)
    assert record_interval(1.0, rule, 50) == 1
    assert record_interval(40.0, rule, 10) == 20
    assert record_interval(1_000.0, rule, 50) == 4  # 200 tested steps must hold 50 draws


def test_rhat_limit_is_twice_the_stationary_excess_and_at_least_one_percent():
    assert rhat_limit(4, 1_000) == pytest.approx(1.01)
    assert rhat_limit(40, 1_000) == pytest.approx(1.04)


def test_run_chains_stop_truncates_the_draws_and_counts_the_steps():
    kernel = gaussian_kernel()
    draws, _, info = run_chains(kernel, ULAState(torch.zeros(3, 1)), 100, thin=5,
                                stop=lambda t, kept: kept.shape[1] == 4)
    assert draws.shape == (3, 4, 1) and info.num_steps == 20


@pytest.mark.parametrize("kwargs, message", [
    ({"draws_per_chain": 0, "record_every": 1}, "draws_per_chain"),
    ({"draws_per_chain": 5, "record_every": 0}, "record_every"),
])
def test_bad_arguments_are_refused(kwargs, message):
    kernel = gaussian_kernel()
    with pytest.raises(ValueError, match=message):
        run_until_ess(kernel, kernel.init(torch.zeros(2, 1)), EssStopping(1, 100), **kwargs)
    with pytest.raises(ValueError, match="min_steps <= max_steps"):
        run_until_ess(kernel, kernel.init(torch.zeros(2, 1)), EssStopping(1, 100, min_steps=200),
                      draws_per_chain=1, record_every=1)


def test_the_checkpoints_grow_geometrically_to_max_steps():
    steps = checkpoint_steps(EssStopping(1, 1_000, min_steps=200, growth=1.5))
    assert steps == [200, 300, 450, 675, 1_000]
    assert all(math.isclose(b / a, 1.5, rel_tol=0.01) for a, b in zip(steps[:3], steps[1:4]))


def test_the_measure_is_what_is_tested():
    """Well-mixed states, but a measure that offsets each chain by its own constant: the tested
    quantity differs between chains and the target is not met."""
    offsets = torch.linspace(-3, 3, 20, dtype=torch.float64)[:, None, None]
    rule = EssStopping(target=100, max_steps=1_000, min_steps=200, max_rhat=1.1)
    kernel = gaussian_kernel()
    state = kernel.init(torch.zeros(20, 2, dtype=torch.float64))
    plain = run_until_ess(kernel, state, rule, draws_per_chain=5, record_every=2,
                          generator=torch.Generator().manual_seed(0))[3]
    shifted = run_until_ess(kernel, state, rule, draws_per_chain=5, record_every=2, measure=lambda s: s + offsets,
                            generator=torch.Generator().manual_seed(0))[3]
    assert plain.met and not shifted.met and shifted.rhat > 1.5


def test_classical_diagnostics_of_independent_and_of_separated_chains():
    from scorebayes.diagnostics import ess, rhat

    g = torch.Generator().manual_seed(0)
    iid = torch.randn(8, 500, generator=g, dtype=torch.float64).numpy()
    assert abs(ess(iid, rank=False) / 4_000 - 1) < 0.15 and rhat(iid, rank=False) < 1.01
    apart = iid + torch.arange(8.0, dtype=torch.float64)[:, None].numpy()
    assert rhat(apart, rank=False) > 2 and ess(apart, rank=False) < 100
