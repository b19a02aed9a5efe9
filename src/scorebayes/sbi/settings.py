r"""Settings of the Langevin-SBI estimator, grouped by the stage they configure.

Each group is a small frozen dataclass that checks its values when it is built, so a bad
setting is refused before any simulation. [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] takes
one of each (defaults in its signature); [`group_options()`][scorebayes.sbi.settings.group_options] maps the flat keyword names of the
command line's ``[options]`` table (``num_simulations = 2000``, ``hidden = [64, 64]``, ...) onto
them.

Examples:
    >>> Tables(num_simulations=500).num_simulations
    500
    >>> sorted(group_options({"hidden": (32,), "num_simulations": 500}))
    ['networks', 'tables']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, fields, replace
from typing import Any

from torch import Tensor, nn

from ..priors import ParameterSpace
from ..scores.coordinates import ConstrainedMeanNet, ConstrainedScoreNet, check_elementwise
from ..scores.networks import (
    CoordinateViewScoreNet,
    CrossFitMean,
    MeanNet,
    ScoreNet,
    check_embedding,
    check_tied,
    check_views,
)
from ..scores.training import TrainingSchedule
from ..tables import FAULT_MODES

__all__ = ["Localization", "Tables", "Networks", "Training", "Simulation", "OPTION_GROUPS",
           "PRESETS", "default_schedule", "group_options", "preset_options"]

NETWORK_COORDINATES = ("unconstrained", "constrained")
DEBIAS = ("debias", "a1", "a2", "none")


@dataclass(frozen=True)
class Localization:
    r"""Where the tables' parameters come from (Sec. 3.1 of Jiang, Wang and Yang, 2025).

    Arguments:
        enabled: draw the tables from the localized proposal $q$ (minimum-distance
            replicates, [`scorebayes.sbi.localization.minimum_distance.localize()`][scorebayes.sbi.localization.minimum_distance.localize]) or, if ``False``, from the prior.
        options: keyword arguments of [`scorebayes.sbi.localization.minimum_distance.localize()`][scorebayes.sbi.localization.minimum_distance.localize].
        in_support: confine the localization to ``support_fn(x_obs)`` (needs ``support_fn``).
        support_fn: ``support_fn(x_obs [n, p]) -> (low [d], high [d])``, the admissible box of
            $\theta$ given the data (a data-dependent support): the localization may be
            confined to it (``in_support``), and the chains are reflected into it.
        inflation: factor on $q$'s standard deviations; a proposal about twice the
            localization spread keeps the $s^\top\nabla\log q$ noise of the loss down and
            covers the posterior's tails (1.0 is the paper's $q$).
    """

    enabled: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    in_support: bool = False
    inflation: float = 2.0
    support_fn: Callable[[Tensor], tuple[Tensor, Tensor]] | None = None

    def __post_init__(self):
        if self.in_support and self.support_fn is None:
            raise ValueError("localize_in_support needs support_fn (the box the localization is confined to)")
        if not self.inflation > 0:
            raise ValueError(f"proposal_inflation must be positive, got {self.inflation}")
        if self.in_support and "support" in self.options:
            raise ValueError("give the localization's support either as localization['support'] or "
                             "by localize_in_support, not both")


@dataclass(frozen=True)
class Tables:
    r"""The simulation budget and the sizes of the reference tables and of the calibration.

    Arguments:
        num_simulations: the whole simulation budget, localization, tables and the fit's check
            included, in data sets of the observed size $n$ (a single-observation row costs
            $1/n$). ``None``: the default plan's own total (`scorebayes.sbi.budget`; about
            7,800 at $n = 200$ with the calibration, 4,200 without). The sizes below that are not
            given are scaled to it.
        table_size: rows of the main table: $N_S$ single observations (mode ``"single"``,
            default 80,000) or $N$ data sets (other modes, default 1,000).
        num_groups, group_size: $N_R$ (default 500) and $m_R$ (default
            $\min(1000, \max(100, n))$) of $\mathcal D^R$ (single mode).
        antithetic: mirrored parameter pairs with common random numbers in the main table
            (`scorebayes.sbi.antithetic`); ``None``: on in single mode only.
        noise_sd, noise_draws: Gaussian data smoothing $\sigma_\varepsilon$ added to every
            simulated and observed data point, and the number of noisy copies of the observed
            data the chains condition on.
        calibrate: the posterior from the learned score used as a summary and calibrated on
            data sets of the observed size (`scorebayes.sbi.calibrated`), instead of Langevin
            chains on the summed score. ``None``: on in modes ``"single"`` and ``"n"`` (i.i.d.
            data) except under ``preset="paper"``; never in mode ``"markov"``.
        calibration_size: data sets per calibration round (default 1,000, scaled with
            ``num_simulations``).
        time_limit: seconds of the fit and its calibrated sampling after which a calibrated
            fit whose check failed starts no further escalation step (more calibration data
            sets, larger tables: `scorebayes.sbi.calibrated.escalation`); ``None``: no limit but
            ``num_simulations``. The fit's planned stages always run.
    """

    num_simulations: float | None = None
    table_size: int | None = None
    num_groups: int | None = None
    group_size: int | None = None
    antithetic: bool | None = None
    noise_sd: float | None = None
    noise_draws: int = 3
    calibrate: bool | None = None
    calibration_size: int | None = None
    time_limit: float | None = 300.0

    def __post_init__(self):
        if self.calibrate is not None and not isinstance(self.calibrate, bool):
            raise ValueError(f"calibrate must be true or false, got {self.calibrate!r}")
        if self.noise_sd is not None and not self.noise_sd > 0:
            raise ValueError(f"noise_sd must be positive, got {self.noise_sd}")
        for name in ("table_size", "num_groups", "group_size", "calibration_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.time_limit is not None and (isinstance(self.time_limit, bool) or not self.time_limit >= 0):
            raise ValueError(f"time_limit must be a non-negative number of seconds, got {self.time_limit!r}")
        if self.num_simulations is not None and (isinstance(self.num_simulations, bool)
                                                 or not self.num_simulations > 0):
            raise ValueError(f"num_simulations must be a positive number of data sets, got "
                             f"{self.num_simulations!r}")


@dataclass(frozen=True)
class Networks:
    r"""Architecture of the score and debiasing networks.

    Arguments:
        hidden, activation: hidden widths and activation of every MLP.
        score_views: ``d`` index lists into the network's data input: parameter ``j``'s score is a
            network of its own that sees all of $\theta$ and only those inputs
            (`CoordinateViewScoreNet`). ``None``: one network
            sees everything. Not in single mode (the debiasing net has no data view).
        tied_views: groups of exchangeable parameters whose view networks are one network.
        shared_embedding: width of one embedding of the whole data view appended to every view.
        data_features: ``data_features(view [..., p]) -> [..., k]`` summaries appended to the
            network's view of every data set (simulated and observed), row by row.
        coordinates: ``"unconstrained"`` (networks take $u$) or ``"constrained"`` (they take
            $\theta = T(u)$; outputs mapped to $u$ by the diagonal Jacobian).
        normal_scores: the score network sees heavy-tailed data columns as normal scores
            (`scorebayes.scores.normal_scores`); off under ``preset="paper"``, whose networks
            see the data standardised only.
    """

    hidden: tuple[int, ...] = (64, 64)
    activation: str = "elu"
    score_views: Sequence[Sequence[int]] | None = None
    tied_views: Sequence[Sequence[int]] = ()
    shared_embedding: int = 0
    data_features: Callable[[Tensor], Tensor] | None = None
    coordinates: str = "unconstrained"
    normal_scores: bool = True

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(self.hidden))
        if not isinstance(self.normal_scores, bool):
            raise ValueError(f"normal_scores must be true or false, got {self.normal_scores!r}")
        if self.coordinates not in NETWORK_COORDINATES:
            raise ValueError(f"network_coordinates must be one of {NETWORK_COORDINATES}, got "
                             f"{self.coordinates!r}")
        if self.data_features is not None and not callable(self.data_features):
            raise TypeError(f"data_features must be a function of the network's view, got {self.data_features!r}")
        if self.tied_views and self.score_views is None:
            raise ValueError("tied_views ties per-parameter networks: it needs score_views")
        if self.shared_embedding and self.score_views is None:
            raise ValueError("shared_embedding is appended to per-parameter views: it needs score_views "
                             "(without views one network already sees all of the data)")

    def checked(self, space: ParameterSpace, mode: str) -> Networks:
        """These settings with the views checked against the parameters' dimension and ``mode``."""
        if self.coordinates == "constrained":
            check_elementwise(space)  # before any simulation
        if self.score_views is None:
            return self
        if mode == "single":
            raise ValueError("score_views needs mode 'n', 'full' or 'markov' (the single-model's "
                             "debiasing network h(theta) has no data view)")
        views = check_views(self.score_views, space.dim)
        tied = check_tied(self.tied_views, views) if self.tied_views else []
        return replace(self, score_views=views, tied_views=tied,
                       shared_embedding=check_embedding(self.shared_embedding, tied))

    def _in_coordinates(self, space: ParameterSpace, net: nn.Module, wrapper: type[nn.Module]) -> nn.Module:
        return wrapper(space, net) if self.coordinates == "constrained" else net

    def score_network(self, space: ParameterSpace, p_net: int) -> nn.Module:
        """A fresh score network ``s(u [*, d], x [*, p_net]) -> [*, d]`` (from the torch RNG)."""
        if self.score_views is None:
            net = ScoreNet(space.dim, p_net, self.hidden, self.activation, normal_scores=self.normal_scores)
        else:
            net = CoordinateViewScoreNet(space.dim, p_net, self.score_views, self.hidden, self.activation,
                                         tied=self.tied_views, embedding=self.shared_embedding,
                                         normal_scores=self.normal_scores)
        return self._in_coordinates(space, net, ConstrainedScoreNet)

    def mean_network(self, space: ParameterSpace, members: int) -> CrossFitMean:
        """A fresh debiasing network $h(u)$: ``members`` cross-fitted MLPs, averaged."""
        return CrossFitMean([self._in_coordinates(space, MeanNet(space.dim, self.hidden, self.activation),
                                                  ConstrainedMeanNet) for _ in range(members)])


@dataclass(frozen=True)
class Training:
    r"""Training of the score network and the debiasing network.

    Arguments:
        schedule, mean_schedule: [`TrainingSchedule`][scorebayes.scores.training.TrainingSchedule] of the score
            and mean networks (``None``: [`default_schedule()`][scorebayes.sbi.settings.default_schedule]).
        curvature_penalties: $\lambda_1$ grid, chosen on validation.
        mean_penalties: $\lambda_2$ grid of the debiasing network.
        debias: ``"debias"`` (Algorithm 3), ``"a1"``, ``"a2"`` (App. B.5) or ``"none"``.
        cross_fit: fit the debiasing network on each half of $\mathcal D^R$ and average.
        weight_fn: $g(\theta, X)$ ``[B, d]``, a weight of the score-matching loss that
            vanishes on the boundary of a data-dependent support (eq. 19; not with the single
            mode's debiasing).
    """

    schedule: TrainingSchedule | None = None
    mean_schedule: TrainingSchedule | None = None
    curvature_penalties: tuple[float, ...] = (0.0, 1e-3)
    mean_penalties: tuple[float, ...] = (0.0,)
    debias: str = "debias"
    cross_fit: bool = True
    weight_fn: Callable[[Tensor, Tensor], Tensor] | None = None

    def __post_init__(self):
        if self.debias not in DEBIAS:
            raise ValueError(f"debias must be 'debias', 'a1', 'a2' or 'none', got {self.debias!r}")
        for name in ("curvature_penalties", "mean_penalties"):
            grid = getattr(self, name)
            if not len(grid) or any((not math.isfinite(v)) or v < 0 for v in grid):
                raise ValueError(f"{name} must be a non-empty list of non-negative numbers")
            object.__setattr__(self, name, tuple(float(v) for v in grid))
        object.__setattr__(self, "cross_fit", bool(self.cross_fit))


@dataclass(frozen=True)
class Simulation:
    r"""How the simulations run ([`scorebayes.tables.simulate_table()`][scorebayes.tables.simulate_table]).

    Arguments:
        executor: a ``concurrent.futures.Executor`` (process pool, Dask), or in-process.
        block_size: parameters per seeded block (the unit of resumption and parallelism).
        on_simulator_error, max_failure_fraction, retries: fault handling of failed or non-finite
            simulations.
    """

    executor: Executor | None = None
    block_size: int = 256
    on_simulator_error: str = "raise"
    max_failure_fraction: float = 0.1
    retries: int = 3

    def __post_init__(self):
        if self.on_simulator_error not in FAULT_MODES:
            raise ValueError(f"on_simulator_error must be one of {FAULT_MODES}, got "
                             f"{self.on_simulator_error!r}")
        object.__setattr__(self, "max_failure_fraction", float(self.max_failure_fraction))


def default_schedule(single: bool, mean: bool = False) -> TrainingSchedule:
    """The default training: at most 60 epochs (15 per penalty), stopped after 10 without
    improvement; a batch is 256 single observations or 32 data sets."""
    return TrainingSchedule(epochs=60, penalty_epochs=15, patience=10,
                            batch_size=256 if single and not mean else 32)


PRESETS = ("default", "paper")


def preset_options(preset: str, single: bool) -> dict[str, Any]:
    r"""The flat options of a preset: ``"default"`` (the dataclasses' defaults and the budget plan
    of `scorebayes.sbi.budget`) or ``"paper"``, the settings of Jiang, Wang and Yang (2025):
    100 localization replicates of 500 Adam steps, $N_S$ = 20,000 single observations and
    $N_R$ = 2,000 groups (single mode) or $N$ = 2,000 data sets, up to 300 epochs (60 per
    penalty, patience 40) and the penalty grids $\{0, 10^{-3}, 10^{-1}\}$, with the paper's
    Langevin chains on the summed score (no calibration) and networks that see the data
    standardised only (no normal scores)."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    if preset == "default":
        return {}
    return {"localization": {"replicates": 100, "iterations": 500},
            "table_size": 20_000 if single else 2_000, "num_groups": 2_000,
            "schedule": TrainingSchedule() if single else TrainingSchedule(batch_size=32),
            "mean_schedule": TrainingSchedule(batch_size=32),
            "curvature_penalties": (0.0, 1e-3, 1e-1), "mean_penalties": (0.0, 1e-3, 1e-1),
            "calibrate": False, "normal_scores": False}


#: flat option name -> (group argument of ScoreLangevin, field of that group)
OPTION_GROUPS: dict[str, tuple[str, str]] = {
    "localize": ("localization", "enabled"), "localization": ("localization", "options"),
    "localize_in_support": ("localization", "in_support"),
    "proposal_inflation": ("localization", "inflation"), "support_fn": ("localization", "support_fn"),
    **{name: ("tables", name) for name in (f.name for f in fields(Tables))},
    **{name: ("networks", name) for name in ("hidden", "activation", "score_views", "tied_views",
                                             "shared_embedding", "data_features", "normal_scores")},
    "network_coordinates": ("networks", "coordinates"),
    **{name: ("training", name) for name in (f.name for f in fields(Training))},
    **{name: ("simulation", name) for name in (f.name for f in fields(Simulation))},
}
GROUPS = {"localization": Localization, "tables": Tables, "networks": Networks, "training": Training,
          "simulation": Simulation}


def group_options(options: dict[str, Any]) -> dict[str, Any]:
    """Flat option names (as in a config's ``[options]``) -> the grouped settings objects.

    Names that are not settings of a group (``mode``, ``seed``, ``store``, ...) pass through.
    ``localization`` given as a dict is the localization's options; ``localize`` its switch.
    """
    grouped: dict[str, dict[str, Any]] = {}
    rest: dict[str, Any] = {}
    for name, value in options.items():
        if name in OPTION_GROUPS:
            group, key = OPTION_GROUPS[name]
            grouped.setdefault(group, {})[key] = dict(value or {}) if key == "options" else value
        else:
            rest[name] = value
    return {**rest, **{group: GROUPS[group](**values) for group, values in grouped.items()}}
