r"""Calibration of the loss weight $\beta$ of a generalised posterior $\pi(\theta)e^{-\beta D_n(\theta)}$.

Section 3.3 of the paper: (i) compute minimisers $\theta_n^{(b)}$ of $B$ bootstrap
losses $D_n^{(b)}$ (data resampled with replacement; warm-started from the full-data
minimiser; embarrassingly parallel through an executor); (ii) fit $\beta$ by Hyvärinen
score matching of $\pi_{n,\beta}$ to the bootstrap minimisers (eq. 9), which is
quadratic in $\beta$ with the closed-form minimiser (Theorem 2, eq. 10)

$$
\beta_* = \frac{\sum_b \nabla D_n(\theta_n^{(b)})\cdot\nabla\log\pi(\theta_n^{(b)})
+ \operatorname{Tr}\nabla^2 D_n(\theta_n^{(b)})}{\sum_b\|\nabla D_n(\theta_n^{(b)})\|^2},
$$

with $D_n$ the **full-data** loss, gradients and Hessian traces by
autograd, in the parametrisation of the prior. Bootstrap replicates whose minimisation escapes
(runs away where the loss is unbounded below, or becomes non-finite) are frozen, flagged and
left out of the sums (see [`calibrate_beta()`][scorebayes.discrete.calibrate.calibrate_beta]). For comparison, Lyddon et al.'s
$\beta_L = \operatorname{tr}(JI^+J^\top)/\operatorname{tr}(J)$ at the full-data minimiser,
$J = \nabla^2D_n/n$, $I = \frac1n\sum_i\nabla\ell_i\nabla\ell_i^\top$.

A loss is any object with ``__call__(theta [B, k]) -> [B]``, ``reweighted(row_weights [B, m])``,
``per_row(theta) -> [B, m]``, ``row_counts [m]`` and ``n`` (the DFD, KSD, pseudo-likelihood
and truncated-likelihood losses of this package). The minimisers themselves ([`minimise()`][scorebayes.discrete.calibrate.minimise]
and the per-row status codes) live in `minimisers` and are re-exported here.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 3.3, Theorem 2
      <https://arxiv.org/abs/2206.08420>
    - General Bayesian updating and the loss-likelihood bootstrap (Lyddon, Holmes and Walker, 2019)
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import numbers
import warnings
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
from .minimisers import CONVERGED, ESCAPED, NON_FINITE, NOT_CONVERGED, grad_hessian, minimise

__all__ = ["minimise", "bootstrap_weights", "bootstrap_minimisers", "beta_star", "lyddon_beta",
           "CalibrationError", "CalibrationWarning", "Calibration", "calibrate_beta", "check_robust_options",
           "persisting",
           "CONVERGED", "NOT_CONVERGED", "NON_FINITE", "ESCAPED"]


class CalibrationError(ValueError):
    """The closed-form beta* is not defined (zero gradients or a non-positive numerator)."""


class CalibrationWarning(UserWarning):
    """Some bootstrap replicates escaped (or became non-finite) and were left out of eq. (10)."""


class Calibration(NamedTuple):
    """Result of [`calibrate_beta()`][scorebayes.discrete.calibrate.calibrate_beta]: ``beta``, the full-data minimiser ``[k]``,
    the bootstrap minimisers ``[B, k]`` (all replicates, flagged ones where they were frozen),
    the numerator/denominator of eq. (10) (over the kept replicates) and the indices of the
    replicates that escaped, became non-finite (both excluded) or did not converge (kept)."""

    beta: float
    minimiser: Tensor
    bootstrap: Tensor
    numerator: float
    denominator: float
    escaped: tuple[int, ...] = ()
    non_finite: tuple[int, ...] = ()
    not_converged: tuple[int, ...] = ()


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
    """Minimisers of one task of replicates, with their status as a last column ``[len, k + 1]``."""
    loss, prior, theta_full, indices, seed, opts = unit
    weights = bootstrap_weights(loss.row_counts, indices, seed)
    theta0 = theta_full.reshape(1, -1).expand(len(indices), -1)
    theta, status = minimise(loss.reweighted(weights), theta0, ParameterSpace(prior), return_status=True, **opts)
    return torch.cat([theta, status.to(theta.dtype)[:, None]], dim=1)


class _Persist:
    """Where completed bootstrap tasks are kept (a run store) and how many were reused."""

    def __init__(self, store: Any):
        self.store, self.resumed, self.computed = store, 0, 0


_PERSIST: contextvars.ContextVar[_Persist | None] = contextvars.ContextVar(
    "scorebayes_bootstrap_store", default=None)


@contextlib.contextmanager
def persisting(store: Any) -> Iterator[_Persist | None]:
    """Inside this block [`bootstrap_minimisers()`][scorebayes.discrete.calibrate.bootstrap_minimisers] saves every completed task of
    replicates to ``store`` (a [`RunStore`][scorebayes.store.RunStore], atomically) and reuses
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
                         final_lr_ratio: float = 1e-2, tol: float = 1e-9, max_step: float = 1.0,
                         max_distance: float = 20.0, return_status: bool = False,
                         progress: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    r"""Minimisers ``[B, k]`` of ``B`` bootstrap losses, warm-started at ``theta_full [k]``.

    Each replicate is minimised with Newton steps of at most ``max_step`` per unconstrained
    coordinate; a replicate that moves more than ``max_distance`` from ``theta_full`` in some
    unconstrained coordinate is frozen and flagged as *escaped* (its loss is typically
    unbounded below there, e.g. a CMP dispersion running to infinity), one whose loss or
    gradient becomes non-finite as *non-finite* (see [`minimise()`][scorebayes.discrete.calibrate.minimise]); neither stops the other
    replicates. With ``return_status`` the result is ``(theta [B, k], status [B])``; otherwise
    flagged replicates only raise a warning.

    With ``executor=None`` all replicates run as one vectorised batch; otherwise they are split
    into tasks of ``chunk_size`` replicates (default: 8 tasks) sent to the executor (the loss and
    prior must then be picklable). Each replicate has its own resampling seed; the minimiser's
    stopping rule is shared by the rows of a task, so the grouping can change the last bits.

    Inside [`persisting()`][scorebayes.discrete.calibrate.persisting] (``scorebayes run --out DIR``) the replicates are always cut
    into tasks of ``chunk_size`` (default: 8 tasks, whatever the executor, so the result does
    not depend on it), each completed task is saved as ``arrays/bootstrap/<first>.npy`` and
    reused on a re-run: bit-identical to an uninterrupted run.
    """
    if isinstance(num_bootstrap, bool) or not isinstance(num_bootstrap, int) or num_bootstrap < 1:
        raise ValueError(f"num_bootstrap must be a positive integer, got {num_bootstrap!r}")
    persist = _PERSIST.get()
    if chunk_size is None:
        chunk_size = num_bootstrap if executor is None and persist is None else max(1, -(-num_bootstrap // 8))
    for label, bound in (("max_step", max_step), ("max_distance", max_distance)):
        if not bound > 0:
            raise ValueError(f"{label} must be positive (math.inf: no bound), got {bound!r}")
    opts = {"method": method, "num_steps": num_steps, "lr": lr, "final_lr_ratio": final_lr_ratio, "tol": tol,
            "max_step": max_step, "max_distance": max_distance}
    units = [(loss, prior, theta_full, list(range(s, min(s + chunk_size, num_bootstrap))), seed, opts)
             for s in range(0, num_bootstrap, chunk_size)]
    if persist is None:
        parts = map_units(_bootstrap_unit, units, executor=executor, progress=progress, desc="bootstrap")
    else:
        parts = _persisted_units(persist, units, executor, progress)
    both = torch.cat(parts, dim=0)
    theta, status = both[:, :-1], both[:, -1].round().to(torch.int64)
    if return_status:
        return theta, status
    flagged = torch.nonzero(status >= NON_FINITE).flatten().tolist()
    if flagged:
        warnings.warn(f"bootstrap replicates {flagged} escaped or became non-finite (frozen where they stopped)",
                      CalibrationWarning, stacklevel=2)
    return theta


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
    r"""The closed-form $\beta_*$ of eq. (10) at the bootstrap minimisers ``theta_boot [B, k]``.

    Returns:
        ``(beta, numerator, denominator)``.

    Raises:
        CalibrationError: if all gradients vanish or the numerator is not positive.
    """
    _, grad, hess = grad_hessian(loss, theta_boot.detach().to(torch.float64))
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
        prior_term, trace_term = float((grad * grad_prior).sum()), float(trace.sum())
        raise CalibrationError(f"beta* is undefined: the numerator of eq. (10) is {num:.4g} <= 0 (prior term "
                               f"{prior_term:.4g} + Hessian trace {trace_term:.4g}: the loss is not locally "
                               "convex at the bootstrap minimisers, or the prior's pull outweighs its curvature); "
                               "fix beta by hand instead")
    return num / den, num, den


def lyddon_beta(loss: Any, theta_hat: Tensor) -> float:
    r"""Lyddon et al.'s $\beta_L = \operatorname{tr}(JI^+J^\top)/\operatorname{tr}(J)$ at ``theta_hat [k]``."""
    theta = theta_hat.detach().to(torch.float64).reshape(1, -1)
    n = loss.n
    hess = torch.autograd.functional.hessian(lambda t: loss(t[None])[0], theta[0]) / n
    jac = torch.autograd.functional.jacobian(lambda t: loss.per_row(t[None])[0], theta[0], vectorize=True)  # [m, k]
    info = (loss.row_counts[:, None, None] * jac[:, :, None] * jac[:, None, :]).sum(0) / n
    return float(torch.trace(hess @ torch.linalg.pinv(info) @ hess.T) / torch.trace(hess))


def check_robust_options(max_step: float, max_distance: float, max_flagged: float) -> None:
    """``ValueError`` unless ``max_step``, ``max_distance`` > 0 (``math.inf``: no bound) and
    ``0 <= max_flagged < 1`` (the robust-calibration options of [`calibrate_beta()`][scorebayes.discrete.calibrate.calibrate_beta])."""
    for label, bound in (("max_step", max_step), ("max_distance", max_distance)):
        if isinstance(bound, bool) or not isinstance(bound, numbers.Real) or not bound > 0:
            raise ValueError(f"{label} must be positive (math.inf: no bound), got {bound!r}")
    if isinstance(max_flagged, bool) or not isinstance(max_flagged, numbers.Real) or not 0 <= max_flagged < 1:
        raise ValueError(f"max_flagged must be a fraction in [0, 1), got {max_flagged!r}")


def calibrate_beta(loss: Any, prior: Distribution, *, num_bootstrap: int = 100, theta_init: Tensor | None = None,
                   seed: int = 0, executor: Executor | None = None, method: str = "newton",
                   init_steps: int = 200, init_lr: float = 0.1, steps: int = 200, lr: float = 0.1,
                   final_lr_ratio: float = 1e-2, tol: float = 1e-9, max_step: float = 1.0,
                   max_distance: float = 20.0, max_flagged: float = 0.1, progress: bool = False) -> Calibration:
    r"""Full-data minimiser (from ``theta_init`` or a prior draw), bootstrap minimisers and $\beta_*$.

    ``method="newton"`` (default) needs few iterations and finds the exact minimisers. The
    paper's settings use ``method="adam"`` at a constant rate (``final_lr_ratio=1``): CMP 50,000
    full-data steps at lr 0.1 then 5,000 warm-started steps per replicate; Ising 5,000/5,000 at
    0.01; graphical models 50,000/10,000 at 0.001. A constant rate leaves the bootstrap
    "minimisers" jittering around the true ones, which inflates the gradients in the
    denominator of eq. (10) and lowers $\beta_*$ (CMP, over-dispersed data: by a factor
    of about 0.6). ``final_lr_ratio`` and ``tol`` (stop
    once no coordinate moves more than ``tol`` over 100 steps; ``0`` runs every step, as the
    paper) apply to both phases.

    Eq. (10) is a ratio of sums over replicates and is dominated by replicates whose minimiser
    lies far from the full-data one. The DFD loss of CMP models is unbounded below as a
    dispersion grows (the largest count drives it), so a bootstrap replicate can leave the
    basin of the full-data minimiser: an unguarded Newton run follows it to infinity (a
    non-finite gradient, or a huge non-positive numerator), while the paper's fixed Adam budget
    stops part-way, which inflates the denominator. For the CMP graphical model on brca_10 this
    is the whole difference between the paper's 0.9971 and about 2.7 with exact minimisers on
    the same resamples.

    Escaped replicates are therefore detected and **excluded**: a bootstrap replicate whose
    minimisation moves more than ``max_distance`` (default 20) from the full-data minimiser in
    some coordinate of the unconstrained space of the prior, or whose loss or gradient becomes
    non-finite, is frozen and left out of both sums of eq. (10), with a
    [`CalibrationWarning`][scorebayes.discrete.calibrate.CalibrationWarning]. With Newton steps of at most ``max_step`` (default 1) a
    runaway crosses the bound within about ``max_distance`` iterations instead of keeping the
    batch busy for ``steps``. The default 20 (20 prior standard deviations for the unit-scale
    priors of the built-in models, a factor $e^{20}$ for log-transformed parameters)
    catches only replicates without a minimiser (brca_10, CMP-GM: Newton runs them to
    $\theta_6\approx 2400$), and keeps distant but finite local minima (there gene 6's
    main effect $\theta_6$ goes from 0.78 to about 3-11 in some replicates out of 100, which move
    $\beta_*$ a lot: bootstrap seed 3 gives 1.77 with them and 3.56 with
    ``max_distance=5``, which drops the 3 beyond 5). Eq. (10) is then computed over the kept
    set $K$,

    $$
    \beta_* = \frac{\sum_{b\in K} \nabla D_n(\theta_n^{(b)})\cdot\nabla\log\pi(\theta_n^{(b)})
    + \operatorname{Tr}\nabla^2 D_n(\theta_n^{(b)})}{\sum_{b\in K}\|\nabla D_n(\theta_n^{(b)})\|^2}.
    $$

    Why: eq. (9) matches $\pi_{n,\beta}$ to the bootstrap distribution of the *local*
    minimiser of $D_n$, whose basin the full-data minimiser defines; an escaped replicate
    has no minimiser in that basin (often none at all), so it is not a draw from that
    distribution, and its terms, evaluated wherever the run stopped, would dominate both sums.
    Excluding it conditions the bootstrap on staying in the basin, an event of probability
    tending to one as $n$ grows. When more than a fraction ``max_flagged`` (default 0.1)
    of the replicates are flagged, that conditioning is no longer a small correction and a
    [`CalibrationError`][scorebayes.discrete.calibrate.CalibrationError] is raised instead (fix ``beta`` by hand, or raise
    ``max_distance`` if the model's unconstrained scale is wide). Replicates that merely did not
    converge within ``steps`` are kept (their indices are in ``not_converged``). With no
    flagged replicate the result is the plain eq. (10), as before.

    Raises:
        CalibrationError: if too many replicates are flagged, or eq. (10) is undefined.
        FloatingPointError: if the full-data minimisation becomes non-finite (a
            [`CalibrationWarning`][scorebayes.discrete.calibrate.CalibrationWarning] if Newton's does not converge: the loss may be unbounded
            below from that start, e.g. brca_10 CMP-GM from the prior draw of seed 4).
    """
    for label, value in (("num_bootstrap", num_bootstrap), ("init_steps", init_steps), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if method not in ("newton", "adam"):
        raise ValueError(f"method must be 'newton' or 'adam', got {method!r}")
    check_robust_options(max_step, max_distance, max_flagged)
    space = ParameterSpace(prior)
    if theta_init is None:
        theta_init = sample_prior(prior, 1, generator=make_generator(seed, "init")).to(torch.float64)
    theta_init = torch.as_tensor(theta_init, dtype=torch.float64).reshape(1, -1)
    theta_full, full_status = minimise(loss, theta_init, space, method=method, num_steps=init_steps, lr=init_lr,
                                       final_lr_ratio=final_lr_ratio, tol=tol, return_status=True)
    if int(full_status[0]) == NON_FINITE:
        raise FloatingPointError("non-finite loss or gradient during the full-data minimisation")
    if method == "newton" and int(full_status[0]) != CONVERGED:
        warnings.warn(f"the full-data minimisation did not converge within init_steps={init_steps} Newton "
                      "steps: the loss may be unbounded below from this start (then every bootstrap replicate "
                      "escapes); try another theta_init or seed", CalibrationWarning, stacklevel=2)
    theta_full = theta_full[0]
    boot, status = bootstrap_minimisers(loss, prior, theta_full, num_bootstrap=num_bootstrap,
                                        seed=derive_seed(seed, "bootstrap"), executor=executor,
                                        method=method, num_steps=steps, lr=lr, final_lr_ratio=final_lr_ratio,
                                        tol=tol, max_step=max_step, max_distance=max_distance,
                                        return_status=True, progress=progress)
    escaped, non_finite, not_converged = (tuple(torch.nonzero(status == c).flatten().tolist())
                                          for c in (ESCAPED, NON_FINITE, NOT_CONVERGED))
    flagged = len(escaped) + len(non_finite)
    if flagged > max_flagged * num_bootstrap:
        raise CalibrationError(
            f"{flagged} of {num_bootstrap} bootstrap replicates left the basin of the full-data minimiser "
            f"(escaped beyond max_distance={max_distance}: {list(escaped)}; non-finite: {list(non_finite)}), "
            f"more than max_flagged={max_flagged}; the loss may be unbounded below near the minimiser: "
            "fix beta by hand, or raise max_distance if the parameters' unconstrained scale is wide")
    if flagged:
        warnings.warn(f"{flagged} of {num_bootstrap} bootstrap replicates excluded from beta* (escaped: "
                      f"{list(escaped)}; non-finite: {list(non_finite)}): their loss left the basin of the "
                      "full-data minimiser", CalibrationWarning, stacklevel=2)
    keep = status < NON_FINITE
    beta, num, den = beta_star(loss, prior, boot[keep])
    return Calibration(beta, theta_full, boot, num, den, escaped, non_finite, not_converged)
