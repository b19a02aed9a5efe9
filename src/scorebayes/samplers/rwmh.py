r"""Vectorised random-walk Metropolis-Hastings in an unconstrained parametrisation.

Chains ``u [C, k]`` live in the unconstrained space $u = T^{-1}(\theta)$ of a
[`ParameterSpace`][scorebayes.priors.ParameterSpace], with target

$$
\log\pi_u(u) = \log\pi(T(u)) + \log|\det J_T(u)|
$$

(the log-Jacobian; e.g. $\sum_i\log\theta_i$ for a random walk on $\log\theta$).
A step proposes $u' = u + s\odot\varepsilon$, $\varepsilon\sim N(0,I)$,
and accepts with probability $\min(1, \pi_u(u')/\pi_u(u))$.

The step is the MH kernel of [`scorebayes.samplers.mh`][scorebayes.samplers.mh] with a
[`RandomWalkProposal`][scorebayes.samplers.proposals.RandomWalkProposal] $u' = u + sL\varepsilon$ and the
exact rule ([`ExactRule`][scorebayes.samplers.acceptance.ExactRule], the log target cached in the
state), run by the driver [`run_chains()`][scorebayes.samplers.base.run_chains]. With ``adapt=True``
(default) the scale $s$ is tuned during burn-in only
(`random_walk_adaptation()`): a per-chain Robbins-Monro update
of $\log s$ toward a target acceptance rate (0.44 for one parameter, 0.234 for many), and
every window the proposal shape $L$ from the Cholesky factor of the pooled covariance of
the chains (Haario et al.). It is frozen afterwards, so the kept draws come from a fixed MH
kernel. With ``adapt=False`` the isotropic scale ``step_size`` is used throughout (the paper's
settings: e.g. $\sigma = 0.1$ on $\log\theta$).

References:
    - Equation of state calculations by fast computing machines (Metropolis et al., 1953)
    - An adaptive Metropolis algorithm (Haario, Saksman and Tamminen, 2001)
      <https://doi.org/10.2307/3318737>
    - Examples of adaptive MCMC (Roberts and Rosenthal, 2009) <https://doi.org/10.1198/jcgs.2009.06134>
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from ..posterior import Posterior
from ..priors import ParameterSpace
from .acceptance import ExactRule
from .base import Kernel, run_chains
from .mh import MHInfo, MHState, build_kernel
from .proposals import RandomWalkProposal
from .step_size import random_walk_adaptation

__all__ = ["RWMHState", "rwmh_kernel", "rwmh_step", "sample_rwmh"]


class RWMHState(NamedTuple):
    """Chains ``u [C, k]`` and their log targets ``log_prob [C]``."""

    u: Tensor
    log_prob: Tensor


def _finite_or_minus_inf(log_prob_fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    def log_target(u: Tensor) -> Tensor:
        lp = log_prob_fn(u)
        return torch.where(torch.isfinite(lp), lp, torch.full_like(lp, -torch.inf))

    return log_target


def rwmh_kernel(log_prob_fn: Callable[[Tensor], Tensor], scale: Tensor | float,
                chol: Tensor | None = None) -> Kernel:
    r"""The random-walk MH kernel $u' = u + s\,L\varepsilon$ with the exact acceptance rule.

    Arguments:
        log_prob_fn: ``u [C, k] -> [C]``; non-finite values (outside the support) reject the move.
        scale: proposal scale $s$, a float or ``[C, 1]``.
        chol: optional ``[k, k]`` lower-triangular shape $L$ of the proposal covariance.

    Returns:
        an MH [`Kernel`][scorebayes.samplers.base.Kernel] whose states cache the log target.
    """
    log_target = _finite_or_minus_inf(log_prob_fn)
    return build_kernel(RandomWalkProposal(scale, chol), ExactRule(log_target), log_density=log_target)


def rwmh_step(state: RWMHState, log_prob_fn: Callable[[Tensor], Tensor], scale: Tensor | float, *,
              chol: Tensor | None = None, generator: torch.Generator | None = None) -> tuple[RWMHState, Tensor]:
    r"""One Gaussian random-walk MH step for all chains, $u' = u + s\,L\varepsilon$.

    Arguments:
        state: current [`RWMHState`][scorebayes.samplers.rwmh.RWMHState].
        log_prob_fn: ``u [C, k] -> [C]`` (``-inf`` outside the support).
        scale: proposal scale $s$, a float or ``[C, 1]``.
        chol: optional ``[k, k]`` lower-triangular shape $L$ of the proposal covariance.

    Returns:
        ``(new_state, accepted [C] bool)``.
    """
    new, info = rwmh_kernel(log_prob_fn, scale, chol).step(MHState(state.u, None, state.log_prob), generator)
    return RWMHState(new.position, new.log_density), info.is_accepted


def _target_rate(k: int) -> float:
    return {1: 0.44, 2: 0.35, 3: 0.3}.get(k, 0.234)


def sample_rwmh(log_prob: Callable[[Tensor], Tensor], init: Tensor, num_samples: int, *,
                space: ParameterSpace | None = None, burn_in: int = 1000, thin: int = 1,
                step_size: float = 0.1, adapt: bool = True, target_accept: float | None = None,
                names: Sequence[str] | None = None, generator: torch.Generator | None = None,
                progress: bool = False) -> Posterior:
    r"""Run ``C`` random-walk MH chains and return their draws as a [`Posterior`][scorebayes.posterior.Posterior].

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
            return lp

    def build(scale: Tensor, chol: Tensor) -> Kernel:
        return rwmh_kernel(log_target, scale, chol)

    u0 = space.to_unconstrained(init) if space is not None else init.clone()
    log_scale = torch.full((c, 1), float(step_size), dtype=torch.float64).log()
    scale = log_scale.exp()  # as the adaptation's scales: exp of the log scale
    chol = torch.eye(k, dtype=torch.float64)
    state = build(scale, chol).init(u0)
    if not bool(torch.isfinite(state.log_density).all()):
        raise ValueError("the target log-density is not finite at every initial point")
    start = time.perf_counter()
    if burn_in > 0:
        target = target_accept if target_accept is not None else _target_rate(k)
        tuner = random_walk_adaptation(build, log_scale, target=target, window=max(50, burn_in // 10),
                                       shape_until=burn_in * 0.8) if adapt else None
        _, state, warm = run_chains(build(scale, chol), state, burn_in, burn_in=burn_in, generator=generator,
                                    adaptation=tuner, progress=progress, desc="rwmh warm-up")
        if adapt:
            scale, chol = warm.adaptation.log_step.exp(), warm.adaptation.chol
    accepted = torch.zeros(c, dtype=torch.float64)

    def count(t: int, state: MHState, info: MHInfo) -> None:
        accepted.add_(info.is_accepted.to(torch.float64))

    draws, _, _ = run_chains(build(scale, chol), state, num_samples * thin, thin=thin, generator=generator,
                             on_step=count, collect=lambda s: to_theta(s.position), progress=progress,
                             desc="rwmh")
    rate = accepted / (num_samples * thin)
    info = {"sampler": "rwmh", "acceptance_rate": float(rate.mean()), "seconds_sampling": time.perf_counter() - start,
            "scale": float(scale.mean()), "proposal_chol": chol.tolist(), "burn_in": burn_in,
            "thin": thin}
    return Posterior(draws, names, info=info)
