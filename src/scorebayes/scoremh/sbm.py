r"""Score balance matching (SBM): learning an MH acceptance function from a score.

Detailed balance $a(x',x)/a(x,x') = p(x')q(x\mid x')/(p(x)q(x'\mid x))$ holds iff the
gradient (with respect to the stacked pair $(x, x') \in \mathbb R^{2d}$) of its logarithm
holds, which needs only scores. The loss (eq. 7, with the entropy term of eq. 10):

$$
\mathcal L(a) = \mathbb E\big\|\nabla\log a(x',x) - \nabla\log a(x,x') - \nabla\log p(x')
+ \nabla\log p(x) - \nabla\log q(x\mid x') + \nabla\log q(x'\mid x)\big\|^2
+ \lambda\,\mathbb E[H(a(x',x))],
$$

with $H(a) = a\log a + (1-a)\log(1-a)$ (negative binary entropy, minimised) and every
gradient laid out as $[\partial_x; \partial_{x'}]$:
$\nabla\log a(x,x')$ differentiates the network with its slots *swapped*,
$\nabla\log p(x) = (\tilde s(x), 0)$, $\nabla\log p(x') = (0, \tilde s(x'))$, and
$\nabla\log q(x\mid x') = (\partial_x\log q(x\mid x'), \partial_{x'}\log q(x\mid x'))$.
All gradient blocks are clamped element-wise to $[-C, C]$ (Algorithm 1, V.C11).

Training (Algorithm 2): step ``i`` draws data ``x`` and proposals
$x' = \alpha_i v' + (1-\alpha_i)\tilde x$, $v'\sim q(\cdot\mid\tilde x)$, with
$\alpha_i$ rising linearly from 0.1 to 1 over the first half of training (V.C2); pairing
``"coupled"`` takes $\tilde x = x$ (the population loss (7) at $\alpha = 1$),
``"independent"`` draws $\tilde x$ as an independent batch (literal Algorithm 2; matched pairs).

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025), eqs. (7), (10), (11), Alg. 1-2
      <https://arxiv.org/abs/2501.00467>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..scores.loop import LoopSchedule, train_loop

__all__ = [
    "negative_entropy",
    "sbm_residual",
    "sbm_loss",
    "alpha_schedule",
    "training_pairs",
    "train_acceptance",
    "PAIRINGS",
]

PAIRINGS = ("coupled", "independent")
LogAccept = Callable[[Tensor, Tensor], Tensor]


def negative_entropy(log_a: Tensor, eps: float = 1e-6) -> Tensor:
    r"""$H(a) = a\log a + (1-a)\log(1-a)$ with $a$ clamped to $[\epsilon, 1-\epsilon]$; ``[B]``."""
    a = log_a.exp().clamp(eps, 1 - eps)
    return a * a.log() + (1 - a) * torch.log1p(-a)


def _stacked_grad(values: Tensor, x: Tensor, x_prop: Tensor, create_graph: bool) -> Tensor:
    gx, gxp = torch.autograd.grad(values.sum(), (x, x_prop), create_graph=create_graph)
    return torch.cat([gx, gxp], dim=-1)


def sbm_residual(
    log_accept: LogAccept,
    x: Tensor,
    x_prop: Tensor,
    *,
    score: Callable[[Tensor], Tensor],
    proposal: Any,
    clip: float | None = 10.0,
    create_graph: bool = True,
) -> tuple[Tensor, Tensor]:
    r"""The vector inside the norm of (7), ``[B, 2d]``, and $\log a(x', x)$ ``[B]``.

    Arguments:
        log_accept: ``(x_to [B, d], x_from [B, d]) -> [B]``, differentiable in both inputs.
        x, x_prop: pairs ``[B, d]`` (current state and proposal).
        score: $\tilde s$, ``[B, d] -> [B, d]`` (treated as fixed).
        proposal: object with ``grads(x_to, x_from) -> (d_from, d_to)``.
        clip: element-wise clamp threshold $C$ (``None``: no clipping).
        create_graph: keep the graph for training the acceptance network.
    """
    x = x.detach().requires_grad_(True)
    x_prop = x_prop.detach().requires_grad_(True)

    def clamp(v: Tensor) -> Tensor:
        return v if clip is None else v.clamp(-clip, clip)

    with torch.enable_grad():
        log_a_fwd = log_accept(x_prop, x)
        grad_fwd = clamp(_stacked_grad(log_a_fwd, x, x_prop, create_graph))
        grad_bwd = clamp(_stacked_grad(log_accept(x, x_prop), x, x_prop, create_graph))
    with torch.no_grad():
        s_x, s_prop = clamp(score(x.detach())), clamp(score(x_prop.detach()))
    fwd_from, fwd_to = proposal.grads(x_prop.detach(), x.detach())  # log q(x' | x)
    bwd_from, bwd_to = proposal.grads(x.detach(), x_prop.detach())  # log q(x | x')
    grad_q_fwd = clamp(torch.cat([fwd_from, fwd_to], dim=-1))
    grad_q_bwd = clamp(torch.cat([bwd_to, bwd_from], dim=-1))
    grad_p_diff = torch.cat([-s_x, s_prop], dim=-1)  # grad log p(x') - grad log p(x)
    residual = grad_fwd - grad_bwd - grad_p_diff - grad_q_bwd + grad_q_fwd
    return residual, log_a_fwd


def sbm_loss(
    log_accept: LogAccept,
    x: Tensor,
    x_prop: Tensor,
    *,
    score: Callable[[Tensor], Tensor],
    proposal: Any,
    lam: float = 1.0,
    clip: float | None = 10.0,
    eps: float = 1e-6,
    create_graph: bool = True,
) -> tuple[Tensor, dict[str, float]]:
    r"""Empirical loss (11): $\frac1B\sum_i l_i + \frac\lambda B\sum_i h_i$ (scalar) and its parts.

    Arguments: as [`sbm_residual()`][scorebayes.scoremh.sbm.sbm_residual], plus ``lam`` ($\lambda$) and ``eps`` (clamp of
    $a$ in the entropy term, which acts on the forward direction $a(x', x)$ only).

    Returns:
        ``(loss, {"balance": float, "entropy": float, "mean_acceptance": float})``.
    """
    residual, log_a = sbm_residual(log_accept, x, x_prop, score=score, proposal=proposal,
                                   clip=clip, create_graph=create_graph)
    balance = (residual**2).sum(-1).mean()
    entropy = negative_entropy(log_a, eps).mean()
    loss = balance + lam * entropy
    return loss, {"balance": float(balance.detach()), "entropy": float(entropy.detach()),
                  "mean_acceptance": float(log_a.detach().exp().mean())}


def alpha_schedule(n_epochs: int, start: float = 0.1, end: float = 1.0,
                   warmup_fraction: float = 0.5) -> list[float]:
    r"""$\alpha_i$: linear from ``start`` to ``end`` over the first ``warmup_fraction``, then ``end``."""
    warm = max(1, int(round(warmup_fraction * n_epochs)))
    return [start + (end - start) * min(i / max(warm - 1, 1), 1.0) if i < warm else end
            for i in range(n_epochs)]


def training_pairs(data: Tensor, batch_size: int, proposal: Any, alpha: float, *,
                   pairing: str = "coupled",
                   generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    r"""One batch of pairs ``(x [B, d], x' [B, d])`` with $x' = \alpha v' + (1-\alpha)\tilde x$."""
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    n = data.shape[0]
    x = data[torch.randint(0, n, (batch_size,), generator=generator)]
    x_tilde = x if pairing == "coupled" else data[torch.randint(0, n, (batch_size,), generator=generator)]
    with torch.no_grad():
        v = proposal.sample(x_tilde, None, generator=generator)
    return x, alpha * v + (1 - alpha) * x_tilde


def train_acceptance(
    log_accept: LogAccept,
    parameters: Any,
    data: Tensor,
    *,
    score: Callable[[Tensor], Tensor],
    proposal: Any,
    n_epochs: int = 1000,
    batch_size: int = 512,
    lr: float = 5e-4,
    lam: float = 2.0,
    clip: float | None = 10.0,
    pairing: str = "coupled",
    alpha_start: float = 0.1,
    warmup_fraction: float = 0.5,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> list[dict[str, float]]:
    r"""Algorithm 2: ``n_epochs`` Adam steps (one batch each) on the SBM loss.

    Arguments:
        log_accept: e.g. ``AcceptanceNet(...).log_accept``.
        parameters: the trainable ``nn.Parameter`` objects (e.g. ``net.parameters()``).
        data: samples of the target ``[N, d]`` (in the coordinates the kernel will use).
        score, proposal: the score model and the proposal the kernel will use.
        n_epochs: training steps (the paper's "epochs": one batch each, Algorithm 2).
        batch_size, lr, lam, clip: batch size, Adam learning rate, $\lambda$, $C$.
        pairing: ``"coupled"`` or ``"independent"`` (V.C2).
        alpha_start, warmup_fraction: the $\alpha$ schedule ([`alpha_schedule()`][scorebayes.scoremh.sbm.alpha_schedule]).

    Returns:
        per-step history ``[{"alpha", "loss", "balance", "entropy", "mean_acceptance"}, ...]``.
    """
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    if data.dim() != 2 or data.shape[0] < 2:
        raise ValueError(f"data must be [N, d] with N >= 2, got {tuple(data.shape)}")
    params = list(parameters)
    if not all(isinstance(p, torch.nn.Parameter) for p in params):
        raise TypeError("parameters must be torch.nn.Parameter objects (e.g. net.parameters())")
    alphas = alpha_schedule(n_epochs, alpha_start, 1.0, warmup_fraction)
    history: list[dict[str, float]] = []

    def pairs(step: int) -> list[tuple[float, Tensor, Tensor]]:  # one batch per step (Algorithm 2)
        x, x_prop = training_pairs(data, batch_size, proposal, alphas[step], pairing=pairing,
                                   generator=generator)
        return [(alphas[step], x, x_prop)]

    def loss(batch: tuple[float, Tensor, Tensor]) -> Tensor:
        alpha, x, x_prop = batch
        value, parts = sbm_loss(log_accept, x, x_prop, score=score, proposal=proposal, lam=lam, clip=clip)
        history.append({"alpha": alpha, "loss": float(value.detach()), **parts})
        return value

    # the parameters in a module of their own: the loop's view of what it trains (no checkpoints:
    # these fits have never joined a checkpointing block's phases)
    train_loop(torch.nn.ParameterList(params), loss, pairs, schedule=LoopSchedule(epochs=n_epochs, lr=lr),
               checkpoint=False, progress=progress, desc="acceptance (SBM)")
    return history
