import math

import pytest
import torch

from scorebayes.samplers.proposals import LangevinProposal, PCNProposal, RandomWalkProposal
from scorebayes.scoremh.sbm import sbm_residual


def nonlinear_score(x):
    # score of a non-Gaussian density (log p = -x^4/4 - x^2/2 summed), Jacobian not a multiple of I
    return -(x**3) - x + 0.3 * torch.roll(x, 1, dims=-1)


PROPOSALS = [
    lambda: RandomWalkProposal(0.7),
    lambda: LangevinProposal(nonlinear_score, 0.2),
    lambda: PCNProposal(0.4),
]


def _normalised_log_q(prop, x_to, x_from):
    """log q(x_to | x_from) with the Gaussian normalising constant, by torch.distributions."""
    if isinstance(prop, RandomWalkProposal):
        mean, sd = x_from, prop.step_size
    elif isinstance(prop, LangevinProposal):
        mean, sd = x_from + prop.step_size * nonlinear_score(x_from), math.sqrt(2 * prop.step_size)
    else:
        mean, sd = prop.rho * x_from, prop.step_size
    return torch.distributions.Normal(mean, sd).log_prob(x_to).sum(-1)


@pytest.mark.parametrize("make", PROPOSALS)
def test_log_prob_matches_gaussian_up_to_constant(make, generator):
    prop = make()
    x = torch.randn(50, 3, generator=generator, dtype=torch.float64)
    xp = prop.sample(x, nonlinear_score(x), generator=generator)
    ours = prop.log_prob(xp, x) - prop.log_prob(x, xp)
    ref = _normalised_log_q(prop, xp, x) - _normalised_log_q(prop, x, xp)
    torch.testing.assert_close(ours, ref)


@pytest.mark.parametrize("make", PROPOSALS)
def test_grads_match_autograd(make, generator):
    prop = make()
    x_from = torch.randn(20, 3, generator=generator, dtype=torch.float64).requires_grad_(True)
    x_to = torch.randn(20, 3, generator=generator, dtype=torch.float64).requires_grad_(True)
    lq = prop.log_prob(x_to, x_from).sum()
    ref_from, ref_to = torch.autograd.grad(lq, (x_from, x_to))
    d_from, d_to = prop.grads(x_to.detach(), x_from.detach())
    torch.testing.assert_close(d_from, ref_from)
    torch.testing.assert_close(d_to, ref_to)


def test_pcn_proposal_terms_reduce_to_x_minus_xprime(generator):
    # METHODS.md III.4: -grad log q(x|x') + grad log q(x'|x) = (x, -x') for pCN
    prop = PCNProposal(0.3)
    x = torch.randn(40, 2, generator=generator, dtype=torch.float64)
    xp = prop.sample(x, generator=generator)

    def zero_log_accept(x_to, x_from):
        return 0.0 * (x_to.sum(-1) + x_from.sum(-1))

    residual, _ = sbm_residual(zero_log_accept, x, xp, score=torch.zeros_like, proposal=prop, clip=None,
                               create_graph=False)
    torch.testing.assert_close(residual, torch.cat([x, -xp], dim=-1))


def test_random_walk_terms_cancel(generator):
    prop = RandomWalkProposal(0.5)
    x = torch.randn(10, 2, generator=generator, dtype=torch.float64)
    xp = prop.sample(x, generator=generator)
    residual, _ = sbm_residual(lambda a, b: 0.0 * (a.sum(-1) + b.sum(-1)), x, xp, score=torch.zeros_like,
                               proposal=prop, clip=None, create_graph=False)
    torch.testing.assert_close(residual, torch.zeros_like(residual))


def test_same_seed_same_proposal():
    prop = LangevinProposal(nonlinear_score, 0.1)
    x = torch.zeros(5, 2)
    a = prop.sample(x, generator=torch.Generator().manual_seed(3))
    b = prop.sample(x, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b)


def test_per_chain_step_sizes(generator):
    steps = torch.tensor([[0.1], [0.4]], dtype=torch.float64)
    prop = LangevinProposal(nonlinear_score, steps)
    x = torch.randn(2, 3, generator=generator, dtype=torch.float64)
    xp = prop.sample(x, generator=generator)
    for c in range(2):
        single = LangevinProposal(nonlinear_score, float(steps[c]))
        torch.testing.assert_close(prop.log_prob(xp, x)[c], single.log_prob(xp[c:c + 1], x[c:c + 1])[0])


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_bad_step_sizes(bad):
    with pytest.raises(ValueError, match="positive"):
        RandomWalkProposal(bad)
    with pytest.raises(ValueError):
        PCNProposal(1.5)


def test_random_walk_with_a_shape_matches_the_multivariate_normal(generator):
    L = torch.linalg.cholesky(torch.tensor([[1.0, 0.8, 0.0], [0.8, 2.0, 0.3], [0.0, 0.3, 0.5]],
                                           dtype=torch.float64))
    prop = RandomWalkProposal(torch.full((40, 1), 0.6, dtype=torch.float64), L)
    x = torch.randn(40, 3, generator=generator, dtype=torch.float64)
    xp = prop.sample(x, generator=generator)
    ref = torch.distributions.MultivariateNormal(x, scale_tril=0.6 * L).log_prob(xp)
    const = ref - prop.log_prob(xp, x)
    torch.testing.assert_close(const, const[:1].expand(40))  # equal up to a position-free constant
    x_from, x_to = x.clone().requires_grad_(True), xp.clone().requires_grad_(True)
    d_from, d_to = torch.autograd.grad(prop.log_prob(x_to, x_from).sum(), (x_from, x_to))
    got_from, got_to = prop.grads(xp, x)
    torch.testing.assert_close(got_from, d_from)
    torch.testing.assert_close(got_to, d_to)
    steps = RandomWalkProposal(1.0, L).sample(torch.zeros(20000, 3, dtype=torch.float64), generator=generator)
    torch.testing.assert_close(steps.T.cov(), L @ L.T, atol=0.06, rtol=0.0)
