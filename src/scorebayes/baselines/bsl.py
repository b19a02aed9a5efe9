r"""Bayesian synthetic likelihood (Price, Drovandi, Lee and Nott, 2018).

The intractable likelihood of the summary :math:`s_{obs} = s(\mathbf X^*)` is replaced by a
Gaussian whose moments are estimated from :math:`M` simulations at each proposed
:math:`\theta`,

.. math:: \hat p(s_{obs} \mid \theta) = \mathcal N(s_{obs};\, \hat\mu_\theta, \hat\Sigma_\theta),
          \quad \hat\mu_\theta = \frac1M \sum_{m} s_m, \quad
          \hat\Sigma_\theta = \frac{1}{M-1}\sum_m (s_m - \hat\mu_\theta)(s_m - \hat\mu_\theta)^\top,

inside a random-walk Metropolis-Hastings chain on the unconstrained parameter
:math:`u = T^{-1}(\theta)` (:class:`~scorebayes.priors.ParameterSpace`) with target
:math:`\hat p(s_{obs} \mid T(u))\, \pi(T(u))\, |\det J_T(u)|`. As in pseudo-marginal MCMC
the estimate at the current state is kept until the next acceptance.

Proposal: :math:`u' = u + \sigma L z`, :math:`z \sim \mathcal N(0, I)`.
:math:`LL^\top` is the diagonal of the localized proposal :math:`q` when given (kept, unless
``adapt_covariance=True``), otherwise it is re-estimated from the chains (pooled
within-chain covariance, rescaled to the current proposal's volume) at the end of doubling
windows of the burn-in, which doubles as the pilot run. The scale :math:`\sigma` starts at
:math:`2.38/\sqrt d` (times 0.1 without :math:`q`, the initial shape being the prior's
spread) and is adapted during burn-in by Robbins-Monro,
:math:`\log\sigma \mathrel{+}= t^{-0.6}(\bar a_t - a^*)`, towards the acceptance rate
:math:`a^* = 0.25`; everything is frozen after burn-in. Chains start at the mean of
:math:`q`, or at prior draws without localization.

All ``C`` chains advance together: one batched simulator call with ``C * M`` data sets
per iteration. Cost: chains x length x M data sets.

Reliability: with ``store`` (a :class:`~scorebayes.store.RunStore`) the whole
chain state (states, estimates, adaptation, generator state) is checkpointed atomically
every ``checkpoint_every`` iterations, and a re-run continues from the last checkpoint to
bit-identical draws. With ``on_simulator_error = "skip"``/``"retry"`` a batch call that
raises is re-run chain by chain (``retries`` tries each); a proposal whose simulations keep
failing, or are non-finite, gets :math:`\hat p = 0` and is rejected, and is counted.

Paper settings (defaults follow the M/G/1 queue):

==============  ===============================  ==================  ======================
example         summary                          chains x length      sims/iteration M
==============  ===============================  ==================  ======================
M/G/1           mean and element-wise SD of X_n  10 x 3000 (1000 bi)  100
monotone        :math:`D^\top y`                 10 x 1200 (200 bi)   100
epidemic        mean and SD of the rows of S     10 x 1000 (200 bi)   100 (set. 1), 200 (2)
==============  ===============================  ==================  ======================

References:
    | Bayesian synthetic likelihood (Price, Drovandi, Lee, Nott, 2018), JCGS 27(1).
    | https://doi.org/10.1080/10618600.2017.1302882
    | Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
    | https://arxiv.org/abs/2509.03853 (Sec. 5, baselines)
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
from ..priors import sample as sample_prior
from ..simulators import SimulatorError, as_simulator
from ..table_blocks import FAULT_MODES, simulate_groups
from ._common import as_observed, resume_checkpoint, uses_prior

__all__ = ["bsl", "mean_sd_summary", "gaussian_synthetic_loglik"]


def mean_sd_summary(x: Tensor) -> Tensor:
    r"""Sample mean and element-wise SD of each column: ``x [B, n, p] -> [B, 2p]``."""
    return torch.cat([x.mean(1), x.std(1)], dim=-1)


def gaussian_synthetic_loglik(s_obs: Tensor, s: Tensor) -> Tensor:
    r""":math:`\log \mathcal N(s_{obs}; \hat\mu, \hat\Sigma)` from simulated summaries.

    Arguments:
        s_obs: observed summary ``[k]``.
        s: simulated summaries ``[C, M, k]`` (``M >= 2``).

    Returns:
        ``[C]`` float64; ``-inf`` where the summaries are non-finite or :math:`\hat\Sigma`
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


def _init_state(space: ParameterSpace, prior: Distribution, sampler: Any, init: Any,
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
        prior: :math:`\pi`, a ``Distribution`` with event shape ``[d]``.
        summary: ``x [B, n, p] -> [B, k]`` (default: mean and SD of each column).
        num_chains: :math:`C`.
        num_steps: chain length :math:`L` including burn-in (the initial state counts).
        burn_in: states dropped from the start of each chain (the adaptation phase).
        num_sims: :math:`M` simulations per likelihood estimate (``>= 2``, and ``> k``
            for a non-singular covariance).
        sampler: a localized ``GaussianProposal`` :math:`q`: its mean initialises the
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
        store: a :class:`~scorebayes.store.RunStore`: checkpoint ``bsl/chain`` every
            ``checkpoint_every`` iterations and resume from it (needs ``generator``).

    Returns:
        :class:`~scorebayes.posterior.Posterior` with ``samples [C, L - burn_in, d]``;
        ``info`` has ``method``, ``simulations`` (:math:`C L M`), ``seconds``,
        ``acceptance_rate`` (after burn-in), ``acceptance_per_chain``, ``proposal_scale``,
        ``proposal_sd_unconstrained``, ``failed_simulations`` and ``nonfinite_simulations``
        (proposals rejected because of simulator faults) and ``resumed_simulations``.
    """
    start = time.perf_counter()
    x_obs = as_observed(x_obs)
    simulator = as_simulator(simulator)
    for label, value, low in (("num_chains", num_chains, 1), ("num_steps", num_steps, 2),
                              ("num_sims", num_sims, 2), ("burn_in", burn_in, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
    if burn_in >= num_steps:
        raise ValueError(f"burn_in={burn_in} leaves no draws from num_steps={num_steps}")
    if not 0 < target_acceptance < 1:
        raise ValueError(f"target_acceptance must be in (0, 1), got {target_acceptance!r}")
    if not callable(summary):
        raise TypeError("summary must be a callable x [B, n, p] -> [B, k]")
    if on_simulator_error not in FAULT_MODES:
        raise ValueError(f"on_simulator_error must be one of {FAULT_MODES}, got "
                         f"{on_simulator_error!r}")
    for label, value in (("retries", retries), ("checkpoint_every", checkpoint_every)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if not 0.0 <= max_failure_fraction <= 1.0:
        raise ValueError(f"max_failure_fraction must be in [0, 1], got {max_failure_fraction!r}")
    if store is not None and generator is None:
        raise ValueError("bsl with a store needs a generator (its state is checkpointed)")
    space = ParameterSpace(prior)
    d, n = space.dim, x_obs.shape[0]
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
    u = _init_state(space, prior, sampler, init, num_chains, generator)
    if localized:
        base_sd = sampler.sd.to(torch.float64)
        chol = torch.diag(base_sd)
    else:
        prior_u = space.to_unconstrained(sample_prior(prior, 2000, generator=generator)
                                         .to(torch.float64))
        chol = torch.diag(prior_u.std(0).clamp_min(1e-8))
    log_scale = math.log(2.38 / math.sqrt(d)) + (0.0 if localized else math.log(0.1))

    faults = {"failed": 0, "nonfinite": 0}
    budget = max_failure_fraction * num_chains * num_steps

    def simulate(theta: Tensor, ok: Tensor) -> tuple[Tensor, Tensor]:
        """``x [C*M, n, p]`` and the chains whose simulations all worked ``[C]``."""
        if on_simulator_error == "raise":
            return simulator(theta.repeat_interleave(num_sims, 0), n, generator), ok
        x, good, failed, nonfinite = simulate_groups(
            simulator, theta, num_sims, n, generator, retries=retries if on_simulator_error ==
            "retry" else 1, active=ok, obs_dim=x_obs.shape[1])
        faults["failed"] += failed
        faults["nonfinite"] += nonfinite
        if faults["failed"] + faults["nonfinite"] > budget:
            raise SimulatorError(
                f"bsl: {faults['failed']} proposals' simulations raised and "
                f"{faults['nonfinite']} returned non-finite values, more than "
                f"max_failure_fraction = {max_failure_fraction} of {num_chains * num_steps}: "
                "fix the simulator or restrict the prior to where it works")
        return x, ok & good

    def log_lik(u_new: Tensor, lp: Tensor) -> Tensor:
        theta = space.to_constrained(u_new)
        ok = torch.isfinite(lp)
        theta = torch.where(ok[:, None], theta, space.to_constrained(u))  # never simulate outside
        x, ok = simulate(theta, ok)
        s = torch.as_tensor(summary(x))
        if s.dim() != 2 or s.shape != (num_chains * num_sims, k):
            raise ValueError(f"summary returned shape {tuple(s.shape)}, expected "
                             f"[{num_chains * num_sims}, {k}]")
        ll = gaussian_synthetic_loglik(s_obs, s.reshape(num_chains, num_sims, k))
        return torch.where(ok, ll, torch.full_like(ll, -math.inf))

    adapt_cov = (not localized) if adapt_covariance is None else bool(adapt_covariance)
    chain = torch.empty(num_chains, num_steps, d, dtype=torch.float64)
    accepted = torch.zeros(num_chains, num_steps, dtype=torch.bool)
    window_start, window_end = 1, min(burn_in, 50)
    recipe = {"num_chains": num_chains, "num_steps": num_steps, "burn_in": burn_in,
              "num_sims": num_sims, "adapt": bool(adapt), "target": float(target_acceptance),
              "adapt_covariance": adapt_cov,
              "on_error": on_simulator_error, "retries": retries, "s_obs": s_obs.tolist()}
    saved = resume_checkpoint(store, "bsl", "a bsl chain", recipe, "chain")
    if saved is None:
        lp = space.log_prob_unconstrained(u)
        ll = log_lik(u, lp)
        chain[:, 0] = space.to_constrained(u)
        first = 1
    else:  # continue after the last checkpointed iteration
        first = int(saved["t"]) + 1
        u, ll, lp, chol = saved["u"], saved["ll"], saved["lp"], saved["chol"]
        chain[:, :first], accepted[:, :first] = saved["chain"], saved["accepted"]
        log_scale, window_start, window_end = (float(saved["log_scale"]), int(saved["window_start"]),
                                               int(saved["window_end"]))
        faults.update(failed=int(saved["failed"]), nonfinite=int(saved["nonfinite"]))
        generator.set_state(saved["generator"])
    bar = tqdm(range(first, num_steps), desc="BSL", disable=not progress, leave=False)
    for t in bar:
        z = torch.randn(num_chains, d, generator=generator, dtype=torch.float64)
        u_prop = u + math.exp(log_scale) * z @ chol.T
        lp_prop = space.log_prob_unconstrained(u_prop)
        ll_prop = log_lik(u_prop, lp_prop)
        log_alpha = (ll_prop + lp_prop) - (ll + lp)
        log_unif = torch.rand(num_chains, generator=generator, dtype=torch.float64).log()
        accept = (log_unif < log_alpha) & torch.isfinite(ll_prop + lp_prop)
        u = torch.where(accept[:, None], u_prop, u)
        ll = torch.where(accept, ll_prop, ll)
        lp = torch.where(accept, lp_prop, lp)
        chain[:, t] = space.to_constrained(u)
        accepted[:, t] = accept
        if adapt and t < burn_in:
            log_scale += (t ** -0.6) * (accept.double().mean().item() - target_acceptance)
            if adapt_cov and t == window_end:
                new = _window_covariance(space.to_unconstrained(chain[:, window_start:t + 1]),
                                         accepted[:, window_start:t + 1])
                if new is not None:  # new shape, same volume: the tuned scale stays valid
                    shift = chol.diagonal().log().mean() - new.diagonal().log().mean()
                    chol = new * shift.exp()
                window_start, window_end = t + 1, min(burn_in - 1, 2 * t)
        if progress and t % 50 == 0:
            bar.set_postfix(acc=f"{accepted[:, max(1, t - 199):t + 1].double().mean():.2f}")
        if store is not None and (t % checkpoint_every == 0 or t == num_steps - 1):
            store.save_checkpoint("bsl/chain", {
                "t": t, "u": u, "ll": ll, "lp": lp, "chol": chol, "chain": chain[:, :t + 1],
                "accepted": accepted[:, :t + 1], "log_scale": log_scale,
                "window_start": window_start, "window_end": window_end,
                "generator": generator.get_state(), **faults})
    bar.close()
    kept_acc = accepted[:, max(burn_in, 1):]
    info = {
        "method": "bsl",
        "simulations": float(num_chains * num_steps * num_sims),
        "num_chains": num_chains,
        "num_steps": num_steps,
        "burn_in": burn_in,
        "num_sims": num_sims,
        "summary_dim": k,
        "acceptance_rate": float(kept_acc.double().mean()),
        "acceptance_per_chain": kept_acc.double().mean(1).tolist(),
        "proposal_scale": math.exp(log_scale),
        "proposal_sd_unconstrained":
            (math.exp(log_scale) * (chol @ chol.T).diagonal().sqrt()).tolist(),
        "failed_simulations": faults["failed"],
        "nonfinite_simulations": faults["nonfinite"],
        "resumed_simulations": float(num_chains * (first if saved is not None else 0) * num_sims),
        "seconds": time.perf_counter() - start,
    }
    if faults["failed"] + faults["nonfinite"]:
        warnings.warn(
            f"bsl: rejected {faults['failed']} proposals whose simulations failed and "
            f"{faults['nonfinite']} with non-finite simulations; if failures depend on theta, "
            "the chains avoid those parameters and the posterior is biased away from them",
            stacklevel=2)
    return Posterior(chain[:, burn_in:], names, info=info)


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
