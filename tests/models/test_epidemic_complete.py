"""The SI epidemic's complete-data likelihood: hazards against a per-person loop, the score
identities E[score] = 0 and Var(score) = I_C at the truth, and that the identity check fails
on a wrong likelihood."""

import pytest
import torch

from scorebayes.models.epidemic import EpidemicSimulator
from scorebayes.models.epidemic_complete import (CompleteDataLikelihood, complete_data_score,
                                                 hazard_covariates)

F64 = torch.float64
THETA = torch.tensor([0.05, 0.08, 0.14, 0.05], dtype=F64)  # facility, two floors, room


def trajectories(sim, num, seed, theta=THETA):
    z = sim.latent(num, sim.steps, torch.Generator().manual_seed(seed))
    _, X, _ = sim.run(theta.expand(num, -1).clone(), z, return_states=True)
    return X, z[..., 2] < sim.gamma


@pytest.mark.parametrize("room_normalisation", ["capacity", "n"])
def test_hazards_match_a_per_person_loop(room_normalisation):
    sim = EpidemicSimulator(floors=2, steps=5, room_normalisation=room_normalisation)
    infected = (torch.rand(3, sim.size, generator=torch.Generator().manual_seed(0)) < 0.3).double()
    hazard = hazard_covariates(sim, infected) @ THETA
    N, J = sim.size, sim.floors
    cap = 2.0 if room_normalisation == "capacity" else float(N)
    for b in range(3):
        I = infected[b].tolist()
        for i in range(N):
            floor = sum(I[l] for l in range(N) if l % J == i % J)
            room = sum(I[l] for l in range(N) if l % (N // 2) == i % (N // 2))
            expected = THETA[0] * sum(I) / N + THETA[1 + i % J] * floor / 60 + THETA[J + 1] * room / cap
            assert abs(float(hazard[b, i]) - float(expected)) < 1e-12


def test_log_prob_gradient_is_the_score():
    sim = EpidemicSimulator(floors=2)
    X, discharged = trajectories(sim, 2, seed=1)
    score, _ = complete_data_score(sim, THETA, X, discharged)
    for b in range(2):
        likelihood = CompleteDataLikelihood(sim, X[b], discharged[b])
        theta = THETA.clone()[None].requires_grad_(True)
        likelihood.log_prob(theta).sum().backward()
        assert torch.allclose(theta.grad[0], score[b], rtol=1e-10, atol=1e-9)
    assert likelihood.log_prob(torch.tensor([[0.0, 0.0, 0.0, 0.0]], dtype=F64)).item() == -torch.inf


def score_z_and_variance_ratio(sim_data, sim_model, num=400, seed=2):
    X, discharged = trajectories(sim_data, num, seed)
    score, fisher = complete_data_score(sim_model, THETA, X, discharged)
    z = score.mean(0) / (score.std(0) / num**0.5)
    return z, torch.cov(score.T).diagonal() / fisher.diagonal()


def test_score_has_mean_zero_and_variance_the_information_at_the_truth():
    sim = EpidemicSimulator(floors=2)
    z, ratio = score_z_and_variance_ratio(sim, sim)
    # 4 coordinates: |z| < 3.5 fails by chance with probability about 0.002; the variance
    # ratio's Monte Carlo SE is about sqrt(2/400) = 0.07 for a near-Gaussian score
    assert z.abs().max() < 3.5, z
    assert ((ratio - 1).abs() < 0.3).all(), ratio


def test_the_identity_check_fails_on_a_wrong_likelihood():
    # data with the printed beta/n room term, likelihood with beta/2: the room score is biased
    z, _ = score_z_and_variance_ratio(EpidemicSimulator(floors=2, room_normalisation="n"),
                                      EpidemicSimulator(floors=2))
    assert z.abs().max() > 10, z
    # people moved between floors and rooms: every coordinate's score is off
    sim = EpidemicSimulator(floors=2)
    X, discharged = trajectories(sim, 400, seed=3)
    perm = torch.randperm(sim.size, generator=torch.Generator().manual_seed(0))
    score, _ = complete_data_score(sim, THETA, X[:, :, perm], discharged[:, :, perm])
    assert (score.mean(0) / (score.std(0) / 400**0.5)).abs().max() > 10


def test_bad_shapes_are_refused():
    sim = EpidemicSimulator(floors=2)
    X, discharged = trajectories(sim, 2, seed=4)
    with pytest.raises(ValueError, match="one data set at a time"):
        CompleteDataLikelihood(sim, X, discharged)
    with pytest.raises(ValueError, match="must both be"):
        complete_data_score(sim, THETA, X[:, :10], discharged[:, :10])
