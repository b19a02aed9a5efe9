"""The driver (run_chains): thinning and shapes, divergence, adaptation, reproducibility; the ULA
kernel against its exact stationary law on a Gaussian."""

import math
from typing import NamedTuple

import pytest
import torch

from scorebayes.samplers.base import (Adaptation, ChainsDivergedError, Divergence, Kernel, run_chains,
                                      warn_diverged)
from scorebayes.samplers.langevin import run_langevin
from scorebayes.samplers.ula import ULAState, build_kernel, tempering

D64 = torch.float64


class Count(NamedTuple):
    position: torch.Tensor


def counting_kernel(step=1.0, blow_up=None):
    """Adds ``step`` to every chain; chain 0 becomes ``inf`` at step ``blow_up``."""
    calls = []

    def one(state, generator=None):
        x = state.position + step
        calls.append(1)
        if blow_up is not None and len(calls) == blow_up:
            x = x.clone()
            x[0] = math.inf
        return Count(x), None

    return Kernel(Count, one)


def test_draws_have_the_right_shape_and_thinning():
    x0 = torch.zeros(3, 2, dtype=D64)
    draws, state, info = run_chains(counting_kernel(), Count(x0), 10, burn_in=3, thin=2)
    assert draws.shape == (3, 3, 2)  # floor((10 - 3) / 2) draws
    # the states after steps 5, 7 and 9; the trailing tenth step is run but not kept
    assert torch.equal(draws[:, :, 0], torch.tensor([[5.0, 7.0, 9.0]] * 3, dtype=D64))
    assert torch.equal(state.position, torch.full((3, 2), 10.0, dtype=D64))
    assert info.num_steps == 10 and not info.diverged.any() and info.adaptation is None
    empty, _, _ = run_chains(counting_kernel(), Count(x0), 4, burn_in=4)
    assert empty.shape == (3, 0, 2)
    with pytest.raises(ValueError, match=r"\[C, d\]"):
        run_chains(counting_kernel(), Count(torch.zeros(3)), 2)


def test_collect_and_on_step():
    seen = []
    draws, _, _ = run_chains(counting_kernel(), Count(torch.zeros(2, 1)), 4, thin=2,
                             collect=lambda s: s.position[:, 0] * 10,
                             on_step=lambda t, s, i: seen.append((t, float(s.position[0, 0]))))
    assert torch.equal(draws, torch.tensor([[20.0, 40.0]] * 2))
    assert seen == [(0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0)]


def test_adaptation_makes_the_burn_in_steps_only():
    # the adaptation's kernel steps by 100, learns the number of steps; the kept steps add 1
    adapt = Adaptation(init=lambda s: 0, update=lambda a, t, s, i: a + 1,
                       kernel=lambda a: counting_kernel(100.0))
    draws, _, info = run_chains(counting_kernel(), Count(torch.zeros(2, 1)), 5, burn_in=3, adaptation=adapt)
    assert info.adaptation == 3
    assert torch.equal(draws[0, :, 0], torch.tensor([301.0, 302.0]))
    with pytest.raises(ValueError, match="kernel is needed"):
        run_chains(None, Count(torch.zeros(2, 1)), 5, burn_in=3, adaptation=adapt)


def test_a_diverging_chain_is_detected_and_frozen():
    x0 = torch.zeros(4, 2, dtype=D64)
    draws, state, info = run_chains(counting_kernel(blow_up=3), Count(x0), 6, divergence=Divergence())
    assert info.diverged.tolist() == [True, False, False, False]
    assert torch.equal(draws[0, :, 0], torch.tensor([1.0, 2.0, 2.0, 2.0, 2.0, 2.0], dtype=D64))  # last good state
    assert torch.equal(draws[1, :, 0], torch.arange(1.0, 7.0, dtype=D64))
    # run-away (|x| > max_abs) counts too, and too many diverged chains raise
    _, _, info = run_chains(counting_kernel(), Count(x0), 6, divergence=Divergence(max_abs=4.5, max_fraction=1.0))
    assert info.diverged.all()
    with pytest.raises(ChainsDivergedError, match="4 of 4 chains diverged"):
        run_chains(counting_kernel(), Count(x0), 6, divergence=Divergence(max_abs=4.5))
    # no check without a Divergence
    _, state, info = run_chains(counting_kernel(blow_up=3), Count(x0), 6)
    assert not info.diverged.any() and math.isinf(state.position[0, 0])
    with pytest.warns(UserWarning, match="1 of 4 chains diverged"):
        warn_diverged(torch.tensor([False, True, False, False]))


def _ula(prec, mean, step_size):
    lik = lambda u: -(u - mean) * prec  # noqa: E731
    prior = lambda u: torch.zeros_like(u)  # noqa: E731
    return lik, prior, build_kernel(lik, prior, step_size)


def test_same_generator_same_chain():
    _, _, kernel = _ula(torch.tensor([4.0, 1.0], dtype=D64), 0.0, 0.05)
    x0 = torch.zeros(5, 2, dtype=D64)
    a, _, _ = run_chains(kernel, ULAState(x0), 20, burn_in=5, thin=3, generator=torch.Generator().manual_seed(2))
    b, _, _ = run_chains(kernel, ULAState(x0), 20, burn_in=5, thin=3, generator=torch.Generator().manual_seed(2))
    c, _, _ = run_chains(kernel, ULAState(x0), 20, burn_in=5, thin=3, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_run_langevin_is_the_ula_kernel_on_the_driver():
    prec, mean = torch.tensor([4.0, 1.0], dtype=D64), torch.tensor([0.5, -1.0], dtype=D64)
    lik, prior, kernel = _ula(prec, mean, 0.05)
    x0 = torch.randn(6, 2, generator=torch.Generator().manual_seed(0), dtype=D64)
    expected, _ = run_langevin(lik, prior, x0, step_size=0.05, num_draws=4, burn_in=3, thin=2,
                               tempering=(0.2, 0.6), steps_per_stage=5, generator=torch.Generator().manual_seed(1))
    schedule = tempering(lambda w: build_kernel(lik, prior, 0.05, weight=w), (0.2, 0.6), 5, kernel)
    draws, _, info = run_chains(kernel, kernel.init(x0), 10 + 3 + 8, burn_in=13, thin=2, adaptation=schedule,
                                generator=torch.Generator().manual_seed(1))
    assert torch.equal(draws, expected)
    assert info.adaptation == 13


def test_ula_recovers_the_gaussian_mean_and_inflated_variance():
    r"""On :math:`N(m, 1/\lambda)` ULA is the AR(1) chain :math:`u' = m + \rho(u - m) + \sqrt{2\tau}\xi`,
    :math:`\rho = 1 - \tau\lambda`, with stationary variance :math:`\sigma^2 = 1/(\lambda(1-\tau\lambda/2))`.
    Chains start from that law, so the draws are stationary; successive kept draws (every ``thin``
    steps) have correlation :math:`r = \rho^{\mathrm{thin}}`, hence over :math:`n` draws
    :math:`\mathrm{se}(\bar u) = \sigma\sqrt{(1+r)/((1-r)n)}` and
    :math:`\mathrm{se}(\hat\sigma^2) = \sigma^2\sqrt{2(1+r^2)/((1-r^2)n)}` (the AR(1) effective sample
    sizes). With :math:`\tau\lambda = 0.5` in the stiff coordinate the inflation (4/3) is many standard
    errors away from :math:`1/\lambda`, so an unadjusted variance would fail the test."""
    prec, mean, tau = torch.tensor([4.0, 1.0], dtype=D64), torch.tensor([0.5, -1.0], dtype=D64), 0.125
    _, _, kernel = _ula(prec, mean, tau)
    chains, num_draws, thin = 2000, 20, 5
    g = torch.Generator().manual_seed(0)
    sd = (1 / (prec * (1 - tau * prec / 2))).sqrt()
    x0 = mean + sd * torch.randn(chains, 2, generator=g, dtype=D64)
    draws, _, _ = run_chains(kernel, kernel.init(x0), num_draws * thin, thin=thin, generator=g)
    flat = draws.reshape(-1, 2)
    n = flat.shape[0]
    r = (1 - tau * prec) ** thin
    se_mean = sd * ((1 + r) / ((1 - r) * n)).sqrt()
    se_var = sd**2 * (2 * (1 + r**2) / ((1 - r**2) * n)).sqrt()
    assert torch.all((flat.mean(0) - mean).abs() < 4.5 * se_mean)
    assert torch.all((flat.var(0) - sd**2).abs() < 4.5 * se_var)
    assert torch.all((1 / prec - sd**2).abs() > 6 * se_var)  # the check tells the inflation apart


def test_alternating_makes_every_kth_step_with_the_other_kernel():
    """Steps 3, 6, 9 (1-based) are the other kernel's: here it adds 100, the kernel adds 1."""
    from scorebayes.samplers.base import Kernel, alternating, run_chains

    class S(NamedTuple):
        position: torch.Tensor

    def adder(c):
        return Kernel(S, lambda s, g=None: (S(s.position + c), c))

    kernel = alternating(adder(1.0), adder(100.0), 3)
    seen = []
    draws, state, _ = run_chains(kernel, kernel.init(torch.zeros(2, 1)), 9,
                                 on_step=lambda t, s, info: seen.append(info.is_other))
    assert seen == [False, False, True] * 3
    assert draws[0, :, 0].tolist() == [1, 2, 102, 103, 104, 204, 205, 206, 306]
