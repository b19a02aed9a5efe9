r"""The estimator as the stages see it: a structural type, so that the stages (rounds, checks,
remedies) need not import the estimator that composes them.

[`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] satisfies `FittedEstimator`. Attributes
with a trailing underscore are set by ``fit`` and by the rounds; the others are the estimator's
settings.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor
from torch.distributions import Distribution

from ..posterior import Posterior
from ..priors import ParameterSpace
from ..scores.training import TrainingSchedule
from ..simulators import Simulator
from .budget import BudgetPlan, Ledger
from .likelihood import DataSmoothing, LearnedLikelihoodScore
from .reference_tables import TableSource
from .settings import Localization, Networks, Simulation, Training
from .views import DataView

__all__ = ["FittedEstimator"]


class FittedEstimator(Protocol):
    """What the stages read from and write to the estimator (see the module docstring)."""

    # settings
    prior: Distribution
    space: ParameterSpace
    simulator: Simulator
    mode: str
    view: DataView
    calibrates: bool
    localization: Localization
    networks: Networks
    training: Training
    simulation: Simulation
    schedule: TrainingSchedule
    mean_schedule: TrainingSchedule
    debias: str
    antithetic: bool
    smoothing: DataSmoothing | None
    parameter_names: list[str] | None
    store: Any
    device: torch.device
    seed: int
    progress: bool
    # state of the fit
    likelihood_: LearnedLikelihoodScore
    plan_: BudgetPlan
    ledger_: Ledger
    source_: TableSource
    proposal_: Any
    localization_: Any
    simulations_: dict[str, float]
    faults_: dict[str, float]
    fit_report_: Any
    mean_report_: Any
    mean_reports_: list[Any]
    rounds_: list[dict]  # modes n, full, markov: each table round's proposal and rows
    table_rounds_: list[dict]  # single mode: each table round's proposal
    debias_groups_: Any
    trust_steps_: list[dict]
    calibration_: Any

    def posterior_u(self, posterior: Posterior) -> Tensor: ...

    def check(self, posterior: Posterior, **options: Any) -> Any: ...

    def sample(self, num_samples: int = ..., **options: Any) -> Posterior: ...

    def fit(self, x_obs: Tensor) -> Any: ...

    def likelihood_score(self, u: Tensor, x_obs: Tensor | None = None, **options: Any) -> Tensor: ...

    def move_tables(self, center: Tensor, sd: Tensor) -> Any: ...

    def refine_proposal(self, posterior: Posterior, **options: Any) -> Any: ...
