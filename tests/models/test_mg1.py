"""M/G/1 queue: simulator contract, plain-loop cross-checks, gradients, support."""

import math
import pickle

import numpy as np
import pytest
import torch

from scorebayes.models import MG1, get_model
from scorebayes.models.mg1 import queue_features


def loop_queue(theta1, theta2, theta3, U, V):
    """Paper's recursion x_k = u_k + max(0, sum_{j<=k} w_j - sum_{j<=k-1} x_j), one queue at a time."""
    out = np.empty_like(U)
    for i in range(U.shape[0]):
        u = theta1 + (theta2 - theta1) * U[i]
        w = -np.log(V[i]) / theta3
        xs = []
        for k in range(U.shape[1]):
            xs.append(u[k] + max(0.0, w[: k + 1].sum() - sum(xs)))
        out[i] = xs
    return out


def test_contract_and_reproducibility():
    model = get_model("mg1")
    assert model.parameter_names == ["theta1", "theta2_minus_theta1", "theta3"]
    assert model.reported_names == ["theta1", "theta2", "theta3"]
    assert torch.allclose(model.true_parameters, torch.tensor([1.0, 4.0, 0.2], dtype=torch.float64))
    assert torch.allclose(model.to_reported(model.true_parameters),
                          torch.tensor([1.0, 5.0, 0.2], dtype=torch.float64))
    assert model.n_obs == 500 and model.obs_dim == 5
    theta = torch.tensor([[1.0, 4.0, 0.2], [0.5, 1.0, 0.4]], dtype=torch.float64)
    x1 = model.simulator(theta, 50, torch.Generator().manual_seed(1))
    x2 = model.simulator(theta, 50, torch.Generator().manual_seed(1))
    x3 = model.simulator(theta, 50, torch.Generator().manual_seed(2))
    assert x1.shape == (2, 50, 5) and x1.dtype == torch.float64
    assert torch.equal(x1, x2) and not torch.equal(x1, x3)
    assert (x1[0] >= 1.0).all()  # every gap is at least one service time
    pickle.dumps(model.simulator)
    assert model.prior.log_prob(model.true_parameters).isfinite()
    assert model.summary_fn(x1).shape == (2, 10)


def test_transform_matches_plain_loop_on_same_latents():
    model = MG1()
    g = torch.Generator().manual_seed(0)
    U, V = model.simulator.latent(1, 200, g)
    x = model.simulator.transform(torch.tensor([[1.0, 4.0, 0.2]], dtype=torch.float64), (U, V))
    ref = loop_queue(1.0, 5.0, 0.2, U[0].numpy(), V[0].numpy())
    np.testing.assert_allclose(x[0].numpy(), ref, rtol=1e-12, atol=1e-12)


def test_moments_match_independent_plain_loop():
    """Batched simulator vs an independent numpy loop with its own RNG: means/SDs within MC error."""
    model = MG1()
    n = 20_000
    x = model.simulator(torch.tensor([[1.0, 4.0, 0.2]], dtype=torch.float64), n,
                        torch.Generator().manual_seed(3))[0].numpy()
    rng = np.random.default_rng(4)
    ref = loop_queue(1.0, 5.0, 0.2, rng.uniform(size=(n, 5)), 1.0 - rng.uniform(size=(n, 5)))
    for k in range(5):
        se = math.sqrt(x[:, k].var() / n + ref[:, k].var() / n)
        assert abs(x[:, k].mean() - ref[:, k].mean()) < 4 * se
        assert abs(x[:, k].std() - ref[:, k].std()) < 0.05 * ref[:, k].std()
    # first gap = service + first inter-arrival: mean 3 + 5 = 8
    assert abs(x[:, 0].mean() - 8.0) < 4 * x[:, 0].std() / math.sqrt(n)


def test_transform_gradient_matches_finite_differences():
    model = MG1()
    z = model.simulator.latent(1, 30, torch.Generator().manual_seed(5))
    phi = torch.tensor([[1.0, 4.0, 0.2]], dtype=torch.float64, requires_grad=True)
    weights = torch.randn(1, 30, 5, generator=torch.Generator().manual_seed(6), dtype=torch.float64)

    def f(p):
        return (model.simulator.transform(p, z) * weights).sum()

    (grad,) = torch.autograd.grad(f(phi), phi)
    assert grad.abs().sum() > 0
    eps = 1e-6
    for k in range(3):
        e = torch.zeros_like(phi)
        e[0, k] = eps
        fd = (f(phi.detach() + e) - f(phi.detach() - e)) / (2 * eps)
        assert torch.allclose(grad[0, k], fd, rtol=1e-5, atol=1e-6)


def test_support_is_data_dependent_box():
    model = MG1()
    x = model.observed(torch.Generator().manual_seed(0))
    low, high = model.support(x)
    assert torch.equal(low, torch.zeros(3, dtype=torch.float64))
    assert high[0] == x.min() and high[0] >= 1.0 and high[1] == 10.0 and high[2] == 0.5
    assert model.from_reported(model.to_reported(model.true_parameters)).equal(model.true_parameters)
    with pytest.raises(ValueError):
        model.simulator(torch.ones(3), 5)


def test_queue_features_are_order_statistics_and_departure_times():
    """Against the textbook queue: departure k = max(arrival k, departure k-1) + service k."""
    model = MG1()
    U, V = model.simulator.latent(1, 100, torch.Generator().manual_seed(3))
    x = model.simulator.transform(torch.tensor([[1.0, 4.0, 0.2]], dtype=torch.float64), (U, V))[0]
    service, arrivals = 1.0 + 4.0 * U[0].numpy(), np.cumsum(-np.log(V[0].numpy()) / 0.2, axis=-1)
    departures = np.empty_like(service)
    for i in range(len(service)):
        last = 0.0
        for k in range(service.shape[1]):
            last = departures[i, k] = max(arrivals[i, k], last) + service[i, k]
    features = queue_features(x)
    assert features.shape == (100, 10)
    np.testing.assert_allclose(features[:, 5:].numpy(), departures, rtol=1e-12)
    np.testing.assert_array_equal(features[:, :5].numpy(), np.sort(x.numpy(), axis=-1))
    with pytest.raises(ValueError, match=r"inter-departure times \[\.\.\., k\]"):
        queue_features(torch.zeros(3, 0))
