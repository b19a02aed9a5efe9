import math

import pytest
import torch

from scorebayes.samplers.acceptance import LearnedRule
from scorebayes.samplers.mh import build_kernel, run
from scorebayes.samplers.proposals import LangevinProposal, PCNProposal, RandomWalkProposal
from scorebayes.scoremh.acceptance_net import AcceptanceNet
from scorebayes.scoremh.sbm import (
    alpha_schedule,
    negative_entropy,
    sbm_loss,
    sbm_residual,
    train_acceptance,
    training_pairs,
)

VAR = torch.tensor([0.5, 2.0], dtype=torch.float64)  # anisotropic: the MALA Jacobian is not a multiple of I


def log_p(x):
    return -0.5 * (x**2 / VAR).sum(-1)


def score(x):
    return -x / VAR


PROPOSALS = {
    "rw": lambda: RandomWalkProposal(0.8),
    "mala": lambda: LangevinProposal(score, 0.3),
    "pcn": lambda: PCNProposal(0.5),
}


def exact_log_accept(prop, lp=log_p):
    def log_a(x_to, x_from):
        return (lp(x_to) - lp(x_from) + prop.log_prob(x_from, x_to) - prop.log_prob(x_to, x_from)).clamp(max=0)

    return log_a


def pairs(prop, generator, n=400):
    x = VAR.sqrt() * torch.randn(n, 2, generator=generator, dtype=torch.float64)
    return x, prop.sample(x, score(x), generator=generator)


@pytest.mark.parametrize("name", PROPOSALS)
def test_sbm_loss_zero_for_exact_mh_and_positive_when_perturbed(name, generator):
    prop = PROPOSALS[name]()
    x, xp = pairs(prop, generator)
    kw = dict(score=score, proposal=prop, lam=0.0, clip=None, create_graph=False)
    loss, _ = sbm_loss(exact_log_accept(prop), x, xp, **kw)
    assert float(loss) < 1e-20
    # perturbed acceptance (the ratio of a different Gaussian) -> positive loss
    wrong = exact_log_accept(prop, lambda x: -0.5 * (x**2 / (1.3 * VAR)).sum(-1))
    assert float(sbm_loss(wrong, x, xp, **kw)[0]) > 0.05
    # a perturbed score with the exact acceptance -> positive loss too
    assert float(sbm_loss(exact_log_accept(prop), x, xp, **{**kw, "score": lambda z: 1.2 * score(z)})[0]) > 0.05


def test_gradient_layout_needs_swapped_slots(generator):
    # the exact rule gives zero only if the second term swaps the network's slots
    prop = PROPOSALS["mala"]()
    x, xp = pairs(prop, generator)
    log_a = exact_log_accept(prop)
    good, _ = sbm_residual(log_a, x, xp, score=score, proposal=prop, clip=None, create_graph=False)
    bad, _ = sbm_residual(lambda a, b: log_a(b, a), x, xp, score=score, proposal=prop, clip=None,
                          create_graph=False)
    assert good.abs().max() < 1e-10 and bad.abs().max() > 0.1


def test_clipping_bounds_every_block(generator):
    prop = RandomWalkProposal(0.01)  # huge proposal gradients
    x, xp = pairs(prop, generator, n=50)
    res, _ = sbm_residual(lambda a, b: 100.0 * (a - b).sum(-1), x, xp, score=lambda z: 1e3 * z,
                          proposal=prop, clip=10.0, create_graph=False)
    assert res.abs().max() <= 6 * 10.0 + 1e-9


def test_negative_entropy():
    a = torch.tensor([0.5, 0.9, 1e-9, 1.0], dtype=torch.float64)
    h = negative_entropy(a.log())
    assert h[0] == pytest.approx(-math.log(2))
    assert h[1] == pytest.approx(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert torch.isfinite(h).all() and h.max() <= 0


def test_alpha_schedule_and_pairs(generator):
    alphas = alpha_schedule(10)
    assert alphas[0] == pytest.approx(0.1) and alphas[4] == pytest.approx(1.0) and alphas[-1] == 1.0
    assert all(b >= a for a, b in zip(alphas, alphas[1:], strict=False))
    data = torch.randn(100, 2, generator=generator)
    prop = RandomWalkProposal(1.0)
    x, xp = training_pairs(data, 32, prop, 0.0, pairing="coupled", generator=generator)
    torch.testing.assert_close(x, xp)  # alpha = 0 keeps x' on the data point itself
    x, xp = training_pairs(data, 32, prop, 0.0, pairing="independent", generator=generator)
    assert not torch.allclose(x, xp)
    with pytest.raises(ValueError, match="pairing"):
        training_pairs(data, 4, prop, 0.5, pairing="cartesian")


def test_acceptance_net_head():
    net = AcceptanceNet(2, 16, 2)
    x = torch.randn(5, 2)
    with torch.no_grad():
        net.output.bias.fill_(-200.0)  # huge negative logits: log a stays finite
        net.output.weight.zero_()
        assert torch.allclose(net.log_accept(x, x), torch.full((5,), -200.0))
        literal = AcceptanceNet(2, 16, 2, final_gelu=True)
        literal.output.bias.fill_(-5.0)
        literal.output.weight.zero_()
        assert torch.all(literal(x, x) > 0.45)  # the paper's literal head cannot go below ~0.458
    with pytest.raises(ValueError, match="inputs"):
        net.log_accept(torch.randn(5, 3), torch.randn(5, 3))


def test_learned_acceptance_approaches_exact_on_1d_gaussian():
    """SBM with the true score of N(0, 1), RW proposal: the learned net satisfies detailed balance.

    SBM identifies a only up to the detailed-balance family; with the entropy term it lands near
    Barker's r / (1 + r). The ratio form min{1, a(x',x) / a(x,x')} then recovers min(1, r).
    """
    g = torch.Generator().manual_seed(0)
    prop = RandomWalkProposal(1.0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = AcceptanceNet(1, 32, 2)
    data = torch.randn(4000, 1, generator=g)
    history = train_acceptance(net.log_accept, net.parameters(), data, score=lambda z: -z, proposal=prop,
                               n_epochs=500, batch_size=256, lr=3e-3, lam=0.5, generator=g)
    assert history[-1]["balance"] < 0.05
    x = torch.randn(2000, 1, generator=g)
    xp = prop.sample(x, generator=g)
    log_r = -0.5 * (xp**2 - x**2).squeeze(-1)
    with torch.no_grad():
        fwd, bwd = net.log_accept(xp, x), net.log_accept(x, xp)
    assert ((fwd - bwd) - log_r).pow(2).mean().sqrt() < 0.1  # detailed balance
    exact = log_r.clamp(max=0).exp()
    ratio_form = (fwd - bwd).clamp(max=0).exp()
    assert (ratio_form - exact).abs().mean() < 0.03
    assert (fwd.exp() - torch.sigmoid(log_r)).abs().mean() < 0.05  # direct form ~ Barker
    # and the chain with the learned (direct) rule keeps N(0, 1)
    kernel = build_kernel(prop, LearnedRule(net.log_accept))
    draws, _ = run(kernel, torch.randn(4000, 1, generator=g), 40, generator=g)
    last = draws[:, -1, 0]
    assert abs(float(last.mean())) < 4.5 / math.sqrt(4000)
    assert abs(float(last.var()) - 1) < 4.5 * math.sqrt(2 / 4000)
