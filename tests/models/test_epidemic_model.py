"""SI epidemic: vectorised simulator vs a plain per-individual loop, smooth transform, contract."""

import math
import pickle

import numpy as np
import pytest
import torch

from scorebayes.models import Epidemic, get_model
from scorebayes.models.epidemic import EpidemicSimulator


def loop_epidemic(beta, z, J, alpha, gamma, eta, room_cap, detection):
    """One facility, person by person (Chatha et al.'s rules), on the latents z [T, N, 4]."""
    T, N = z.shape[0], z.shape[1]
    F = [i % J for i in range(N)]
    R = [i % (N // 2) for i in range(N)]
    X = np.zeros((T, N))
    Y = np.zeros((T, N))
    for i in range(N):
        X[0, i] = Y[0, i] = float(z[0, i, 0] < alpha)
    for t in range(1, T):
        I = X[t - 1]
        total = 0.0
        floor_inf = [0.0] * J
        room_inf = [0.0] * (N // 2)
        for i in range(N):
            total += I[i]
            floor_inf[F[i]] += I[i]
            room_inf[R[i]] += I[i]
        for i in range(N):
            hazard = (beta[0] * total / N + beta[1 + F[i]] * floor_inf[F[i]] / 60
                      + beta[J + 1] * room_inf[R[i]] / room_cap)
            p = 1.0 - math.exp(-hazard)
            x_new = 1.0 if I[i] == 1 else float(z[t, i, 0] < p)
            infected = x_new if detection == "current" else I[i]
            if Y[t - 1, i] == 1:
                y_new = 1.0
            else:
                y_new = 1.0 if (infected == 1 and z[t, i, 1] < eta) else 0.0
            if z[t, i, 2] < gamma:
                X[t, i] = Y[t, i] = float(z[t, i, 3] < alpha)
            else:
                X[t, i], Y[t, i] = x_new, y_new
    S = np.zeros((T, J + 2))
    for t in range(T):
        S[t, 0] = Y[t].mean()
        for j in range(J):
            S[t, 1 + j] = np.mean([Y[t, i] for i in range(N) if F[i] == j])
        both = [Y[t, r] * Y[t, r + N // 2] for r in range(N // 2)]
        S[t, J + 1] = np.mean(both)
    return S, X, Y


@pytest.mark.parametrize(("floors", "room", "detection"),
                         [(5, "capacity", "current"), (5, "n", "previous"), (10, "capacity", "current")])
def test_vectorised_equals_plain_loop(floors, room, detection):
    sim = EpidemicSimulator(floors=floors, steps=20, room_normalisation=room, detection=detection,
                            eta=0.3)
    theta = torch.tensor([[0.3] + [0.2] * floors + [0.5], [0.05] + [0.1] * floors + [0.05]],
                         dtype=torch.float64)
    z = sim.latent(2, 20, torch.Generator().manual_seed(floors))
    S, X, Y = sim.run(theta, z, return_states=True)
    cap = 2.0 if room == "capacity" else float(60 * floors)
    for b in range(2):
        S_ref, X_ref, Y_ref = loop_epidemic(theta[b].tolist(), z[b].double().numpy(), floors,
                                            0.1, 0.05, 0.3, cap, detection)
        assert np.array_equal(X[b].numpy(), X_ref) and np.array_equal(Y[b].numpy(), Y_ref)
        np.testing.assert_allclose(S[b].numpy(), S_ref, atol=1e-12)
        assert Y_ref.sum() > 20 and (X_ref >= Y_ref).all()  # non-trivial; observed implies infected
    assert torch.equal(S, sim.transform(theta, z))


def test_contract_reproducibility_and_chunking():
    model = get_model("epidemic5", chunk_size=3)
    assert model.dim == 7 and model.n_obs == 52 and model.obs_dim == 7
    assert model.parameter_names[0] == "beta_facility" and model.parameter_names[-1] == "beta_room"
    assert torch.allclose(model.true_parameters,
                          torch.tensor([0.05, 0.02, 0.04, 0.06, 0.08, 0.10, 0.05], dtype=torch.float64))
    assert float(model.prior.marginals[0].scale) == 1.0
    theta = model.true_parameters[None].repeat(5, 1)
    x1 = model.simulator(theta, 52, torch.Generator().manual_seed(0))
    x2 = model.simulator(theta, 52, torch.Generator().manual_seed(0))
    assert x1.shape == (5, 52, 7) and x1.dtype == torch.float64 and torch.equal(x1, x2)
    assert ((x1 >= 0) & (x1 <= 1)).all()
    # chunked simulate == transform of latents drawn chunk by chunk
    g = torch.Generator().manual_seed(0)
    sim = model.epidemic_simulator
    ref = torch.cat([sim.transform(c, sim.latent(c.shape[0], 52, g)) for c in theta.split(3)])
    assert torch.equal(x1, ref)
    assert model.summary_fn(x1).shape == (5, 14)
    assert model.observed(torch.Generator().manual_seed(1)).shape == (52, 7)
    pickle.dumps(model.simulator)
    with pytest.raises(ValueError, match="T=52"):
        model.simulator(theta, 10)
    with pytest.raises(ValueError, match="room_normalisation"):
        Epidemic(room_normalisation="rooms")


def test_setting2():
    model = get_model("epidemic10")
    assert model.dim == 12 and model.epidemic_simulator.size == 600
    assert float(model.prior.marginals[0].scale) == 2.0 and float(model.prior.marginals[0].loc) == -3.0
    assert torch.allclose(model.true_parameters[6:11],
                          torch.tensor([0.12, 0.14, 0.16, 0.18, 0.20], dtype=torch.float64))
    assert model.paper_settings["n_model"]["N"] == 20_000


def test_smooth_transform_is_differentiable_and_close():
    sim = EpidemicSimulator(floors=5, steps=52)
    theta0 = torch.tensor([[0.05, 0.02, 0.04, 0.06, 0.08, 0.10, 0.05]], dtype=torch.float64)
    z = sim.latent(8, 52, torch.Generator().manual_seed(4))
    theta = theta0.repeat(8, 1).requires_grad_(True)
    smooth = sim.smooth_transform(theta, z)
    hard = sim.transform(theta.detach(), z)
    assert (smooth - hard).abs().mean() < 0.02  # the same epidemic, blurred
    weights = torch.randn(smooth.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)

    def f(t):
        return (sim.smooth_transform(t, z[:1]) * weights[:1]).sum()

    (grad,) = torch.autograd.grad(f(theta[:1]), theta)
    assert torch.isfinite(grad).all() and grad[0].abs().sum() > 0
    eps = 1e-7
    for k in (0, 3, 6):
        e = torch.zeros_like(theta0)
        e[0, k] = eps
        fd = (f(theta0 + e) - f(theta0 - e)) / (2 * eps)
        assert torch.allclose(grad[0, k], fd, rtol=1e-3, atol=1e-4)
