"""ScoreNet.score_and_jacobian (forward mode) against autograd: values and training gradients."""

import pytest
import torch
from torch import nn

from scorebayes.scores import losses
from scorebayes.scores.losses import curvature_penalty, evaluate_score, implicit_score_matching
from scorebayes.scores.networks import ScoreNet


def _autograd(net, theta, x):
    """The reference: evaluate_score's autograd path (d backward passes, double backward)."""
    leaf = theta.detach().requires_grad_(True)
    per_obs = net(leaf[:, None, :], x)
    total = per_obs.sum(1)
    return per_obs, losses.jacobian(total, leaf, create_graph=True)


def _net(activation, hidden, seed=0):
    torch.manual_seed(seed)
    net = ScoreNet(3, 4, hidden, activation).double()
    g = torch.Generator().manual_seed(seed + 1)
    # non-trivial standardisation, so the theta scale enters the chain rule and the output
    net.fit_standardisation(2.0 + 3.0 * torch.randn(500, 3, generator=g, dtype=torch.float64),
                            -1.0 + 0.5 * torch.randn(500, 4, generator=g, dtype=torch.float64))
    return net


def _data(m, seed=5):
    g = torch.Generator().manual_seed(seed)
    theta = 2.0 + 3.0 * torch.randn(6, 3, generator=g, dtype=torch.float64)
    x = -1.0 + 0.5 * torch.randn(6, m, 4, generator=g, dtype=torch.float64)
    return theta, x


@pytest.mark.parametrize("activation", ["tanh", "elu", "relu", "silu", "softplus"])
@pytest.mark.parametrize("hidden", [(16,), (16, 8, 8)])
@pytest.mark.parametrize("m", [1, 7])
def test_values_match_autograd(activation, hidden, m):
    net = _net(activation, hidden)
    theta, x = _data(m)
    per_obs, jac = net.score_and_jacobian(theta, x)
    ref_obs, ref_jac = _autograd(net, theta, x)
    torch.testing.assert_close(per_obs, ref_obs, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(jac, ref_jac, rtol=1e-9, atol=1e-10)
    assert float(jac.detach().abs().max()) > 1e-4  # far above atol: not a comparison of zeros


@pytest.mark.parametrize("activation", ["tanh", "elu", "silu"])
def test_training_gradients_match_autograd(activation):
    """The loss of a training step (ISM + curvature penalty) has the same parameter gradients."""
    net = _net(activation, (16, 8))
    theta, x = _data(5)
    grad_log_p = torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(9))

    def loss_grads(per_obs, jac):
        loss = implicit_score_matching(per_obs.sum(1), jac, grad_log_p).mean() \
            + 0.3 * curvature_penalty(per_obs, jac).mean()
        return torch.autograd.grad(loss, list(net.parameters()))

    fast = loss_grads(*net.score_and_jacobian(theta, x))
    slow = loss_grads(*_autograd(net, theta, x))
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_evaluate_score_uses_forward_mode_and_falls_back():
    theta, x = _data(4)
    net = _net("tanh", (16,))
    ev = evaluate_score(net, theta, x)
    ref_obs, ref_jac = _autograd(net, theta, x)
    torch.testing.assert_close(ev.jacobian, ref_jac)
    torch.testing.assert_close(ev.total, ref_obs.sum(1))
    assert ev.jacobian.requires_grad  # differentiable for training
    assert not evaluate_score(net, theta, x, create_graph=False).jacobian.requires_grad
    gelu = _net("gelu", (16,))  # no closed-form derivative here: autograd path, same values
    assert gelu.score_and_jacobian(theta, x) is None
    ev = evaluate_score(gelu, theta, x)
    torch.testing.assert_close(ev.jacobian, _autograd(gelu, theta, x)[1])


def test_linear_net_without_hidden_layers_falls_back():
    net = ScoreNet(3, 4, (), "tanh").double()
    theta, x = _data(2)
    assert net.score_and_jacobian(theta, x) is None
    assert isinstance(net.rest[0], nn.Linear)
    ev = evaluate_score(net, theta, x)
    torch.testing.assert_close(ev.jacobian, _autograd(net, theta, x)[1])
