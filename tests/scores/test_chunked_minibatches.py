"""Minibatches evaluated in chunks of rows (TrainingSchedule.chunk_observations) train the same net.

The n-model's minibatch loss mean_b [l_b + lambda pen_b] is a sum over rows, so evaluating it in
chunks and accumulating the gradients must give the same steps as one piece, up to float rounding.
"""

import pytest
import torch

from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_score_network


def _n_model_table(num=48, m=10, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    theta = 2.0 * torch.randn(num, d, generator=g, dtype=torch.float64)
    x = theta[:, None, :] + torch.randn(num, m, d, generator=g, dtype=torch.float64)
    return theta, x, -theta / 4.0  # grad log N(0, 2^2)


def _train(chunk, penalties=(0.0,), weight_fn=None):
    theta, x, grad = _n_model_table()
    torch.manual_seed(0)
    net = ScoreNet(2, 2, (16,), "tanh").double()
    report = fit_score_network(
        net, theta, x, grad, penalties=penalties, weight_fn=weight_fn,
        schedule=TrainingSchedule(epochs=3, penalty_epochs=2, batch_size=16, patience=10, lr=(1e-2, 1e-3),
                                  chunk_observations=chunk),
        generator=torch.Generator().manual_seed(1))
    return net, report


@pytest.mark.parametrize("penalties", [(0.0,), (0.5,)])
@pytest.mark.parametrize("chunk", [10, 30, 1000])  # 1, 3 and all 16 rows of m = 10 per chunk
def test_chunked_minibatches_train_the_same_net_as_one_piece(chunk, penalties):
    whole, whole_report = _train(None, penalties)
    chunked, chunked_report = _train(chunk, penalties)
    assert chunked_report.history == pytest.approx(whole_report.history, rel=1e-10)
    for (name, a), b in zip(whole.state_dict().items(), chunked.state_dict().values()):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-12), name
    # and the training moved the net (the comparison is not between two untrained nets)
    torch.manual_seed(0)
    untrained = ScoreNet(2, 2, (16,), "tanh").double()
    assert not torch.allclose(next(untrained.parameters()), next(whole.parameters()))

def test_chunked_minibatches_with_a_weight_function():
    def box_weight(theta, x):  # distance to the box |theta_j| <= 6, per coordinate
        return (6.0 - theta.abs()).clamp_min(0.0)

    whole, _ = _train(None, weight_fn=box_weight)
    chunked, _ = _train(20, weight_fn=box_weight)
    for a, b in zip(whole.parameters(), chunked.parameters()):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("bad", [0, -5])
def test_chunk_observations_must_be_positive(bad):
    with pytest.raises(ValueError, match="chunk_observations must be a positive integer or None"):
        TrainingSchedule(chunk_observations=bad)
