r"""Metropolis-Hastings kernels = a proposal + a swappable acceptance rule, vectorised over chains.

One step of ``C`` chains ``x [C, d]``:

$$
x' \sim q(\cdot \mid x), \qquad u \sim U(0, 1), \qquad
x \leftarrow x' \text{ if } \log u < \log\alpha(x, x') \text{ else } x,
$$

where $\log\alpha$ comes from an acceptance rule of [`scorebayes.samplers.acceptance`][scorebayes.samplers.acceptance]
(exact MH ratio, learned network, Taylor-1, path-integral quadrature, or none: a Langevin
proposal without acceptance is ULA). The kernel follows blackjax: an ``init`` that builds an
[`MHState`][scorebayes.samplers.mh.MHState] (caching the score, and optionally the log-density, at the current position,
so each is computed once per step) and a pure ``step(state, generator) -> (state, info)``;
[`run()`][scorebayes.samplers.mh.run] collects draws through the driver [`run_chains()`][scorebayes.samplers.base.run_chains].

Examples:
    >>> import torch
    >>> from scorebayes.samplers.proposals import LangevinProposal
    >>> from scorebayes.samplers.acceptance import ExactRule
    >>> score = lambda x: -x
    >>> kernel = build_kernel(LangevinProposal(score, 0.5), ExactRule(lambda x: -0.5 * (x**2).sum(-1)))
    >>> draws, stats = run(kernel, torch.zeros(100, 2), 50, generator=torch.Generator().manual_seed(0))
    >>> draws.shape
    torch.Size([100, 50, 2])

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025)
      <https://arxiv.org/abs/2501.00467>
    - BlackJAX: Composable Bayesian inference in JAX (Cabezas et al., 2024)
      <https://arxiv.org/abs/2402.10797>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .acceptance import AlwaysAccept, Move
from .base import Kernel, run_chains

__all__ = ["MHState", "MHInfo", "Kernel", "build_kernel", "run"]  # Kernel: from .base


class MHState(NamedTuple):
    """Chains ``position [C, d]``, the cached score ``[C, d]`` (``None`` without a score) and the
    cached log-density ``[C]`` (``None`` unless the kernel was built with ``log_density``)."""

    position: Tensor
    score: Tensor | None
    log_density: Tensor | None = None


class MHInfo(NamedTuple):
    """Per step: ``acceptance_probability [C]``, ``is_accepted [C]`` (bool), ``proposal [C, d]``."""

    acceptance_probability: Tensor
    is_accepted: Tensor
    proposal: Tensor


def build_kernel(
    proposal: Any,
    acceptance: Callable[[Move], Tensor] | None = None,
    *,
    score: Callable[[Tensor], Tensor] | None = None,
    support: Callable[[Tensor], Tensor] | None = None,
    log_density: Callable[[Tensor], Tensor] | None = None,
) -> Kernel:
    r"""An MH kernel from a proposal and an acceptance rule.

    Arguments:
        proposal: an object of [`scorebayes.samplers.proposals`][scorebayes.samplers.proposals] (``sample``, ``log_prob``).
        acceptance: ``rule(move) -> log_alpha [C]``; ``None`` accepts every move (with a
            Langevin proposal: the unadjusted Langevin algorithm).
        score: $\tilde s$, ``[C, d] -> [C, d]``, cached in the state (default: the
            proposal's own ``score`` if it has one). Needed by Langevin proposals and by the
            Taylor and quadrature rules.
        support: optional ``[C, d] -> bool [C]``; proposals outside are always rejected.
        log_density: optional $\log p$, ``[C, d] -> [C]``, cached in the state and passed to
            the rule in the [`Move`][scorebayes.samplers.acceptance.Move], so that
            [`ExactRule`][scorebayes.samplers.acceptance.ExactRule] evaluates it once per step.

    A symmetric proposal (``proposal.symmetric``) has $\Delta_q = 0$ without evaluating it.

    Returns:
        [`Kernel`][scorebayes.samplers.base.Kernel] ``(init, step)``: ``init(position [C, d]) ->
        MHState`` and ``step(state, generator=None) -> (MHState, MHInfo)``.
    """
    rule = AlwaysAccept() if acceptance is None else acceptance
    score = score if score is not None else getattr(proposal, "score", None)
    symmetric = bool(getattr(proposal, "symmetric", False))

    def init(position: Tensor) -> MHState:
        if position.dim() != 2:
            raise ValueError(f"chains must be [C, d], got shape {tuple(position.shape)}")
        with torch.no_grad():
            return MHState(position, None if score is None else score(position),
                           None if log_density is None else log_density(position))

    def step(state: MHState, generator: torch.Generator | None = None) -> tuple[MHState, MHInfo]:
        with torch.no_grad():
            x, s, lp = state
            x_prop = proposal.sample(x, s, generator=generator)
            s_prop = None if score is None else score(x_prop)
            lp_prop = None if log_density is None else log_density(x_prop)
            if symmetric:
                log_q_ratio = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
            else:
                log_q_ratio = proposal.log_prob(x, x_prop, s_prop) - proposal.log_prob(x_prop, x, s)
            log_alpha = rule(Move(x, x_prop, s, s_prop, log_q_ratio, lp, lp_prop)).reshape(-1)
            if support is not None:
                log_alpha = torch.where(support(x_prop), log_alpha, torch.full_like(log_alpha, -torch.inf))
            u = torch.rand(x.shape[0], generator=generator, dtype=x.dtype, device=x.device)
            accept = torch.log(u) < log_alpha
            new_x = torch.where(accept[:, None], x_prop, x)
            new_s = None if s is None else torch.where(accept[:, None], s_prop, s)
            new_lp = None if lp is None else torch.where(accept, lp_prop, lp)
            return MHState(new_x, new_s, new_lp), MHInfo(log_alpha.exp(), accept, x_prop)

    return Kernel(init, step)


def run(
    kernel: Kernel,
    position: Tensor,
    num_steps: int,
    *,
    generator: torch.Generator | None = None,
    keep: int | None = None,
    thin: int = 1,
    progress: bool = False,
    desc: str = "MH",
) -> tuple[Tensor, dict[str, Any]]:
    r"""Run ``num_steps`` steps of ``C`` chains from ``position [C, d]``.

    Arguments:
        kernel: from [`build_kernel()`][scorebayes.samplers.mh.build_kernel].
        position: initial states ``[C, d]``.
        num_steps: number of steps.
        generator: random source (same seed, same draws).
        keep: keep only the last ``keep`` stored draws (default all).
        thin: store every ``thin``-th state.
        progress: tqdm progress bar.

    Returns:
        ``draws [C, S, d]`` and ``{"acceptance_rate": mean fraction of accepted moves,
        "acceptance_rate_per_chain": [C] tensor, "mean_acceptance_probability": float}``.
    """
    if num_steps < 1 or thin < 1:
        raise ValueError("num_steps and thin must be >= 1")
    if num_steps < thin:
        raise ValueError(f"no draw is stored: num_steps ({num_steps}) < thin ({thin})")
    accepted, prob = torch.zeros(position.shape[0]), [0.0]

    def count(t: int, state: MHState, info: MHInfo) -> None:
        accepted.add_(info.is_accepted.to(accepted.dtype).cpu())
        prob[0] += float(info.acceptance_probability.mean())

    draws, _, _ = run_chains(kernel, kernel.init(position), num_steps, thin=thin, generator=generator,
                             on_step=count, progress=progress, desc=desc)
    if keep is not None:
        draws = draws[:, -keep:]
    per_chain = accepted / num_steps
    stats = {"acceptance_rate": float(per_chain.mean()),
             "acceptance_rate_per_chain": per_chain,
             "mean_acceptance_probability": prob[0] / num_steps}
    return draws, stats
