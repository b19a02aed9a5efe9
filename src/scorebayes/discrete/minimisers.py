r"""Row-separable minimisers in the unconstrained space of a prior: saddle-free Newton and Adam.

``objective(theta [B, k]) -> [B]`` is a batch of ``B`` independent problems (e.g. bootstrap
losses) minimised together in $u = T^{-1}(\theta)$ (the bijection of
[`ParameterSpace`][scorebayes.priors.ParameterSpace]).

**Newton** (default). With $g$ and $H = Q\Lambda Q^\top$ the gradient and
(symmetrised) Hessian of a row at $u_t$, and the floor
$\lambda_{\min} = 10^{-10}\max_i|\lambda_i| + 10^{-300}$, the saddle-free step has
coefficients along the eigenvectors $q_i$

$$
c_i = -\frac{q_i^\top g}{\max(|\lambda_i|, \lambda_{\min})}, \qquad
c_i \leftarrow -\operatorname{sign}(q_i^\top g)\,\max(|c_i|, \epsilon)
\ \text{ if } \lambda_i < -\lambda_{\min}
$$

(negative curvature is descended, by at least $\epsilon = 10^{-2}$, so saddles such as
squared parameters stuck at 0 are left), $\delta = Qc$. The trust region caps every
coordinate of the step at ``max_step`` $s$,

$$
\delta \leftarrow \delta\,\min\bigl(1, s/\|\delta\|_\infty\bigr),
$$

and the step length is damped: $\alpha = 1, \tfrac12, \tfrac14, \dots$ (at most 40 halvings)
until the Armijo condition $f(u_t + \alpha\delta) \le f(u_t) + 10^{-4}\alpha\,g^\top\delta$
holds, then $u_{t+1} = u_t + \alpha\delta$.

**Adam** (the paper's choice): elementwise Adam at ``lr``, decaying geometrically to
``lr * final_lr_ratio`` over ``num_steps`` steps.

**Status and escape rule.** Each row carries a status: ``CONVERGED = 0`` (no coordinate moves
more than ``tol``, or no further decrease), ``NOT_CONVERGED = 1`` (still moving after the
budget), ``NON_FINITE = 2`` (value, gradient or Hessian not finite; frozen at its last finite
point) and ``ESCAPED = 3``: a row is frozen once

$$
\|u_t - u_0\|_\infty > \texttt{max\_distance},
$$

i.e. it ran away from its start (typically where the objective is unbounded below, e.g. a CMP
dispersion going to infinity). Flagged rows never affect the other rows.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 3.3
      <https://arxiv.org/abs/2206.08420>
    - Identifying and attacking the saddle point problem in high-dimensional non-convex
      optimization (Dauphin, Pascanu, Gulcehre, Cho, Ganguli and Bengio, 2014)
      <https://arxiv.org/abs/1406.2572>
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..priors import ParameterSpace

__all__ = ["minimise", "grad_hessian", "CONVERGED", "NOT_CONVERGED", "NON_FINITE", "ESCAPED"]


def grad_hessian(objective: Callable[[Tensor], Tensor], u: Tensor,
                  space: ParameterSpace | None = None) -> tuple[Tensor, Tensor, Tensor]:
    r"""Value ``[B]``, gradient ``[B, k]`` and Hessian ``[B, k, k]`` of ``objective(T(u))`` for separable rows.

    Losses with closed-form derivatives in the natural parameters (``has_closed_form``) use
    $H_u = J^\top H_\eta J + \nabla^2_u(g_\eta\cdot\eta(T(u)))$, with the Jacobian
    $J$ of the small map $u \mapsto \eta(T(u))$ by autograd; other losses use
    autograd throughout (one backward pass per parameter).
    """
    to_theta = space.to_constrained if space is not None else (lambda v: v)
    k = u.shape[1]
    with torch.enable_grad():
        u = u.detach().clone().requires_grad_(True)
        if getattr(objective, "has_closed_form", False):
            eta = objective.model.natural_parameters(to_theta(u))
            value, g_eta, h_eta = objective.natural_derivatives(eta.detach())
            jac = torch.stack([torch.autograd.grad(eta[:, q].sum(), u, retain_graph=True, allow_unused=True,
                                                   materialize_grads=True)[0] for q in range(eta.shape[1])], 1)
            (grad,) = torch.autograd.grad((eta * g_eta).sum(), u, create_graph=True)
            extra = torch.einsum("bqi,bqr,brj->bij", jac, h_eta, jac)
        else:
            value = objective(to_theta(u))
            (grad,) = torch.autograd.grad(value.sum(), u, create_graph=True)
            extra = 0
        if not grad.requires_grad:  # linear in u
            return value.detach(), grad.detach(), extra + torch.zeros(*u.shape, k, dtype=u.dtype)
        rows = [torch.autograd.grad(grad[:, i].sum(), u, retain_graph=True, allow_unused=True,
                                    materialize_grads=True)[0] for i in range(k)]
    return value.detach(), grad.detach(), (extra + torch.stack(rows, dim=1)).detach()


CONVERGED, NOT_CONVERGED, NON_FINITE, ESCAPED = 0, 1, 2, 3  # per-row status codes of the minimisers


def _newton(objective: Callable[[Tensor], Tensor], u: Tensor, space: ParameterSpace, max_iter: int,
            tol: float, escape: float = 1e-2, max_step: float = math.inf,
            max_distance: float = math.inf) -> tuple[Tensor, Tensor]:
    """Saddle-free Newton with a backtracking line search and a trust region, per row.

    Direction $-|H|^{-1} g$ (the Hessian with absolute, floored eigenvalues, so negative
    curvature is descended too, with a step of at least ``escape`` along negative-curvature
    directions so that saddle points are left), shortened to at most ``max_step`` in every
    coordinate; step length halved until the Armijo condition holds. A row is ``CONVERGED``
    while none of its coordinates moves more than ``tol`` or it cannot decrease its objective any
    more; such rows no longer keep the loop running (they still take its remaining, negligible
    steps, so that without flagged rows the result is that of the shared stopping rule "no
    coordinate of any row moves more than ``tol``", bit for bit). A row is frozen and flagged
    when its value, gradient or Hessian is not finite (``NON_FINITE``, kept at its last finite
    point) or when it moves more than ``max_distance`` from its start in some coordinate
    (``ESCAPED``: the objective is then
    usually unbounded below). Rows still moving after ``max_iter`` iterations are
    ``NOT_CONVERGED``.

    Returns:
        ``(u [B, k], status [B])`` (int64 codes above).
    """
    start = u
    status = torch.full((u.shape[0],), NOT_CONVERGED, dtype=torch.int64)
    for _ in range(max_iter):
        value, grad, hess = grad_hessian(objective, u, space)
        bad = ~(torch.isfinite(value) & torch.isfinite(grad).all(-1) & torch.isfinite(hess).flatten(1).all(-1))
        status = torch.where(bad & (status <= NOT_CONVERGED), NON_FINITE, status)
        if not bool((status == NOT_CONVERGED).any()):
            break
        active = status <= NOT_CONVERGED  # converged rows keep stepping, flagged rows are frozen
        grad = torch.where(active[:, None], grad, 0.0)
        hess = torch.where(active[:, None, None], hess, torch.eye(u.shape[1], dtype=u.dtype))
        value = torch.where(active, value, 0.0)
        evals, evecs = torch.linalg.eigh(0.5 * (hess + hess.transpose(1, 2)))
        floor = 1e-10 * evals.abs().max(-1, keepdim=True).values + 1e-300
        proj = torch.einsum("bji,bj->bi", evecs, grad)
        coef = -proj / evals.abs().clamp(min=floor)
        # escape saddles (e.g. squared parameters stuck at 0): a step of at least `escape` along
        # negative-curvature directions, downhill (or either way when the gradient vanishes)
        sign = torch.where(proj > 0, -1.0, 1.0).to(coef.dtype)
        coef = torch.where(evals < -floor, sign * coef.abs().clamp(min=escape), coef)
        direction = torch.einsum("bij,bj->bi", evecs, coef)
        if math.isfinite(max_step):  # the trust region
            longest = direction.abs().max(-1, keepdim=True).values
            direction = direction * (max_step / longest.clamp(min=max_step))
        direction = torch.where(active[:, None], direction, 0.0)
        slope = (grad * direction).sum(-1).clamp(max=0)
        alpha = torch.ones_like(value)
        done = ~active
        moved_ok = torch.zeros_like(active)
        new_u = u
        for _ in range(40):
            candidate = u + alpha[:, None] * direction
            with torch.no_grad():
                new = objective(space.to_constrained(candidate))
            ok = ~done & torch.isfinite(new) & (new <= value + 1e-4 * alpha * slope)
            new_u = torch.where(ok[:, None], candidate, new_u)
            moved_ok |= ok
            done |= ok
            if bool(done.all()):
                break
            alpha = torch.where(done, alpha, alpha / 2)
        moved = (new_u - u).abs().max(-1).values
        u = new_u
        still = moved_ok & (moved >= tol)  # rows that keep the loop running (as a shared stopping rule)
        escaped = active & ((u - start).abs().max(-1).values > max_distance)
        status = torch.where(escaped, ESCAPED,
                             torch.where(active, torch.where(still, NOT_CONVERGED, CONVERGED), status))
        if not bool((status == NOT_CONVERGED).any()):
            break
    return u, status


def _adam(objective: Callable[[Tensor], Tensor], u: Tensor, num_steps: int, lr: float, final_lr_ratio: float,
          tol: float, check_every: int, max_distance: float) -> tuple[Tensor, Tensor]:
    """Adam in the unconstrained space (elementwise, so row-separable); rows frozen as in `_newton()`."""
    start = u.clone()
    status = torch.full((u.shape[0],), NOT_CONVERGED, dtype=torch.int64)
    u = u.clone().requires_grad_(True)
    opt = torch.optim.Adam([u], lr=lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, final_lr_ratio ** (1.0 / max(num_steps, 1)))
    last = u.detach().clone()
    for step in range(num_steps):
        opt.zero_grad()
        before = u.detach().clone()
        value = objective(u)
        value.sum().backward()
        bad = ~(torch.isfinite(value.detach()) & torch.isfinite(u.grad).all(-1))
        status = torch.where(bad & (status == NOT_CONVERGED), NON_FINITE, status)
        u.grad = torch.where((status == NOT_CONVERGED)[:, None], u.grad, 0.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            frozen = status != NOT_CONVERGED
            u.copy_(torch.where(frozen[:, None], before, u))
            escaped = ~frozen & ((u - start).abs().max(-1).values > max_distance)
            status = torch.where(escaped, ESCAPED, status)
        if (step + 1) % check_every == 0:
            if float(((u.detach() - last).abs().max(-1).values * (status == NOT_CONVERGED)).max()) < tol:
                status = torch.where(status == NOT_CONVERGED, CONVERGED, status)  # a shared stopping rule
                break
            last = u.detach().clone()
    return u.detach(), status


def minimise(objective: Callable[[Tensor], Tensor], theta0: Tensor, space: ParameterSpace, *,
             method: str = "newton", num_steps: int = 200, lr: float = 0.1, tol: float = 1e-9,
             final_lr_ratio: float = 1e-2, check_every: int = 100, max_step: float = math.inf,
             max_distance: float = math.inf, return_status: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    r"""Minimise ``objective(theta [B, k]) -> [B]`` separately for each row, in the unconstrained space.

    The rows are independent problems solved together. ``method="newton"`` (default) is a
    saddle-free damped Newton method with autograd Hessians (robust in the curved valleys
    of the CMP loss; ``num_steps`` iterations at most; each step at most ``max_step`` in every
    unconstrained coordinate). ``method="adam"`` is the paper's choice:
    Adam at ``lr``, decaying geometrically to ``lr * final_lr_ratio`` over ``num_steps`` steps
    (Adam is elementwise, so the batch equals ``B`` separate runs). Both stop once no coordinate
    moves more than ``tol``.

    A row whose objective or gradient becomes non-finite, or which moves more than
    ``max_distance`` from its start in some unconstrained coordinate, is frozen and flagged
    (status ``NON_FINITE = 2`` / ``ESCAPED = 3``; ``CONVERGED = 0``, ``NOT_CONVERGED = 1``); the
    other rows are unaffected.

    Returns:
        ``theta [B, k]`` (detached, float64), or ``(theta, status [B])`` with ``return_status``.

    Raises:
        FloatingPointError: without ``return_status``, if a row became non-finite.
    """
    if method not in ("newton", "adam"):
        raise ValueError(f"method must be 'newton' or 'adam', got {method!r}")
    for label, bound in (("max_step", max_step), ("max_distance", max_distance)):
        if not bound > 0:
            raise ValueError(f"{label} must be positive (math.inf: no bound), got {bound!r}")
    u = space.to_unconstrained(theta0.detach().to(torch.float64)).clone()
    if method == "newton":
        u, status = _newton(objective, u, space, num_steps, tol, max_step=max_step, max_distance=max_distance)
    else:
        u, status = _adam(lambda v: objective(space.to_constrained(v)), u, num_steps, lr, final_lr_ratio, tol,
                          check_every, max_distance)
    theta = space.to_constrained(u).detach()
    if return_status:
        return theta, status
    bad = torch.nonzero(status == NON_FINITE).flatten().tolist()
    if bad:
        raise FloatingPointError(f"non-finite loss or gradient during minimisation (rows {bad}"
                                 + ("; try a smaller lr)" if method == "adam" else ")"))
    return theta
