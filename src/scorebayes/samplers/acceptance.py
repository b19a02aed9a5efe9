r"""Swappable Metropolis-Hastings acceptance rules with one signature.

A rule maps a proposed [`Move`][scorebayes.samplers.acceptance.Move] to the log acceptance probability,
``rule(move) -> log_alpha [C]`` (values $\le 0$). With
$\tau = x' - x$ and $\Delta_q = \log q(x\mid x') - \log q(x'\mid x)$:

- [`ExactRule`][scorebayes.samplers.acceptance.ExactRule]: $\min\{0, \log p(x') - \log p(x) + \Delta_q\}$ when a
  (possibly unnormalised) log-density is known;
- [`LearnedRule`][scorebayes.samplers.acceptance.LearnedRule]: $\log a_\omega(x', x)$ from an acceptance network trained by
  score balance matching ([`scorebayes.scoremh.sbm`][scorebayes.scoremh.sbm]); the proposal is built into it
  (``form="ratio"`` uses $\min\{0, \log a_\omega(x',x) - \log a_\omega(x,x')\}$ instead);
- [`TaylorRule`][scorebayes.samplers.acceptance.TaylorRule]: the Taylor expansions of App. A of the paper; the default
  (order 1 with averaging) is $\min\{0, \tfrac12(\tilde s(x)+\tilde s(x'))\cdot\tau + \Delta_q\}$;
- [`QuadratureRule`][scorebayes.samplers.acceptance.QuadratureRule] (beyond the paper): the path integral
  $\log p(x') - \log p(x) = \int_0^1 \tilde s(x + t\tau)\cdot\tau\,dt$ by ``k``-node
  Gauss-Lobatto (default; the endpoints are nodes, ``k = 2`` is the trapezoid rule, i.e.
  exactly Taylor-1 with averaging, and ``k`` nodes integrate polynomials of degree
  $2k-3$ exactly with only $k-2$ new score evaluations) or Gauss-Legendre
  (``k`` interior nodes, exact to degree $2k-1$; ``k = 1`` is the midpoint rule);
- [`AlwaysAccept`][scorebayes.samplers.acceptance.AlwaysAccept]: no correction (a Langevin proposal then gives ULA).

Only differences of log-densities enter, so an unnormalised density or a score alone suffices.

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025), eq. (5), App. A
      <https://arxiv.org/abs/2501.00467>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "Move",
    "ExactRule",
    "LearnedRule",
    "TaylorRule",
    "QuadratureRule",
    "AlwaysAccept",
    "quadrature_nodes",
    "log_density_difference",
]


class Move(NamedTuple):
    r"""A proposed move of ``C`` chains.

    Attributes:
        x: current states ``[C, d]``.
        x_prop: proposals ``[C, d]``.
        score: $\tilde s(x)$ ``[C, d]`` (``None`` if no score is available).
        score_prop: $\tilde s(x')$ ``[C, d]`` (or ``None``).
        log_q_ratio: $\log q(x\mid x') - \log q(x'\mid x)$ ``[C]``.
        log_density: $\log p(x)$ ``[C]`` if the kernel caches it (else ``None``).
        log_density_prop: $\log p(x')$ ``[C]`` (or ``None``).
    """

    x: Tensor
    x_prop: Tensor
    score: Tensor | None
    score_prop: Tensor | None
    log_q_ratio: Tensor
    log_density: Tensor | None = None
    log_density_prop: Tensor | None = None


def _need_scores(move: Move, rule: str) -> tuple[Tensor, Tensor]:
    if move.score is None or move.score_prop is None:
        raise ValueError(f"the {rule} acceptance rule needs scores: build the kernel with a score")
    return move.score, move.score_prop


def _clamp_log_alpha(log_ratio: Tensor) -> Tensor:
    log_ratio = torch.where(torch.isnan(log_ratio), torch.full_like(log_ratio, -torch.inf), log_ratio)
    return log_ratio.clamp(max=0.0)


class AlwaysAccept:
    """Accept every proposal (unadjusted dynamics, e.g. ULA)."""

    def __call__(self, move: Move) -> Tensor:
        return torch.zeros(move.x.shape[0], dtype=move.x.dtype, device=move.x.device)


class ExactRule:
    r"""Exact MH: $\log\alpha = \min\{0, \log p(x') - \log p(x) + \Delta_q\}$.

    Arguments:
        log_density: $\log p$ up to a constant, ``[C, d] -> [C]``; ``-inf`` (or NaN)
            outside the support rejects the move. Not called where the move carries the
            values (a kernel built with ``log_density``, [`build_kernel()`][scorebayes.samplers.mh.build_kernel]).
    """

    def __init__(self, log_density: Callable[[Tensor], Tensor]):
        self.log_density = log_density

    def __call__(self, move: Move) -> Tensor:
        lp_prop = self.log_density(move.x_prop) if move.log_density_prop is None else move.log_density_prop
        lp = self.log_density(move.x) if move.log_density is None else move.log_density
        diff = lp_prop - lp
        return _clamp_log_alpha(diff + move.log_q_ratio)


class LearnedRule:
    r"""Learned acceptance from a network $a_\omega$ (first slot: the destination).

    ``form="direct"`` (the paper): $\log\alpha = \log a_\omega(x', x)$.
    ``form="ratio"``: $\log\alpha = \min\{0, \log a_\omega(x', x) - \log a_\omega(x, x')\}$.
    Score balance matching identifies $a_\omega$ only up to the family of detailed-balance
    solutions (any $a$ with $a(x',x)/a(x,x') = r$; the entropy term drives it toward
    Barker's $r/(1+r)$). Every such $a$ is below $\min\{1, r\}$, and the ratio
    form recovers exactly $\min\{1, r\}$ from any of them (Peskun-optimal, up to twice
    Barker's acceptance), at the price of a second network evaluation.

    Arguments:
        log_accept: ``(x_to [C, d], x_from [C, d]) -> [C]``, e.g. an
            `AcceptanceNet`'s ``log_accept``
            (or a ``functools.partial`` fixing its conditioning).
        form: ``"direct"`` or ``"ratio"``.
    """

    def __init__(self, log_accept: Callable[[Tensor, Tensor], Tensor], form: str = "direct"):
        if form not in ("direct", "ratio"):
            raise ValueError(f"learned acceptance form must be 'direct' or 'ratio', got {form!r}")
        self.log_accept, self.form = log_accept, form

    def __call__(self, move: Move) -> Tensor:
        log_a = self.log_accept(move.x_prop, move.x).reshape(-1)
        if self.form == "ratio":
            log_a = log_a - self.log_accept(move.x, move.x_prop).reshape(-1)
        return _clamp_log_alpha(log_a)


def _quadratic_form(score: Callable[[Tensor], Tensor], x: Tensor, tau: Tensor) -> Tensor:
    r"""$\tau^\top J_{\tilde s}(x)\,\tau$ ``[C]`` by one vector-Jacobian product."""
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        (jt_tau,) = torch.autograd.grad((score(x) * tau).sum(), x)
    return (jt_tau * tau).sum(-1).detach()


class TaylorRule:
    r"""Taylor approximations of $\log p(x') - \log p(x)$ (App. A).

    ``order=1, averaging=True`` (default, "Taylor-1 (averaging)"): $\tfrac12(\tilde s(x)+\tilde s(x'))\cdot\tau$;
    ``order=1, averaging=False``: $\tilde s(x)\cdot\tau$;
    ``order=2, averaging=False``: $\tilde s(x)\cdot\tau + \tfrac12\tau^\top J(x)\tau$;
    ``order=2, averaging=True``: $\tfrac12(\tilde s(x)+\tilde s(x'))\cdot\tau + \tfrac14\tau^\top(J(x) - J(x'))\tau$.

    Arguments:
        order: 1 or 2.
        averaging: expand around both endpoints and average.
        score: the score callable; needed for ``order=2`` (its Jacobian).
    """

    def __init__(self, order: int = 1, averaging: bool = True,
                 score: Callable[[Tensor], Tensor] | None = None):
        if order not in (1, 2):
            raise ValueError(f"Taylor order must be 1 or 2, got {order}")
        if order == 2 and score is None:
            raise ValueError("the order-2 Taylor rule needs the score callable (for its Jacobian)")
        self.order, self.averaging, self.score = order, averaging, score

    def __call__(self, move: Move) -> Tensor:
        s, s_prop = _need_scores(move, "Taylor")
        tau = move.x_prop - move.x
        if self.averaging:
            diff = 0.5 * ((s + s_prop) * tau).sum(-1)
            if self.order == 2:
                diff = diff + 0.25 * (_quadratic_form(self.score, move.x, tau)
                                      - _quadratic_form(self.score, move.x_prop, tau))
        else:
            diff = (s * tau).sum(-1)
            if self.order == 2:
                diff = diff + 0.5 * _quadratic_form(self.score, move.x, tau)
        return _clamp_log_alpha(diff + move.log_q_ratio)


def quadrature_nodes(num_nodes: int, kind: str = "lobatto") -> tuple[np.ndarray, np.ndarray]:
    r"""Nodes ``t [k]`` and weights ``w [k]`` on $[0, 1]$ (weights sum to 1).

    ``"lobatto"``: $t = 0, 1$ and the roots of $P'_{k-1}$ (mapped), weights
    $2/(k(k-1)P_{k-1}(u_i)^2)$ halved; ``"legendre"``: roots of $P_k$.
    """
    leg = np.polynomial.legendre
    if kind == "lobatto":
        if num_nodes < 2:
            raise ValueError("Gauss-Lobatto needs at least 2 nodes (the two endpoints)")
        interior = leg.Legendre.basis(num_nodes - 1).deriv().roots() if num_nodes > 2 else np.array([])
        u = np.concatenate([[-1.0], np.sort(np.real(interior)), [1.0]])
        p = leg.legval(u, [0] * (num_nodes - 1) + [1])
        w = 2.0 / (num_nodes * (num_nodes - 1) * p**2)
    elif kind == "legendre":
        if num_nodes < 1:
            raise ValueError("Gauss-Legendre needs at least 1 node")
        u, w = leg.leggauss(num_nodes)
    else:
        raise ValueError(f"quadrature kind must be 'lobatto' or 'legendre', got {kind!r}")
    return (u + 1) / 2, w / 2


def log_density_difference(score: Callable[[Tensor], Tensor], start: Tensor, end: Tensor, *,
                           pieces: int = 16, num_nodes: int = 4) -> Tensor:
    r"""Log-density differences from a score alone, by a composite path integral.

    $$
    \log p(b) - \log p(a) = \int_0^1 s(a + t(b - a))\cdot(b - a)\,dt,
    $$

    the straight segment cut into ``pieces`` equal parts, each integrated by ``num_nodes``-node
    Gauss-Legendre ([`quadrature_nodes()`][scorebayes.samplers.acceptance.quadrature_nodes]): ``pieces * num_nodes`` score evaluations per
    segment. Composite, so that a segment much longer than the density's scale (a chain
    stuck far out in the tail) is still resolved near its peak. Exact for a conservative score up
    to the quadrature error; a learned score that is not conservative gives the integral along
    this path.

    Arguments:
        score: $s = \nabla\log p$, ``[M, d] -> [M, d]``.
        start, end: end points $a$ and $b$, ``[C, d]``; one of them may be ``[d]`` (shared).

    Returns:
        ``[C]``: $\log p(b_c) - \log p(a_c)$.
    """
    if pieces < 1:
        raise ValueError(f"pieces must be >= 1, got {pieces}")
    start, end = torch.broadcast_tensors(torch.as_tensor(start), torch.as_tensor(end))
    if start.dim() != 2:
        raise ValueError(f"start and end must be [C, d] (one may be [d]), got shape {tuple(start.shape)}")
    nodes, weights = quadrature_nodes(num_nodes, "legendre")
    t = (np.arange(pieces)[:, None] + nodes[None, :]).ravel() / pieces  # [K] on [0, 1]
    w = np.tile(weights, pieces) / pieces
    delta = end - start  # [C, d]
    total = torch.zeros(start.shape[0], dtype=start.dtype, device=start.device)
    for t_k, w_k in zip(t, w, strict=True):  # one [C, d] batch per node: a sampler step's memory
        s = score(start + float(t_k) * delta).to(start.dtype)
        total = total + float(w_k) * (s * delta).sum(-1)
    return total


class QuadratureRule:
    r"""Path-integral acceptance: $\log p(x') - \log p(x) \approx \sum_i w_i\,\tilde s(x + t_i\tau)\cdot\tau$.

    Exact for any conservative score up to the quadrature error, which falls with
    ``num_nodes`` as fast as the score is smooth along the segment.

    Arguments:
        score: $\tilde s$, ``[C, d] -> [C, d]``.
        num_nodes: ``k``; with Lobatto ``k = 2`` equals [`TaylorRule`][scorebayes.samplers.acceptance.TaylorRule] (order 1, averaging).
        kind: ``"lobatto"`` (default, reuses the scores cached at both endpoints) or ``"legendre"``.
    """

    def __init__(self, score: Callable[[Tensor], Tensor], num_nodes: int = 3, kind: str = "lobatto"):
        self.score, self.kind = score, kind
        self.nodes, self.weights = quadrature_nodes(num_nodes, kind)

    def __call__(self, move: Move) -> Tensor:
        tau = move.x_prop - move.x
        total = torch.zeros(tau.shape[0], dtype=tau.dtype, device=tau.device)
        for t, w in zip(self.nodes, self.weights, strict=True):
            if self.kind == "lobatto" and t == 0.0 and move.score is not None:
                s = move.score
            elif self.kind == "lobatto" and t == 1.0 and move.score_prop is not None:
                s = move.score_prop
            else:
                s = self.score(move.x + float(t) * tau)
            total = total + float(w) * (s * tau).sum(-1)
        return _clamp_log_alpha(total + move.log_q_ratio)
