"""ScoreNet.sum_over_observations: the chain-batched drift equals the plain per-pair sum."""

import pytest
import torch

from scorebayes.scores.networks import ScoreNet


@pytest.mark.parametrize("hidden,activation", [((64, 64, 64), "elu"), ((16,), "tanh"), ((8, 8), "elu")])
@pytest.mark.parametrize("max_elements", [1, 5 * 16 * 3, 2**18])
def test_sum_over_observations_equals_the_sum_of_forward_passes(hidden, activation, max_elements):
    """Chunks of one chain, of a few chains (7 chains do not divide into them) and all chains at
    once; the sum over observations taken before the affine last layer gives the same drift."""
    torch.manual_seed(0)
    net = ScoreNet(3, 2, hidden, activation)
    net.fit_standardisation(torch.randn(50, 3) * 2 + 1, torch.randn(50, 2) * 3)
    chains, data = torch.randn(7, 3), torch.randn(16, 2)
    with torch.no_grad():
        fast = net.sum_over_observations(chains, data, max_elements=max_elements)
        slow = net(chains[:, None, :], data[None]).sum(1)
    assert fast.shape == (7, 3)
    assert torch.allclose(fast, slow, rtol=1e-5, atol=1e-5)


def test_sum_over_observations_without_data_and_in_double_precision():
    torch.manual_seed(1)
    net = ScoreNet(2, 1, (8,), "elu").double()
    chains = torch.randn(4, 2, dtype=torch.float64)
    with torch.no_grad():
        empty = net.sum_over_observations(chains, torch.zeros(0, 1, dtype=torch.float64))
        data = torch.randn(9, 1, dtype=torch.float64)
        fast = net.sum_over_observations(chains, data, max_elements=8 * 9)
        slow = net(chains[:, None, :], data[None]).sum(1)
    assert torch.equal(empty, torch.zeros(4, 2, dtype=torch.float64))
    assert torch.allclose(fast, slow, rtol=1e-12, atol=1e-12)
