"""A fixed number of random curvature groups per step (TrainingSchedule.penalty_groups).

On a large grouped table D^R the default penalty step visits N_R / steps groups (every group once
per epoch); ``penalty_groups`` bounds it to a few random groups per step. Either way the penalty
must act: after the same epochs, a net trained with a large curvature weight has a far smaller
curvature penalty over all of D^R than the same schedule with a negligible weight.
"""

import pytest
import torch

from scorebayes.scores.losses import curvature_penalty, evaluate_score
from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_score_network


def _tables(seed=0):
    """x | theta ~ N(theta, 1) in 2-D; D^S: 400 single observations, D^R: 60 groups of 25."""
    g = torch.Generator().manual_seed(seed)
    theta = 2.0 * torch.randn(400, 2, generator=g, dtype=torch.float64)
    x = theta[:, None, :] + torch.randn(400, 1, 2, generator=g, dtype=torch.float64)
    theta_r = 2.0 * torch.randn(60, 2, generator=g, dtype=torch.float64)
    x_r = theta_r[:, None, :] + torch.randn(60, 25, 2, generator=g, dtype=torch.float64)
    return theta, x, -theta / 4.0, theta_r, x_r


def _train(penalty, groups):
    theta, x, grad, theta_r, x_r = _tables()
    torch.manual_seed(0)
    net = ScoreNet(2, 2, (16,), "tanh").double()
    fit_score_network(
        net, theta, x, grad, penalties=(penalty,), curvature_theta=theta_r, curvature_x=x_r,
        schedule=TrainingSchedule(epochs=2, penalty_epochs=6, batch_size=40, patience=50,
                                  lr=(1e-2, 1e-3), penalty_groups=groups),
        generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ev = evaluate_score(net, theta_r, x_r, create_graph=False)
    return net, float(curvature_penalty(ev.per_observation, ev.jacobian).mean())


@pytest.mark.parametrize("groups", [None, 2])
def test_the_penalty_acts_with_all_or_a_few_groups_per_step(groups):
    _, without = _train(1e-12, groups)  # same schedule, negligible weight
    _, with_penalty = _train(30.0, groups)
    assert with_penalty < 0.3 * without, (with_penalty, without)


def test_a_few_groups_per_step_is_another_optimisation_path():
    all_groups, _ = _train(30.0, None)
    two_groups, _ = _train(30.0, 2)
    assert not torch.allclose(next(all_groups.parameters()), next(two_groups.parameters()))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_penalty_groups_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="penalty_groups must be a positive integer or None"):
        TrainingSchedule(penalty_groups=bad)
