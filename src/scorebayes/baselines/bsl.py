r"""Bayesian synthetic likelihood (Price, Drovandi, Lee and Nott, 2018).

The intractable likelihood of the summary $s_{obs} = s(\mathbf X^*)$ is replaced by a
Gaussian whose moments are estimated from $M$ simulations at each proposed
$\theta$,

$$
\hat p(s_{obs} \mid \theta) = \mathcal N(s_{obs};\, \hat\mu_\theta, \hat\Sigma_\theta),
\quad \hat\mu_\theta = \frac1M \sum_{m} s_m, \quad
\hat\Sigma_\theta = \frac{1}{M-1}\sum_m (s_m - \hat\mu_\theta)(s_m - \hat\mu_\theta)^\top,
$$

inside a random-walk Metropolis-Hastings chain on the unconstrained parameter
$u = T^{-1}(\theta)$ ([`ParameterSpace`][scorebayes.priors.ParameterSpace]) with target
$\hat p(s_{obs} \mid T(u))\, \pi(T(u))\, |\det J_T(u)|$. As in pseudo-marginal MCMC
the estimate at the current state is kept until the next acceptance.

Proposal: $u' = u + \sigma L z$, $z \sim \mathcal N(0, I)$.
$LL^\top$ is the diagonal of the localized proposal $q$ when given (kept, unless
``adapt_covariance=True``), otherwise it is re-estimated from the chains (pooled
within-chain covariance, rescaled to the current proposal's volume) at the end of doubling
windows of the burn-in, which doubles as the pilot run. The scale $\sigma$ starts at
$2.38/\sqrt d$ (times 0.1 without $q$, the initial shape being the prior's
spread) and is adapted during burn-in by Robbins-Monro,
$\log\sigma \mathrel{+}= t^{-0.6}(\bar a_t - a^*)$, towards the acceptance rate
$a^* = 0.25$; everything is frozen after burn-in. Chains start at the mean of
$q$, or at prior draws without localization.

All ``C`` chains advance together: one batched simulator call with ``C * M`` data sets
per iteration. Cost: chains x length x M data sets.

Reliability: with ``store`` (a [`RunStore`][scorebayes.store.RunStore]) the whole
chain state (states, estimates, adaptation, generator state) is checkpointed atomically
every ``checkpoint_every`` iterations, and a re-run continues from the last checkpoint to
bit-identical draws. With ``on_simulator_error = "skip"``/``"retry"`` a batch call that
raises is re-run chain by chain (``retries`` tries each); a proposal whose simulations keep
failing, or are non-finite, gets $\hat p = 0$ and is rejected, and is counted.

Paper settings (defaults follow the M/G/1 queue):

==============  ===============================  ==================  ======================
example         summary                          chains x length      sims/iteration M
==============  ===============================  ==================  ======================
M/G/1           mean and element-wise SD of X_n  10 x 3000 (1000 bi)  100
monotone        $D^\top y$                 10 x 1200 (200 bi)   100
epidemic        mean and SD of the rows of S     10 x 1000 (200 bi)   100 (set. 1), 200 (2)
==============  ===============================  ==================  ======================

References:
    - Bayesian synthetic likelihood (Price, Drovandi, Lee, Nott, 2018), JCGS 27(1).
      <https://doi.org/10.1080/10618600.2017.1302882>
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5, baselines)
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Distribution
from tqdm.auto import tqdm

from ..posterior import Posterior
from ..priors import ParameterSpace
from ..simulators import as_simulator
from ..table_blocks import FAULT_MODES
from ._common import as_observed, check_integers, resume_checkpoint, uses_prior
from .bsl_chains import (BSLSettings, Chains, gaussian_synthetic_loglik, initial_chains, iterate,
                         log_synthetic_likelihood, save_chains)

__all__ = ["bsl", "mean_sd_summary", "gaussian_synthetic_loglik"]


def mean_sd_summary(x: Tensor) -> Tensor:
    r"""Sample mean and element-wise SD of each column: ``x [B, n, p] -> [B, 2p]``."""
    return torch.cat([x.mean(1), x.std(1)], dim=-1)


def bsl(
    x_obs: Tensor,
    simulator: Any,
    prior: Distribution,
    *,
    summary: Callable[[Tensor], Tensor] = mean_sd_summary,
    num_chains: int = 10,
    num_steps: int = 3000,
    burn_in: int = 1000,
    num_sims: int = 100,
    sampler: Any = None,
    init: Tensor | None = None,
    target_acceptance: float = 0.25,
    adapt: bool = True,
    adapt_covariance: bool | None = None,
    names: Sequence[str] | None = None,
    generator: torch.Generator | None = None,
    progress: bool = False,
    on_simulator_error: str = "raise",
    retries: int = 3,
    max_failure_fraction: float = 0.1,
    store: Any = None,
    checkpoint_every: int = 100,
) -> Posterior:
    r"""Random-walk MH with a Gaussian synthetic likelihood, ``num_chains`` chains at once.

    Arguments:
        x_obs: observed data ``[n, p]``.
        simulator: batched ``(theta [B, d], n, generator) -> x [B, n, p]``.
        prior: $\pi$, a ``Distribution`` with event shape ``[d]``.
        summary: ``x [B, n, p] -> [B, k]`` (default: mean and SD of each column).
        num_chains: $C$.
        num_steps: chain length $L$ including burn-in (the initial state counts).
        burn_in: states dropped from the start of each chain (the adaptation phase).
        num_sims: $M$ simulations per likelihood estimate (``>= 2``, and ``> k``
            for a non-singular covariance).
        sampler: a localized ``GaussianProposal`` $q$: its mean initialises the
            chains and its diagonal shapes the random walk. ``None``/prior: prior draws
            and a covariance estimated during burn-in.
        init: optional initial ``theta [d]`` or ``[C, d]`` (overrides ``sampler``).
        target_acceptance: acceptance rate targeted during burn-in.
        adapt: adapt scale (and, without ``q``, covariance) during burn-in.
        adapt_covariance: re-estimate the random walk's covariance from the chains during
            burn-in. ``None``: only without ``q``. ``True`` with ``q``: its diagonal is then
            only the starting shape, which a strongly correlated posterior needs (the monotone
            regression's Bernstein coefficients: a diagonal walk barely moves there).
        names: ``d`` parameter names.
        generator: all randomness (proposals, simulations, initial draws).
        progress: tqdm bar over iterations.
        on_simulator_error: ``"raise"`` (default), ``"skip"`` or ``"retry"`` (``retries``
            tries per chain): a proposal whose simulations fail or are non-finite is rejected
            and counted; more than ``max_failure_fraction`` of all proposals raises.
        store: a [`RunStore`][scorebayes.store.RunStore]: checkpoint ``bsl/chain`` every
            ``checkpoint_every`` iterations and resume from it (needs ``generator``).

    Returns:
        [`Posterior`][scorebayes.posterior.Posterior] with ``samples [C, L - burn_in, d]``;
        ``info`` has ``method``, ``simulations`` ($C L M$), ``seconds``,
        ``acceptance_rate`` (after burn-in), ``acceptance_per_chain``, ``proposal_scale``,
        ``proposal_sd_unconstrained``, ``failed_simulations`` and ``nonfinite_simulations``
        (proposals rejected because of simulator faults) and ``resumed_simulations``.
    """
    start = time.perf_counter()
    run = _settings(x_obs, simulator, prior, summary=summary, num_chains=num_chains, num_steps=num_steps,
                    burn_in=burn_in, num_sims=num_sims, sampler=sampler, target_acceptance=target_acceptance,
                    adapt=adapt, adapt_covariance=adapt_covariance, on_simulator_error=on_simulator_error,
                    retries=retries, max_failure_fraction=max_failure_fraction, store=store,
                    checkpoint_every=checkpoint_every, generator=generator)
    state = initial_chains(run, prior, sampler, init)
    resumed = _start_or_resume(run, state)
    bar = tqdm(range(state.first, num_steps), desc="BSL", disable=not progress, leave=False)
    for t in bar:
        iterate(run, state, t)
        if progress and t % 50 == 0:
            bar.set_postfix(acc=f"{state.accepted[:, max(1, t - 199):t + 1].double().mean():.2f}")
        if store is not None and (t % checkpoint_every == 0 or t == num_steps - 1):
            save_chains(run, state, t)
    bar.close()
    info = _info(run, state, resumed, time.perf_counter() - start)
    faults = state.faults
    if faults["failed"] + faults["nonfinite"]:
        warnings.warn(
            f"bsl: rejected {faults['failed']} proposals whose simulations failed and "
            f"{faults['nonfinite']} with non-finite simulations; if failures depend on theta, "
            "the chains avoid those parameters and the posterior is biased away from them",
            stacklevel=2)
    return Posterior(state.chain[:, burn_in:], names, info=info)


def _settings(x_obs: Tensor, simulator: Any, prior: Distribution, *, summary: Callable[[Tensor], Tensor],
              num_chains: int, num_steps: int, burn_in: int, num_sims: int, sampler: Any,
              target_acceptance: float, adapt: bool, adapt_covariance: bool | None, on_simulator_error: str,
              retries: int, max_failure_fraction: float, store: Any, checkpoint_every: int,
              generator: torch.Generator | None) -> BSLSettings:
    """Check every setting and the observed summary (before any simulation)."""
    x_obs = as_observed(x_obs)
    simulator = as_simulator(simulator)
    check_integers(("num_chains", num_chains, 1), ("num_steps", num_steps, 2), ("num_sims", num_sims, 2),
                   ("burn_in", burn_in, 0))
    if burn_in >= num_steps:
        raise ValueError(f"burn_in={burn_in} leaves no draws from num_steps={num_steps}")
    if not 0 < target_acceptance < 1:
        raise ValueError(f"target_acceptance must be in (0, 1), got {target_acceptance!r}")
    if not callable(summary):
        raise TypeError("summary must be a callable x [B, n, p] -> [B, k]")
    if on_simulator_error not in FAULT_MODES:
        raise ValueError(f"on_simulator_error must be one of {FAULT_MODES}, got "
                         f"{on_simulator_error!r}")
    check_integers(("retries", retries, 1), ("checkpoint_every", checkpoint_every, 1), positive=True)
    if not 0.0 <= max_failure_fraction <= 1.0:
        raise ValueError(f"max_failure_fraction must be in [0, 1], got {max_failure_fraction!r}")
    if store is not None and generator is None:
        raise ValueError("bsl with a store needs a generator (its state is checkpointed)")
    space = ParameterSpace(prior)
    s_obs = torch.as_tensor(summary(x_obs[None])).to(torch.float64)
    if s_obs.dim() != 2 or s_obs.shape[0] != 1 or not torch.isfinite(s_obs).all():
        raise ValueError(f"summary(x [1, n, p]) must return finite [1, k], got "
                         f"{tuple(s_obs.shape)}")
    s_obs = s_obs[0]
    k = s_obs.numel()
    if num_sims <= k:
        raise ValueError(f"num_sims={num_sims} must exceed the summary dimension k={k} "
                         "(otherwise the covariance estimate is singular)")
    localized = not uses_prior(sampler, prior) and hasattr(sampler, "sd")
    return BSLSettings(
        space=space, simulator=simulator, summary=summary, s_obs=s_obs, n=x_obs.shape[0], obs_dim=x_obs.shape[1],
        num_chains=num_chains, num_steps=num_steps, burn_in=burn_in, num_sims=num_sims,
        target_acceptance=target_acceptance, adapt=adapt,
        adapt_cov=(not localized) if adapt_covariance is None else bool(adapt_covariance), localized=localized,
        on_simulator_error=on_simulator_error, retries=retries, max_failure_fraction=max_failure_fraction,
        store=store, checkpoint_every=checkpoint_every, generator=generator)


def _start_or_resume(run: BSLSettings, state: Chains) -> bool:
    """Continue after the last iteration checkpointed in ``run.store`` (its recipe checked; True),
    or estimate the likelihood at the starting states (False)."""
    recipe = {"num_chains": run.num_chains, "num_steps": run.num_steps, "burn_in": run.burn_in,
              "num_sims": run.num_sims, "adapt": bool(run.adapt), "target": float(run.target_acceptance),
              "adapt_covariance": run.adapt_cov,
              "on_error": run.on_simulator_error, "retries": run.retries, "s_obs": run.s_obs.tolist()}
    saved = resume_checkpoint(run.store, "bsl", "a bsl chain", recipe, "chain")
    if saved is None:
        state.lp = run.space.log_prob_unconstrained(state.u)
        state.ll = log_synthetic_likelihood(run, state, state.u, state.lp)
        state.chain[:, 0] = run.space.to_constrained(state.u)
        state.first = 1
        return False
    state.first = first = int(saved["t"]) + 1
    state.u, state.ll, state.lp, state.chol = saved["u"], saved["ll"], saved["lp"], saved["chol"]
    state.chain[:, :first], state.accepted[:, :first] = saved["chain"], saved["accepted"]
    state.log_scale, state.window_start, state.window_end = (float(saved["log_scale"]),
                                                             int(saved["window_start"]), int(saved["window_end"]))
    state.faults.update(failed=int(saved["failed"]), nonfinite=int(saved["nonfinite"]))
    run.generator.set_state(saved["generator"])
    return True


def _info(run: BSLSettings, state: Chains, resumed: bool, seconds: float) -> dict[str, Any]:
    """The posterior's ``info`` (see `bsl()`)."""
    kept_acc = state.accepted[:, max(run.burn_in, 1):]
    scale = math.exp(state.log_scale)
    return {
        "method": "bsl",
        "simulations": float(run.num_chains * run.num_steps * run.num_sims),
        "num_chains": run.num_chains,
        "num_steps": run.num_steps,
        "burn_in": run.burn_in,
        "num_sims": run.num_sims,
        "summary_dim": run.s_obs.numel(),
        "acceptance_rate": float(kept_acc.double().mean()),
        "acceptance_per_chain": kept_acc.double().mean(1).tolist(),
        "proposal_scale": scale,
        "proposal_sd_unconstrained": (scale * (state.chol @ state.chol.T).diagonal().sqrt()).tolist(),
        "failed_simulations": state.faults["failed"],
        "nonfinite_simulations": state.faults["nonfinite"],
        "resumed_simulations": float(run.num_chains * (state.first if resumed else 0) * run.num_sims),
        "seconds": seconds,
    }
