r"""Long vectorised Metropolis-Hastings runs, for reference posteriors of numerical likelihoods.

``C`` chains run in parallel on a log target $\log \pi(\theta)$ that is evaluated for all
chains at once and may carry a per-chain auxiliary state (e.g. the roots $z_i$ of a
quantile equation at the current parameter, used as the next warm start). Two phases:

1. *adaptation*: random-walk Metropolis $\theta' = \theta + s L \varepsilon$, with
   $L L^\top$ the covariance of the chains' pooled recent draws, re-estimated every
   ``block`` steps, and $s$ tuned towards an acceptance rate of 0.234 (Haario, Saksman and
   Tamminen 2001, An adaptive Metropolis algorithm, Bernoulli; Roberts, Gelman and Gilks 1997,
   Weak convergence and optimal scaling of random walk Metropolis algorithms);
2. *sampling* with the kernels fixed: each iteration is an independence Metropolis-Hastings step
   from a multivariate Student-t (``df`` degrees of freedom) fitted to the adaptation draws,
   followed by a random-walk step. Both leave $\pi$ invariant, so their composition does;
   the independence step makes successive draws nearly independent when the posterior is
   close to the fitted t, and the random-walk step keeps the chains moving where it is not.

The draws of the sampling phase, their rank-normalised split R-hat and bulk ESS (Vehtari et
al. 2021, [`scorebayes.diagnostics`][scorebayes.diagnostics]) are returned; sampling is extended until every
parameter's R-hat is below ``max_rhat`` and its ESS above ``min_ess``, or ``max_iterations``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ...diagnostics import ess, rhat

__all__ = ["MCMCResult", "run_mcmc"]

LogTarget = Callable[[Tensor, Any], tuple[Tensor, Any]]


class MCMCResult(NamedTuple):
    draws: Tensor  # [C, S, d] sampling-phase draws
    rhat: Tensor  # [d]
    ess: Tensor  # [d]
    acceptance: float  # independence-step acceptance rate in the sampling phase
    seconds: float


def _take(new: Any, old: Any, accept: Tensor) -> Any:
    """Per-chain choice between two auxiliary states (tensors with leading dim C, or None)."""
    if new is None:
        return None
    shape = (-1,) + (1,) * (new.dim() - 1)
    return torch.where(accept.reshape(shape), new, old)


def _mh(log_target: LogTarget, theta: Tensor, logp: Tensor, aux: Any, proposal: Tensor,
        log_ratio_q: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor, Any, Tensor]:
    """One Metropolis-Hastings accept/reject for all chains."""
    logp_new, aux_new = log_target(proposal, aux)
    log_u = torch.log(torch.rand(theta.shape[0], generator=generator, dtype=theta.dtype))
    accept = torch.isfinite(logp_new) & (log_u < logp_new - logp + log_ratio_q)
    theta = torch.where(accept[:, None], proposal, theta)
    logp = torch.where(accept, logp_new, logp)
    return theta, logp, _take(aux_new, aux, accept), accept


def _t_draws(mean: Tensor, chol: Tensor, df: int, C: int, generator: torch.Generator) -> Tensor:
    d = mean.numel()
    eps = torch.randn(C, d, generator=generator, dtype=mean.dtype)
    chi2 = (torch.randn(C, df, generator=generator, dtype=mean.dtype) ** 2).sum(1)
    return mean + (eps @ chol.T) / torch.sqrt(chi2 / df)[:, None]


def _t_log_density(theta: Tensor, mean: Tensor, chol: Tensor, df: int) -> Tensor:
    """Unnormalised multivariate-t log density (the constant cancels in the MH ratio)."""
    d = mean.numel()
    y = torch.linalg.solve_triangular(chol, (theta - mean).T, upper=False).T
    return -0.5 * (df + d) * torch.log1p((y * y).sum(1) / df)


def _pooled_cov(draws: Tensor) -> Tensor:
    flat = draws.reshape(-1, draws.shape[-1])
    cov = torch.cov(flat.T).reshape(draws.shape[-1], draws.shape[-1])
    return cov + 1e-12 * torch.eye(cov.shape[0], dtype=cov.dtype) * cov.diagonal().mean()


def run_mcmc(log_target: LogTarget, init: Tensor, aux: Any = None, *, adapt_steps: int = 400,
             block: int = 50, iterations: int = 400, max_iterations: int = 2000,
             min_ess: float = 20_000.0, max_rhat: float = 1.01, df: int = 5,
             generator: torch.Generator | None = None) -> MCMCResult:
    r"""Adaptive random-walk, then independence-plus-random-walk Metropolis on ``C`` chains.

    Arguments:
        log_target: ``(theta [C, d], aux) -> (log pi [C], aux')``; ``-inf`` outside the support;
            ``aux`` is the per-chain auxiliary state of the current parameters (or ``None``).
        init: ``[C, d]`` over-dispersed starting points inside the support.
        aux: the auxiliary state at ``init`` (``None`` if unused).
        adapt_steps: random-walk steps of the adaptation phase (discarded).
        block: steps between covariance and scale updates during adaptation.
        iterations: sampling iterations of the first pass; extended by the same number while the
            diagnostics fail, up to ``max_iterations``.
        min_ess, max_rhat: the stopping rule (every parameter).
        df: degrees of freedom of the independence proposal (an integer > 2).
        generator: random numbers (fixed seed: a deterministic run).
    """
    if int(df) != df or df <= 2:
        raise ValueError(f"df must be an integer above 2, got {df}")
    df = int(df)
    start = time.perf_counter()
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    theta = init.to(torch.float64).clone()
    C, d = theta.shape
    logp, aux = log_target(theta, aux)
    if not torch.isfinite(logp).all():
        raise ValueError("every starting point must have a finite log target")
    scale = 2.38 / math.sqrt(d)
    zero = torch.zeros(C, dtype=theta.dtype)  # the log proposal ratio of a random walk
    chol = torch.linalg.cholesky(_pooled_cov(theta[:, None]))
    history, block_acceptance = [], 0.0
    for step in range(adapt_steps):
        prop = theta + scale * torch.randn(C, d, generator=g, dtype=theta.dtype) @ chol.T
        theta, logp, aux, acc = _mh(log_target, theta, logp, aux, prop, zero, g)
        history.append(theta)
        block_acceptance += float(acc.double().mean()) / block
        if (step + 1) % block == 0:
            recent = torch.stack(history[len(history) // 2:], 1)
            chol = torch.linalg.cholesky(_pooled_cov(recent))
            scale *= math.exp(block_acceptance - 0.234)
            block_acceptance = 0.0
    recent = torch.stack(history[len(history) // 2:], 1).reshape(-1, d)
    mean, t_chol = recent.mean(0), torch.linalg.cholesky(_pooled_cov(recent[None]))
    t_chol = t_chol * 1.2 * math.sqrt((df - 2) / df)  # the t's covariance: 1.44 x the fitted one
    draws, accepted, done = [], 0.0, 0
    while True:
        for _ in range(iterations):
            prop = _t_draws(mean, t_chol, df, C, g)
            ratio = _t_log_density(theta, mean, t_chol, df) - _t_log_density(prop, mean, t_chol, df)
            theta, logp, aux, acc = _mh(log_target, theta, logp, aux, prop, ratio, g)
            accepted += float(acc.double().mean())
            prop = theta + scale * torch.randn(C, d, generator=g, dtype=theta.dtype) @ chol.T
            theta, logp, aux, _ = _mh(log_target, theta, logp, aux, prop, zero, g)
            draws.append(theta)
        done += iterations
        chains = torch.stack(draws, 1)
        r = torch.tensor([rhat(chains[..., j].numpy()) for j in range(d)], dtype=torch.float64)
        e = torch.tensor([ess(chains[..., j].numpy()) for j in range(d)], dtype=torch.float64)
        if (bool((r < max_rhat).all()) and bool((e > min_ess).all())) or done >= max_iterations:
            break
    return MCMCResult(chains, r, e, accepted / done, time.perf_counter() - start)
