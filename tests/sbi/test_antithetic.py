"""Antithetic tables: mirrored pairs, common random numbers, and the variance they remove."""

import torch
from torch.distributions import Normal

from scorebayes.sbi.antithetic import AntitheticProposal, CommonRandomPairs, antithetic_pairs
from scorebayes.parallel import make_generator
from scorebayes.priors import ParameterSpace, independent
from scorebayes.proposal import GaussianProposal, PriorSampler
from scorebayes.scores.losses import implicit_score_matching
from scorebayes.simulators import Simulator
from scorebayes.tables import simulate_table

SIGMA = 1.0


def gaussian_simulator() -> Simulator:
    return Simulator(latent=lambda B, n, g: torch.randn(B, n, 1, generator=g, dtype=torch.float64),
                     transform=lambda theta, z: theta[:, None, :] + SIGMA * z)


def proposal(sd: float = 0.05) -> GaussianProposal:
    space = ParameterSpace(independent([Normal(torch.tensor(0.0, dtype=torch.float64), 3.0)]))
    return GaussianProposal(space, torch.tensor([0.7]), torch.tensor([sd]))


def test_pairs_are_mirrored_and_marginally_q():
    q = proposal(sd=0.5)
    u = AntitheticProposal(q).sample_unconstrained(20_001, make_generator(0, "a"))
    assert u.shape == (20_001, 1)
    assert torch.allclose(u[0:-1:2] + u[1::2], 2 * q.mean.expand(10_000, 1))
    # every row is marginally N(0.7, 0.5^2): mean exact by symmetry, sd within MC error
    assert abs(float(u.std()) - 0.5) < 4 * 0.5 / (2 * 10_000) ** 0.5
    # densities are those of q
    assert torch.equal(AntitheticProposal(q).grad_log_prob_unconstrained(u[:4]),
                       q.grad_log_prob_unconstrained(u[:4]))


def test_common_random_pairs_share_latents_through_a_table():
    q = proposal()
    sim = Simulator(CommonRandomPairs(gaussian_simulator()), validate=False)
    table = simulate_table(sim, AntitheticProposal(q), 1000, 3, seed=1, tag="S", block_size=256, n_data=3)
    noise = table.x[..., 0] - table.theta  # the latent z of each row
    assert torch.allclose(noise[0::2], noise[1::2])
    assert not torch.allclose(noise[0::2][:-1], noise[0::2][1:])  # but differ across pairs


def test_antithetic_pairs_survive_dropped_rows():
    q = proposal()
    u = AntitheticProposal(q).sample_unconstrained(10, make_generator(2))
    kept = torch.cat([u[:3], u[4:]])  # row 3 lost: its partner (row 2) becomes unpaired
    pairs = antithetic_pairs(kept, q.mean)
    assert pairs.tolist() == [[0, 1], [3, 4], [5, 6], [7, 8]]
    assert antithetic_pairs(PriorSampler(independent([Normal(0.0, 1.0)])).sample(10, make_generator(3)),
                            torch.zeros(1)).shape == (0, 2)


def test_pairs_cancel_the_proposal_term_of_the_loss():
    r"""For the true score, the ISM loss of a pair has (almost) no s^T grad log q noise.

    Gaussian location family with a tight proposal (sd 0.05, so |grad log q| ~ 20): the
    per-pair mean loss of an antithetic table must vary far less than the mean of two iid rows.
    """
    q = proposal(sd=0.05)
    num = 20_000

    def pair_means(sampler, simulator) -> torch.Tensor:
        table = simulate_table(simulator, sampler, num, 1, seed=4, tag="S", block_size=256, n_data=1)
        u = table.theta
        s = (table.x[:, 0, :] - u) / SIGMA**2  # true score s(u, x)
        jac = torch.full((num, 1, 1), -1.0 / SIGMA**2, dtype=torch.float64)
        rows = implicit_score_matching(s, jac, q.grad_log_prob_unconstrained(u))
        return rows.reshape(-1, 2).mean(1)

    iid = pair_means(q, gaussian_simulator())
    paired = pair_means(AntitheticProposal(q), Simulator(CommonRandomPairs(gaussian_simulator()),
                                                         validate=False))
    # same expectation (both unbiased for the same loss), within MC error
    se = (iid.var() / len(iid) + paired.var() / len(paired)).sqrt()
    assert abs(float(iid.mean() - paired.mean())) < 4 * float(se)
    assert float(paired.var()) < 0.05 * float(iid.var())
