r"""The random walk of Bayesian synthetic likelihood (`bsl()`), one iteration at a time.

`gaussian_synthetic_loglik()` is the Gaussian synthetic log likelihood
$\log \mathcal N(s_{obs}; \hat\mu_\theta, \hat\Sigma_\theta)$ from ``M`` simulated summaries;
`log_synthetic_likelihood()` simulates them for all ``C`` chains in one batched call (with
the simulator-fault modes of `scorebayes.table_blocks`); `iterate()` is one Metropolis-Hastings
step of the ``C`` chains on $u = T^{-1}(\theta)$, with the burn-in's Robbins-Monro scale and
doubling-window covariance adaptation; `Chains` is what a checkpoint saves (`save_chains()`).

References:
    - Bayesian synthetic likelihood (Price, Drovandi, Lee, Nott, 2018), JCGS 27(1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Distribution

from ..priors import ParameterSpace
from ..priors import sample as sample_prior
from ..simulators import SimulatorError
from ..table_blocks import simulate_groups

__all__ = ["BSLSettings", "Chains", "gaussian_synthetic_loglik", "initial_chains", "log_synthetic_likelihood",
           "iterate", "save_chains"]


def gaussian_synthetic_loglik(s_obs: Tensor, s: Tensor) -> Tensor:
    r"""$\log \mathcal N(s_{obs}; \hat\mu, \hat\Sigma)$ from simulated summaries.

    Arguments:
        s_obs: observed summary ``[k]``.
        s: simulated summaries ``[C, M, k]`` (``M >= 2``).

    Returns:
        ``[C]`` float64; ``-inf`` where the summaries are non-finite or $\hat\Sigma$
        stays singular after a small ridge.
    """
    s = s.to(torch.float64)
    num_chains, m, k = s.shape
    mu = s.mean(1)
    centred = s - mu[:, None]
    cov = centred.transpose(1, 2) @ centred / (m - 1)
    chol, info = torch.linalg.cholesky_ex(cov)
    ridge = 1e-10
    while bool((info > 0).any()) and ridge < 1e-2:  # singular: add a ridge relative to the scale
        scale = cov.diagonal(dim1=1, dim2=2).mean(-1).clamp_min(1e-300)
        jitter = (ridge * scale)[:, None, None] * torch.eye(k, dtype=cov.dtype)
        failed = (info > 0)[:, None, None]
        chol, info = torch.linalg.cholesky_ex(torch.where(failed, cov + jitter, cov))
        ridge *= 100
    diff = (s_obs.to(torch.float64) - mu)[..., None]
    z = torch.linalg.solve_triangular(chol, diff, upper=False)[..., 0]
    logdet = 2 * chol.diagonal(dim1=1, dim2=2).log().sum(-1)
    out = -0.5 * (z**2).sum(-1) - 0.5 * logdet - 0.5 * k * math.log(2 * math.pi)
    bad = (info > 0) | ~torch.isfinite(s).flatten(1).all(1) | ~torch.isfinite(out)
    return torch.where(bad, torch.full_like(out, -math.inf), out)


@dataclass(frozen=True)
class BSLSettings:
    """The checked settings of one `bsl()` run (``s_obs [k]``: the observed summary)."""

    space: ParameterSpace
    simulator: Any
    summary: Callable[[Tensor], Tensor]
    s_obs: Tensor
    n: int
    obs_dim: int
    num_chains: int
    num_steps: int
    burn_in: int
    num_sims: int
    target_acceptance: float
    adapt: bool
    adapt_cov: bool
    localized: bool
    on_simulator_error: str
    retries: int
    max_failure_fraction: float
    store: Any
    checkpoint_every: int
    generator: torch.Generator | None


@dataclass
class Chains:
    """The state of the ``C`` chains: current ``u [C, d]``, its log synthetic likelihood ``ll`` and
    log prior ``lp``, the random walk's Cholesky factor and log scale, the adaptation window, the
    states and acceptances so far, the fault counts; iteration ``first`` comes next."""

    u: Tensor
    chol: Tensor
    log_scale: float
    chain: Tensor
    accepted: Tensor
    window_start: int
    window_end: int
    ll: Tensor | None = None
    lp: Tensor | None = None
    first: int = 1
    faults: dict[str, int] = field(default_factory=lambda: {"failed": 0, "nonfinite": 0})


def _initial_states(space: ParameterSpace, prior: Distribution, sampler: Any, init: Any,
                    num_chains: int, generator: torch.Generator | None) -> Tensor:
    """Initial unconstrained states ``u [C, d]``."""
    d = space.dim
    if init is not None:
        theta = torch.as_tensor(init, dtype=torch.float64)
        theta = theta.expand(num_chains, d) if theta.dim() == 1 else theta
        if tuple(theta.shape) != (num_chains, d):
            raise ValueError(f"init must be theta [d={d}] or [num_chains={num_chains}, d], got "
                             f"{tuple(torch.as_tensor(init).shape)}")
        if not torch.isfinite(prior.log_prob(theta)).all():
            raise ValueError("init lies outside the prior's support")
        return space.to_unconstrained(theta).clone()
    if sampler is not None and hasattr(sampler, "mean") and isinstance(sampler.mean, Tensor) \
            and sampler.mean.shape == (d,) and hasattr(sampler, "sd"):
        return sampler.mean.to(torch.float64).expand(num_chains, d).clone()
    theta = sample_prior(prior, num_chains, generator=generator).to(torch.float64)
    return space.to_unconstrained(theta)


def initial_chains(run: BSLSettings, prior: Distribution, sampler: Any, init: Any) -> Chains:
    """The chains' starting states, the random walk's initial shape (the diagonal of ``q``, or the
    prior's spread in ``u``) and scale, and empty chains."""
    space, generator = run.space, run.generator
    d = space.dim
    u = _initial_states(space, prior, sampler, init, run.num_chains, generator)
    if run.localized:
        base_sd = sampler.sd.to(torch.float64)
        chol = torch.diag(base_sd)
    else:
        prior_u = space.to_unconstrained(sample_prior(prior, 2000, generator=generator)
                                         .to(torch.float64))
        chol = torch.diag(prior_u.std(0).clamp_min(1e-8))
    log_scale = math.log(2.38 / math.sqrt(d)) + (0.0 if run.localized else math.log(0.1))
    return Chains(u=u, chol=chol, log_scale=log_scale,
                  chain=torch.empty(run.num_chains, run.num_steps, d, dtype=torch.float64),
                  accepted=torch.zeros(run.num_chains, run.num_steps, dtype=torch.bool),
                  window_start=1, window_end=min(run.burn_in, 50))


def _simulate(run: BSLSettings, state: Chains, theta: Tensor, ok: Tensor) -> tuple[Tensor, Tensor]:
    """``x [C*M, n, p]`` and the chains whose simulations all worked ``[C]``."""
    if run.on_simulator_error == "raise":
        return run.simulator(theta.repeat_interleave(run.num_sims, 0), run.n, run.generator), ok
    x, good, failed, nonfinite = simulate_groups(
        run.simulator, theta, run.num_sims, run.n, run.generator, retries=run.retries
        if run.on_simulator_error == "retry" else 1, active=ok, obs_dim=run.obs_dim)
    faults = state.faults
    faults["failed"] += failed
    faults["nonfinite"] += nonfinite
    if faults["failed"] + faults["nonfinite"] > run.max_failure_fraction * run.num_chains * run.num_steps:
        raise SimulatorError(
            f"bsl: {faults['failed']} proposals' simulations raised and "
            f"{faults['nonfinite']} returned non-finite values, more than "
            f"max_failure_fraction = {run.max_failure_fraction} of {run.num_chains * run.num_steps}: "
            "fix the simulator or restrict the prior to where it works")
    return x, ok & good


def log_synthetic_likelihood(run: BSLSettings, state: Chains, u_new: Tensor, lp: Tensor) -> Tensor:
    """The log synthetic likelihood at ``u_new [C, d]`` (``-inf`` where ``lp`` is, or the
    simulations failed); chains outside the prior simulate at their current state instead."""
    space, num_chains, num_sims, k = run.space, run.num_chains, run.num_sims, run.s_obs.numel()
    theta = space.to_constrained(u_new)
    ok = torch.isfinite(lp)
    theta = torch.where(ok[:, None], theta, space.to_constrained(state.u))  # never simulate outside
    x, ok = _simulate(run, state, theta, ok)
    s = torch.as_tensor(run.summary(x))
    if s.dim() != 2 or s.shape != (num_chains * num_sims, k):
        raise ValueError(f"summary returned shape {tuple(s.shape)}, expected "
                         f"[{num_chains * num_sims}, {k}]")
    ll = gaussian_synthetic_loglik(run.s_obs, s.reshape(num_chains, num_sims, k))
    return torch.where(ok, ll, torch.full_like(ll, -math.inf))


def iterate(run: BSLSettings, state: Chains, t: int) -> None:
    """Iteration ``t``: propose, estimate the likelihood, accept or reject, adapt during burn-in."""
    space, generator, num_chains = run.space, run.generator, run.num_chains
    z = torch.randn(num_chains, space.dim, generator=generator, dtype=torch.float64)
    u_prop = state.u + math.exp(state.log_scale) * z @ state.chol.T
    lp_prop = space.log_prob_unconstrained(u_prop)
    ll_prop = log_synthetic_likelihood(run, state, u_prop, lp_prop)
    log_alpha = (ll_prop + lp_prop) - (state.ll + state.lp)
    log_unif = torch.rand(num_chains, generator=generator, dtype=torch.float64).log()
    accept = (log_unif < log_alpha) & torch.isfinite(ll_prop + lp_prop)
    state.u = torch.where(accept[:, None], u_prop, state.u)
    state.ll = torch.where(accept, ll_prop, state.ll)
    state.lp = torch.where(accept, lp_prop, state.lp)
    state.chain[:, t] = space.to_constrained(state.u)
    state.accepted[:, t] = accept
    if run.adapt and t < run.burn_in:
        _adapt_walk(run, state, t, accept)


def _adapt_walk(run: BSLSettings, state: Chains, t: int, accept: Tensor) -> None:
    """Robbins-Monro on the log scale; at the end of a doubling window, the walk's new shape."""
    state.log_scale += (t ** -0.6) * (accept.double().mean().item() - run.target_acceptance)
    if run.adapt_cov and t == state.window_end:
        window = slice(state.window_start, t + 1)
        new = _window_covariance(run.space.to_unconstrained(state.chain[:, window]), state.accepted[:, window])
        if new is not None:  # new shape, same volume: the tuned scale stays valid
            shift = state.chol.diagonal().log().mean() - new.diagonal().log().mean()
            state.chol = new * shift.exp()
        state.window_start, state.window_end = t + 1, min(run.burn_in - 1, 2 * t)


def save_chains(run: BSLSettings, state: Chains, t: int) -> None:
    """Save the whole chain state after iteration ``t``."""
    run.store.save_checkpoint("bsl/chain", {
        "t": t, "u": state.u, "ll": state.ll, "lp": state.lp, "chol": state.chol,
        "chain": state.chain[:, :t + 1], "accepted": state.accepted[:, :t + 1], "log_scale": state.log_scale,
        "window_start": state.window_start, "window_end": state.window_end,
        "generator": run.generator.get_state(), **state.faults})


def _window_covariance(u: Tensor, accepted: Tensor) -> Tensor | None:
    r"""Cholesky factor of the pooled within-chain covariance of ``u [C, W, d]``.

    ``None`` when the window has too few accepted moves to estimate it.
    """
    num_chains, width, d = u.shape
    if width < 2 or accepted.sum() < max(2 * d, 0.05 * accepted.numel()):
        return None
    centred = u - u.mean(1, keepdim=True)
    cov = torch.einsum("cwi,cwj->ij", centred, centred) / (num_chains * (width - 1))
    cov = cov + 1e-10 * cov.diagonal().mean() * torch.eye(d, dtype=cov.dtype)
    new, info = torch.linalg.cholesky_ex(cov)
    return None if int(info) > 0 or not torch.isfinite(new).all() else new
