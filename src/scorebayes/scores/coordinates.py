r"""Networks that live in the constrained parameter $\theta$ but answer in $u$.

The sampler and the score-matching losses work in the unconstrained $u$, with
$\theta = T(u)$ (``ParameterSpace``: logit of a prior box, log of a positive rate). A
network in $u$ must learn the Jacobian of $T$ along with the likelihood. Near a box
face that factor decays exponentially ($\partial\theta/\partial u \approx \theta - a$
as $\theta \to a$), and a network fitted where the table is dense extrapolates it badly
into the tails where boundary posteriors sit.

These wrappers put the network in $\theta$ and apply the chain rule exactly, for
elementwise transforms (diagonal $J = \partial\theta/\partial u$):

$$
s_u(u, x) = J(u) \odot s^\theta_\phi(T(u), x), \qquad
h_u(u) = J(u) \odot h^\theta_\psi(T(u)).
$$

The losses are unchanged (they differentiate through $J$ and $T$ by autograd), so
score matching, the curvature penalty and debiasing keep their meaning in $u$. Measured on
the monotone regression (11 parameters, most increments at the
$\theta_k = 0$ face): at exact posterior draws the debiased score's squared error fell from
2.0e7 to 4.7e5 (true score's squared norm 5.9e5) at the same table size.

Reference: the paper's networks take $\theta$ itself (Jiang, Wang, Yang, App. C.2);
``ScoreLangevin(network_coordinates="constrained")``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..priors import ParameterSpace

__all__ = ["ConstrainedScoreNet", "ConstrainedMeanNet", "check_elementwise", "theta_and_jacobian"]


def theta_and_jacobian(space: ParameterSpace, u: Tensor) -> tuple[Tensor, Tensor]:
    r"""$\theta = T(u)$ and the diagonal $\partial\theta_k/\partial u_k$, both ``[*, d]``.

    Differentiable in ``u`` (the losses take $\nabla_u$ of scores built from them). Only
    elementwise transforms have a diagonal Jacobian: checked by
    [`ParameterSpace.is_elementwise()`][scorebayes.priors.ParameterSpace.is_elementwise] when the wrapper is built."""
    with torch.enable_grad():
        leaf = not u.requires_grad
        v = u.detach().requires_grad_(True) if leaf else u
        theta = space.to_constrained(v)
        (jac,) = torch.autograd.grad(theta.sum(), v, create_graph=not leaf)
    if leaf:
        return theta.detach(), jac.detach()
    return theta, jac


def check_elementwise(space: ParameterSpace) -> None:
    """Raise unless the prior's transform acts coordinate by coordinate (a diagonal Jacobian)."""
    if not space.is_elementwise():
        raise ValueError("network_coordinates='constrained' needs a prior whose support maps to R^d "
                         "coordinate by coordinate (e.g. independent marginals); this prior's "
                         "transform mixes coordinates")


class ConstrainedScoreNet(nn.Module):
    r"""Per-observation score in $u$ from a network in $\theta$.

    Arguments:
        space: the ``ParameterSpace`` of the prior (elementwise transform).
        inner: a `ScoreNet` taking $\theta$.

    ``forward(u [*, d], x [*, p]) -> [*, d]``; ``sum_over_observations(u [C, d], x [n, p]) -> [C, d]``.
    """

    def __init__(self, space: ParameterSpace, inner: nn.Module):
        super().__init__()
        check_elementwise(space)
        self.space, self.inner = space, inner
        self.theta_dim, self.x_dim = inner.theta_dim, inner.x_dim

    def fit_standardisation(self, u: Tensor, x: Tensor) -> None:
        self.inner.fit_standardisation(theta_and_jacobian(self.space, u)[0], x)

    def forward(self, u: Tensor, x: Tensor) -> Tensor:
        theta, jac = theta_and_jacobian(self.space, u)
        return jac * self.inner(theta, x)

    def sum_over_observations(self, u: Tensor, x: Tensor, **kwargs) -> Tensor:
        theta, jac = theta_and_jacobian(self.space, u)
        return jac * self.inner.sum_over_observations(theta, x, **kwargs)

    def score_and_jacobian(self, u: Tensor, x: Tensor) -> tuple[Tensor, Tensor] | None:
        r"""Scores in $u$ and their summed $u$-Jacobian, by the chain rule on the inner
        network's forward mode (`ScoreNet.score_and_jacobian()`):

        $$
        \frac{\partial s_{u,j}}{\partial u_l} = J_j J_l
        \frac{\partial s^\theta_j}{\partial\theta_l} + \delta_{jl} J'_j s^\theta_j,
        \qquad J'_j = \partial^2\theta_j / \partial u_j^2 .
        $$

        ``u [B, d]``, ``x [B, m, p]`` -> ``(s [B, m, d], J [B, d, d])``, or ``None`` when the inner
        network has no forward mode (the caller then uses autograd). Without it, training
        differentiated through $T$ with ``d`` double-backward passes.
        """
        inner = getattr(self.inner, "score_and_jacobian", None)
        if inner is None:
            return None
        theta, jac, curvature = _theta_jacobian_curvature(self.space, u)
        out = inner(theta, x)
        if out is None:
            return None
        per_obs, jac_theta = out
        jac_u = jac[:, :, None] * jac_theta * jac[:, None, :]
        jac_u = jac_u + torch.diag_embed(curvature * per_obs.sum(1))
        return jac[:, None, :] * per_obs, jac_u


def _theta_jacobian_curvature(space: ParameterSpace, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r"""$\theta = T(u)$, $T'(u)$ and $T''(u)$ elementwise, ``[B, d]`` each,
    as constants (no graph to ``u``: score matching differentiates in the network's weights)."""
    with torch.enable_grad():
        v = u.detach().requires_grad_(True)
        theta = space.to_constrained(v)
        (jac,) = torch.autograd.grad(theta.sum(), v, create_graph=True)
        if jac.requires_grad:
            (curvature,) = torch.autograd.grad(jac.sum(), v, allow_unused=True)
        else:
            curvature = None
    if curvature is None:  # an affine transform
        curvature = torch.zeros_like(v)
    return theta.detach(), jac.detach(), curvature.detach()


class ConstrainedMeanNet(nn.Module):
    r"""Debiasing mean $h_u(u) = J(u) \odot h^\theta_\psi(T(u))$ (``forward(u [*, d]) -> [*, d]``).

    The regression targets (mean scores in $u$) are divided by $J$ for the inner
    network's output standardisation."""

    def __init__(self, space: ParameterSpace, inner: nn.Module):
        super().__init__()
        check_elementwise(space)
        self.space, self.inner = space, inner

    def fit_standardisation(self, u: Tensor, targets: Tensor) -> None:
        theta, jac = theta_and_jacobian(self.space, u)
        safe = torch.where(jac == 0, torch.finfo(jac.dtype).tiny, jac)  # only the statistics use it
        self.inner.fit_standardisation(theta, targets / safe)

    def forward(self, u: Tensor) -> Tensor:
        theta, jac = theta_and_jacobian(self.space, u)
        return jac * self.inner(theta)
