r"""The exact g-and-k posterior by long MCMC on the numerically computed likelihood.

The log posterior under the suite's uniform prior on $[0, 10]^4$ is
$\sum_i \log f(x_i; \theta)$ inside the box (`gk_log_density()`; each chain
keeps the roots $z_i$ of its current parameter as the next warm start). The run:

1. a starting point from the octiles ($A_0$ the median, $B_0$ the interquartile
   range over 1.349, $g_0 = 0$, $k_0 = 0.1$), improved to the posterior mode by
   L-BFGS-B with exact gradients, and the Laplace covariance there (finite differences of
   the gradient);
2. ``chains`` chains started from the mode plus twice the Laplace spread (over-dispersed, so
   R-hat can detect chains that have not mixed), run by `run_mcmc()` with a fixed
   seed until R-hat < 1.01 and bulk ESS > ``min_ess`` for every parameter (a
   ``RuntimeWarning`` if ``max_iterations`` come first).

Results are cached per ``x_obs`` (its bytes) and settings within the process.
"""

from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import torch
from scipy import optimize
from torch import Tensor

from .gandk import gk_log_density
from .mcmc import MCMCResult, run_mcmc

__all__ = ["GK_HIGH", "GK_LOW", "gandk_log_posterior", "gandk_mcmc", "gandk_mode"]

GK_LOW, GK_HIGH = 0.0, 10.0  # the uniform prior's box, every coordinate

_CACHE: dict[tuple, MCMCResult] = {}


def _inside(theta: Tensor) -> Tensor:
    return ((theta > GK_LOW) & (theta < GK_HIGH)).all(-1)


def gandk_log_posterior(theta: Tensor, x_obs: Tensor, z0: Tensor | None = None
                        ) -> tuple[Tensor, Tensor]:
    r"""Log posterior ``[C]`` (up to a constant) and roots ``z [C, n]`` for ``theta [C, 4]``.

    ``-inf`` outside the prior's box (there the roots are returned unchanged, or zero)."""
    inside = _inside(theta)
    safe = torch.where(inside[:, None], theta, torch.full_like(theta, 0.5 * (GK_LOW + GK_HIGH)))
    x = x_obs.reshape(1, -1).expand(theta.shape[0], -1)
    log_f, z = gk_log_density(x, safe, z0)
    logp = torch.where(inside, log_f.sum(1), torch.full_like(log_f[:, 0], -math.inf))
    if z0 is not None:
        z = torch.where(inside[:, None], z, z0)
    return logp, z


def _value_and_grad(theta: np.ndarray, x_obs: Tensor) -> tuple[float, np.ndarray]:
    th = torch.tensor(theta[None], dtype=torch.float64, requires_grad=True)
    x = x_obs.reshape(1, -1)
    value = gk_log_density(x, th)[0].sum()
    (grad,) = torch.autograd.grad(value, th)
    return -float(value.detach()), -grad[0].numpy()


def gandk_mode(x_obs: Tensor) -> tuple[Tensor, Tensor]:
    r"""Posterior mode ``[4]`` and Laplace covariance ``[4, 4]`` of the g-and-k model."""
    x = x_obs.reshape(-1).to(torch.float64)
    q = torch.quantile(x, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    start = np.array([float(q[1]), max(float(q[2] - q[0]) / 1.349, 1e-3), 0.0, 0.1])
    start = np.clip(start, GK_LOW + 1e-3, GK_HIGH - 1e-3)
    bounds = [(GK_LOW + 1e-6, GK_HIGH - 1e-6)] * 4
    fit = optimize.minimize(_value_and_grad, start, args=(x,), jac=True, method="L-BFGS-B",
                            bounds=bounds, options={"maxiter": 500, "ftol": 1e-14, "gtol": 1e-8})
    mode = fit.x
    step = 1e-5 * np.maximum(np.abs(mode), 1.0)
    hess = np.zeros((4, 4))
    for j in range(4):
        up, down = mode.copy(), mode.copy()
        up[j] += step[j]
        down[j] -= step[j]
        hess[j] = (_value_and_grad(up, x)[1] - _value_and_grad(down, x)[1]) / (2 * step[j])
    hess = 0.5 * (hess + hess.T)
    vals, vecs = np.linalg.eigh(hess)
    vals = np.maximum(vals, 1e-8 * vals.max())  # a flat direction at the box's edge
    cov = vecs @ np.diag(1.0 / vals) @ vecs.T
    return torch.tensor(mode, dtype=torch.float64), torch.tensor(cov, dtype=torch.float64)


def gandk_mcmc(x_obs: Tensor, *, chains: int = 128, min_ess: float = 20_000.0, seed: int = 0,
               adapt_steps: int = 400, iterations: int = 200, max_iterations: int = 2000
               ) -> MCMCResult:
    r"""The g-and-k posterior's MCMC run on ``x_obs [n, 1]`` (cached per data set and settings).

    Returns:
        `MCMCResult` with ``draws [chains, S, 4]``, R-hat, bulk ESS, the
        independence-step acceptance rate and the run's seconds.
    """
    x = torch.as_tensor(x_obs, dtype=torch.float64).reshape(-1)
    key = (hashlib.sha1(x.numpy().tobytes()).hexdigest(), chains, min_ess, seed, adapt_steps,
           iterations, max_iterations)
    if key in _CACHE:
        return _CACHE[key]
    g = torch.Generator().manual_seed(seed)
    mode, cov = gandk_mode(x)
    chol = torch.linalg.cholesky(cov)
    init = torch.empty(0, 4, dtype=torch.float64)
    while init.shape[0] < chains:
        cand = mode + 2.0 * torch.randn(chains, 4, generator=g, dtype=torch.float64) @ chol.T
        init = torch.cat([init, cand[_inside(cand)]])[:chains]
    z0 = torch.zeros(chains, x.numel(), dtype=torch.float64)

    def log_target(theta, z):
        return gandk_log_posterior(theta, x, z)

    result = run_mcmc(log_target, init, z0, adapt_steps=adapt_steps, iterations=iterations,
                      max_iterations=max_iterations, min_ess=min_ess, generator=g)
    if not (bool((result.rhat < 1.01).all()) and bool((result.ess > min_ess).all())):
        warnings.warn(f"the g-and-k reference MCMC did not converge in {max_iterations} "
                      f"iterations: R-hat {result.rhat.tolist()}, ESS {result.ess.tolist()}",
                      RuntimeWarning, stacklevel=2)
    _CACHE[key] = result
    return result
