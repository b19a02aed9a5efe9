"""Shared steps of the epidemic10 pilots that look at a fit at the truth theta*.

``checks_at_truth``: the score-mean test (1,000 data sets, seed 5) and ``calibrate(at=theta*)``
over 100 data sets (25 chains each, seed 41), printed; the settings every session-57-60 pilot used.
``saved_fit_at_truth``: a fit saved in runs/pilots/ and M data sets simulated at theta* (seed 13),
as the networks see them. ``prior_grad``, ``prior_hessian``, ``learned_modes`` and
``laplace_precision``: the learned posterior's modes and the Laplace curvature there.
"""
from pathlib import Path

import torch

from scorebayes.calibration import calibrate, score_mean_test
from scorebayes.models import get_model
from scorebayes.parallel import make_generator
from scorebayes.scores.losses import evaluate_score

RUNS = Path(__file__).resolve().parents[2] / "runs" / "pilots"


def checks_at_truth(est, model):
    """Print and return (score-mean test, calibration) of ``est`` at ``model.true_parameters``."""
    star = model.true_parameters
    sm = score_mean_test(est, star, 1000, seed=5)
    print(sm.summary(), flush=True)
    cal = calibrate(est, 100, at=star, chains=25, draws_per_chain=20, burn_in=3000, thin=50, seed=41,
                    progress=False)
    print(cal.summary(), flush=True)
    print("mean width", [round(v, 3) for v in cal.width.mean(0).tolist()])
    print("posterior mean", [round(v, 3) for v in cal.posterior_mean.mean(0).tolist()])
    return sm, cal


def saved_fit_at_truth(name: str, num_data_sets: int):
    """``(model, est, u_star [d], views [M, 1, p])`` for the saved fit ``runs/pilots/NAME``."""
    model = get_model("epidemic10")
    est = torch.load(RUNS / name, weights_only=False)
    est.score_net_.eval()
    star = model.true_parameters.to(torch.float64)
    g = make_generator(13, "field-root")
    x = est.simulator(star.expand(num_data_sets, -1).clone(), est.n_obs_, g)
    views = est._table_view(x.to(est.x_obs_.dtype))
    return model, est, est.space.to_unconstrained(star), views


def prior_grad(space, u):
    """:math:`\\nabla_u\\log\\pi_u(u)` for ``u [B, d]``, ``[B, d]``."""
    v = u.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(space.log_prob_unconstrained(v).sum(), v)
    return grad


def prior_hessian(space, u):
    """:math:`\\nabla_u^2\\log\\pi_u(u)` at one ``u [d]``, ``[d, d]``."""
    return torch.autograd.functional.hessian(lambda v: space.log_prob_unconstrained(v[None]).sum(), u)


def learned_modes(net, space, start, views, step_cov, iterations):
    """Each data set's learned posterior mode, the root of s(u, x_b) + grad log pi(u), by damped
    Newton steps u <- u + 0.5 (s + grad log pi) step_cov from ``start [d]``; ``views [B, 1, p]``
    -> ``[B, d]`` (non-finite where the steps diverge)."""
    u = start.expand(len(views), -1).clone()
    for _ in range(iterations):
        with torch.no_grad():
            s = net(u.float()[:, None, :], views)[:, 0].double()
        u = u + 0.5 * (s + prior_grad(space, u)) @ step_cov
    return u


def laplace_precision(net, modes, views, prior_hess):
    """``-sym(dS/du) - prior Hessian`` at each mode, ``[B, d, d]``: the learned curvature's
    symmetric part (the antisymmetric part of a non-gradient field dropped) plus the prior's."""
    J = evaluate_score(net, modes.float(), views, create_graph=False).jacobian.detach().double()
    return -0.5 * (J + J.transpose(-1, -2)) - prior_hess
