"""The observed data of a Langevin-SBI fit, checked before any expensive work.

`checked_observed()` checks the array itself; `check_against_pilot()` then simulates a
pilot data set at the observed size (some simulators only make data sets of one length) and checks
that the simulator, the data view, the data features and the score views agree with the data.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .fitted import FittedEstimator
from .reference_tables import TableSource
from .views import DataView

__all__ = ["checked_observed", "check_against_pilot"]


def checked_observed(x_obs: Tensor, view: DataView) -> Tensor:
    """``x_obs`` as ``[n, p]`` in the default dtype (``[n]`` is read as ``p = 1``), finite and
    accepted by ``view``."""
    x_obs = torch.as_tensor(x_obs, dtype=torch.get_default_dtype())
    if x_obs.dim() == 1:
        x_obs = x_obs[:, None]
    if x_obs.dim() != 2 or len(x_obs) < 1:
        raise ValueError(f"x_obs must be [n, p], got shape {tuple(x_obs.shape)}")
    if not torch.isfinite(x_obs).all():
        raise ValueError("x_obs contains non-finite values")
    view.check(x_obs)
    return x_obs


def check_against_pilot(est: FittedEstimator, source: TableSource, x_obs: Tensor) -> None:
    """Simulate two data sets of the observed size at ``u = 0`` (through ``source``'s fault
    handling) and check the simulator's columns, the data features and the score views against
    ``x_obs [n, p]``."""
    pilot_theta = est.space.to_constrained(torch.zeros(2, est.space.dim, dtype=torch.float64))
    pilot = source.pilot(pilot_theta, len(x_obs))
    if pilot.shape[-1] != x_obs.shape[-1]:
        raise ValueError(f"the simulator returns p={pilot.shape[-1]} columns per observation but "
                         f"the observed data have p={x_obs.shape[-1]}")
    if est.networks.data_features is not None:  # the summaries work on a table and on the data
        est.view.table(pilot.to(x_obs.dtype))
        est.view.observed(x_obs)
    if est.networks.score_views is not None:
        from ..scores.networks import check_views

        check_views(est.networks.score_views, est.space.dim, est.view.observed(x_obs).shape[-1])
