from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from scipy import optimize

from scorebayes.discrete import (
    CalibrationError, CMPModel, DFDLoss, PoissonModel, TruncatedLikelihoodLoss, beta_star, bootstrap_minimisers,
    calibrate_beta, lyddon_beta, minimise, sample_cmp,
)
from scorebayes.priors import ParameterSpace

D64 = torch.float64


@pytest.fixture(scope="module")
def cmp_problem():
    x = sample_cmp(torch.tensor([4.0, 0.75]), 1000, generator=torch.Generator().manual_seed(0))
    model = CMPModel()
    return model, model.default_prior(), DFDLoss(model, x)


def test_minimise_matches_the_closed_form_poisson_minimiser():
    x = torch.poisson(torch.full((300, 1), 3.0, dtype=D64), generator=torch.Generator().manual_seed(1))
    model = PoissonModel()
    loss = DFDLoss(model, x)
    closed = (x**2).sum() / (x + 1).sum()  # d/dtheta [sum (x/t)^2 - 2 (x+1)/t] = 0
    space = ParameterSpace(model.default_prior())
    for method in ("newton", "adam"):
        theta = minimise(loss, torch.tensor([[0.5]], dtype=D64), space, method=method, num_steps=3000)
        assert theta.item() == pytest.approx(closed.item(), rel=1e-6)


def test_beta_star_is_the_argmin_of_eq_9(cmp_problem):
    model, prior, loss = cmp_problem
    cal = calibrate_beta(loss, prior, num_bootstrap=30, seed=1)
    theta = cal.bootstrap.clone().requires_grad_(True)
    grad_d = torch.autograd.grad(loss(theta).sum(), theta, create_graph=True)[0]
    grad_p = torch.autograd.grad(prior.log_prob(theta).sum(), theta, create_graph=True)[0]
    tr_d = sum(torch.autograd.grad(grad_d[:, i].sum(), theta, retain_graph=True)[0][:, i] for i in range(2))
    tr_p = sum(torch.autograd.grad(grad_p[:, i].sum(), theta, retain_graph=True)[0][:, i] for i in range(2))
    grad_d, grad_p, tr_d, tr_p = (t.detach() for t in (grad_d, grad_p, tr_d, tr_p))

    def objective(beta):  # eq. (9): Hyvarinen score of pi * exp(-beta D_n) at the bootstrap minimisers
        return float((((grad_p - beta * grad_d) ** 2).sum(-1) + 2 * (tr_p - beta * tr_d)).sum())

    res = optimize.minimize_scalar(objective, bounds=(1e-6, 100), method="bounded", options={"xatol": 1e-10})
    assert cal.beta == pytest.approx(res.x, rel=1e-6)
    assert 0.5 < cal.beta < 10
    assert torch.allclose(cal.minimiser, torch.tensor([4.0, 0.75], dtype=D64), rtol=0.15)


def test_beta_star_errors_when_numerator_not_positive(cmp_problem):
    _, prior, _ = cmp_problem
    theta = torch.tensor([[1.0, 2.0], [2.0, 3.0]], dtype=D64)
    with pytest.raises(CalibrationError, match="numerator"):
        beta_star(lambda t: -10 * ((t - 1.5) ** 2).sum(-1), prior, theta)
    with pytest.raises(CalibrationError, match="vanishes"):
        beta_star(lambda t: 0 * t.sum(-1), prior, theta)


def test_bootstrap_does_not_depend_on_the_executor(cmp_problem):
    _, prior, loss = cmp_problem
    start = torch.tensor([4.0, 0.75], dtype=D64)
    serial = bootstrap_minimisers(loss, prior, start, num_bootstrap=6, seed=3)
    with ThreadPoolExecutor(2) as pool:
        pooled = bootstrap_minimisers(loss, prior, start, num_bootstrap=6, seed=3, executor=pool, chunk_size=4)
    assert torch.allclose(serial, pooled, rtol=1e-8)
    assert serial.std(0).min() > 0


def test_lyddon_beta_is_one_for_a_well_specified_likelihood():
    x = torch.poisson(torch.full((4000, 1), 3.0, dtype=D64), generator=torch.Generator().manual_seed(2))
    model = PoissonModel()
    loss = TruncatedLikelihoodLoss(model, x)
    theta_hat = x.mean().reshape(1)
    assert lyddon_beta(loss, theta_hat) == pytest.approx(1.0, abs=0.08)


@pytest.mark.parametrize("kind", ["cmp", "pgm", "cmpgm", "ising-pseudo"])
def test_closed_form_hessian_matches_autograd(kind):
    from scorebayes.discrete import CMPGraphicalModel, IsingModel, PoissonGraphicalModel, PseudoLikelihoodLoss
    from scorebayes.discrete.minimisers import grad_hessian
    from scorebayes.priors import sample

    g = torch.Generator().manual_seed(0)
    if kind == "cmp":
        model = CMPModel()
        loss = DFDLoss(model, sample_cmp(torch.tensor([3.0, 0.8]), 200, generator=g))
    elif kind == "ising-pseudo":
        model = IsingModel(3)
        loss = PseudoLikelihoodLoss(model, 2 * torch.randint(0, 2, (50, 9), generator=g).double() - 1)
    else:
        model = PoissonGraphicalModel(3) if kind == "pgm" else CMPGraphicalModel(3)
        loss = DFDLoss(model, torch.randint(0, 5, (60, 3), generator=g).double())
    prior = model.default_prior()
    space = ParameterSpace(prior)
    u = space.to_unconstrained(sample(prior, 4, generator=g))
    weights = torch.rand(4, loss.rows.shape[0], generator=g, dtype=D64) * 3
    for objective in (loss, loss.reweighted(weights)):
        assert objective.has_closed_form
        closed = grad_hessian(objective, u, space)
        plain = grad_hessian(lambda t, o=objective: o(t), u, space)  # a lambda hides the closed form
        for a, b in zip(closed, plain, strict=True):
            assert torch.allclose(a, b, rtol=1e-8, atol=1e-8)


def test_beta_star_with_a_flat_prior():
    from scorebayes.discrete import BernoulliModel

    model = BernoulliModel()
    x = (torch.rand(300, 1, generator=torch.Generator().manual_seed(0), dtype=D64) < 0.3).double()
    cal = calibrate_beta(DFDLoss(model, x), model.default_prior(), num_bootstrap=20)
    assert cal.beta > 0 and abs(cal.minimiser.item() - x.mean().item()) < 0.1
