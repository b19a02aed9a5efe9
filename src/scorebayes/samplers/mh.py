r"""Metropolis-Hastings kernels = a proposal + a swappable acceptance rule, vectorised over chains.

One step of ``C`` chains ``x [C, d]``:

.. math::
    x' \sim q(\cdot \mid x), \qquad u \sim U(0, 1), \qquad
    x \leftarrow x' \text{ if } \log u < \log\alpha(x, x') \text{ else } x,

where :math:`\log\alpha` comes from an acceptance rule of :mod:`scorebayes.samplers.acceptance`
(exact MH ratio, learned network, Taylor-1, path-integral quadrature, or none: a Langevin
proposal without acceptance is ULA). The kernel follows blackjax: an ``init`` that builds an
:class:`MHState` (caching the score at the current position, so it is computed once per
step) and a pure ``step(state, generator) -> (state, info)``; :func:`run` collects draws.

Example:
    >>> import torch
    >>> from scorebayes.samplers.proposals import LangevinProposal
    >>> from scorebayes.samplers.acceptance import ExactRule
    >>> score = lambda x: -x
    >>> kernel = build_kernel(LangevinProposal(score, 0.5), ExactRule(lambda x: -0.5 * (x**2).sum(-1)))
    >>> draws, stats = run(kernel, torch.zeros(100, 2), 50, generator=torch.Generator().manual_seed(0))
    >>> draws.shape
    torch.Size([100, 50, 2])

References:
    | Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025)
    | https://arxiv.org/abs/2501.00467 (seed file 004_4c01255ce52071c1.txt)
    | BlackJAX: Composable Bayesian inference in JAX (Cabezas et al., 2024)
    | https://arxiv.org/abs/2402.10797
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor
from tqdm.auto import tqdm

from .acceptance import AlwaysAccept, Move

__all__ = ["MHState", "MHInfo", "Kernel", "build_kernel", "run"]


class MHState(NamedTuple):
    """Chains ``position [C, d]`` and the cached score ``[C, d]`` (``None`` without a score)."""

    position: Tensor
    score: Tensor | None


class MHInfo(NamedTuple):
    """Per step: ``acceptance_probability [C]``, ``is_accepted [C]`` (bool), ``proposal [C, d]``."""

    acceptance_probability: Tensor
    is_accepted: Tensor
    proposal: Tensor


class Kernel(NamedTuple):
    """``init(position [C, d]) -> MHState`` and ``step(state, generator=None) -> (MHState, MHInfo)``."""

    init: Callable[[Tensor], MHState]
    step: Callable[..., tuple[MHState, MHInfo]]


def build_kernel(
    proposal: Any,
    acceptance: Callable[[Move], Tensor] | None = None,
    *,
    score: Callable[[Tensor], Tensor] | None = None,
    support: Callable[[Tensor], Tensor] | None = None,
) -> Kernel:
    r"""An MH kernel from a proposal and an acceptance rule.

    Arguments:
        proposal: an object of :mod:`scorebayes.samplers.proposals` (``sample``, ``log_prob``).
        acceptance: ``rule(move) -> log_alpha [C]``; ``None`` accepts every move (with a
            Langevin proposal: the unadjusted Langevin algorithm).
        score: :math:`\tilde s`, ``[C, d] -> [C, d]``, cached in the state (default: the
            proposal's own ``score`` if it has one). Needed by Langevin proposals and by the
            Taylor and quadrature rules.
        support: optional ``[C, d] -> bool [C]``; proposals outside are always rejected.

    Returns:
        :class:`Kernel` ``(init, step)``.
    """
    rule = AlwaysAccept() if acceptance is None else acceptance
    score = score if score is not None else getattr(proposal, "score", None)

    def init(position: Tensor) -> MHState:
        if position.dim() != 2:
            raise ValueError(f"chains must be [C, d], got shape {tuple(position.shape)}")
        with torch.no_grad():
            return MHState(position, None if score is None else score(position))

    def step(state: MHState, generator: torch.Generator | None = None) -> tuple[MHState, MHInfo]:
        with torch.no_grad():
            x, s = state
            x_prop = proposal.sample(x, s, generator=generator)
            s_prop = None if score is None else score(x_prop)
            log_q_ratio = proposal.log_prob(x, x_prop, s_prop) - proposal.log_prob(x_prop, x, s)
            log_alpha = rule(Move(x, x_prop, s, s_prop, log_q_ratio)).reshape(-1)
            if support is not None:
                log_alpha = torch.where(support(x_prop), log_alpha, torch.full_like(log_alpha, -torch.inf))
            u = torch.rand(x.shape[0], generator=generator, dtype=x.dtype, device=x.device)
            accept = torch.log(u) < log_alpha
            new_x = torch.where(accept[:, None], x_prop, x)
            new_s = None if s is None else torch.where(accept[:, None], s_prop, s)
            return MHState(new_x, new_s), MHInfo(log_alpha.exp(), accept, x_prop)

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
        kernel: from :func:`build_kernel`.
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
    state = kernel.init(position)
    stored, accepted, prob = [], torch.zeros(position.shape[0]), 0.0
    for t in tqdm(range(num_steps), disable=not progress, desc=desc, leave=False):
        state, info = kernel.step(state, generator)
        accepted += info.is_accepted.to(accepted.dtype).cpu()
        prob += float(info.acceptance_probability.mean())
        if (t + 1) % thin == 0:
            stored.append(state.position)
    draws = torch.stack(stored, dim=1)
    if keep is not None:
        draws = draws[:, -keep:]
    per_chain = accepted / num_steps
    stats = {"acceptance_rate": float(per_chain.mean()),
             "acceptance_rate_per_chain": per_chain,
             "mean_acceptance_probability": prob / num_steps}
    return draws, stats
