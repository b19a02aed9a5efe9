r"""Step-size adaptation, separate from the kernels it tunes.

Curvature (for Langevin chains, [`curvature_step_size()`][scorebayes.samplers.langevin.curvature_step_size]). For a Gaussian target with
precision eigenvalue $\lambda$, ULA is stable iff $\tau\lambda < 2$ and its stationary
variance is $1/(\lambda(1-\tau\lambda/2))$. The largest eigenvalue $\lambda_{\max}$
of $-\nabla$ drift at a few chain positions sets $\tau = \kappa/\lambda_{\max}$
(default $\kappa = 0.1$: at most 5% variance inflation, 2.6% in sd, in the stiffest
direction; less elsewhere). Since the likelihood part of the curvature grows like $n$, this
is $\tau = c/n$ with $c = \kappa n / \lambda_{\max}$. The slowest direction relaxes in
about $1/(\tau\lambda_{\min})$ steps, which sets the automatic burn-in and thinning.

Acceptance rate (for random-walk MH, `random_walk_adaptation()`). A per-chain Robbins–Monro
update of the log scale toward a target acceptance rate $\alpha^*$,

$$
\log s_{t+1} = \log s_t + (a_t - \alpha^*)\,(1 + t/20)^{-0.6},
$$

with $a_t \in \{0, 1\}$ the step's acceptance, and every ``window`` steps the proposal shape
$L$ from the Cholesky factor of $2.38^2/k$ times the pooled covariance of the chains'
recent states (the overall size $\log\det L$ carried over to $s$).

References:
    - Exponential convergence of Langevin distributions and their discrete approximations
      (Roberts and Tweedie, 1996) <https://doi.org/10.2307/3318418>
    - An adaptive Metropolis algorithm (Haario, Saksman and Tamminen, 2001)
      <https://doi.org/10.2307/3318737>
    - Examples of adaptive MCMC (Roberts and Rosenthal, 2009) <https://doi.org/10.1198/jcgs.2009.06134>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from .base import Adaptation, ChainsDivergedError, Kernel

__all__ = ["StepSize", "curvature_step_size", "ScaleState", "random_walk_adaptation"]


class StepSize(NamedTuple):
    step_size: float  # tau
    max_curvature: float  # lambda_max
    min_curvature: float  # lambda_min (median over probe points)

    def relaxation_steps(self) -> float:
        """Steps for the slowest direction to relax by a factor e: 1/(tau lambda_min)."""
        return 1.0 / max(self.step_size * self.min_curvature, 1e-12)


def curvature_step_size(drift: Callable[[Tensor], Tensor], points: Tensor, *,
                        kappa: float = 0.1) -> StepSize:
    r"""Step size $\tau = \kappa/\lambda_{\max}$ from the drift's Jacobian.

    Arguments:
        drift: the full drift $u \mapsto \hat s(u) + \nabla\log\pi_u(u)$, ``[C, d] -> [C, d]``,
            differentiable in ``u``.
        points: ``[K, d]`` probe positions (e.g. the first chain states).
        kappa: $\tau\lambda_{\max}$; must be in (0, 2).
    """
    if not 0 < kappa < 2:
        raise ValueError(f"kappa must be in (0, 2) for a stable chain, got {kappa}")
    eig_max, eig_min = [], []
    for point in points:
        u = point.detach().clone()
        jac = torch.autograd.functional.jacobian(lambda v: drift(v[None])[0], u)
        sym = -0.5 * (jac + jac.T)
        eig = torch.linalg.eigvalsh(sym.double())
        if torch.isfinite(eig).all():
            eig_max.append(float(eig[-1]))
            eig_min.append(float(eig[0]))
    if not eig_max:
        raise ChainsDivergedError("the drift's Jacobian is not finite at any probe point")
    lam_max = max(max(eig_max), 1e-8)
    lam_min = float(torch.tensor(eig_min).median())
    lam_min = min(max(lam_min, lam_max * 1e-6), lam_max)
    return StepSize(kappa / lam_max, lam_max, lam_min)


class ScaleState(NamedTuple):
    """``log_step [C, 1]`` (log scale per chain), ``chol [k, k]`` (shape) and the window's states."""

    log_step: Tensor
    chol: Tensor
    history: list[Tensor]


def random_walk_adaptation(build: Callable[[Tensor, Tensor], Kernel], log_scale: Tensor, *, target: float,
                           window: int, shape_until: float) -> Adaptation:
    r"""Robbins–Monro scale and windowed shape adaptation of a random-walk MH kernel.

    Arguments:
        build: ``(scale [C, 1], chol [k, k]) -> Kernel`` with proposal $u + sL\varepsilon$;
            its steps' info has ``is_accepted [C]`` (an [`MHInfo`][scorebayes.samplers.mh.MHInfo]).
        log_scale: initial log scales $\log s$ ``[C, 1]``.
        target: $\alpha^*$.
        window: refit the shape $L$ every ``window`` steps from the second half of the window.
        shape_until: refit only at steps ``t < shape_until`` (the scale adapts to the last one).

    Returns:
        an [`Adaptation`][scorebayes.samplers.base.Adaptation] whose state is a `ScaleState`;
        ``build(state.log_step.exp(), state.chol)`` is the tuned kernel.
    """

    def init(state: object) -> ScaleState:
        k = state.position.shape[1]
        return ScaleState(log_scale, torch.eye(k, dtype=log_scale.dtype, device=log_scale.device), [])

    def update(a: ScaleState, t: int, state: object, info: object) -> ScaleState:
        log_step, chol = a.log_step, a.chol
        k = chol.shape[0]
        log_step = log_step + (info.is_accepted.to(log_step.dtype)[:, None] - target) / (1 + t / 20) ** 0.6
        history = a.history  # appended in place: a window's states are not copied at every step
        history.append(state.position)
        if len(history) == window and t < shape_until:
            recent = torch.stack(history[window // 2:]).reshape(-1, k)
            cov = torch.atleast_2d(torch.cov(recent.T)) * 2.38**2 / k
            new, bad = torch.linalg.cholesky_ex(cov + 1e-12 * torch.eye(k, dtype=cov.dtype, device=cov.device))
            if int(bad) == 0:
                # keep the overall size (log-determinant) and change only the shape
                log_step = log_step + (chol.diagonal().log().sum() - new.diagonal().log().sum()) / k
                chol = new
            history = []
        elif len(history) >= window:
            history = []
        return ScaleState(log_step, chol, history)

    return Adaptation(init, update, lambda a: build(a.log_step.exp(), a.chol))
