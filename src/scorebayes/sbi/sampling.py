r"""Langevin chains on a learned posterior score, from starts to a [`Posterior`][scorebayes.posterior.Posterior].

$$
u^{(k)} = u^{(k-1)} + \tau\big(t\,\hat s(u^{(k-1)}; \tilde{\mathbf X}^*_c)
+ \nabla\log\pi_u(u^{(k-1)})\big) + \sqrt{2\tau}\,\xi_k
$$

for each noisy copy $\tilde{\mathbf X}^*_c$ of the data
([`noisy_copies()`][scorebayes.sbi.likelihood.LearnedLikelihoodScore.noisy_copies]). The chains start
inside the box the score may be trusted in, optionally run whitened
([`scorebayes.samplers.adaptation`][scorebayes.samplers.adaptation]), and their draws are checked: start memory, restarts,
and draws at the edge of the trained region all warn.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..diagnostics import remembers_start, start_memory
from ..parallel import make_generator
from ..posterior import Posterior
from ..priors import ParameterSpace
from ..samplers.adaptation import (
    adapt_whitening,
    default_straggler_gap,
    probes_with_centre,
    whitened,
)
from ..samplers.ess_stopping import EssStopping, record_interval, rhat_limit
from ..samplers.langevin import (
    adaptation_windows,
    covariance_preconditioner,
    curvature_step_size,
    dense_preconditioner,
    reflect_into_box,
    run_langevin,
    run_langevin_to_ess,
)
from .likelihood import LearnedLikelihoodScore
from .reference_tables import to_unconstrained

__all__ = ["ChainSettings", "DrawsSampler", "prior_score_graph", "chain_starts", "step_budget",
           "run_chains"]


class ChainSettings(NamedTuple):
    """The sampler's settings (the arguments of ``ScoreLangevin.sample``, resolved)."""

    step_size: float | str = "auto"
    step_size_factor: float = 0.1
    burn_in: int | str = "auto"
    thin: int | str = "auto"
    stages: tuple[float, ...] = ()
    steps_per_stage: int | str = "auto"
    clip_norm: float | None = None
    max_steps: int = 20_000
    target_ess: float | str = "auto"
    compile_drift: bool = False
    precondition: str | None = None
    adapt_steps: int = 0
    reset_stragglers: bool = True

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> ChainSettings:
        """``sample``'s arguments checked and resolved into [`ChainSettings`][scorebayes.sbi.sampling.ChainSettings]."""
        num_samples, init = arguments["num_samples"], arguments["init"]
        precondition, adapt_steps = arguments["precondition"], arguments["adapt_steps"]
        if num_samples < 1:
            raise ValueError("num_samples must be >= 1")
        if not isinstance(init, Posterior) and init not in ("proposal", "prior"):
            raise ValueError(f"init must be 'proposal', 'prior' or a Posterior, got {init!r}")
        if precondition not in (None, "dense"):
            raise ValueError(f"precondition must be None or 'dense', got {precondition!r}")
        if isinstance(adapt_steps, bool) or not isinstance(adapt_steps, int) or adapt_steps < 0:
            raise ValueError(f"adapt_steps must be an integer >= 0, got {adapt_steps!r}")
        if not isinstance(arguments["reset_stragglers"], bool):
            raise ValueError(f"reset_stragglers must be True or False, got {arguments['reset_stragglers']!r}")
        target = arguments["target_ess"]
        if target != "auto" and (isinstance(target, bool) or not isinstance(target, (int, float))
                                 or not target > 0):
            raise ValueError(f"target_ess must be 'auto' or a positive number, got {target!r}")
        if adapt_steps and precondition != "dense":
            raise ValueError("adapt_steps adapts the dense preconditioner: pass precondition='dense'")
        tempering = arguments["tempering"]
        stages = tuple(i / 10 for i in range(1, 10)) if tempering is True else tuple(tempering or ())
        return cls(**{k: arguments[k] for k in cls._fields if k != "stages"}, stages=stages)


class DrawsSampler:
    """Chain starts drawn from stored posterior draws ``theta [S, d]``: without replacement while
    ``num <= S``, with replacement beyond (``sample(num, generator) -> [num, d]``)."""

    def __init__(self, theta: Tensor):
        self.theta = theta

    def sample(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        size = len(self.theta)
        index = (torch.randperm(size, generator=generator)[:num] if num <= size
                 else torch.randint(size, (num,), generator=generator))
        return self.theta[index]


def prior_score_graph(space: ParameterSpace, u: Tensor) -> Tensor:
    r"""$\nabla_u\log\pi_u(u)$ ``[C, d]``, keeping the graph (for the drift's Jacobian)."""
    with torch.enable_grad():
        leaf = u if u.requires_grad else u.detach().requires_grad_(True)
        lp = space.log_prob_unconstrained(leaf)
        (grad,) = torch.autograd.grad(lp.sum(), leaf, create_graph=True)
    return grad


def chain_starts(space: ParameterSpace, sampler: Any, num: int, generator: torch.Generator, low: Tensor,
                 high: Tensor, *, max_batches: int = 100) -> tuple[Tensor, int, int]:
    """Chain starts in ``u`` from ``sampler``, inside the box ``[low, high]``.

    Starts outside the box (e.g. beyond a data-dependent support) are redrawn, in place, from the
    same sampler: the start distribution truncated to the box. Reflecting them instead can fold
    a far start onto the box's other side, where a learned score may have a spurious mode. After
    ``max_batches`` batches of ``num`` draws the remaining ones are reflected.

    Returns:
        ``(u [C, d], redrawn, reflected)``; ``C`` is the number of finite draws of the first batch.
    """
    def inside(v: Tensor) -> Tensor:
        return ((v >= low) & (v <= high)).all(-1)

    u, keep = to_unconstrained(space, sampler.sample(num, generator))
    u = u[keep]
    outside = ~inside(u)
    redrawn = int(outside.sum())
    for _ in range(max_batches):
        if not outside.any():
            break
        more, ok = to_unconstrained(space, sampler.sample(num, generator))
        more = more[ok & inside(more)]
        slots = outside.nonzero().squeeze(-1)[: len(more)]
        u[slots] = more[: len(slots)]
        outside[slots] = False
    reflected = int(outside.sum())
    if reflected:
        u[outside] = reflect_into_box(u[outside], low, high)
    return u, redrawn - reflected, reflected


def step_budget(settings: ChainSettings, relax: float, stages: Sequence[float],
                draws_per_chain: int) -> tuple[int, int, int]:
    """``(steps per tempering stage, burn-in, thin)``; ``"auto"`` entries from the relaxation time.

    The automatic budget keeps the tempering stages under ``max_steps / 4`` in total, tempering and
    burn-in under ``max_steps / 2``, and the draws the rest (5 relaxation times of burn-in, one of
    thinning, each at least 200 and 1)."""
    max_steps = settings.max_steps
    n_stage = int(min(max(50, math.ceil(relax)), max(50, max_steps // (4 * max(1, len(settings.stages)))))) \
        if settings.steps_per_stage == "auto" else int(settings.steps_per_stage)
    n_burn = int(min(max(200, math.ceil(5 * relax)), max(200, max_steps // 2 - len(stages) * n_stage))) \
        if settings.burn_in == "auto" else int(settings.burn_in)
    spare = max_steps - n_burn - len(stages) * n_stage
    n_thin = int(min(max(1, math.ceil(relax)), max(1, spare // draws_per_chain))) \
        if settings.thin == "auto" else int(settings.thin)
    return n_stage, n_burn, n_thin


def stopping_rule(settings: ChainSettings, relax: float, tempering_steps: int, chains: int,
                  draws_per_chain: int) -> EssStopping | None:
    r"""The ESS stopping rule of one copy's ``chains`` chains, or ``None`` for a fixed step budget
    (an explicit ``burn_in`` or ``thin``).

    ``target_ess="auto"`` asks for a quarter as many effective draws as draws returned (at least
    100): the posterior means' Monte Carlo error is then at most $2/\sqrt{N}$ posterior SDs
    for ``N`` draws (0.045 for 2,000), far below the posterior's own spread. The first test comes
    after 10 relaxation times (at least 400 steps), at least 5 relaxation times (and 200 steps)
    are discarded, the R-hat limit is
    `rhat_limit()`, and the run, tempering included, stays
    within ``max_steps``."""
    if settings.burn_in != "auto" or settings.thin != "auto":
        return None
    num_draws = chains * draws_per_chain
    target = max(100.0, num_draws / 4) if settings.target_ess == "auto" else float(settings.target_ess)
    max_steps = max(1, settings.max_steps - tempering_steps)
    min_steps = min(max_steps, max(400, math.ceil(10 * relax)))
    return EssStopping(target=target, max_steps=max_steps, min_steps=min_steps, growth=1.25,
                       max_rhat=rhat_limit(chains, target), min_burn_in=max(200, math.ceil(5 * relax)))


class CopyRun(NamedTuple):
    """One noisy copy's chains: draws ``[C, S, d]`` in ``u``, their starts ``[C, d]``, the sampler's
    info, the relaxation time, warm-up steps and restarts, and start counts (redrawn, reflected)."""

    draws: Tensor
    starts: Tensor
    info: Any
    relax: float
    warmup_steps: int
    resets: int
    start_counts: tuple[int, int]


def run_copy(likelihood: LearnedLikelihoodScore, x_copy: Tensor, start_sampler: Any, chains: int,
             draws_per_chain: int, settings: ChainSettings, *, init_u: Tensor | None,
             generator: torch.Generator, progress: bool) -> CopyRun:
    """Run ``chains`` Langevin chains conditioned on ``x_copy [n, p]``, started from ``start_sampler``.

    ``init_u`` (``[S, d]``, a previous posterior's draws) sets the dense whitening to their
    covariance instead of the drift's curvature at the starts."""
    space = likelihood.space
    bounds = likelihood.chain_box()
    u0, redrawn, reflected = chain_starts(space, start_sampler, chains, generator, *bounds)
    starts_u = u0  # kept in u for the start-memory check (u0 may become v below)

    def lik_u(u: Tensor) -> Tensor:
        return likelihood(u, x_copy, compiled=settings.compile_drift)

    def drift_graph_u(u: Tensor) -> Tensor:
        return lik_u(u) + prior_score_graph(space, u)

    lik, prior_score, drift_graph = lik_u, space.grad_log_prob_unconstrained, drift_graph_u
    chain_bounds, to_u, constrain = bounds, (lambda w: w), None
    warmup_steps, resets, stages = 0, 0, settings.stages
    if settings.precondition == "dense":  # chains in v, u = c + L v
        u_fns = (lik, prior_score, drift_graph)
        if init_u is not None:  # the previous posterior's shape, not the curvature at one point
            center, L = covariance_preconditioner(init_u)
        else:
            center, L = dense_preconditioner(drift_graph, u0[: min(32, len(u0))])
        if settings.adapt_steps:
            gap = default_straggler_gap(u0.shape[-1]) if settings.reset_stragglers else None
            u0, alive, center, L, warmup_steps, resets = adapt_whitening(
                u_fns, bounds, u0, center, L, windows=adaptation_windows(settings.adapt_steps),
                stages=settings.stages, kappa=settings.step_size_factor, clip_norm=settings.clip_norm,
                generator=generator, progress=progress, straggler_gap=gap)
            starts_u, stages = starts_u[alive], ()
        lik, prior_score, drift_graph, to_u, constrain = whitened(u_fns, center, L, bounds)
        u0 = torch.linalg.solve(L, (u0 - center).T).T
        chain_bounds = None
    if settings.step_size == "auto":
        # after the warm-up also the centre of the chains (v = 0), where the curvature peaks
        probes = probes_with_centre(u0) if warmup_steps else u0[: min(16, len(u0))]
        est = curvature_step_size(drift_graph, probes, kappa=settings.step_size_factor)
        tau, relax = est.step_size, est.relaxation_steps()
    else:
        tau, relax = float(settings.step_size), 1.0
    n_stage, n_burn, n_thin = step_budget(settings, relax, stages, draws_per_chain)
    chain_options = dict(step_size=tau, num_draws=draws_per_chain, tempering=stages, steps_per_stage=n_stage,
                         clip_norm=settings.clip_norm, bounds=chain_bounds, constrain=constrain,
                         generator=generator, progress=progress)
    rule = stopping_rule(settings, relax, len(stages) * n_stage, len(u0), draws_per_chain)
    if rule is None:
        draws, info = run_langevin(lik, prior_score, u0, burn_in=n_burn, thin=n_thin, **chain_options)
    else:
        def parameters(w: Tensor) -> Tensor:  # chain states [C, K, d] -> theta [C, K, d]
            return space.to_constrained(to_u(w.reshape(-1, w.shape[-1]))).reshape(w.shape)

        draws, info = run_langevin_to_ess(lik, prior_score, u0, rule,
                                          record_every=record_interval(relax, rule, draws_per_chain),
                                          measure=parameters, **chain_options)
    return CopyRun(to_u(draws[~info.diverged]), starts_u[~info.diverged], info, float(relax),
                   warmup_steps, resets, (redrawn, reflected))


def edge_fraction(likelihood: LearnedLikelihoodScore, u_draws: Tensor) -> float:
    """Share of draws ``[C, S, d]`` within 2% of a side of the trained region (not at a support
    bound, where the posterior may legitimately pile up)."""
    region_low, region_high = likelihood.sampling_region()
    low, high = likelihood.chain_box()
    tol = 0.02 * (high - low)
    edge = (((u_draws - low) < tol) & (low <= region_low)) | (((high - u_draws) < tol) & (high >= region_high))
    return float(edge.any(-1).double().mean())


def warn_about(runs: list[CopyRun], u_draws: Tensor, starts: Tensor, edge: float,
               names: list[str]) -> tuple[float, bool]:
    """Warn about chains that remember their starts, restarts, reflected starts and draws at the
    edge; returns the largest start-memory $R^2$ (NaN if undefined) and whether the chains
    remember their starts."""
    memory = start_memory(starts.cpu().numpy(), u_draws[:, -1].cpu().numpy())
    remembered = remembers_start(memory)
    if remembered:
        k = int(np.nanargmax(memory.r_squared))
        warnings.warn(f"the chains have not forgotten their starts: over {len(u_draws)} chains, the "
                      f"starts explain {memory.r_squared[k]:.0%} of the spread of the last draws of "
                      f"{names[k]} (p = {memory.p_value[k]:.1e}). The chains are stuck, or split between "
                      "separated modes by where they started, so the draws over-represent the start "
                      "distribution. Raise max_steps, try precondition='dense', or look for "
                      "spurious modes of the learned score", stacklevel=4)
    resets = sum(r.resets for r in runs)
    if resets:
        warnings.warn(f"warm-up restarted {resets} chain states (of {len(u_draws)} chains, over the "
                      "adaptation windows) that lay far below the others in learned log-posterior, from "
                      "other chains' states (reset_stragglers): the start distribution reaches regions "
                      "where the drift is too flat to leave (info['chains_reset'])", stacklevel=4)
    reflected = sum(r.start_counts[1] for r in runs)
    if reflected:
        warnings.warn(f"{reflected} chain starts could not be drawn inside the sampling region "
                      "(trained region and support) and were reflected into it; reflected starts can "
                      "land far from the posterior (the start distribution barely reaches that region: "
                      "check support_fn and the proposal)", stacklevel=4)
    if edge > 0.01:
        warnings.warn(f"{100 * edge:.1f}% of the draws lie at the edge of the region the "
                      "score was trained on: the posterior may extend beyond the reference table "
                      "(widen the proposal, e.g. localize=False, or use more replicates)", stacklevel=4)
    largest = float(np.nanmax(memory.r_squared)) if np.isfinite(memory.r_squared).any() else float("nan")
    return largest, remembered


def run_chains(likelihood: LearnedLikelihoodScore, start_sampler: Callable[[int], Any] | Any,
               num_samples: int, chains: int | None, settings: ChainSettings, *, init_u: Tensor | None,
               seed: int, progress: bool, names: list[str]) -> tuple[Tensor, dict[str, Any]]:
    """All noisy copies' chains: ``(u_draws [C, S, d], info)``, ``info`` the sampler's record."""
    copies = likelihood.noisy_copies()
    chains = chains or max(4, num_samples // 50)
    chains = max(len(copies), chains - chains % len(copies))
    draws_per_chain = math.ceil(num_samples / chains)
    runs = [run_copy(likelihood, x_copy, start_sampler, chains // len(copies), draws_per_chain, settings,
                     init_u=init_u, generator=make_generator(seed, "langevin", c), progress=progress)
            for c, x_copy in enumerate(copies)]
    u_draws = torch.cat([r.draws for r in runs], 0)
    edge = edge_fraction(likelihood, u_draws)
    memory, remembered = warn_about(runs, u_draws, torch.cat([r.starts for r in runs]), edge, names)
    info0 = runs[0].info
    converged = [r.info.convergence for r in runs if r.info.convergence is not None]
    if converged and not all(c.met for c in converged):
        worst = min(converged, key=lambda c: c.ess if math.isfinite(c.ess) else -1.0)  # NaN: undefined, worst
        warnings.warn(f"the chains did not reach their effective sample size within max_steps = "
                      f"{settings.max_steps}: ESS {worst.ess:.0f} of {worst.target:.0f}, R-hat "
                      f"{worst.rhat:.3f} (want < {worst.max_rhat:.2f}). The draws are more correlated than their number "
                      "suggests; raise max_steps, or check the fit (a flat learned score mixes slowly)",
                      stacklevel=4)
    return u_draws, {
        "ess": min((c.ess for c in converged), default=None),
        "rhat": max((c.rhat for c in converged), default=None),
        "target_ess": converged[0].target if converged else None,
        "ess_met": all(c.met for c in converged) if converged else None,
        "total_steps": max(int(r.info.total_steps) for r in runs),
        "step_size": info0.step_size,
        "step_size_c": info0.step_size * likelihood.n_obs,
        "burn_in": info0.burn_in,
        "thin": info0.thin,
        "relaxation_steps": runs[-1].relax,
        "chains": int(u_draws.shape[0]),
        "diverged_chains": int(sum(int(r.info.diverged.sum()) for r in runs)),
        # which noisy copy of the data (noisy_copies()) each chain conditions on
        "chain_copies": [c for c, r in enumerate(runs) for _ in range(int((~r.info.diverged).sum()))],
        "edge_fraction": edge,
        "starts_redrawn": sum(r.start_counts[0] for r in runs),
        "starts_reflected": sum(r.start_counts[1] for r in runs),
        "start_memory": memory,
        "remembers_start": remembered,
        "precondition": settings.precondition,
        "warmup_steps": runs[-1].warmup_steps,
        "chains_reset": sum(r.resets for r in runs),
    }
