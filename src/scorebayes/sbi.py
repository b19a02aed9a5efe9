r"""Score-based Langevin simulation-based inference: the whole pipeline in one estimator.

.. math:: \nabla_u\log\pi_n(u\mid\mathbf X^*_n) \approx \sum_{i=1}^n \big[s_\phi(u, X^*_i) - h_\psi(u)\big]
          + \nabla_u\log\pi_u(u)

1. **Localization** (Sec. 3.1): sliced-Wasserstein minimum-distance replicates give a
   Gaussian proposal :math:`q` over the unconstrained parameters ``u``.
2. **Reference tables** drawn from :math:`q` (or the prior), in seeded blocks.
3. **Score matching** in ``u``-space with :math:`\nabla\log q` (the table's sampling
   density, V.A1):

   - ``mode="single"`` (Algorithm 3): single-observation matching on :math:`\mathcal D^S`
     with the curvature penalty on :math:`\mathcal D^R`, then the debiasing regression
     :math:`h_\psi` (or App. B.5 alternatives ``"a1"``/``"a2"``);
   - ``mode="n"`` (Algorithm 2): additive full-data matching with the :math:`1/n` scaling
     and the curvature penalty; optional weight function for data-dependent supports;
   - ``mode="full"``: one network on the whole (summary) data set, no additivity;
   - ``mode="markov"``: blockwise score :math:`s(u, x_{i-1}, x_i)` (Remark 4).
4. **Langevin chains** from :math:`q` with an automatic step size (see
   :mod:`scorebayes.samplers.langevin`), optional tempering, results mapped back to
   :math:`\theta = T(u)`.

Example:
    >>> import torch
    >>> from torch.distributions import Normal
    >>> from scorebayes.priors import independent
    >>> from scorebayes.simulators import Simulator
    >>> sim = Simulator(lambda th, n, g: th[:, None, :] + torch.randn(len(th), n, 1, generator=g))
    >>> model = ScoreLangevin(independent([Normal(0.0, 3.0)]), sim, localize=False,
    ...                       num_simulations=2000, schedule=TrainingSchedule(epochs=5),
    ...                       curvature_penalties=(0.0,), mean_penalties=(0.0,), progress=False)
    >>> x_obs = 1.0 + torch.randn(50, 1, generator=torch.Generator().manual_seed(1))
    >>> model.fit(x_obs).sample(200).draws.shape
    torch.Size([200, 1])

References:
    | Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang, Yang, 2025)
    | ../shared/seeds/000_1aaaaf87072c12bc.txt
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.distributions import Distribution

from .diagnostics import remembers_start, start_memory
from .parallel import derive_seed, make_generator
from .posterior import Posterior
from .priors import ParameterSpace
from .proposal import GaussianProposal, MixtureProposal, PriorSampler
from .samplers.adaptation import adapt_whitening, default_straggler_gap, probes_with_centre, whitened
from .samplers.langevin import (adaptation_windows, covariance_preconditioner, curvature_step_size,
                                dense_preconditioner, reflect_into_box, run_langevin)
from .scores.local_debias import (LocalLinearCorrection, ThetaLinearCorrection, fit_kernel_correction,
                                  fit_local_correction)
from .scores.coordinates import (ConstrainedMeanNet, ConstrainedScoreNet, check_elementwise,
                                 theta_and_jacobian)
from .scores.networks import (CoordinateViewScoreNet, CrossFitMean, MeanNet, ScoreNet, check_embedding,
                              check_tied, check_views)
from .scores.training import (TrainingSchedule, checkpointing, fit_mean_network, fit_score_network,
                               split_indices)
from .antithetic import AntitheticProposal, CommonRandomPairs, antithetic_pairs
from .simulators import Simulator, as_simulator
from .tables import FAULT_MODES, simulate_table

__all__ = ["ScoreLangevin", "DebiasedScore", "TrainingSchedule", "MODES"]

MODES = ("single", "n", "full", "markov")
NETWORK_COORDINATES = ("unconstrained", "constrained")


class DebiasedScore(nn.Module):
    r""":math:`\tilde s(u, x) = s_\phi(u, x) - h_\psi(u)` as one module (App. B.5 alternative 2)."""

    def __init__(self, score: ScoreNet, mean: MeanNet):
        super().__init__()
        self.score, self.mean = score, mean

    def fit_standardisation(self, theta: Tensor, x: Tensor) -> None:  # keep the nets' own statistics
        pass

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        return self.score(theta, x) - self.mean(theta)


class ScoreLangevin:
    r"""Learn the likelihood score from simulations and sample the posterior by Langevin dynamics.

    Arguments:
        prior: any ``Distribution`` with event shape ``[d]`` (constrained supports are mapped
            to :math:`\mathbb R^d`).
        simulator: a :class:`~scorebayes.simulators.Simulator` or batched callable
            ``simulate(theta [B, d], n, generator) -> x [B, n, p]``.
        mode: ``"single"`` (default), ``"n"``, ``"full"`` or ``"markov"`` (module docstring).
        localize: draw tables from the localized proposal :math:`q` (``True``) or the prior.
        num_simulations: rows of the main table: :math:`N` single observations (single-model)
            or :math:`N` data sets (other modes). Default 20,000 / 2,000.
        num_groups, group_size: :math:`N_R` and :math:`m_R` of :math:`\mathcal D^R` (single-model).
        hidden, activation: network architecture (score and mean nets).
        score_views: ``d`` index lists into the score network's data input (``vec(x)`` in mode
            ``"full"``, one observation in ``"n"``, ``[x_{i-1}, x_i]`` in ``"markov"``):
            parameter ``j``'s score is then a network of its own that sees all of
            :math:`\theta` and only those inputs
            (:class:`~scorebayes.scores.networks.CoordinateViewScoreNet`; ``hidden`` sizes each
            of them). ``None`` (default): one network sees everything. Beyond the paper; on the
            epidemic with 10 floors, ``model.score_views()`` narrows floor 1 from the prior's
            width to the paper's (``benchmarks/epidemic10.py``).
        tied_views: with ``score_views``, groups of exchangeable parameters whose networks are one
            network, each member evaluating it on theta in cyclic order from its own coordinate
            and on its own view (``CoordinateViewScoreNet(tied=...)``: the likelihood must be
            unchanged when a group's parameters and their views are permuted together), e.g.
            :meth:`scorebayes.models.Epidemic.exchangeable_rates` (the floors). Default none.
        data_features: summaries appended to the network's view of every data set (simulated
            and observed): ``data_features(view [..., p_net]) -> [..., k]``, a deterministic
            function applied row by row; the networks then see ``p_net + k`` inputs and
            ``score_views`` may index the summaries at ``p_net, ..., p_net + k - 1``. Use it
            for summaries a network on a narrow view cannot form itself, e.g.
            :meth:`scorebayes.models.Epidemic.floor_spread` (how infections spread across the
            floors, which tells facility-wide from floor transmission). In mode ``"single"``
            the view is one observation, in every table (:math:`\mathcal D^S`,
            :math:`\mathcal D^R`, refinements) and the observed data alike; the score target is
            unchanged, as the summaries are functions of the observation (on the M/G/1 queue,
            with networks in :math:`\theta`, adding the sorted and the departure times raised the
            share of :math:`\theta_1`'s information the net carries from 0.26 to 0.89,
            ``benchmarks/pilots/mg1_data_features.py``).
        shared_embedding: with ``score_views``, the width :math:`k` of one embedding of the whole
            data view, an MLP trained jointly with the per-parameter networks and appended to every
            view (``CoordinateViewScoreNet(embedding=k)``): with k wide enough no network's view
            misses information, so the chains sample the posterior, not the composite law of views
            that miss it. 0 (default): none. Beyond the paper; on the 10-floor epidemic it narrows
            the per-rate rows but does not meet Table 6 (``benchmarks/results/epidemic10.md``).
        network_coordinates: ``"unconstrained"`` (default): the networks take :math:`u`;
            ``"constrained"``: they take :math:`\theta = T(u)` and their outputs are mapped to
            :math:`u` by the exact diagonal Jacobian
            (:mod:`scorebayes.scores.coordinates`). Use it when posteriors sit near a prior
            box face, where a network in :math:`u` must learn a Jacobian that decays
            exponentially (monotone regression: 40x smaller score error). Needs a prior whose
            transform acts coordinate by coordinate.
        schedule, mean_schedule: :class:`TrainingSchedule` of the two networks.
        curvature_penalties: :math:`\lambda_1` grid (one value = fixed); chosen on validation.
        mean_penalties: :math:`\lambda_2` grid.
        debias: ``"debias"`` (Algorithm 3), ``"a1"``, ``"a2"`` (App. B.5) or ``"none"``.
        cross_fit: fit the debiasing network twice, on each half of :math:`\mathcal D^R` with
            the other half for validation, and average the two
            (:class:`~scorebayes.scores.networks.CrossFitMean`); ``False`` is the paper's
            single fit on one half.
        antithetic: draw the main table (:math:`\mathcal D^S`, or the data sets of the other
            modes) from the localized proposal in mirrored pairs :math:`(u, 2\mu - u)` with
            common random numbers, and keep pairs together in training
            (:mod:`scorebayes.antithetic`): cancels most of the :math:`s^\top\nabla\log q`
            noise of the loss. Ignored for prior tables. ``False``: iid tables, as in the paper.
            ``None`` (default): on for the single-model only. Measured on the linear
            regression (single-model, N = 20,000): per-observation score error -25%; on the
            n-model the pairs halve the number of distinct latent data sets, which cost as
            much as they saved (exponential-rate model, 4 seeds).
        noise_sd: :math:`\sigma_\varepsilon` of Gaussian data smoothing (App. B.2 solution 2),
            added to every simulated and observed data point; ``noise_draws`` pooled at sampling.
        weight_fn: :math:`g(\theta, X)` ``[B, d]`` for a data-dependent support (eq. 19).
        support_fn: ``support_fn(x_obs [n, p]) -> (low [d], high [d])`` admissible box of
            :math:`\theta` given the data; Langevin states are reflected into it.
        localization: keyword arguments of :func:`scorebayes.localize.localize`.
        localize_in_support: confine the localization to ``support_fn(x_obs)`` (projected
            Adam, the ``support`` argument of :func:`~scorebayes.localize.localize`), so that
            :math:`q` is not centred where the observed data are impossible. Needs
            ``support_fn``. Beyond the paper (M/G/1: mg1 note "N-MODEL-FEATURES-MH").
        proposal_inflation: factor on the localized proposal's standard deviations. The
            implicit score-matching loss contains :math:`s^\top\nabla\log q`, whose variance
            grows like :math:`1/\mathrm{sd}(q)^2`; a proposal about twice as wide as the
            localization spread keeps that variance down and covers the posterior's tails
            (1.0 reproduces the paper's :math:`q`).
        executor: ``concurrent.futures.Executor`` for the simulations.
        store: a :class:`~scorebayes.store.RunStore`: the localization result, every table
            block, the networks (with epoch checkpoints: weights, optimiser and RNG state)
            and the samples are saved there and reused on a re-run, which then gives
            bit-identical samples.
        on_simulator_error, max_failure_fraction, retries: fault handling of the tables (see
            :func:`scorebayes.tables.simulate_table`).
        device: where networks train and chains run (``"cpu"``, ``"cuda"``).
        seed: run seed; same seed, same result.
        progress: tqdm bars.

    After :meth:`fit`: ``proposal_``, ``localization_``, ``score_net_``, ``mean_net_``,
    ``fit_report_``, ``mean_report_``, ``simulations_`` (dataset units, by stage).
    """

    def __init__(
        self,
        prior: Distribution,
        simulator: Simulator | Callable,
        *,
        mode: str = "single",
        localize: bool = True,
        num_simulations: int | None = None,
        num_groups: int = 2000,
        group_size: int | None = None,
        hidden: Sequence[int] = (64, 64),
        activation: str = "elu",
        score_views: Sequence[Sequence[int]] | None = None,
        tied_views: Sequence[Sequence[int]] = (),
        data_features: Callable[[Tensor], Tensor] | None = None,
        shared_embedding: int = 0,
        network_coordinates: str = "unconstrained",
        schedule: TrainingSchedule | None = None,
        mean_schedule: TrainingSchedule | None = None,
        curvature_penalties: Sequence[float] = (0.0, 1e-3, 1e-1),
        mean_penalties: Sequence[float] = (0.0, 1e-3, 1e-1),
        debias: str = "debias",
        cross_fit: bool = True,
        antithetic: bool | None = None,
        noise_sd: float | None = None,
        noise_draws: int = 3,
        weight_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
        support_fn: Callable[[Tensor], tuple[Tensor, Tensor]] | None = None,
        localization: dict[str, Any] | None = None,
        localize_in_support: bool = False,
        proposal_inflation: float = 2.0,
        parameter_names: Sequence[str] | None = None,
        executor: Executor | None = None,
        block_size: int = 256,
        device: str | torch.device = "cpu",
        seed: int = 0,
        progress: bool = True,
        store: Any = None,
        on_simulator_error: str = "raise",
        max_failure_fraction: float = 0.1,
        retries: int = 3,
    ):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if debias not in ("debias", "a1", "a2", "none"):
            raise ValueError(f"debias must be 'debias', 'a1', 'a2' or 'none', got {debias!r}")
        if noise_sd is not None and not noise_sd > 0:
            raise ValueError(f"noise_sd must be positive, got {noise_sd}")
        if weight_fn is not None and mode == "single" and debias != "none":
            raise ValueError("a weight function breaks the mean-zero property: use mode='n' "
                             "or debias='none' (App. B.2), or noise_sd for the single-model")
        for name, grid in (("curvature_penalties", curvature_penalties), ("mean_penalties", mean_penalties)):
            if not len(grid) or any((not math.isfinite(v)) or v < 0 for v in grid):
                raise ValueError(f"{name} must be a non-empty list of non-negative numbers")
        if network_coordinates not in NETWORK_COORDINATES:
            raise ValueError(f"network_coordinates must be one of {NETWORK_COORDINATES}, got "
                             f"{network_coordinates!r}")
        self.prior = prior
        self.space = ParameterSpace(prior)
        if network_coordinates == "constrained":
            check_elementwise(self.space)  # before any simulation
        self.network_coordinates = network_coordinates
        self.simulator = as_simulator(simulator)
        self.mode = mode
        self.localize = localize
        self.num_simulations = num_simulations
        self.num_groups = num_groups
        self.group_size = group_size
        self.hidden = tuple(hidden)
        self.activation = activation
        self.score_views = None
        if score_views is not None:
            if mode == "single":
                raise ValueError("score_views needs mode 'n', 'full' or 'markov' (the single-model's "
                                 "debiasing network h(theta) has no data view)")
            self.score_views = check_views(score_views, self.space.dim)
        if tied_views and self.score_views is None:
            raise ValueError("tied_views ties per-parameter networks: it needs score_views")
        self.tied_views = check_tied(tied_views, self.score_views) if tied_views else []
        if shared_embedding and self.score_views is None:
            raise ValueError("shared_embedding is appended to per-parameter views: it needs score_views "
                             "(without views one network already sees all of the data)")
        self.shared_embedding = check_embedding(shared_embedding, self.tied_views)
        if data_features is not None and not callable(data_features):
            raise TypeError(f"data_features must be a function of the network's view, got {data_features!r}")
        self.data_features = data_features
        # an n-model step carries batch_size * n observations: fewer data sets per step
        self.schedule = schedule or (TrainingSchedule() if mode == "single" else TrainingSchedule(batch_size=32))
        self.mean_schedule = mean_schedule or TrainingSchedule(batch_size=32)
        self.curvature_penalties = tuple(float(v) for v in curvature_penalties)
        self.mean_penalties = tuple(float(v) for v in mean_penalties)
        self.debias = debias if mode == "single" else "none"
        self.cross_fit = bool(cross_fit)
        self.antithetic = (mode == "single") if antithetic is None else bool(antithetic)
        self.noise_sd = noise_sd
        self.noise_draws = noise_draws
        self.weight_fn = weight_fn
        self.support_fn = support_fn
        self.localization = dict(localization or {})
        if localize_in_support and support_fn is None:
            raise ValueError("localize_in_support needs support_fn (the box the localization is confined to)")
        if localize_in_support and "support" in self.localization:
            raise ValueError("give the localization's support either as localization['support'] or "
                             "by localize_in_support, not both")
        self.localize_in_support = bool(localize_in_support)
        if not proposal_inflation > 0:
            raise ValueError(f"proposal_inflation must be positive, got {proposal_inflation}")
        self.proposal_inflation = float(proposal_inflation)
        self.parameter_names = list(parameter_names) if parameter_names else None
        self.executor = executor
        self.block_size = block_size
        self.device = torch.device(device)
        self.seed = seed
        self.progress = progress
        if on_simulator_error not in FAULT_MODES:
            raise ValueError(f"on_simulator_error must be one of {FAULT_MODES}, got "
                             f"{on_simulator_error!r}")
        self.store = store
        self.on_simulator_error = on_simulator_error
        self.max_failure_fraction = float(max_failure_fraction)
        self.retries = retries

    # ----------------------------------------------------------------- helpers
    def _observations(self, x_obs: Tensor) -> Tensor:
        """The network's view of the observed data: ``[n_units, p_net]``."""
        if self.mode == "full":
            view = x_obs.reshape(1, -1)
        elif self.mode == "markov":
            view = torch.cat([x_obs[:-1], x_obs[1:]], dim=-1)
        else:
            view = x_obs
        return self._with_features(view)

    def _table_view(self, x: Tensor, chunk_elements: int = 1 << 24) -> Tensor:
        """Simulated data sets ``[N, n, p]`` -> network inputs ``[N, m, p_net]``.

        With ``data_features`` the view is built ``chunk_elements`` input values at a time into a
        float32 table (the networks train in float32, which casts it anyway): the monotone
        paper-scale D^R (1e8 observations) with 10 features is 4.8 GB, where the features of the
        whole float64 table at once took over 13 GB and the out-of-memory killer stopped the run.
        """
        def view_of(data: Tensor) -> Tensor:
            if self.mode == "full":
                return data.reshape(data.shape[0], 1, -1)
            if self.mode == "markov":
                return torch.cat([data[:, :-1], data[:, 1:]], dim=-1)
            return data

        if self.data_features is None:
            return view_of(x)
        rows = max(1, chunk_elements // max(1, x[0].numel()))
        first = self._with_features(view_of(x[:rows]))
        out = torch.empty(len(x), *first.shape[1:], dtype=torch.float32)
        out[:rows] = first
        for start in range(rows, len(x), rows):
            out[start : start + rows] = self._with_features(view_of(x[start : start + rows]))
        return out

    def _with_features(self, view: Tensor) -> Tensor:
        """``view [..., p]`` -> ``[..., p + k]`` with ``data_features`` appended (or unchanged)."""
        if self.data_features is None:
            return view
        extra = torch.as_tensor(self.data_features(view))
        if extra.shape[:-1] != view.shape[:-1] or extra.dim() != view.dim():
            raise ValueError(f"data_features must map the network's view [..., p] = {tuple(view.shape)} "
                             f"to [..., k], got {tuple(extra.shape)}")
        if not torch.isfinite(extra).all():
            raise ValueError("data_features returned non-finite values")
        return torch.cat([view, extra.to(view.dtype)], -1)

    def _noisy(self, x: Tensor, *keys: Any) -> Tensor:
        if self.noise_sd is None:
            return x
        g = make_generator(self.seed, "noise", *keys)
        return x + self.noise_sd * torch.randn(x.shape, generator=g, dtype=x.dtype)

    def _to_u(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        u = self.space.to_unconstrained(theta.to(torch.float64))
        keep = torch.isfinite(u).all(1)
        return u, keep

    def _posterior_u(self, posterior: Posterior) -> Tensor:
        """A posterior's finite draws in ``u``, ``[S, d]`` (checks the dimension and count)."""
        draws = torch.as_tensor(posterior.draws, dtype=torch.float64).reshape(-1, posterior.draws.shape[-1])
        if draws.shape[-1] != self.space.dim or len(draws) < 2:
            raise ValueError(f"posterior must hold at least 2 draws of dimension {self.space.dim}, "
                             f"got {tuple(posterior.draws.shape)}")
        u, keep = self._to_u(draws)
        return u[keep]

    def _in_coordinates(self, net: nn.Module, wrapper: type[nn.Module]) -> nn.Module:
        """``net`` as built (it takes u), or wrapped to take theta = T(u) (``network_coordinates``)."""
        return wrapper(self.space, net) if self.network_coordinates == "constrained" else net

    def _record_training_region(self, u: Tensor) -> None:
        """The box of unconstrained parameters the score net was trained on (widened by 10%)."""
        low, high = u.min(0).values, u.max(0).values
        pad = 0.1 * (high - low)
        self.training_region_ = (low - pad, high + pad)

    def _table(self, sampler: Any, num: int, n_obs: int, tag: str,
               paired: bool = False) -> tuple[Tensor, Tensor, float]:
        simulator = self.simulator
        if paired:  # mirrored parameter pairs sharing their random numbers (antithetic.py)
            sampler = AntitheticProposal(sampler)
            simulator = Simulator(CommonRandomPairs(self.simulator), validate=False)
        table = simulate_table(simulator, sampler, num, n_obs, seed=self.seed, tag=tag,
                               block_size=self.block_size, n_data=self.n_obs_,
                               executor=self.executor, progress=self.progress, store=self.store,
                               on_simulator_error=self.on_simulator_error,
                               max_failure_fraction=self.max_failure_fraction,
                               retries=self.retries)
        for key, value in (("failed", table.failed), ("nonfinite", table.nonfinite),
                           ("resumed", table.resumed)):
            self.faults_[key] += value
        u, keep = self._to_u(table.theta)
        x = self._noisy(table.x, tag)
        # all rows kept: no copy (a memory-mapped table, [options] stream_tables, stays mapped)
        return u[keep], (x if bool(keep.all()) else x[keep]), float(table.simulations)

    def _paired(self) -> bool:
        return self.antithetic and isinstance(self.proposal_, GaussianProposal)

    def _pairs(self, u: Tensor) -> Tensor | None:
        """Antithetic pairs of a table drawn with ``paired=True`` (``None`` otherwise)."""
        return antithetic_pairs(u, self.proposal_.mean) if self._paired() else None

    # --------------------------------------------------------------------- fit
    def fit(self, x_obs: Tensor) -> ScoreLangevin:
        r"""Localize, simulate the tables and train the networks for observed data ``x_obs [n, p]``.

        With a ``store``, every training phase checkpoints after each epoch and resumes."""
        with checkpointing(self.store, "train"):
            return self._fit(x_obs)

    def _fit(self, x_obs: Tensor) -> ScoreLangevin:
        x_obs = torch.as_tensor(x_obs, dtype=torch.get_default_dtype())
        if x_obs.dim() == 1:
            x_obs = x_obs[:, None]
        if x_obs.dim() != 2 or len(x_obs) < 1:
            raise ValueError(f"x_obs must be [n, p], got shape {tuple(x_obs.shape)}")
        if not torch.isfinite(x_obs).all():
            raise ValueError("x_obs contains non-finite values")
        if self.mode == "markov" and len(x_obs) < 2:
            raise ValueError("mode='markov' needs at least two observations")
        # pilot simulation: shape check before any expensive work
        pilot_theta = self.space.to_constrained(torch.zeros(2, self.space.dim, dtype=torch.float64))
        # at the observed size: some simulators only produce data sets of one length (a time series)
        pilot = self.simulator(pilot_theta, len(x_obs), make_generator(self.seed, "pilot"))
        if pilot.shape[-1] != x_obs.shape[-1]:
            raise ValueError(f"the simulator returns p={pilot.shape[-1]} columns per observation but "
                             f"the observed data have p={x_obs.shape[-1]}")
        if self.data_features is not None:  # the summaries work on a table and on the observed data
            self._table_view(pilot.to(x_obs.dtype))
            self._observations(x_obs)
        if self.score_views is not None:
            check_views(self.score_views, self.space.dim, self._observations(x_obs).shape[-1])
        start = time.perf_counter()
        self.x_obs_ = x_obs
        self.refinements_ = []  # a new fit starts without local debiasing corrections
        self.n_obs_ = n = len(x_obs)
        self.simulations_: dict[str, float] = {}
        self.faults_: dict[str, float] = {"failed": 0, "nonfinite": 0, "resumed": 0.0}
        store = self.store

        # 1. localization
        if self.localize and store is not None and store.is_done("localization"):
            saved = store.load_checkpoint("localization")
            self.localization_ = None  # the proposal is all later stages need
            self.proposal_ = GaussianProposal(self.space, saved["mean"],
                                              saved["sd"] * self.proposal_inflation)
            self.simulations_["localization"] = float(saved["simulations"])
            self.faults_["resumed"] += float(saved["simulations"])
        elif self.localize:
            from .localize import localize as run_localization

            options = {"progress": self.progress, "seed": self.seed, **self.localization}
            if self.localize_in_support:
                options["support"] = self.support_fn(x_obs)
            self.localization_ = run_localization(self.simulator, x_obs, self.prior, **options)
            q = self.localization_.proposal
            self.proposal_ = GaussianProposal(self.space, q.mean, q.sd * self.proposal_inflation)
            self.simulations_["localization"] = float(self.localization_.simulations)
            if store is not None:
                store.save_checkpoint("localization", {
                    "mean": q.mean, "sd": q.sd,
                    "simulations": float(self.localization_.simulations)})
                store.mark_done("localization")
        else:
            self.localization_ = None
            self.proposal_ = PriorSampler(self.prior)

        # 2-3. tables and score matching
        gen = make_generator(self.seed, "training")
        net_obs = self._observations(x_obs)
        p_net = net_obs.shape[-1]
        d = self.space.dim
        with torch.random.fork_rng(devices=[]):  # network initialisation from the run seed
            torch.manual_seed(derive_seed(self.seed, "init"))
            self.score_net_ = self._in_coordinates(self._score_network(d, p_net),
                                                   ConstrainedScoreNet).to(self.device)
            mean_init = self._mean_network()
        self.mean_net_ = None
        if self.mode == "single":
            self.table_rounds_ = [{"proposal": self.proposal_}]
            self._fit_single_model(mean_init, gen, "")
        else:
            num = self.num_simulations or 2_000
            u_t, x_t, cost = self._table(self.proposal_, num, n, "N", paired=self._paired())
            self.simulations_["table_N"] = cost
            self.rounds_ = [{"proposal": self.proposal_, "u": u_t, "x": x_t}]
            self._fit_data_set_score(self.proposal_, u_t, x_t, self._pairs(u_t), gen)
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _fit_single_model(self, mean_init: nn.Module, gen: torch.Generator, suffix: str) -> None:
        r"""Tables :math:`\mathcal D^S, \mathcal D^R` from ``proposal_`` (tags ``S<suffix>``,
        ``R<suffix>``), then the score network and the debiasing network on them."""
        num = self.num_simulations or 20_000
        m_r = self.group_size or min(1000, max(100, self.n_obs_))
        u_s, x_s, cost_s = self._table(self.proposal_, num, 1, f"S{suffix}", paired=self._paired())
        u_r, x_r, cost_r = self._table(self.proposal_, self.num_groups, m_r, f"R{suffix}")
        x_s, x_r = self._table_view(x_s), self._table_view(x_r)  # any data_features appended
        self.simulations_[f"table_S{suffix}"], self.simulations_[f"table_R{suffix}"] = cost_s, cost_r
        self._record_training_region(u_s)
        self.fit_report_ = fit_score_network(
            self.score_net_, u_s.float(), x_s, self.proposal_.grad_log_prob_unconstrained(u_s).float(),
            schedule=self.schedule, penalties=self.curvature_penalties,
            curvature_theta=u_r.float(), curvature_x=x_r, pairs=self._pairs(u_s), generator=gen,
            progress=self.progress, desc="score net")
        if self.debias != "none":
            self.mean_net_ = mean_init
            self._fit_debiasing(u_s, x_s, u_r, x_r, gen)

    def move_tables(self, center: Tensor, sd: Tensor) -> ScoreLangevin:
        r"""Redraw the single-model's tables from :math:`q = \mathcal N(c, \operatorname{diag} s^2)`
        in ``u`` and retrain both networks on them from a fresh start (a trust-region round;
        beyond the paper).

        The likelihood score does not depend on where the table's parameters come from, only
        its accuracy does: implicit score matching is most accurate where the table is dense, and
        the debiasing network must be accurate to :math:`\operatorname{sd}(s)/\sqrt n` where the
        posterior lives. A table concentrated on a region around the posterior buys that accuracy
        at the same cost (M/G/1, ``benchmarks/results/mg1.md``). Chains are then confined to the
        new table's region, so the region must contain the posterior:
        :func:`scorebayes.trust_region.trust_region_fit` centres it on the last chains and bounds
        its shrinking by Laplace SDs.

        Arguments:
            center: :math:`c`, ``[d]`` in ``u``.
            sd: :math:`s`, ``[d]``, positive.

        Round :math:`k` (the first :meth:`fit` is round 0) records its cost as
        ``simulations_["table_S<k>"]`` and ``["table_R<k>"]`` and appends to ``table_rounds_``;
        local debiasing corrections of earlier rounds are dropped. Call :meth:`sample` afterwards.
        """
        self._check_fitted()
        if self.mode != "single":
            raise ValueError("move_tables needs mode='single'; for the other modes use refine_proposal")
        center = torch.as_tensor(center, dtype=torch.float64).reshape(-1)
        sd = torch.as_tensor(sd, dtype=torch.float64).reshape(-1)
        if center.numel() != self.space.dim or sd.numel() != self.space.dim:
            raise ValueError(f"center and sd must have {self.space.dim} entries, got "
                             f"{center.numel()} and {sd.numel()}")
        if not torch.isfinite(center).all() or not (torch.isfinite(sd) & (sd > 0)).all():
            raise ValueError("center must be finite and sd finite and positive")
        k = len(self.table_rounds_)
        self.proposal_ = GaussianProposal(self.space, center, sd)
        self.table_rounds_.append({"proposal": self.proposal_})
        self.refinements_ = []
        p_net = self._observations(self.x_obs_).shape[-1]
        self.score_net_ = self._new_score_net(p_net, "round", k)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "init", "mean", k))
            mean_init = self._mean_network()
        with checkpointing(self.store, f"round{k}"):
            self._fit_single_model(mean_init, make_generator(self.seed, "training", "round", k), str(k))
        return self

    def _mean_network(self) -> CrossFitMean:
        """A fresh debiasing network (two cross-fitted members, or one), initialised from the
        current torch RNG."""
        return CrossFitMean([
            self._in_coordinates(MeanNet(self.space.dim, self.hidden, self.activation),
                                 ConstrainedMeanNet).to(self.device)
            for _ in range(2 if self.cross_fit else 1)])

    def _score_network(self, d: int, p_net: int) -> nn.Module:
        """One wide network, or one per parameter on its own view of the data (``score_views``)."""
        if self.score_views is None:
            return ScoreNet(d, p_net, self.hidden, self.activation)
        return CoordinateViewScoreNet(d, p_net, self.score_views, self.hidden, self.activation,
                                      tied=self.tied_views, embedding=self.shared_embedding)

    def _new_score_net(self, p_net: int, *keys: Any) -> nn.Module:
        """A freshly initialised score network for a later round (seeded by the run seed and ``keys``)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "init", *keys))
            net = self._score_network(self.space.dim, p_net)
        return self._in_coordinates(net, ConstrainedScoreNet).to(self.device)

    def _fit_data_set_score(self, density: Any, u_t: Tensor, x_t: Tensor, pairs: Tensor | None,
                            gen: torch.Generator) -> None:
        """Score matching on a table of whole data sets (modes n, full, markov) drawn from ``density``."""
        weight_fn = None
        if self.weight_fn is not None:
            user_weight = self.weight_fn

            def weight_fn(u: Tensor, x: Tensor) -> Tensor:  # g evaluated at theta = T(u)
                return user_weight(self.space.to_constrained(u.double()).to(u.dtype), x)

        self._record_training_region(u_t)
        self.fit_report_ = fit_score_network(
            self.score_net_, u_t.float(), self._table_view(x_t),
            density.grad_log_prob_unconstrained(u_t).float(),
            schedule=self.schedule,
            penalties=self.curvature_penalties if self.mode in ("n", "markov") else (0.0,),
            weight_fn=weight_fn, pairs=pairs, generator=gen, progress=self.progress,
            desc="score net")

    def refine_proposal(self, posterior: Posterior, *, num_simulations: int | None = None,
                        inflation: float = 1.0) -> ScoreLangevin:
        r"""Add a table round around ``posterior`` and retrain on every round's table
        (modes ``"n"``, ``"full"``, ``"markov"``; beyond the paper).

        Round :math:`k+1` draws ``num_simulations`` parameters (default: the first round's
        size) from :math:`q_{k+1} = \mathcal N(\bar u, \operatorname{diag}(c\,s_u)^2)`, the
        mean and ``inflation`` :math:`c` x SD of the posterior draws in ``u``, simulates one data
        set for each, and trains a fresh score network on the pooled table of all rounds. The
        pooled table is a sample of the mixture :math:`p(u) = \sum_r (N_r/N)\, q_r(u)`
        (:class:`~scorebayes.proposal.MixtureProposal`), whose score enters the loss (4) in place
        of :math:`\nabla\log q`; chains later start from that mixture.

        Use it when the localization's :math:`q` misses part of the posterior. A weakly
        identified parameter can do that: its minimum-distance replicates drift to the edge of the
        prior where the data say little (epidemic setting 2, floor 1: replicates at
        :math:`\log\beta \approx -7` against the truth's -3.9), so the first round never
        simulates the values the data rule out. The first round's posterior spreads over those
        values, and the second round's table covers them. Covering is necessary, not sufficient:
        on that example the second round halves floors 1-2 but widens others, and the network
        still learns little of floor 1's score (``benchmarks/results/epidemic10.md``).
        Cost: ``simulations_["table_N<k>"]``. Call :meth:`sample` again afterwards.
        """
        self._check_fitted()
        if self.mode == "single":
            raise ValueError("refine_proposal needs mode 'n', 'full' or 'markov'; for the "
                             "single-model use refine_debiasing")
        if not inflation > 0:
            raise ValueError(f"inflation must be > 0, got {inflation}")
        u = self._posterior_u(posterior)
        if not (u.std(0) > 0).all():  # also false (NaN) for fewer than 2 finite draws
            raise ValueError("the posterior's draws do not spread in every coordinate (fewer than 2 "
                             "distinct finite draws?): cannot fit a proposal to them")
        k = len(self.rounds_)
        num = num_simulations or len(self.rounds_[0]["u"])
        if num < 2:
            raise ValueError(f"num_simulations must be >= 2, got {num}")
        q = GaussianProposal(self.space, u.mean(0), inflation * u.std(0))
        with checkpointing(self.store, f"round{k}"):
            u_k, x_k, cost = self._table(q, num, self.n_obs_, f"N{k}")
            self.simulations_[f"table_N{k}"] = cost
            self.rounds_.append({"proposal": q, "u": u_k, "x": x_k})
            u_t = torch.cat([r["u"] for r in self.rounds_])
            x_t = torch.cat([r["x"] for r in self.rounds_])
            self.proposal_ = MixtureProposal([r["proposal"] for r in self.rounds_],
                                             [len(r["u"]) for r in self.rounds_])
            self.score_net_ = self._new_score_net(self._observations(self.x_obs_).shape[-1], "round", k)
            self._fit_data_set_score(self.proposal_, u_t, x_t, None,
                                     make_generator(self.seed, "training", "round", k))
        return self

    def _fit_debiasing(self, u_s: Tensor, x_s: Tensor, u_r: Tensor, x_r: Tensor,
                       gen: torch.Generator) -> None:
        alternative = "a1" if self.debias == "a1" else "debias"
        rounds = 2 if self.debias == "a2" else 1
        train, valid = split_indices(len(u_r), self.mean_schedule.validation_fraction, gen)
        folds = [(train, valid), (valid, train)][: len(self.mean_net_.members)]
        for r in range(rounds):
            s_bar = self._group_means(u_r, x_r)
            self.mean_reports_ = [
                fit_mean_network(member, u_r.float(), s_bar, schedule=self.mean_schedule,
                                 penalties=self.mean_penalties, alternative=alternative, split=fold,
                                 generator=gen, progress=self.progress, desc=f"mean net {k + 1}/{len(folds)}")
                for k, (member, fold) in enumerate(zip(self.mean_net_.members, folds))]
            self.mean_report_ = self.mean_reports_[0]
            self.debias_groups_ = (u_r.float(), s_bar)  # D^R's group means, for refit_debiasing
            if self.debias == "a2" and r < rounds - 1:
                # alternative 2: jointly refine s - h under SM + curvature, then re-project h
                joint = DebiasedScore(self.score_net_, self.mean_net_)
                fit_score_network(
                    joint, u_s.float(), x_s, self.proposal_.grad_log_prob_unconstrained(u_s).float(),
                    schedule=TrainingSchedule(epochs=self.schedule.penalty_epochs, penalty_epochs=0,
                                              batch_size=self.schedule.batch_size, lr=self.schedule.lr,
                                              chunk_observations=self.schedule.chunk_observations,
                                              penalty_groups=self.schedule.penalty_groups),
                    penalties=(self.fit_report_.penalty,) if self.fit_report_.penalty else (0.0,),
                    curvature_theta=u_r.float(), curvature_x=x_r, generator=gen,
                    progress=self.progress, desc="joint s-h")

    @torch.no_grad()
    def _group_means(self, u_r: Tensor, x_r: Tensor, chunk: int = 64) -> Tensor:
        """:math:`\\bar s_l = \\frac1{m_R}\\sum_i s_\\phi(u_l, X_{l,i})`, ``[N_R, d]``.

        The result is written into one preallocated tensor: appending each chunk's small result
        to a list left them scattered between the chunks' large transient activations, and
        glibc's heap then could not reuse or return that memory: the resident size grew with
        the table (by 2.2 GB over 50,000 groups in ``benchmarks/results/group_means_memory.md``,
        where the preallocated tensor adds 64 MB), and loading the monotone paper-scale fit
        (100,000 groups) reached 18-24 GB.
        """
        out = torch.empty(len(u_r), u_r.shape[-1], dtype=torch.float32)
        for start in range(0, len(u_r), chunk):
            u = u_r[start : start + chunk].float().to(self.device)
            x = x_r[start : start + chunk].float().to(self.device)
            out[start : start + chunk] = self.score_net_(u[:, None, :], x).mean(1).cpu()
        return out

    def refine_debiasing(self, posterior: Posterior | None = None, *, num_groups: int | None = None,
                         group_size: int | None = None, inflation: float = 2.0) -> ScoreLangevin:
        r"""Refine the debiasing network around ``posterior`` (single-model; beyond the paper).

        Draws ``num_groups`` parameters from :math:`\mathcal N(c, \mathrm{diag}(r^2))` in ``u``
        (``c``, ``r``: the posterior draws' median and ``inflation`` x 1.4826 MAD, robust to a
        few stray chains), simulates ``group_size``
        observations for each, and adds the least-squares linear fit of the residual group means
        to :math:`h_\psi` (:mod:`scorebayes.scores.local_debias`). Repeated calls refine further.
        Later chains are reflected into the region of the last correction (centre +- 4 x its
        spread), where the linear fit holds; draws piling up at its edge trigger the usual
        edge warning. When ``posterior`` has more than 1% of its draws at the edge
        (``info["edge_fraction"]``), its spread is truncated: the new region then keeps the
        confining region's size, centred on the draws, so repeated calls walk towards the
        posterior instead of shrinking onto the edge (loop until the edge fraction is small).
        Cost is recorded as ``simulations_["refine<k>"]``. Call :meth:`sample` again afterwards.
        ``posterior=None`` refines over the localized proposal :math:`q` instead (its mean and
        SD, no further inflation): a first step when the unrefined posterior is far off.
        """
        self._check_fitted()
        if self.mode != "single" or self.mean_net_ is None:
            raise ValueError("refine_debiasing needs mode='single' with debiasing (debias != 'none')")
        if inflation <= 0:
            raise ValueError(f"inflation must be > 0, got {inflation}")
        if posterior is None:
            if not isinstance(self.proposal_, GaussianProposal):
                raise ValueError("refine_debiasing(None) needs a localized proposal (localize=True)")
            center, spread = self.proposal_.mean.double(), self.proposal_.sd.double()
        else:
            u = self._posterior_u(posterior)
            # robust centre and spread: a few chains stuck at a boundary must not widen the region
            center = u.median(0).values
            mad = (u - center).abs().median(0).values * 1.4826
            spread = (inflation * torch.where(mad > 0, mad, u.std(0))).clamp_min(1e-6)
            if posterior.info.get("edge_fraction", 0.0) > 0.01:
                # the draws piled up at the side of the region that confined them: their spread is
                # truncated, not posterior width. Keep the confining region's size and move it to the
                # draws (a moving trust region); shrinking it would collapse the chains onto the edge.
                low, high = self._sampling_region()
                spread = torch.maximum(spread, (high - low) / 8)
        k = len(getattr(self, "refinements_", []))
        num = num_groups or self.num_groups
        m = group_size or self.group_size or min(1000, max(100, self.n_obs_))
        u_r, x_r, cost = self._table(GaussianProposal(self.space, center, spread), num, m, f"refine{k}")
        x_r = self._table_view(x_r)
        with torch.no_grad():
            residual = self._group_means(u_r, x_r) - self.mean_net_(u_r.float().to(self.device)).cpu()
        intercept, slope, residual_sd = fit_local_correction(u_r, residual, center)
        self.mean_net_ = LocalLinearCorrection(self.mean_net_, intercept, slope, center).to(self.device)
        self.simulations_[f"refine{k}"] = cost
        self.refinements_ = [*getattr(self, "refinements_", []), {
            "center": center, "spread": spread, "intercept": intercept, "slope": slope,
            "residual_sd": residual_sd, "groups": len(u_r), "group_size": m}]
        return self

    def refit_debiasing(self, posterior: Posterior, *, bandwidth: float = 5.0) -> ScoreLangevin:
        r"""Correct the debiasing network near ``posterior`` with the groups of :math:`\mathcal D^R`
        already simulated (single-model; beyond the paper; **no new simulations**).

        Fits :math:`(\bar s_l - h_\psi(u_l))/J(u_l) \approx a + B(\theta_l - c)` by least squares
        weighted with a Gaussian kernel of ``bandwidth`` posterior SDs around the posterior draws'
        mean :math:`c` (Mahalanobis distance in :math:`\theta`), and adds
        :math:`J(u)\odot(a + B(T(u) - c))` to :math:`h_\psi`
        (:func:`~scorebayes.scores.local_debias.fit_kernel_correction`). The error of
        :math:`h_\psi` enters the posterior score n times; a network fitted over the whole
        proposal is least accurate where the posterior lives, and the kernel re-weights the
        same groups towards it. Repeated calls refine further; call :meth:`sample` again
        afterwards. Needs an elementwise transform :math:`T` (as the box and positive priors).
        Unlike :meth:`refine_debiasing`, the chains' region is not cut: the correction is smooth.
        """
        self._check_fitted()
        if self.mode != "single" or self.mean_net_ is None or not hasattr(self, "debias_groups_"):
            raise ValueError("refit_debiasing needs mode='single' with debiasing (debias != 'none')")
        if not bandwidth > 0:
            raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
        if not self.space.is_elementwise():
            raise ValueError("refit_debiasing needs an elementwise parameter transform")
        theta_post = self.space.to_constrained(self._posterior_u(posterior))
        center = theta_post.mean(0)
        cov = torch.cov(theta_post.T).reshape(self.space.dim, self.space.dim)
        ridge = 1e-9 * cov.diagonal().clamp_min(1e-300).diag_embed()  # keep the factor defined
        scale_tril = torch.linalg.cholesky(cov + ridge)
        u_r, s_bar = self.debias_groups_
        with torch.no_grad():
            h = torch.cat([self.mean_net_(u_r[i : i + 10_000].to(self.device)).cpu()
                           for i in range(0, len(u_r), 10_000)])
        theta_r, jac = theta_and_jacobian(self.space, u_r.double())
        residual = (s_bar.double() - h.double()) / jac.clamp_min(torch.finfo(torch.float64).tiny)
        intercept, slope, residual_sd, effective = fit_kernel_correction(theta_r, residual, center,
                                                                         scale_tril, bandwidth)
        self.mean_net_ = ThetaLinearCorrection(self.mean_net_, self.space, intercept, slope,
                                               center).to(self.device)
        self.refinements_ = [*getattr(self, "refinements_", []), {
            "kind": "kernel", "center": center, "bandwidth": bandwidth, "intercept": intercept,
            "slope": slope, "residual_sd": residual_sd, "effective_groups": effective}]
        return self

    # ------------------------------------------------------------------ score
    def likelihood_score(self, u: Tensor, x_obs: Tensor | None = None, *, compiled: bool = False) -> Tensor:
        r"""Learned :math:`\nabla_u\log p(\mathbf X^*\mid T(u))`, ``u [C, d] -> [C, d]`` (float64).

        Differentiable in ``u`` (used for the automatic step size). ``compiled=True`` runs the
        drift through ``torch.compile`` when no gradient is needed (about 1.7x faster on CPU,
        see ``benchmarks/results/langevin_drift.md``; needs a C++ compiler).
        """
        self._check_fitted()
        data = self._observed_view(self.x_obs_ if x_obs is None else x_obs)
        uf = u.float().to(self.device)
        summed = self.score_net_.sum_over_observations
        if compiled and not torch.is_grad_enabled():
            # keyed on the network: a later round (refine_proposal, move_tables) replaces it
            cached = getattr(self, "_compiled_sum_", None)
            if cached is None or cached[0] is not self.score_net_:
                self._compiled_sum_ = (self.score_net_, torch.compile(summed))
            summed = self._compiled_sum_[1]
        total = summed(uf, data)
        if self.mean_net_ is not None:
            total = total - len(data) * self.mean_net_(uf)
        return total.to(u.device, torch.float64)

    def _observed_view(self, x_obs: Tensor) -> Tensor:
        """:meth:`_observations` of ``x_obs`` as float32 on ``self.device``, built once per data set.

        A chain calls :meth:`likelihood_score` with the same data tensor at every step; its view
        (with any ``data_features`` and their checks) is cached for that tensor. The cache holds
        the tensor itself, so its ``id`` cannot be reused by another, and its ``_version`` (bumped
        by in-place edits) must match too.
        """
        cached = getattr(self, "_observed_view_cache_", None)
        key = (x_obs._version, self.device, self.data_features)
        if cached is not None and cached[0] is x_obs and cached[1] == key:
            return cached[2]
        data = self._observations(x_obs).float().to(self.device)
        self._observed_view_cache_ = (x_obs, key, data)
        return data

    def _sampling_region(self) -> tuple[Tensor, Tensor]:
        """Box in ``u`` where chains may go: the training region, after :meth:`refine_debiasing`
        cut to the last correction's centre +- 4 spreads (where its linear fit holds)."""
        low, high = self.training_region_
        cuts = [r for r in getattr(self, "refinements_", []) if r.get("kind") != "kernel"]  # refits: no cut
        if cuts:
            last = cuts[-1]
            low = torch.maximum(low, last["center"] - 4 * last["spread"])
            high = torch.minimum(high, last["center"] + 4 * last["spread"])
        return low, high

    def chain_box(self, x_obs: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Box in ``u`` the chains are reflected in, ``(low [d], high [d])``: the trained region
        (cut after :meth:`refine_debiasing`) cut to the support (``support_fn``), if any, of
        ``x_obs`` (default: the observed data)."""
        low, high = self._sampling_region()
        if self.support_fn is not None:
            s_low, s_high = self.support_fn(self.x_obs_ if x_obs is None else x_obs)
            low = torch.maximum(low, self.space.to_unconstrained(torch.as_tensor(s_low, dtype=torch.float64)))
            high = torch.minimum(high, self.space.to_unconstrained(torch.as_tensor(s_high, dtype=torch.float64)))
        return low, high

    def noisy_copies(self) -> list[Tensor]:
        r"""The data the chains of :meth:`sample` condition on, ``noise_draws`` tensors ``[n, p]``:
        :math:`\tilde{\mathbf X}^*_c = \mathbf X^* + \sigma\varepsilon_c` (``noise_sd`` :math:`=\sigma`;
        App. C.1.1), the same on every call; ``[x_obs]`` without noise smoothing."""
        self._check_fitted()
        copies = self.noise_draws if self.noise_sd is not None else 1
        return [self._noisy(self.x_obs_, "observed", c) for c in range(copies)]

    def _check_fitted(self) -> None:
        if not hasattr(self, "score_net_"):
            raise RuntimeError("call fit(x_obs) first")

    # ----------------------------------------------------------------- sample
    def sample(
        self,
        num_samples: int = 2000,
        *,
        chains: int | None = None,
        step_size: float | str = "auto",
        step_size_factor: float = 0.1,
        burn_in: int | str = "auto",
        thin: int | str = "auto",
        tempering: bool | Sequence[float] = False,
        steps_per_stage: int | str = "auto",
        init: str | Posterior = "proposal",
        clip_norm: float | None = None,
        max_steps: int = 20_000,
        compile_drift: bool = False,
        precondition: str | None = None,
        adapt_steps: int = 0,
        reset_stragglers: bool = True,
        seed: int | None = None,
    ) -> Posterior:
        r"""Run Langevin chains on the learned posterior score and return a :class:`Posterior`.

        Arguments:
            num_samples: total draws (over all chains and noise draws).
            chains: parallel chains (default ``max(4, num_samples // 50)``: 50 draws per chain, so
                that split-R-hat is meaningful), split evenly over
                the ``noise_draws`` noisy copies of the data when ``noise_sd`` is set.
            step_size: :math:`\tau`, or ``"auto"``: :math:`\tau = \kappa/\lambda_{\max}` with
                :math:`\kappa` = ``step_size_factor`` (see :func:`curvature_step_size`).
            burn_in, thin: ``"auto"``: 5 and 1 relaxation times of the slowest direction
                (capped so that the run has at most about ``max_steps`` steps: tempering and
                burn-in take at most half of them).
            tempering: ``True`` for likelihood weights 0.1, ..., 0.9 before :math:`t = 1`
                (App. C.2.2), or an explicit list.
            init: ``"proposal"`` (:math:`q`, or the prior without localization), ``"prior"``, or
                a :class:`Posterior` to warm-start from: the chains start at its draws (without
                replacement while they last; weights, if any, are ignored) and, with
                ``precondition="dense"``, the whitening is its draws' covariance
                (:func:`~scorebayes.samplers.langevin.covariance_preconditioner`) instead of the
                drift's curvature at the starts. Use it to re-sample after
                :meth:`refit_debiasing`, whose correction moves the posterior by about its own
                width: chains started from :math:`q` must cross the tails again, where a learned
                drift can be much stiffer than in the bulk (the monotone regression's repetition 1:
                largest curvature up to 2,000 there against at most 100 at exact draws), which
                shrinks the step for all chains. Pass ``tempering=False`` with it (the chains are
                in the posterior already). Starts outside the sampling region (the trained
                region, cut to ``support_fn``) are redrawn from the start distribution truncated
                to it (``info["starts_redrawn"]``).
            clip_norm: clip the learned likelihood score to this norm.
            compile_drift: evaluate the drift through ``torch.compile`` (faster for long runs).
            precondition: ``"dense"`` runs the chains in whitened coordinates
                :math:`u = c + Lv` from the drift's average curvature
                (:func:`~scorebayes.samplers.langevin.dense_preconditioner`): needed when
                parameters are identified at very different precisions (the automatic step is
                set by the stiffest direction). Proposals are still reflected into the training
                region, in u coordinates.
            adapt_steps: with ``precondition="dense"``, warm-up steps (beyond ``max_steps``) that
                re-estimate the whitening from the chains themselves, in windows of ratio 1:2:4
                (:func:`~scorebayes.samplers.langevin.adaptation_windows`): after each window,
                :math:`u = c + Lv` is refitted to the covariance of the window's second half
                (:func:`~scorebayes.samplers.langevin.covariance_preconditioner`) and the step
                size to the curvature at the chains and at :math:`c`. Tempering runs before the
                first window. Use it when the posterior is not Gaussian in u, so that the
                curvature at the starts misses its shape (the monotone regression: a condition
                number of 761 left after whitening at the starts, against the exact posterior's
                covariance). ``info["warmup_steps"]`` records the steps spent.
            reset_stragglers: with ``adapt_steps``, after each warm-up window restart the chains
                whose learned log-posterior (path integral of the drift from the chains' median)
                lies more than :func:`default_straggler_gap` nats below the median chain's, from
                the state of a random other chain, and leave them out of the whitening's refit.
                Chains that start far out where the drift is nearly flat (a logit at its bound)
                otherwise stay there for 1e5 steps and stretch the whitening.
                ``info["chains_reset"]`` counts the restarts (a warning says when any happened).
                The rule assumes the mass sits in one region of comparable log-density: pass
                ``False`` for a posterior with a separated mode that much lower but still heavy
                (a mode 10x wider in each of 11 dimensions).

        Warns when over 1% of the draws lie at the edge of the trained region
        (``info["edge_fraction"]``) and when the chains' last draws still depend on their starts
        (:func:`~scorebayes.diagnostics.start_memory`; ``info["start_memory"]`` is the largest
        :math:`R^2` over the parameters): stuck chains, or chains split between separated modes.
        """
        self._check_fitted()
        if num_samples < 1:
            raise ValueError("num_samples must be >= 1")
        if isinstance(init, Posterior):
            init_u = self._posterior_u(init)  # checks the dimension
            start_sampler = _DrawsSampler(self.space.to_constrained(init_u))
        elif init not in ("proposal", "prior"):
            raise ValueError(f"init must be 'proposal', 'prior' or a Posterior, got {init!r}")
        if precondition not in (None, "dense"):
            raise ValueError(f"precondition must be None or 'dense', got {precondition!r}")
        if isinstance(adapt_steps, bool) or not isinstance(adapt_steps, int) or adapt_steps < 0:
            raise ValueError(f"adapt_steps must be an integer >= 0, got {adapt_steps!r}")
        if not isinstance(reset_stragglers, bool):
            raise ValueError(f"reset_stragglers must be True or False, got {reset_stragglers!r}")
        if adapt_steps and precondition != "dense":
            raise ValueError("adapt_steps adapts the dense preconditioner: pass precondition='dense'")
        seed = self.seed if seed is None else seed
        # the arguments only: a local derived from them (a start sampler, whose repr holds its
        # memory address) would give every process its own name and the store no hits
        arguments = locals()
        saved_as = self._samples_name({k: arguments[k] for k in _SAMPLE_ARGUMENTS})
        if saved_as is not None and self.store.is_done(saved_as):
            stored = Posterior.load(self.store.file("arrays", saved_as, ".npz"))
            if "chain_copies" not in stored.info and not stored.info.get("diverged_chains"):
                # stored before chain_copies was recorded: each copy ran an equal block, in order
                copies = self.noise_draws if self.noise_sd is not None else 1
                per_copy = stored.samples.shape[0] // copies
                stored.info["chain_copies"] = [c for c in range(copies) for _ in range(per_copy)]
            return stored
        data_copies = self.noisy_copies()
        copies = len(data_copies)
        chains = chains or max(4, num_samples // 50)
        chains = max(copies, chains - chains % copies)
        per_copy = chains // copies
        draws_per_chain = math.ceil(num_samples / chains)
        stages = tuple(i / 10 for i in range(1, 10)) if tempering is True else tuple(tempering or ())
        # chains stay where the score was learned (reflection at the training region's edge),
        # and after refine_debiasing where the local correction was fitted (centre +- 4 spreads)
        region_low, region_high = self._sampling_region()
        low, high = self.chain_box()
        bounds = (low, high)
        results, infos, starts = [], [], []
        start_counts = [0, 0]  # starts redrawn, starts reflected into the box
        chains_reset = 0  # warm-up restarts of stragglers (reset_stragglers)
        for c, x_copy in enumerate(data_copies):
            g = make_generator(seed, "langevin", c)
            if isinstance(init, Posterior):
                sampler = start_sampler
            else:
                sampler = self.proposal_ if init == "proposal" else PriorSampler(self.prior)
            u0, redrawn, reflected = self._chain_starts(sampler, per_copy, g, low, high)
            starts_u = u0  # kept in u for the start-memory check (u0 may become v below)
            start_counts[0] += redrawn
            start_counts[1] += reflected

            def lik(u: Tensor, x_copy: Tensor = x_copy) -> Tensor:
                return self.likelihood_score(u, x_copy, compiled=compile_drift)

            prior_score = self.space.grad_log_prob_unconstrained

            def drift_graph(u: Tensor, lik: Callable = lik) -> Tensor:
                return lik(u) + _prior_score_graph(self.space, u)

            chain_bounds, to_u, constrain = bounds, (lambda w: w), None
            warmup_steps, chain_stages = 0, stages
            if precondition == "dense":  # chains in v, u = c + L v
                u_fns = (lik, prior_score, drift_graph)
                if isinstance(init, Posterior):  # the previous posterior's shape, not the curvature at one point
                    center, L = covariance_preconditioner(init_u)
                else:
                    center, L = dense_preconditioner(drift_graph, u0[: min(32, len(u0))])
                if adapt_steps:
                    u0, alive, center, L, warmup_steps, resets = adapt_whitening(
                        u_fns, bounds, u0, center, L, windows=adaptation_windows(adapt_steps),
                        stages=stages, kappa=step_size_factor, clip_norm=clip_norm, generator=g,
                        progress=self.progress,
                        straggler_gap=default_straggler_gap(u0.shape[-1]) if reset_stragglers else None)
                    chains_reset += resets
                    starts_u, chain_stages = starts_u[alive], ()
                lik, prior_score, drift_graph, to_u, constrain = whitened(u_fns, center, L, bounds)
                u0 = torch.linalg.solve(L, (u0 - center).T).T
                chain_bounds = None
            if step_size == "auto":
                # after the warm-up also the centre of the chains (v = 0), where the curvature peaks
                probes = probes_with_centre(u0) if warmup_steps else u0[: min(16, len(u0))]
                est = curvature_step_size(drift_graph, probes, kappa=step_size_factor)
                tau, relax = est.step_size, est.relaxation_steps()
            else:
                tau, relax = float(step_size), 1.0
            # "auto" budget: tempering stages <= max_steps/4 in total (uncapped, a stiff posterior with
            # relax ~1e6 and 9 stages ran for hours), tempering + burn-in <= max_steps/2, draws the rest
            n_stage = int(min(max(50, math.ceil(relax)), max(50, max_steps // (4 * max(1, len(stages)))))) \
                if steps_per_stage == "auto" else int(steps_per_stage)
            n_burn = int(min(max(200, math.ceil(5 * relax)),
                             max(200, max_steps // 2 - len(chain_stages) * n_stage))) \
                if burn_in == "auto" else int(burn_in)
            spare = max_steps - n_burn - len(chain_stages) * n_stage
            n_thin = int(min(max(1, math.ceil(relax)), max(1, spare // draws_per_chain))) \
                if thin == "auto" else int(thin)
            draws, info = run_langevin(lik, prior_score, u0, step_size=tau, num_draws=draws_per_chain,
                                       burn_in=n_burn, thin=n_thin, tempering=chain_stages,
                                       steps_per_stage=n_stage, clip_norm=clip_norm, bounds=chain_bounds,
                                       constrain=constrain,
                                       generator=g, progress=self.progress)
            results.append(to_u(draws[~info.diverged]))
            starts.append(starts_u[~info.diverged])
            infos.append(info)
        u_draws = torch.cat(results, 0)
        # chains that mixed have forgotten where they started (diagnostics.start_memory)
        memory = start_memory(torch.cat(starts).cpu().numpy(), u_draws[:, -1].cpu().numpy())
        if remembers_start(memory):
            k = int(np.nanargmax(memory.r_squared))
            name = (self.parameter_names or [f"theta{j}" for j in range(len(memory.r_squared))])[k]
            warnings.warn(f"the chains have not forgotten their starts: over {len(u_draws)} chains, the "
                          f"starts explain {memory.r_squared[k]:.0%} of the spread of the last draws of "
                          f"{name} (p = {memory.p_value[k]:.1e}). The chains are stuck, or split between "
                          "separated modes by where they started, so the draws over-represent the start "
                          "distribution. Raise max_steps, try precondition='dense', or look for "
                          "spurious modes of the learned score",
                          stacklevel=2)
        if chains_reset:
            warnings.warn(f"warm-up restarted {chains_reset} chain states (of {len(u_draws)} chains, over the "
                          "adaptation windows) that lay far below the others in learned log-posterior, from "
                          "other chains' states (reset_stragglers): the start distribution reaches regions "
                          "where the drift is too flat to leave (info['chains_reset'])", stacklevel=2)
        if start_counts[1]:
            warnings.warn(f"{start_counts[1]} chain starts could not be drawn inside the sampling region "
                          "(trained region and support) and were reflected into it; reflected starts can "
                          "land far from the posterior (the start distribution barely reaches that region: "
                          "check support_fn and the proposal)", stacklevel=2)
        # draws at a side of the trained region (not at a support bound, where the posterior may
        # legitimately pile up, e.g. theta1 <= min x for the M/G/1 queue)
        tol = 0.02 * (high - low)
        edge = (((u_draws - low) < tol) & (low <= region_low)) | (((high - u_draws) < tol) & (high >= region_high))
        edge_fraction = float(edge.any(-1).double().mean())
        if edge_fraction > 0.01:
            warnings.warn(f"{100 * edge_fraction:.1f}% of the draws lie at the edge of the region the "
                          "score was trained on: the posterior may extend beyond the reference table "
                          "(widen the proposal, e.g. localize=False, or use more replicates)", stacklevel=2)
        theta = self.space.to_constrained(u_draws.reshape(-1, u_draws.shape[-1])).reshape(u_draws.shape)
        names = self.parameter_names or [f"theta{k}" for k in range(theta.shape[-1])]
        info0 = infos[0]
        meta = {
            "method": "score-langevin",
            "mode": self.mode,
            "simulations": sum(self.simulations_.values()),
            "simulations_by_stage": dict(self.simulations_),
            "step_size": info0.step_size,
            "step_size_c": info0.step_size * self.n_obs_,
            "burn_in": info0.burn_in,
            "thin": info0.thin,
            "relaxation_steps": float(relax),
            "chains": int(u_draws.shape[0]),
            "diverged_chains": int(sum(int(i.diverged.sum()) for i in infos)),
            # which noisy copy of the data (noisy_copies()) each chain conditions on
            "chain_copies": [c for c, i in enumerate(infos) for _ in range(int((~i.diverged).sum()))],
            "edge_fraction": edge_fraction,
            "starts_redrawn": start_counts[0],
            "starts_reflected": start_counts[1],
            "start_memory": float(np.nanmax(memory.r_squared)) if np.isfinite(memory.r_squared).any()
            else float("nan"),
            "precondition": precondition,
            "warmup_steps": warmup_steps,
            "chains_reset": chains_reset,
            "curvature_penalty": self.fit_report_.penalty,
            "mean_penalty": getattr(self, "mean_report_", None) and self.mean_report_.penalty,
        }
        posterior = Posterior(theta, names, info=meta)
        if saved_as is not None:
            path = self.store.file("arrays", saved_as, ".npz")
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.tmp.npz")
            posterior.save(partial)
            os.replace(partial, path)  # atomic, then the marker
            self.store.mark_done(saved_as)
        return posterior

    def _chain_starts(self, sampler: Any, num: int, generator: torch.Generator, low: Tensor,
                      high: Tensor, *, max_batches: int = 100) -> tuple[Tensor, int, int]:
        """Chain starts in ``u`` from ``sampler``, inside the sampling box ``[low, high]``.

        Starts outside the box (e.g. beyond a data-dependent support such as the M/G/1 queue's
        theta1 <= min x) are redrawn, in place, from the same sampler: the start distribution
        truncated to the box. Reflecting them instead folds a far start to the box's other side
        (on M/G/1, prior starts at theta1 ~ 8 land at theta1 ~ 0.02, where the weight function
        switches the loss off and the learned score has a spurious mode). After ``max_batches``
        batches of ``num`` draws the remaining ones are reflected.

        Returns:
            ``(u [C, d], redrawn, reflected)``; ``C`` is the number of finite draws of the first batch.
        """
        def inside(v: Tensor) -> Tensor:
            return ((v >= low) & (v <= high)).all(-1)

        u, keep = self._to_u(sampler.sample(num, generator))
        u = u[keep]
        outside = ~inside(u)
        redrawn = int(outside.sum())
        for _ in range(max_batches):
            if not outside.any():
                break
            more, ok = self._to_u(sampler.sample(num, generator))
            more = more[ok & inside(more)]
            slots = outside.nonzero().squeeze(-1)[: len(more)]
            u[slots] = more[: len(slots)]
            outside[slots] = False
        reflected = int(outside.sum())
        if reflected:
            u[outside] = reflect_into_box(u[outside], low, high)
        return u, redrawn - reflected, reflected

    def _samples_name(self, arguments: dict[str, Any]) -> str | None:
        """Store name of the samples of one :meth:`sample` call (hash of its arguments)."""
        if self.store is None:
            return None
        arguments.pop("self", None)
        if not arguments.get("adapt_steps"):  # the default: names of samples stored before it existed
            arguments.pop("adapt_steps", None)
        if not (arguments.get("adapt_steps") and arguments.get("reset_stragglers")):
            arguments.pop("reset_stragglers", None)  # no restarts: the samples stored before they existed
        if isinstance(arguments.get("init"), Posterior):  # warm start: named by its draws
            draws = np.ascontiguousarray(np.asarray(arguments["init"].draws, dtype=np.float64))
            arguments["init"] = f"posterior-{hashlib.sha256(draws.tobytes()).hexdigest()[:12]}"
        refinements = getattr(self, "refinements_", [])
        arguments["refinements"] = len(refinements)  # refined drift, new samples
        kernel = [(r["bandwidth"], [float(f"{v:.6g}") for v in r["intercept"].tolist()])
                  for r in refinements if r.get("kind") == "kernel"]
        if kernel:  # another kernel refit (bandwidth, posterior) must not get these samples back
            arguments["kernel_refits"] = kernel
        # samples stored before starts outside the sampling box were redrawn (not reflected) differ
        arguments["chain_starts"] = "redrawn-in-box"
        # the box the chains are reflected in: another support_fn (or none) draws other samples
        arguments["chain_box"] = [[float(f"{v:.6g}") for v in side.tolist()] for side in self.chain_box()]
        text = repr(sorted((k, repr(_exact_value(v))) for k, v in arguments.items()))
        return f"samples_{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _exact_value(value: Any) -> Any:
    """``value`` with tensors and arrays as nested lists of Python numbers, whose repr is exact:
    torch prints ``tensor(0.0010)`` for 0.00101 and 0.00104, and elides large tensors with
    ``...``, so a repr-based name would give one call's samples back to another."""
    if isinstance(value, Tensor):
        return ("tensor", value.detach().cpu().tolist())
    if isinstance(value, np.ndarray):
        return ("array", value.tolist())
    if isinstance(value, (list, tuple)):
        return type(value)(_exact_value(v) for v in value)
    return value


#: the arguments of ScoreLangevin.sample that name its samples in a run store
_SAMPLE_ARGUMENTS = tuple(p for p in inspect.signature(ScoreLangevin.sample).parameters if p != "self")


class _DrawsSampler:
    """Chain starts drawn from stored posterior draws ``theta [S, d]``: without replacement while
    ``num <= S``, with replacement beyond (``sample(num, generator) -> [num, d]``)."""

    def __init__(self, theta: Tensor):
        self.theta = theta

    def sample(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        size = len(self.theta)
        index = (torch.randperm(size, generator=generator)[:num] if num <= size
                 else torch.randint(size, (num,), generator=generator))
        return self.theta[index]


def _prior_score_graph(space: ParameterSpace, u: Tensor) -> Tensor:
    """:math:`\\nabla_u\\log\\pi_u(u)` keeping the graph (for the drift's Jacobian)."""
    with torch.enable_grad():
        leaf = u if u.requires_grad else u.detach().requires_grad_(True)
        lp = space.log_prob_unconstrained(leaf)
        (grad,) = torch.autograd.grad(lp.sum(), leaf, create_graph=True)
    return grad
