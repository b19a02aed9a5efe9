r"""Vectorised random-walk Metropolis-Hastings in an unconstrained parametrisation.

Chains ``u [C, k]`` live in the unconstrained space :math:`u = T^{-1}(\theta)` of a
:class:`~scorebayes.priors.ParameterSpace`, with target

.. math:: \log\pi_u(u) = \log\pi(T(u)) + \log|\det J_T(u)|

(the log-Jacobian; e.g. :math:`\sum_i\log\theta_i` for a random walk on :math:`\log\theta`,
METHODS.md V.B10). A step proposes :math:`u' = u + s\odot\varepsilon`, :math:`\varepsilon\sim N(0,I)`,
and accepts with probability :math:`\min(1, \pi_u(u')/\pi_u(u))`.

With ``adapt=True`` (default) the scale :math:`s` is tuned during burn-in only: a per-chain
Robbins-Monro update of :math:`\log s` toward a target acceptance rate (0.44 for one parameter,
0.234 for many), and every window the proposal shape :math:`L` from the Cholesky factor of the
pooled covariance of the chains (Haario et al.). It is frozen afterwards, so the kept draws come from a fixed MH kernel. With
``adapt=False`` the isotropic scale ``step_size`` is used throughout (the paper's settings:
e.g. :math:`\sigma = 0.1` on :math:`\log\theta`).

References:
    | Equation of state calculations by fast computing machines (Metropolis et al., 1953)
    | An adaptive Metropolis algorithm (Haario, Saksman and Tamminen, 2001)
    | Examples of adaptive MCMC (Roberts and Rosenthal, 2009)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..posterior import Posterior
from ..priors import ParameterSpace

__all__ = ["RWMHState", "rwmh_step", "sample_rwmh"]


class RWMHState(NamedTuple):
    """Chains ``u [C, k]`` and their log targets ``log_prob [C]``."""

    u: Tensor
    log_prob: Tensor


def rwmh_step(state: RWMHState, log_prob_fn: Callable[[Tensor], Tensor], scale: Tensor | float, *,
              chol: Tensor | None = None, generator: torch.Generator | None = None) -> tuple[RWMHState, Tensor]:
    r"""One Gaussian random-walk MH step for all chains, :math:`u' = u + s\,L\varepsilon`.

    Arguments:
        state: current :class:`RWMHState`.
        log_prob_fn: ``u [C, k] -> [C]`` (``-inf`` outside the support).
        scale: proposal scale :math:`s`, a float or ``[C, 1]``.
        chol: optional ``[k, k]`` lower-triangular shape :math:`L` of the proposal covariance.

    Returns:
        ``(new_state, accepted [C] bool)``.
    """
    u, lp = state
    noise = torch.randn(u.shape, generator=generator, dtype=u.dtype)
    proposal = u + scale * (noise if chol is None else noise @ chol.T)
    lp_new = log_prob_fn(proposal)
    log_unif = torch.rand(u.shape[0], generator=generator, dtype=u.dtype).log()
    accept = (log_unif < lp_new - lp) & torch.isfinite(lp_new)
    return RWMHState(torch.where(accept[:, None], proposal, u), torch.where(accept, lp_new, lp)), accept


def _target_rate(k: int) -> float:
    return {1: 0.44, 2: 0.35, 3: 0.3}.get(k, 0.234)


def sample_rwmh(log_prob: Callable[[Tensor], Tensor], init: Tensor, num_samples: int, *,
                space: ParameterSpace | None = None, burn_in: int = 1000, thin: int = 1,
                step_size: float = 0.1, adapt: bool = True, target_accept: float | None = None,
                names: Sequence[str] | None = None, generator: torch.Generator | None = None,
                progress: bool = False) -> Posterior:
    r"""Run ``C`` random-walk MH chains and return their draws as a :class:`~scorebayes.posterior.Posterior`.

    Arguments:
        log_prob: target log-density in the **constrained** space, ``theta [C, k] -> [C]``.
        init: ``[C, k]`` starting points (constrained space, inside the support).
        num_samples: draws kept per chain (after ``burn_in`` steps, one every ``thin`` steps).
        space: the bijection to the unconstrained space (``None``: identity, no Jacobian).
        step_size: initial (``adapt=True``) or fixed proposal scale in the unconstrained space.
        adapt: tune the scale during burn-in (see module docstring).
        target_accept: acceptance rate aimed at (default by dimension).
        names: parameter names.

    Returns:
        ``Posterior`` with samples ``[C, num_samples, k]`` (constrained) and ``info`` holding the
        acceptance rate, the final scales and the run time.
    """
    init = torch.as_tensor(init, dtype=torch.float64)
    if init.dim() != 2:
        raise ValueError(f"init must be [C, k] (chains x parameters), got {tuple(init.shape)}")
    if burn_in < 0 or thin < 1 or num_samples < 1:
        raise ValueError("need burn_in >= 0, thin >= 1 and num_samples >= 1")
    c, k = init.shape
    to_theta = space.to_constrained if space is not None else (lambda u: u)

    def log_target(u: Tensor) -> Tensor:
        with torch.no_grad():
            lp = log_prob(to_theta(u))
            if space is not None:
                lp = lp + space.log_abs_det_jacobian(u)
            return torch.where(torch.isnan(lp), torch.full_like(lp, -torch.inf), lp)

    u0 = space.to_unconstrained(init) if space is not None else init.clone()
    state = RWMHState(u0, log_target(u0))
    if not bool(torch.isfinite(state.log_prob).all()):
        raise ValueError("the target log-density is not finite at every initial point")
    target = target_accept if target_accept is not None else _target_rate(k)
    log_step = torch.full((c, 1), float(step_size), dtype=torch.float64).log()
    chol = torch.eye(k, dtype=torch.float64)
    window = max(50, burn_in // 10)
    history: list[Tensor] = []
    draws = torch.empty(c, num_samples, k, dtype=torch.float64)
    accepted_kept = torch.zeros(c, dtype=torch.float64)
    total = burn_in + num_samples * thin
    start = time.perf_counter()
    kept = 0
    for t in tqdm(range(total), desc="rwmh", disable=not progress, leave=False):
        state, acc = rwmh_step(state, log_target, log_step.exp(), chol=chol, generator=generator)
        if t < burn_in:
            if adapt:
                log_step += (acc.to(torch.float64)[:, None] - target) / (1 + t / 20) ** 0.6
                history.append(state.u)
                if len(history) == window and t < burn_in * 0.8:
                    recent = torch.stack(history[window // 2 :]).reshape(-1, k)
                    cov = torch.atleast_2d(torch.cov(recent.T)) * 2.38**2 / k
                    new, bad = torch.linalg.cholesky_ex(cov + 1e-12 * torch.eye(k, dtype=torch.float64))
                    if int(bad) == 0:
                        # keep the overall size (log-determinant) and change only the shape
                        ratio = (chol.diagonal().log().sum() - new.diagonal().log().sum()) / k
                        log_step += ratio
                        chol = new
                    history = []
                elif len(history) >= window:
                    history = []
            continue
        accepted_kept += acc.to(torch.float64)
        if (t - burn_in) % thin == thin - 1:
            draws[:, kept] = to_theta(state.u)
            kept += 1
    rate = accepted_kept / (num_samples * thin)
    info = {"sampler": "rwmh", "acceptance_rate": float(rate.mean()), "seconds_sampling": time.perf_counter() - start,
            "scale": float(log_step.exp().mean()), "proposal_chol": chol.tolist(), "burn_in": burn_in,
            "thin": thin}
    return Posterior(draws, names, info=info)
