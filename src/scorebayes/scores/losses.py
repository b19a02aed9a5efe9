r"""Score-matching losses, curvature penalties and the debiasing regression loss.

For a table of parameters $\theta^{(k)} \sim p_{\text{train}}$ (the prior, or the
localized proposal $q$) with $m$ simulated observations each, write the
summed score $S_k = \sum_{i=1}^m s_\phi(\theta^{(k)}, X^{(k)}_i)$ and its Jacobian
$J_k = \nabla_\theta S_k$ (``J[j, l] = dS_j / dtheta_l``).

Implicit score matching (eq. 4; eq. 23 with the $1/n$ scaling):

$$
\ell_k = \tfrac12\|S_k\|^2 + S_k^\top\nabla_\theta\log p_{\text{train}}(\theta^{(k)}) + \operatorname{tr} J_k .
$$

Weighted score matching for data-dependent supports (eq. 19), with $g \ge 0$
vanishing on the boundary:

$$
\tfrac12\|S\odot g^{1/2}\|^2 + (S\odot g)^\top\nabla\log p + \sum_j (\partial_j S_j\, g_j + S_j\,\partial_j g_j).
$$

Curvature penalty (information identity, eqs. 23-24), a squared norm of a *within-θ
average*:

$$
C_k = \Big\| \frac1m \sum_i \big[s_i s_i^\top + \nabla_\theta s_i\big] \Big\|_F^2 .
$$

Debiasing regression (eq. 25) for $h_\psi$ with targets $\bar s_l$:

$$
\|h - \bar s\|^2 + \lambda_2 \|h h^\top - \nabla h - \bar s h^\top - h \bar s^\top\|_F^2,
$$

or App. B.5 alternative 1: $\lambda_2\|h h^\top + \nabla h\|_F^2$.

For a target known through samples $z_b \sim p$ (score-based Metropolis-Hastings) the same
implicit objective without a base density, [`ism_loss()`][scorebayes.scoremh.score_matching.ism_loss], and its sliced ([`ssm_loss()`][scorebayes.scoremh.score_matching.ssm_loss])
and denoising ([`dsm_loss()`][scorebayes.scoremh.score_matching.dsm_loss], [`noise_conditional_dsm_loss()`][scorebayes.scoremh.score_matching.noise_conditional_dsm_loss]) variants fit $s \approx
\nabla\log p$.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Algorithms 2-3, eqs. 4, 19, 23-25, App. B.5)
    - Generalized score matching for non-negative data (Yu et al., 2019)
    - Estimation of non-normalized statistical models by score matching (Hyvarinen, 2005)
      <https://jmlr.org/papers/v6/hyvarinen05a.html>
    - Sliced Score Matching (Song et al., 2019), <https://arxiv.org/abs/1905.07088>
    - A Connection Between Score Matching and Denoising Autoencoders (Vincent, 2011)
    - Generative Modeling by Estimating Gradients of the Data Distribution (Song and Ermon, 2019)
      <https://arxiv.org/abs/1907.05600>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

__all__ = [
    "ScoreEvaluation",
    "evaluate_score",
    "implicit_score_matching",
    "weighted_score_matching",
    "curvature_penalty",
    "mean_regression_loss",
    "jacobian",
    "weight_and_diagonal_gradient",
    "ism_loss",
    "ssm_loss",
    "dsm_loss",
    "noise_conditional_dsm_loss",
]


class ScoreEvaluation(NamedTuple):
    per_observation: Tensor  # s_i, [B, m, d]
    total: Tensor  # S = sum_i s_i, [B, d]
    jacobian: Tensor  # J = d S / d theta, [B, d, d]


def jacobian(output: Tensor, theta: Tensor, *, create_graph: bool = True) -> Tensor:
    r"""Rows of $\partial\,\text{output}_j / \partial\theta$, ``[B, d] -> [B, d, d]``.

    ``theta`` is the leaf the output was computed from (``requires_grad``); rows that do
    not depend on ``theta`` come back as zeros. One backward pass per output coordinate.
    """
    rows = []
    for j in range(output.shape[-1]):
        (row,) = torch.autograd.grad(output[..., j].sum(), theta, create_graph=create_graph,
                                     retain_graph=True, allow_unused=True)
        rows.append(torch.zeros_like(theta) if row is None else row)
    return torch.stack(rows, dim=-2)


def evaluate_score(net: nn.Module, theta: Tensor, x: Tensor, *, create_graph: bool = True) -> ScoreEvaluation:
    r"""Evaluate $s_\phi$ on ``m`` observations per parameter, with the summed Jacobian.

    Arguments:
        net: ``net(theta [*, d], x [*, p]) -> [*, d]``.
        theta: ``[B, d]`` (a fresh leaf is made internally).
        x: ``[B, m, p]``.
        create_graph: keep the graph of the Jacobian (training); ``False`` returns values only.

    A net with a forward-mode ``score_and_jacobian`` (`ScoreNet`
    with a closed-form activation) is evaluated by it: the same values, and one backward pass
    instead of a double one in training. Other nets use ``d`` autograd backward passes.
    """
    forward_mode = getattr(net, "score_and_jacobian", None)
    if forward_mode is not None:
        with torch.set_grad_enabled(create_graph and torch.is_grad_enabled()):
            out = forward_mode(theta, x)
        if out is not None:
            per_obs, jac = out
            return ScoreEvaluation(per_obs, per_obs.sum(1), jac)
    leaf = theta.detach().requires_grad_(True)
    per_obs = net(leaf[:, None, :], x)
    total = per_obs.sum(1)
    return ScoreEvaluation(per_obs, total, jacobian(total, leaf, create_graph=create_graph))


def implicit_score_matching(total: Tensor, jac: Tensor, grad_log_p: Tensor | None) -> Tensor:
    r"""Per-row implicit score-matching objective ``[B]`` (eq. 4).

    Arguments:
        total: $S$ ``[B, d]``; jac: $\nabla_\theta S$ ``[B, d, d]``;
        grad_log_p: $\nabla\log p_{\text{train}}(\theta)$ ``[B, d]``; ``None`` for the
            score of the density the rows are drawn from (Hyvarinen's objective
            $\tfrac12\|S\|^2 + \operatorname{tr} J$, as in [`ism_loss()`][scorebayes.scoremh.score_matching.ism_loss]).
    """
    trace = torch.diagonal(jac, dim1=-2, dim2=-1).sum(-1)
    if grad_log_p is None:
        return 0.5 * (total**2).sum(-1) + trace
    return 0.5 * (total**2).sum(-1) + (total * grad_log_p).sum(-1) + trace


def weighted_score_matching(total: Tensor, jac: Tensor, grad_log_p: Tensor,
                            weight: Tensor, weight_diag_grad: Tensor) -> Tensor:
    r"""Per-row weighted implicit score matching ``[B]`` (eq. 19).

    Arguments:
        weight: $g(\theta, X)$ ``[B, d]``, non-negative, zero on the boundary.
        weight_diag_grad: $\partial g_j / \partial\theta_j$ ``[B, d]``.
    """
    diag = torch.diagonal(jac, dim1=-2, dim2=-1)
    return (0.5 * total**2 * weight + total * weight * grad_log_p
            + diag * weight + total * weight_diag_grad).sum(-1)


def curvature_penalty(per_observation: Tensor, jac_sum: Tensor) -> Tensor:
    r"""Per-group $\|\frac1m\sum_i (s_i s_i^\top + \nabla s_i)\|_F^2$, ``[B]``.

    Arguments:
        per_observation: ``[B, m, d]``; jac_sum: $\sum_i \nabla_\theta s_i$ ``[B, d, d]``.
    """
    m = per_observation.shape[1]
    outer = torch.einsum("bmi,bmj->bij", per_observation, per_observation)
    return (((outer + jac_sum) / m) ** 2).sum((-2, -1))


def mean_regression_loss(h: Tensor, h_jac: Tensor, s_bar: Tensor, penalty: float,
                         alternative: str = "debias") -> tuple[Tensor, Tensor]:
    r"""Debiasing regression loss (eq. 25) per row, returned as (regression [B], penalty [B]).

    Arguments:
        h: $h_\psi(\theta)$ ``[B, d]``; h_jac: $\nabla_\theta h$ ``[B, d, d]``;
        s_bar: group means of the frozen score ``[B, d]``;
        alternative: ``"debias"`` (Algorithm 3) or ``"a1"`` (App. B.5 alternative 1).
    """
    regression = ((h - s_bar) ** 2).sum(-1)
    if penalty == 0:
        return regression, torch.zeros_like(regression)
    hh = h[:, :, None] * h[:, None, :]
    if alternative == "debias":
        inner = hh - h_jac - s_bar[:, :, None] * h[:, None, :] - h[:, :, None] * s_bar[:, None, :]
    elif alternative == "a1":
        inner = hh + h_jac
    else:
        raise ValueError(f"unknown alternative {alternative!r}; use 'debias' or 'a1'")
    return regression, (inner**2).sum((-2, -1))


def weight_and_diagonal_gradient(weight_fn: Callable[[Tensor, Tensor], Tensor], theta: Tensor,
                                 x: Tensor) -> tuple[Tensor, Tensor]:
    r"""$g(\theta, X)$ ``[B, d]`` and $\partial g_j/\partial\theta_j$ ``[B, d]`` by autograd."""
    with torch.enable_grad():
        leaf = theta.detach().requires_grad_(True)
        g = weight_fn(leaf, x)
        diag = torch.diagonal(jacobian(g, leaf, create_graph=False), dim1=-2, dim2=-1)
    return g.detach(), diag.detach()


def ism_loss(score: Callable[[Tensor], Tensor], z: Tensor) -> Tensor:
    r"""Implicit score matching of samples ``z [B, d]`` with the exact trace, a scalar:
    $\frac1B\sum_b [\tfrac12\|s(z_b)\|^2 + \operatorname{tr}\nabla_z s(z_b)]$
    (`implicit_score_matching()` without a base density; ``d`` backward passes)."""
    z = z.detach().requires_grad_(True)
    s = score(z)
    return implicit_score_matching(s, jacobian(s, z), None).mean()


def ssm_loss(score: Callable[[Tensor], Tensor], z: Tensor, *,
             generator: torch.Generator | None = None) -> Tensor:
    r"""Sliced score matching (variance-reduced, one projection $v \sim \mathcal N(0, I)$ per
    point): $\frac1B\sum_b [\tfrac12\|s(z_b)\|^2 + v_b^\top\nabla_z s(z_b)\,v_b]$; scalar."""
    z = z.detach().requires_grad_(True)
    s = score(z)
    v = torch.randn(z.shape, generator=generator, dtype=z.dtype, device=z.device)
    (g,) = torch.autograd.grad((s * v).sum(), z, create_graph=True)
    return (0.5 * (s * s).sum(-1) + (g * v).sum(-1)).mean()


def dsm_loss(score: Callable[[Tensor], Tensor], z: Tensor, sigma: float, *,
             generator: torch.Generator | None = None) -> Tensor:
    r"""Denoising score matching at noise ``sigma``, scaled by $\sigma^2$:
    $\frac1B\sum_b \|\sigma s(z_b + \sigma\epsilon_b) + \epsilon_b\|^2$; scalar."""
    eps = torch.randn(z.shape, generator=generator, dtype=z.dtype, device=z.device)
    s = score(z + sigma * eps)
    return ((sigma * s + eps) ** 2).sum(-1).mean()


def noise_conditional_dsm_loss(score: Callable[[Tensor, Tensor], Tensor], z: Tensor,
                               sigmas: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
    r"""DSM over levels drawn uniformly from ``sigmas [L]``, weighted by $\sigma^2$; scalar.
    ``score(z [B, d], sigma [B]) -> [B, d]``."""
    idx = torch.randint(0, len(sigmas), (z.shape[0],), generator=generator)
    sigma = sigmas.to(z)[idx]
    eps = torch.randn(z.shape, generator=generator, dtype=z.dtype, device=z.device)
    s = score(z + sigma[:, None] * eps, sigma)
    return ((sigma[:, None] * s + eps) ** 2).sum(-1).mean()
