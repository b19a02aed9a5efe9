r"""Where the summed-score posterior lies, reported beside the calibrated one.

The posterior of Jiang, Wang and Yang (2025) is the law with score
$g(u) = \nabla_u \log \pi(u) + \hat s(u; \mathbf X)$, the learned single-observation score
summed over the $n$ observations. Its Laplace approximation is the root $u_s$ of $g$ (found by
Newton's method from the calibrated posterior's mean, each step at most ``MAX_STEP`` calibrated
SDs per coordinate) with covariance $(-\partial g / \partial u)^{-1}$ there, the Jacobian by
central differences. Both posteriors use the same network: how far apart they are is how far
the summed score's error would have moved the answer, in calibrated posterior SDs. It is a
report, not a check: the calibrated posterior does not depend on it.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..fitted import FittedEstimator

__all__ = ["summed_score_comparison"]

#: Newton steps at most, and the largest step per coordinate in calibrated SDs
MAX_ITERATIONS, MAX_STEP = 50, 2.0


def _posterior_score(est: FittedEstimator, u: Tensor) -> Tensor:
    """$g(u)$ for ``u [d]`` -> ``[d]`` (float64)."""
    with torch.no_grad():
        return (est.space.grad_log_prob_unconstrained(u[None]) + est.likelihood_(u[None]))[0].double()


def _jacobian(est: FittedEstimator, u: Tensor, scale: Tensor) -> Tensor:
    """$\\partial g / \\partial u$ at ``u [d]`` by central differences of ``1e-3 scale`` -> ``[d, d]``."""
    columns = []
    for j in range(len(u)):
        h = torch.zeros_like(u)
        h[j] = 1e-3 * scale[j]
        columns.append((_posterior_score(est, u + h) - _posterior_score(est, u - h)) / (2 * h[j]))
    jac = torch.stack(columns, 1)
    return 0.5 * (jac + jac.T)


def summed_score_comparison(est: FittedEstimator, mean: Tensor, sd: Tensor) -> dict[str, Any] | None:
    """The summed-score posterior's Laplace approximation against the calibrated posterior's
    ``mean`` and ``sd`` (in ``u``, ``[d]`` each): ``{"mean", "sd"}`` (in ``u``), ``"distance_sd"``
    (the largest |difference of means| in calibrated SDs) and ``"sd_ratio"`` (summed over
    calibrated, per parameter); ``None`` if Newton's method finds no root with a negative definite
    Jacobian (the summed score may have none: then its chains would drift)."""
    u = mean.double().clone()
    for _ in range(MAX_ITERATIONS):
        g, jac = _posterior_score(est, u), _jacobian(est, u, sd)
        try:
            step = torch.linalg.solve(-jac, g)
        except RuntimeError:  # a singular Jacobian
            return None
        step = torch.maximum(torch.minimum(step, MAX_STEP * sd), -MAX_STEP * sd)
        if not torch.isfinite(step).all():
            return None
        u = u + step
        if bool(((step / sd).abs() < 1e-4).all()):
            break
    jac = _jacobian(est, u, sd)
    eig = torch.linalg.eigvalsh(jac)
    if not bool((eig < 0).all()) or not torch.isfinite(u).all():
        return None
    summed_sd = torch.linalg.inv(-jac).diagonal().sqrt()
    return {"mean": u.tolist(), "sd": summed_sd.tolist(),
            "distance_sd": float(((u - mean) / sd).abs().max()),
            "sd_ratio": (summed_sd / sd).tolist()}
