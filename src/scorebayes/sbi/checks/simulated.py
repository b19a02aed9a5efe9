"""Data sets simulated for the checks of a fitted Langevin-SBI estimator (the fit's verdict,
calibration, score-mean test).

Each check simulates data sets at chosen parameters, at the fitted data set's size, through the
tables' fault handling ([`simulate()`][scorebayes.sbi.reference_tables.TableSource.simulate]: failed and
non-finite simulations are dropped and counted), smooths them as the tables were smoothed, and
evaluates the learned likelihood score on their network views.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["checked_parameters", "simulate_views"]


def checked_parameters(space, value: Any, name: str, shapes: tuple[tuple[int, ...], ...], expected: str) -> Tensor:
    """``value`` as float64, checked: one of ``shapes`` and inside the prior's support."""
    value = torch.as_tensor(value, dtype=torch.float64)
    if value.shape not in shapes:
        raise ValueError(f"{name} must be {expected}, got shape {tuple(value.shape)}")
    if not torch.isfinite(space.to_unconstrained(value)).all():
        raise ValueError(f"{name} must lie inside the prior's support")
    return value


def simulate_views(estimator, theta: Tensor, g: torch.Generator, what: str,
                   data: Tensor | None = None, *, drop_nonfinite: bool = False) -> tuple[Tensor, Tensor, list[Tensor]]:
    """One data set per row of ``theta [M, d]`` at the estimator's size, or the given ``data``
    (noise-smoothed if the estimator is), and each one's network view. ``what`` names the check
    in the fault messages; ``drop_nonfinite`` as in [`simulate()`][scorebayes.sbi.reference_tables.TableSource.simulate].

    Returns:
        ``(keep [M] bool, x [M', n, p], [view [n_units, p_net]] * M')``: the rows of ``theta``
        whose simulation worked (all of them for given ``data``), their data sets and views.
    """
    likelihood = estimator.likelihood_
    dtype = likelihood.x_obs.dtype
    if data is None:
        keep, x = estimator.source_.simulate(theta, likelihood.n_obs, g, what, drop_nonfinite=drop_nonfinite)
    else:
        keep, x = torch.ones(len(data), dtype=torch.bool), data
    x = x.to(dtype)
    if likelihood.smoothing is not None:  # the score was learned for the noise-smoothed data
        x = likelihood.smoothing.with_generator(x, g)
    return keep, x, [likelihood.observed_view(x_m) for x_m in x]
