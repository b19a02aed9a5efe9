r"""Calibration of the loss weight :math:`\beta` of a generalised posterior :math:`\pi(\theta)e^{-\beta D_n(\theta)}`.

Section 3.3 of the paper: (i) compute minimisers :math:`\theta_n^{(b)}` of :math:`B` bootstrap
losses :math:`D_n^{(b)}` (data resampled with replacement; warm-started from the full-data
minimiser; embarrassingly parallel through an executor); (ii) fit :math:`\beta` by Hyvärinen
score matching of :math:`\pi_{n,\beta}` to the bootstrap minimisers (eq. 9), which is
quadratic in :math:`\beta` with the closed-form minimiser (Theorem 2, eq. 10)

.. math::
    \beta_* = \frac{\sum_b \nabla D_n(\theta_n^{(b)})\cdot\nabla\log\pi(\theta_n^{(b)})
    + \operatorname{Tr}\nabla^2 D_n(\theta_n^{(b)})}{\sum_b\|\nabla D_n(\theta_n^{(b)})\|^2},

with :math:`D_n` the **full-data** loss (METHODS.md V.B1), gradients and Hessian traces by
autograd, in the parametrisation of the prior. For comparison, Lyddon et al.'s
:math:`\beta_L = \operatorname{tr}(JI^+J^\top)/\operatorname{tr}(J)` at the full-data minimiser,
:math:`J = \nabla^2D_n/n`, :math:`I = \frac1n\sum_i\nabla\ell_i\nabla\ell_i^\top`.

A loss is any object with ``__call__(theta [B, k]) -> [B]``, ``reweighted(row_weights [B, m])``,
``per_row(theta) -> [B, m]``, ``row_counts [m]`` and ``n`` (the DFD, KSD, pseudo-likelihood
and truncated-likelihood losses of this package).

References:
    | Generalised Bayesian Inference for Discrete Intractable Likelihood
    | (Matsubara, Knoblauch, Briol and Oates, 2023), Section 3.3, Theorem 2
    | https://arxiv.org/abs/2206.08420 (seed file 003_6360ec15413368be.txt)
    | General Bayesian updating and the loss-likelihood bootstrap (Lyddon, Holmes and Walker, 2019)
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, as_completed
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.distributions import Distribution
from tqdm.auto import tqdm

from ..parallel import derive_seed, make_generator, map_units
from ..priors import ParameterSpace
from ..priors import sample as sample_prior

__all__ = ["minimise", "bootstrap_weights", "bootstrap_minimisers", "beta_star", "lyddon_beta",
           "CalibrationError", "Calibration", "calibrate_beta", "persisting"]


class CalibrationError(ValueError):
    """The closed-form beta* is not defined (zero gradients or a non-positive numerator)."""


class Calibration(NamedTuple):
    """Result of :func:`calibrate_beta`: ``beta``, the full-data minimiser ``[k]``,
    the bootstrap minimisers ``[B, k]`` and the numerator/denominator of eq. (10)."""

    beta: float
    minimiser: Tensor
    bootstrap: Tensor
    numerator: float
    denominator: float


def _grad_hessian(objective: Callable[[Tensor], Tensor], u: Tensor,
                  space: ParameterSpace | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Value ``[B]``, gradient ``[B, k]`` and Hessian ``[B, k, k]`` of ``objective(T(u))`` for separable rows.

    Losses with closed-form derivatives in the natural parameters (``has_closed_form``) use
    :math:`H_u = J^\\top H_\\eta J + \\nabla^2_u(g_\\eta\\cdot\\eta(T(u)))`, with the Jacobian
    :math:`J` of the small map :math:`u \\mapsto \\eta(T(u))` by autograd; other losses use
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


def _newton(objective: Callable[[Tensor], Tensor], u: Tensor, space: ParameterSpace, max_iter: int,
            tol: float, escape: float = 1e-2) -> Tensor:
    """Saddle-free Newton with a backtracking line search, per row.

    Direction :math:`-|H|^{-1} g` (the Hessian with absolute, floored eigenvalues, so negative
    curvature is descended too, with a step of at least ``escape`` along negative-curvature
    directions so that saddle points are left); step length halved until the Armijo condition holds. Stops when
    no coordinate moves more than ``tol`` (or no row can decrease its objective any more).
    """
    for _ in range(max_iter):
        value, grad, hess = _grad_hessian(objective, u, space)
        if not bool(torch.isfinite(grad).all() and torch.isfinite(hess).all()):
            raise FloatingPointError("non-finite loss gradient during minimisation")
        evals, evecs = torch.linalg.eigh(0.5 * (hess + hess.transpose(1, 2)))
        floor = 1e-10 * evals.abs().max(-1, keepdim=True).values + 1e-300
        proj = torch.einsum("bji,bj->bi", evecs, grad)
        coef = -proj / evals.abs().clamp(min=floor)
        # escape saddles (e.g. squared parameters stuck at 0): a step of at least `escape` along
        # negative-curvature directions, downhill (or either way when the gradient vanishes)
        sign = torch.where(proj > 0, -1.0, 1.0).to(coef.dtype)
        coef = torch.where(evals < -floor, sign * coef.abs().clamp(min=escape), coef)
        direction = torch.einsum("bij,bj->bi", evecs, coef)
        slope = (grad * direction).sum(-1).clamp(max=0)
        alpha = torch.ones_like(value)
        done = torch.zeros_like(value, dtype=torch.bool)
        new_u = u
        for _ in range(40):
            candidate = u + alpha[:, None] * direction
            with torch.no_grad():
                new = objective(space.to_constrained(candidate))
            ok = ~done & torch.isfinite(new) & (new <= value + 1e-4 * alpha * slope)
            new_u = torch.where(ok[:, None], candidate, new_u)
            done |= ok
            if bool(done.all()):
                break
            alpha = torch.where(done, alpha, alpha / 2)
        moved = float(((new_u - u).abs().max(-1).values * done).max())
        u = new_u
        if moved < tol or not bool(done.any()):
            break
    return u


def minimise(objective: Callable[[Tensor], Tensor], theta0: Tensor, space: ParameterSpace, *,
             method: str = "newton", num_steps: int = 200, lr: float = 0.1, tol: float = 1e-9,
             final_lr_ratio: float = 1e-2, check_every: int = 100) -> Tensor:
    r"""Minimise ``objective(theta [B, k]) -> [B]`` separately for each row, in the unconstrained space.

    The rows are independent problems solved together. ``method="newton"`` (default) is a
    Levenberg-Marquardt damped Newton method with autograd Hessians (robust in the curved valleys
    of the CMP loss; ``num_steps`` iterations at most). ``method="adam"`` is the paper's choice:
    Adam at ``lr``, decaying geometrically to ``lr * final_lr_ratio`` over ``num_steps`` steps
    (Adam is elementwise, so the batch equals ``B`` separate runs). Both stop once no coordinate
    moves more than ``tol``.

    Returns:
        ``theta [B, k]`` (detached, float64).
    """
    if method not in ("newton", "adam"):
        raise ValueError(f"method must be 'newton' or 'adam', got {method!r}")
    u = space.to_unconstrained(theta0.detach().to(torch.float64)).clone()

    def in_u(v: Tensor) -> Tensor:
        return objective(space.to_constrained(v))

    if method == "newton":
        return space.to_constrained(_newton(objective, u, space, num_steps, tol))
    u.requires_grad_(True)
    opt = torch.optim.Adam([u], lr=lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, final_lr_ratio ** (1.0 / max(num_steps, 1)))
    last = u.detach().clone()
    for step in range(num_steps):
        opt.zero_grad()
        in_u(u).sum().backward()
        if not bool(torch.isfinite(u.grad).all()):
            raise FloatingPointError("non-finite loss gradient during minimisation (try a smaller lr)")
        opt.step()
        sched.step()
        if (step + 1) % check_every == 0:
            if float((u.detach() - last).abs().max()) < tol:
                break
            last = u.detach().clone()
    return space.to_constrained(u.detach())


def bootstrap_weights(row_counts: Tensor, indices: range | list[int], seed: int) -> Tensor:
    r"""Resampling counts ``[len(indices), m]``: ``n`` draws with replacement from the data.

    Replicate ``b`` uses its own generator ``derive_seed(seed, "bootstrap", b)``, so the weights
    do not depend on how replicates are grouped into tasks.
    """
    n = int(row_counts.sum())
    out = []
    for b in indices:
        g = make_generator(seed, "bootstrap", b)
        idx = torch.multinomial(row_counts, n, replacement=True, generator=g)
        out.append(torch.bincount(idx, minlength=row_counts.numel()).to(torch.float64))
    return torch.stack(out)


def _bootstrap_unit(unit: tuple) -> Tensor:
    loss, prior, theta_full, indices, seed, opts = unit
    weights = bootstrap_weights(loss.row_counts, indices, seed)
    theta0 = theta_full.reshape(1, -1).expand(len(indices), -1)
    return minimise(loss.reweighted(weights), theta0, ParameterSpace(prior), **opts)


class _Persist:
    """Where completed bootstrap tasks are kept (a run store) and how many were reused."""

    def __init__(self, store: Any):
        self.store, self.resumed, self.computed = store, 0, 0


_PERSIST: contextvars.ContextVar[_Persist | None] = contextvars.ContextVar(
    "scorebayes_bootstrap_store", default=None)


@contextlib.contextmanager
def persisting(store: Any) -> Iterator[_Persist | None]:
    """Inside this block :func:`bootstrap_minimisers` saves every completed task of
    replicates to ``store`` (a :class:`~scorebayes.store.RunStore`, atomically) and reuses
    the saved ones, so an interrupted calibration resumes to the same bits. Yields a record
    with ``resumed`` / ``computed`` replicate counts (``store=None``: no-op, yields None)."""
    record = _Persist(store) if store is not None else None
    token = _PERSIST.set(record)
    try:
        yield record
    finally:
        _PERSIST.reset(token)


def bootstrap_minimisers(loss: Any, prior: Distribution, theta_full: Tensor, *, num_bootstrap: int = 100,
                         seed: int = 0, executor: Executor | None = None, chunk_size: int | None = None,
                         method: str = "newton", num_steps: int = 200, lr: float = 0.1,
                         final_lr_ratio: float = 1e-2, tol: float = 1e-9, progress: bool = False) -> Tensor:
    r"""Minimisers ``[B, k]`` of ``B`` bootstrap losses, warm-started at ``theta_full [k]``.

    With ``executor=None`` all replicates run as one vectorised batch; otherwise they are split
    into tasks of ``chunk_size`` replicates (default: 8 tasks) sent to the executor (the loss and
    prior must then be picklable). Each replicate has its own resampling seed; the minimiser's
    stopping rule is shared by the rows of a task, so the grouping can change the last bits.

    Inside :func:`persisting` (``scorebayes run --out DIR``) the replicates are always cut
    into tasks of ``chunk_size`` (default: 8 tasks, whatever the executor, so the result does
    not depend on it), each completed task is saved as ``arrays/bootstrap/<first>.npy`` and
    reused on a re-run: bit-identical to an uninterrupted run.
    """
    if isinstance(num_bootstrap, bool) or not isinstance(num_bootstrap, int) or num_bootstrap < 1:
        raise ValueError(f"num_bootstrap must be a positive integer, got {num_bootstrap!r}")
    persist = _PERSIST.get()
    if chunk_size is None:
        chunk_size = num_bootstrap if executor is None and persist is None else max(1, -(-num_bootstrap // 8))
    opts = {"method": method, "num_steps": num_steps, "lr": lr, "final_lr_ratio": final_lr_ratio, "tol": tol}
    units = [(loss, prior, theta_full, list(range(s, min(s + chunk_size, num_bootstrap))), seed, opts)
             for s in range(0, num_bootstrap, chunk_size)]
    if persist is None:
        parts = map_units(_bootstrap_unit, units, executor=executor, progress=progress, desc="bootstrap")
        return torch.cat(parts, dim=0)
    return torch.cat(_persisted_units(persist, units, executor, progress), dim=0)


def _persisted_units(persist: _Persist, units: list[tuple], executor: Executor | None,
                     progress: bool) -> list[Tensor]:
    """Run the bootstrap ``units`` not yet in the store, saving each one as it completes."""
    store = persist.store
    _, _, theta_full, _, seed, opts = units[0]
    recipe = {"tasks": [u[3][0] for u in units], "replicates": sum(len(u[3]) for u in units),
              "seed": int(seed), "options": opts,
              "theta_full": hashlib.sha256(theta_full.to(torch.float64).numpy().tobytes()).hexdigest()}
    old = store.load_json("bootstrap/recipe")
    if old is not None and old != json.loads(json.dumps(recipe)):
        raise ValueError(f"{store.path} holds bootstrap replicates of another calibration; "
                         "re-run with --fresh (fresh=True) to start over")
    if old is None:
        store.save_json("bootstrap/recipe", recipe)
    parts: dict[int, Tensor] = {}
    for i, unit in enumerate(units):
        if store.has_array(f"bootstrap/{unit[3][0]:06d}"):
            parts[i] = torch.from_numpy(store.load_array(f"bootstrap/{unit[3][0]:06d}", mmap=False))
            persist.resumed += len(unit[3])
    todo = [i for i in range(len(units)) if i not in parts]

    bar = tqdm(total=len(todo), desc="bootstrap", disable=not progress, leave=False)

    def keep(i: int, result: Tensor) -> None:
        store.save_array(f"bootstrap/{units[i][3][0]:06d}", result)
        parts[i] = result
        persist.computed += len(units[i][3])
        bar.update(1)

    try:
        if executor is None:
            for i in todo:
                keep(i, _bootstrap_unit(units[i]))
        else:
            futures = {executor.submit(_bootstrap_unit, units[i]): i for i in todo}
            try:
                for future in as_completed(futures):
                    keep(futures[future], future.result())
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        bar.close()
    return [parts[i] for i in range(len(units))]


def beta_star(loss: Callable[[Tensor], Tensor], prior: Distribution, theta_boot: Tensor) -> tuple[float, float, float]:
    r"""The closed-form :math:`\beta_*` of eq. (10) at the bootstrap minimisers ``theta_boot [B, k]``.

    Returns:
        ``(beta, numerator, denominator)``.

    Raises:
        CalibrationError: if all gradients vanish or the numerator is not positive.
    """
    _, grad, hess = _grad_hessian(loss, theta_boot.detach().to(torch.float64))
    trace = hess.diagonal(dim1=1, dim2=2).sum(-1)
    with torch.enable_grad():
        theta = theta_boot.detach().to(torch.float64).clone().requires_grad_(True)
        log_prior = prior.log_prob(theta).sum()
        grad_prior = (torch.autograd.grad(log_prior, theta)[0] if log_prior.requires_grad
                      else torch.zeros_like(theta))  # a flat prior
    num = float((grad * grad_prior).sum() + trace.sum())
    den = float((grad**2).sum())
    if not (den > 0):
        raise CalibrationError("beta* is undefined: the loss gradient vanishes at every bootstrap minimiser")
    if not (num > 0):
        raise CalibrationError(f"beta* is undefined: the numerator of eq. (10) is {num:.4g} <= 0 "
                               "(the loss is not locally convex at the bootstrap minimisers); "
                               "fix beta by hand instead")
    return num / den, num, den


def lyddon_beta(loss: Any, theta_hat: Tensor) -> float:
    r"""Lyddon et al.'s :math:`\beta_L = \operatorname{tr}(JI^+J^\top)/\operatorname{tr}(J)` at ``theta_hat [k]``."""
    theta = theta_hat.detach().to(torch.float64).reshape(1, -1)
    n = loss.n
    hess = torch.autograd.functional.hessian(lambda t: loss(t[None])[0], theta[0]) / n
    jac = torch.autograd.functional.jacobian(lambda t: loss.per_row(t[None])[0], theta[0], vectorize=True)  # [m, k]
    info = (loss.row_counts[:, None, None] * jac[:, :, None] * jac[:, None, :]).sum(0) / n
    return float(torch.trace(hess @ torch.linalg.pinv(info) @ hess.T) / torch.trace(hess))


def calibrate_beta(loss: Any, prior: Distribution, *, num_bootstrap: int = 100, theta_init: Tensor | None = None,
                   seed: int = 0, executor: Executor | None = None, method: str = "newton",
                   init_steps: int = 200, init_lr: float = 0.1, steps: int = 200, lr: float = 0.1,
                   final_lr_ratio: float = 1e-2, tol: float = 1e-9, progress: bool = False) -> Calibration:
    r"""Full-data minimiser (from ``theta_init`` or a prior draw), bootstrap minimisers and :math:`\beta_*`.

    ``method="newton"`` (default) needs few iterations and finds the exact minimisers. The
    paper's settings use ``method="adam"`` at a constant rate (``final_lr_ratio=1``): CMP 50,000
    full-data steps at lr 0.1 then 5,000 warm-started steps per replicate; Ising 5,000/5,000 at
    0.01; graphical models 50,000/10,000 at 0.001. A constant rate leaves the bootstrap
    "minimisers" jittering around the true ones, which inflates the gradients in the
    denominator of eq. (10) and lowers :math:`\beta_*` (CMP, over-dispersed data: by a factor
    of about 0.6; see ``benchmarks/results/dfd_cmp.md``). ``final_lr_ratio`` and ``tol`` (stop
    once no coordinate moves more than ``tol`` over 100 steps; ``0`` runs every step, as the
    paper) apply to both phases.

    Eq. (10) is a ratio of sums over replicates and is dominated by replicates whose minimiser
    lies far from the full-data one. The DFD loss of CMP models is unbounded below as a
    dispersion grows (the largest count drives it), so a bootstrap replicate can leave the
    basin of the full-data minimiser: Newton then follows it (``FloatingPointError``, or a
    non-positive numerator), while the paper's fixed Adam budget stops part-way, which inflates
    the denominator. For the CMP graphical model on brca_10 this is the whole difference between
    the paper's 0.9971 and about 2.7 with exact minimisers on the same resamples
    (``benchmarks/results/dfd_brca.md``).
    """
    for label, value in (("num_bootstrap", num_bootstrap), ("init_steps", init_steps), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if method not in ("newton", "adam"):
        raise ValueError(f"method must be 'newton' or 'adam', got {method!r}")
    space = ParameterSpace(prior)
    if theta_init is None:
        theta_init = sample_prior(prior, 1, generator=make_generator(seed, "init")).to(torch.float64)
    theta_init = torch.as_tensor(theta_init, dtype=torch.float64).reshape(1, -1)
    theta_full = minimise(loss, theta_init, space, method=method, num_steps=init_steps, lr=init_lr,
                          final_lr_ratio=final_lr_ratio, tol=tol)[0]
    boot = bootstrap_minimisers(loss, prior, theta_full, num_bootstrap=num_bootstrap,
                                seed=derive_seed(seed, "bootstrap"), executor=executor,
                                method=method, num_steps=steps, lr=lr, final_lr_ratio=final_lr_ratio,
                                tol=tol, progress=progress)
    beta, num, den = beta_star(loss, prior, boot)
    return Calibration(beta, theta_full, boot, num, den)
