r"""Linear changes of variables $u = c + Lv$ that whiten a posterior for Langevin chains.

In $v$ the drift is $L^\top\mathrm{drift}(c + Lv)$ (scores transform as
$\nabla_v = L^\top\nabla_u$) and the target is unchanged, since the map is linear. Two
estimates of $L$: from the drift's curvature at a few points ([`dense_preconditioner()`][scorebayes.samplers.langevin.dense_preconditioner],
$L^\top H L = I$) and from the covariance of a cloud of chain states
([`covariance_preconditioner()`][scorebayes.samplers.langevin.covariance_preconditioner], $LL^\top = \hat\Sigma$, shrunk toward its diagonal).

References:
    - Stan Reference Manual: HMC algorithm parameters, adaptation windows (Stan Development Team, 2024)
      <https://mc-stan.org/docs/reference-manual/mcmc.html>
    - Riemann manifold Langevin and Hamiltonian Monte Carlo methods (Girolami and Calderhead, 2011)
      <https://doi.org/10.1111/j.1467-9868.2010.00765.x>
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .base import ChainsDivergedError

__all__ = ["dense_preconditioner", "covariance_preconditioner"]

ScoreFn = Callable[[Tensor], Tensor]


def dense_preconditioner(drift: ScoreFn, points: Tensor, *, floor: float = 1e-8) -> tuple[Tensor, Tensor]:
    r"""A linear change of variables that gives the drift unit curvature in every direction.

    $$
    H = \frac1K\sum_k -\operatorname{sym}\nabla\,\mathrm{drift}(u_k) = V\Lambda V^\top,
    \qquad u = c + L v,\quad L = V\Lambda^{-1/2}
    $$

    In $v$ the drift is $L^\top\mathrm{drift}(c + Lv)$ with Hessian about
    $L^\top H L = I$: the step size is no longer set by the stiffest direction while the
    softest one needs $\lambda_{\max}/\lambda_{\min}$ times more steps (posteriors of
    many weakly and a few strongly identified parameters, e.g. the monotone regression, where
    the curvature spans six orders of magnitude). The change of variables is linear, so the
    chains' target is unchanged.

    Arguments:
        drift: ``[C, d] -> [C, d]``, differentiable; points: ``[K, d]`` probe positions.
        floor: eigenvalues are clamped to ``floor * max`` (directions of no curvature).

    Returns:
        ``(c [d], L [d, d])`` with ``c`` the probes' mean.
    """
    hessians = []
    for point in points:
        jac = torch.autograd.functional.jacobian(lambda v: drift(v[None])[0], point.detach().clone())
        if torch.isfinite(jac).all():
            hessians.append(-0.5 * (jac + jac.T).double())
    if not hessians:
        raise ChainsDivergedError("the drift's Jacobian is not finite at any probe point")
    eig, vec = torch.linalg.eigh(torch.stack(hessians).mean(0))
    eig = eig.clamp_min(max(float(eig.max()), 1e-300) * floor)
    return points.double().mean(0), vec * eig.rsqrt()


def covariance_preconditioner(points: Tensor, *, shrinkage: float = 5.0) -> tuple[Tensor, Tensor]:
    r"""A linear change of variables that whitens a cloud of chain states.

    $$
    \hat\Sigma_\gamma = \frac{N\hat\Sigma + \gamma\,\operatorname{diag}\hat\Sigma}{N+\gamma},
    \qquad u = c + Lv,\quad LL^\top = \hat\Sigma_\gamma,
    $$

    with $c$ and $\hat\Sigma$ the mean and covariance of the ``N`` points and
    $\gamma$ = ``shrinkage`` pulling the correlations towards zero for small ``N`` (as in
    Stan's windowed adaptation, but towards the diagonal rather than a fixed multiple of the
    identity, since the coordinates' scales may differ by orders of magnitude). Where the
    posterior is not Gaussian, the curvature at a few points ([`dense_preconditioner()`][scorebayes.samplers.langevin.dense_preconditioner]) can
    miss its shape by orders of magnitude; the draws' covariance does not.

    Arguments:
        points: ``[N, d]`` states (e.g. pooled draws of a warm-up window), ``N >= 2``.

    Returns:
        ``(c [d], L [d, d])``, ``L`` lower triangular.
    """
    if points.dim() != 2 or len(points) < 2:
        raise ValueError(f"need points [N >= 2, d], got shape {tuple(points.shape)}")
    x = points.double()
    n, d = x.shape
    centre = x.mean(0)
    cov = (x - centre).T @ (x - centre) / (n - 1)
    var = cov.diagonal().clamp_min(max(float(cov.diagonal().max()), 1e-300) * 1e-16)
    sd = var.sqrt()
    corr = cov / (sd[:, None] * sd[None, :])
    corr = (n * corr + shrinkage * torch.eye(d, dtype=x.dtype)) / (n + shrinkage)
    corr = corr + 1e-10 * torch.eye(d, dtype=x.dtype)
    return centre, sd[:, None] * torch.linalg.cholesky(corr)
