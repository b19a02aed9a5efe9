r"""Score-based Langevin simulation-based inference: the estimator that composes the stages.

$$
\nabla_u\log\pi_n(u\mid\mathbf X^*_n) \approx \sum_{k} \big[s_\phi(u, v_k(\mathbf X^*)) - h_\psi(u)\big]
+ \nabla_u\log\pi_u(u)
$$

1. **Localization** (Sec. 3.1): minimum-distance replicates give a Gaussian proposal $q$
   over the unconstrained parameters ``u`` ([`scorebayes.sbi.localization.minimum_distance`][scorebayes.sbi.localization.minimum_distance]).
2. **Reference tables** from $q$ or the prior ([`scorebayes.sbi.reference_tables`][scorebayes.sbi.reference_tables]).
3. **Score matching** in ``u`` on the data view of the mode ([`scorebayes.sbi.views`][scorebayes.sbi.views]):
   ``"single"`` (Algorithm 3, with the debiasing network of [`scorebayes.sbi.debias`][scorebayes.sbi.debias]),
   ``"n"`` (Algorithm 2), ``"full"`` (one network on the whole data set) or ``"markov"``
   (blockwise, Remark 4). The result is a
   [`LearnedLikelihoodScore`][scorebayes.sbi.likelihood.LearnedLikelihoodScore], ``likelihood_``.
4. **The posterior**: for i.i.d. data (modes ``"single"``, ``"n"``) the learned score at a point
   estimate as a summary, calibrated on data sets of the observed size ([`scorebayes.sbi.calibrated`][scorebayes.sbi.calibrated]);
   else (or ``calibrate=False``, ``preset="paper"``) the paper's Langevin chains on the summed score
   ([`scorebayes.sbi.sampling`][scorebayes.sbi.sampling]); mapped back to $\theta = T(u)$.

Later table rounds ([`ScoreLangevin.refine_proposal()`][scorebayes.sbi.estimator.ScoreLangevin.refine_proposal], [`ScoreLangevin.move_tables()`][scorebayes.sbi.estimator.ScoreLangevin.move_tables]) and
local debiasing corrections ([`ScoreLangevin.refine_debiasing()`][scorebayes.sbi.estimator.ScoreLangevin.refine_debiasing],
[`ScoreLangevin.refit_debiasing()`][scorebayes.sbi.estimator.ScoreLangevin.refit_debiasing]) live in [`scorebayes.sbi.rounds.table_rounds`][scorebayes.sbi.rounds.table_rounds].

Examples:
    >>> import torch
    >>> from torch.distributions import Normal
    >>> from scorebayes.priors import independent
    >>> from scorebayes.simulators import Simulator
    >>> from scorebayes.sbi import TrainingSchedule
    >>> sim = Simulator(lambda th, n, g: th[:, None, :] + torch.randn(len(th), n, 1, generator=g))
    >>> model = ScoreLangevin(independent([Normal(0.0, 3.0)]), sim, localization=Localization(enabled=False),
    ...                       tables=Tables(table_size=2000), progress=False,
    ...                       training=Training(schedule=TrainingSchedule(epochs=5),
    ...                                         curvature_penalties=(0.0,), mean_penalties=(0.0,)))
    >>> x_obs = 1.0 + torch.randn(50, 1, generator=torch.Generator().manual_seed(1))
    >>> model.fit(x_obs).sample(200).draws.shape
    torch.Size([200, 1])

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Distribution

from ..parallel import torch_threads
from ..posterior import Posterior
from ..priors import ParameterSpace
from ..proposal import PriorSampler
from ..scores.training import checkpointing
from ..simulators import Simulator, as_simulator
from .budget import Ledger, plan_fit
from .calibrated import calibrated_sample
from .checks.verdict import FitCheck, check_fit
from .likelihood import DataSmoothing, LearnedLikelihoodScore
from .observed import check_against_pilot, checked_observed
from .reference_tables import TableSource, draws_in_u
from .rounds.remedies import announce_check, checked
from .rounds.table_rounds import (
    first_round,
    localized_proposal,
    move_tables,
    refine_debiasing,
    refine_proposal,
    refit_debiasing,
)
from .sample_store import load_samples, samples_name, save_samples
from .sampling import ChainSettings, DrawsSampler, run_chains
from .settings import (
    GROUPS,
    Localization,
    Networks,
    Simulation,
    Tables,
    Training,
    default_schedule,
    group_options,
    preset_options,
)
from .views import VIEWS, view_for_mode

__all__ = ["MODES", "ScoreLangevin"]

MODES = tuple(VIEWS)


def _in_threads(method: Callable) -> Callable:
    """Run an estimator's method with its ``threads`` torch threads."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with torch_threads(self.threads):
            return method(self, *args, **kwargs)
    return wrapper


class ScoreLangevin:
    r"""Learn the likelihood score from simulations and sample the posterior by Langevin dynamics.

    Arguments:
        prior: any ``Distribution`` with event shape ``[d]`` (constrained supports are mapped
            to $\mathbb R^d$).
        simulator: a [`Simulator`][scorebayes.simulators.Simulator] or batched callable
            ``simulate(theta [B, d], n, generator) -> x [B, n, p]``.
        mode: the data view: ``"single"`` (default), ``"n"``, ``"full"`` or ``"markov"``
            ([`scorebayes.sbi.views`][scorebayes.sbi.views]).
        preset: ``"default"`` (quick settings and the budget plan of `scorebayes.sbi.budget`) or
            ``"paper"`` (the paper's table sizes and training, [`preset_options()`][scorebayes.sbi.settings.preset_options]);
            it fills the settings groups not given.
        localization, tables, networks, training, simulation: the stages' settings
            ([`scorebayes.sbi.settings`][scorebayes.sbi.settings]); ``localization=False`` draws the tables from the prior.
            A data-dependent support is ``Localization.support_fn`` (the chains are reflected into
            it) and the loss weight that vanishes on its boundary ``Training.weight_fn``.
        parameter_names: names of the ``d`` parameters.
        store: a [`RunStore`][scorebayes.store.RunStore]: the localization, table blocks, networks
            (with epoch checkpoints) and samples are saved there and reused on a re-run.
        device: where networks train and chains run (``"cpu"``, ``"cuda"``).
        threads: torch threads for the fit and the chains (``None``: torch's setting, by default
            the cores this process may use; [`scorebayes.parallel.torch_threads()`][scorebayes.parallel.torch_threads]).
        seed: run seed; same seed, same result.
        progress: tqdm bars.

    [`from_options()`][scorebayes.sbi.estimator.ScoreLangevin.from_options] takes the settings as flat keywords (``num_simulations=...``,
    ``hidden=...``), as a config's ``[options]`` table does.

    After [`fit()`][scorebayes.sbi.estimator.ScoreLangevin.fit]: ``likelihood_`` (the learned likelihood score), ``proposal_``,
    ``localization_``, ``fit_report_``, ``mean_report_``, ``simulations_`` (data sets of the
    observed size, by stage), ``faults_``.
    """

    def __init__(self, prior: Distribution, simulator: Simulator | Callable, *, mode: str = "single",
                 preset: str = "default", localization: Localization | bool | None = None,
                 tables: Tables | None = None, networks: Networks | None = None,
                 training: Training | None = None, simulation: Simulation | None = None,
                 parameter_names: Sequence[str] | None = None, store: Any = None,
                 device: str | torch.device = "cpu", threads: int | None = None, seed: int = 0,
                 progress: bool = True):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        given = {"localization": localization, "tables": tables, "networks": networks, "training": training,
                 "simulation": simulation}
        preset_groups = group_options(preset_options(preset, VIEWS[mode].single_observations))
        localization, tables, networks, training, simulation = (
            value if value is not None else preset_groups.get(name, GROUPS[name]())
            for name, value in given.items())
        if isinstance(localization, bool):  # the preset's localization, switched on or off
            localization = replace(preset_groups.get("localization", Localization()), enabled=localization)
        if training.weight_fn is not None and mode == "single" and training.debias != "none":
            raise ValueError("a weight function breaks the mean-zero property: use mode='n' "
                             "or debias='none' (App. B.2), or noise_sd for the single-model")
        self.prior, self.space = prior, ParameterSpace(prior)
        self.simulator = as_simulator(simulator)
        self.mode, self.localization = mode, localization
        self.networks = networks.checked(self.space, mode)
        self.view = view_for_mode(mode, networks.data_features)
        single = self.view.single_observations
        self.tables = tables
        calibrate = tables.calibrate  # None: where the data are i.i.d., except the paper's preset
        self.calibrates = (mode in ("single", "n") and preset != "paper") if calibrate is None else (
            calibrate and mode != "markov")
        self.antithetic = single if tables.antithetic is None else bool(tables.antithetic)
        # an n-model step carries batch_size * n observations: fewer data sets per step
        self.schedule = training.schedule or default_schedule(single)
        self.mean_schedule = training.mean_schedule or default_schedule(single, mean=True)
        self.training = training
        self.debias = training.debias if single else "none"
        self.simulation = simulation
        self.parameter_names = list(parameter_names) if parameter_names else None
        self.store, self.device, self.seed, self.progress = store, torch.device(device), seed, progress
        with torch_threads(threads):  # checks the value
            self.threads = threads
        self.smoothing = (DataSmoothing(tables.noise_sd, tables.noise_draws, seed)
                          if tables.noise_sd is not None else None)

    @classmethod
    def from_options(cls, prior: Distribution, simulator: Simulator | Callable, **options: Any) -> ScoreLangevin:
        """The estimator from flat keyword settings ([`group_options()`][scorebayes.sbi.settings.group_options])."""
        preset = options.pop("preset", "default")
        single = VIEWS[options["mode"]].single_observations if options.get("mode") in VIEWS else True
        merged = {**preset_options(preset, single), **options}
        if isinstance(options.get("localization"), dict):  # the preset's localization, key by key
            merged["localization"] = {**preset_options(preset, single).get("localization", {}),
                                      **options["localization"]}
        return cls(prior, simulator, preset=preset, **group_options(merged))

    @property
    def likelihood_(self) -> LearnedLikelihoodScore:
        """The learned likelihood score (after [`fit()`][scorebayes.sbi.estimator.ScoreLangevin.fit])."""
        if "_likelihood" not in self.__dict__:
            raise RuntimeError("call fit(x_obs) first")
        return self.__dict__["_likelihood"]

    @likelihood_.setter
    def likelihood_(self, value: Any) -> None:
        self.__dict__["_likelihood"] = value

    n_obs_ = property(lambda self: self.likelihood_.n_obs)
    x_obs_ = property(lambda self: self.likelihood_.x_obs)

    @property
    def score_net_(self) -> Any:
        return self.likelihood_.score_net

    @property
    def mean_net_(self) -> Any:
        return self.likelihood_.mean_net

    @property
    def training_region_(self) -> tuple[Tensor, Tensor]:
        return self.likelihood_.training_region

    @property
    def refinements_(self) -> list[dict]:
        return self.likelihood_.refinements

    @property
    def noise_sd(self) -> float | None:
        """The data smoothing's SD (of the fitted likelihood once fitted), or ``None``."""
        smoothing = self.__dict__["_likelihood"].smoothing if "_likelihood" in self.__dict__ else self.smoothing
        return None if smoothing is None else smoothing.sd

    # --------------------------------------------------------------------- fit
    @_in_threads
    def fit(self, x_obs: Tensor) -> ScoreLangevin:
        r"""Localize, simulate the tables and train the networks for observed data ``x_obs [n, p]``.

        With a ``store``, every training phase checkpoints after each epoch and resumes."""
        start = time.perf_counter()
        x_obs = checked_observed(x_obs, self.view)
        self.source_ = TableSource(self.simulator, self.space, self.simulation, smoothing=self.smoothing,
                                   seed=self.seed, progress=self.progress, store=self.store, n_data=len(x_obs))
        check_against_pilot(self, self.source_, x_obs)
        self.plan_ = plan_fit(self.tables, self.localization, len(x_obs), single=self.view.single_observations,
                              calibrate=self.calibrates)
        with checkpointing(self.store, "train"):
            self.simulations_: dict[str, float] = {}
            self.faults_ = self.source_.faults
            self.ledger_ = Ledger(self.simulations_, self.progress, faults=self.faults_)
            self.ledger_.note(self.plan_.describe())
            with self.ledger_.stage("localization"):
                self.proposal_ = localized_proposal(self, x_obs)
            first_round(self, x_obs)
            self.fit_seconds_ = time.perf_counter() - start
        return self

    # ------------------------------------------------------------ table rounds
    def refine_proposal(self, posterior: Posterior, *, num_simulations: int | None = None,
                        inflation: float | Tensor = 1.0) -> ScoreLangevin:
        """A table round around ``posterior`` (modes n, full, markov): [`scorebayes.sbi.rounds.table_rounds.refine_proposal()`][scorebayes.sbi.rounds.table_rounds.refine_proposal]."""
        refine_proposal(self, posterior, num_simulations=num_simulations, inflation=inflation)
        return self

    def move_tables(self, center: Tensor, sd: Tensor) -> ScoreLangevin:
        """Redraw the single mode's tables around ``center`` (``u``): [`scorebayes.sbi.rounds.table_rounds.move_tables()`][scorebayes.sbi.rounds.table_rounds.move_tables]."""
        move_tables(self, center, sd)
        return self

    def refine_debiasing(self, posterior: Posterior | None = None, *, num_groups: int | None = None,
                         group_size: int | None = None, inflation: float = 2.0) -> ScoreLangevin:
        r"""New groups around ``posterior`` correct $h_\psi$: [`scorebayes.sbi.rounds.table_rounds.refine_debiasing()`][scorebayes.sbi.rounds.table_rounds.refine_debiasing]."""
        refine_debiasing(self, posterior, num_groups=num_groups, group_size=group_size,
                                inflation=inflation)
        return self

    def refit_debiasing(self, posterior: Posterior, *, bandwidth: float = 5.0) -> ScoreLangevin:
        r"""The existing groups correct $h_\psi$ near ``posterior``: [`scorebayes.sbi.rounds.table_rounds.refit_debiasing()`][scorebayes.sbi.rounds.table_rounds.refit_debiasing]."""
        refit_debiasing(self, posterior, bandwidth=bandwidth)
        return self

    def posterior_u(self, posterior: Posterior) -> Tensor:
        """A posterior's finite draws in ``u``, ``[S, d]`` ([`draws_in_u()`][scorebayes.sbi.reference_tables.draws_in_u])."""
        return draws_in_u(self.space, posterior)

    # ------------------------------------------------------------------ score
    def likelihood_score(self, u: Tensor, x_obs: Tensor | None = None, *, compiled: bool = False) -> Tensor:
        r"""Learned $\nabla_u\log p(\mathbf X^*\mid T(u))$, ``u [C, d] -> [C, d]`` (``likelihood_``)."""
        return self.likelihood_(u, x_obs, compiled=compiled)

    def chain_box(self, x_obs: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Box in ``u`` the chains are reflected in ([`LearnedLikelihoodScore.chain_box()`][scorebayes.sbi.likelihood.LearnedLikelihoodScore.chain_box])."""
        return self.likelihood_.chain_box(x_obs)

    def noisy_copies(self) -> list[Tensor]:
        """The data the chains condition on ([`LearnedLikelihoodScore.noisy_copies()`][scorebayes.sbi.likelihood.LearnedLikelihoodScore.noisy_copies])."""
        return self.likelihood_.noisy_copies()

    # ----------------------------------------------------------------- sample
    @_in_threads
    def sample(self, num_samples: int = 2000, *, chains: int | None = None, step_size: float | str = "auto",
               step_size_factor: float = 0.1, burn_in: int | str = "auto", thin: int | str = "auto",
               tempering: bool | Sequence[float] = False, steps_per_stage: int | str = "auto",
               init: str | Posterior = "proposal", clip_norm: float | None = None, max_steps: int = 20_000,
               target_ess: float | str = "auto", compile_drift: bool = False, precondition: str | None = None, adapt_steps: int = 0,
               reset_stragglers: bool = True, seed: int | None = None, check: bool = True,
               remedy: bool = True) -> Posterior:
        r"""The posterior as a [`Posterior`][scorebayes.posterior.Posterior]: calibrated (i.i.d. data; only
        ``num_samples``, ``seed``, ``check`` apply), or Langevin chains on the summed score (below).

        Arguments:
            num_samples: total draws (over all chains and noise draws).
            chains: parallel chains (default ``max(4, num_samples // 50)``), split evenly over
                the noisy copies of the data when ``noise_sd`` is set.
            step_size: $\tau$, or ``"auto"``: $\kappa/\lambda_{\max}$ with
                $\kappa$ = ``step_size_factor``
                ([`curvature_step_size()`][scorebayes.samplers.langevin.curvature_step_size]).
            burn_in, thin: ``"auto"`` (both): run until the draws' effective sample size reaches
                ``target_ess`` (with $\hat R < 1.01$) or ``max_steps`` steps, the first half
                discarded ([`scorebayes.sbi.sampling.stopping_rule()`][scorebayes.sbi.sampling.stopping_rule]); a warning says when the
                target was not met. Explicit values give a fixed budget instead.
            target_ess: ``"auto"``: a quarter of ``num_samples`` (at least 100); ``info["ess"]`` is
                the smallest ESS over the parameters, ``info["rhat"]`` the largest R-hat.
            steps_per_stage: ``"auto"`` from the slowest direction's relaxation time
                ([`scorebayes.sbi.sampling.step_budget()`][scorebayes.sbi.sampling.step_budget]).
            tempering: ``True`` for likelihood weights 0.1, ..., 0.9 before $t = 1$
                (App. C.2.2), or an explicit list.
            init: ``"proposal"`` ($q$, or the prior without localization), ``"prior"``, or a
                [`Posterior`][scorebayes.posterior.Posterior] to warm-start from (its draws; with ``precondition="dense"`` also
                its covariance as the whitening).
            clip_norm: clip the learned likelihood score to this norm.
            compile_drift: evaluate the drift through ``torch.compile``.
            precondition: ``"dense"`` runs the chains whitened, $u = c + Lv$, from the drift's
                curvature ([`dense_preconditioner()`][scorebayes.samplers.langevin.dense_preconditioner]).
            adapt_steps: with ``precondition="dense"``, warm-up steps that refit the whitening to the
                chains in windows of ratio 1:2:4 ([`adapt_whitening()`][scorebayes.samplers.adaptation.adapt_whitening]).
            reset_stragglers: with ``adapt_steps``, restart warm-up chains far below the others in
                learned log-posterior ([`reset_stragglers()`][scorebayes.samplers.adaptation.reset_stragglers]).
            seed: default the estimator's.
            check: check the fit afterwards ([`check()`][scorebayes.sbi.estimator.ScoreLangevin.check]): ``info["check"]``, one printed line.
            remedy: when the check fails, run its remedy once (a second table round around the
                posterior, within the budget; `scorebayes.sbi.rounds.remedies`), sample again and
                check again; ``info["check"]["remedies"]`` says what was done.

        Warns when over 1% of the draws lie at the edge of the trained region
        (``info["edge_fraction"]``) and when the chains' last draws still depend on their starts
        (``info["start_memory"]``).
        """
        likelihood = self.likelihood_
        settings = ChainSettings.from_arguments(locals())
        init_u = self.posterior_u(init) if isinstance(init, Posterior) else None  # checks the dimension
        seed = self.seed if seed is None else seed
        if self.calibrates:
            return calibrated_sample(self, num_samples, seed=seed, check=check)
        arguments = {**{k: v for k, v in locals().items() if k in _SAMPLE_ARGUMENTS}, "seed": seed}
        saved_as = samples_name(arguments, likelihood) if self.store is not None else None
        again = {k: v for k, v in arguments.items() if k != "init"}  # from a new round's proposal
        stored = None if saved_as is None else load_samples(
            self.store, saved_as, likelihood.smoothing.draws if likelihood.smoothing is not None else 1)
        if stored is not None:  # checked as when it was drawn: a remedy resumes from the store too
            return checked(self, stored, lambda: self.sample(**again, check=False), remedy=remedy) if check else stored
        if init_u is not None:
            start_sampler = DrawsSampler(self.space.to_constrained(init_u))
        else:
            start_sampler = self.proposal_ if init == "proposal" else PriorSampler(self.prior)
        names = self.parameter_names or [f"theta{k}" for k in range(self.space.dim)]
        with self.ledger_.stage("sampling"):
            u_draws, info = run_chains(likelihood, start_sampler, num_samples, chains, settings, init_u=init_u,
                                       seed=seed, progress=self.progress, names=names)
        theta = self.space.to_constrained(u_draws.reshape(-1, u_draws.shape[-1])).reshape(u_draws.shape)
        meta = {"method": "score-langevin", "mode": self.mode, "simulations": sum(self.simulations_.values()),
                "simulations_by_stage": dict(self.simulations_), "dropped_by_stage": {k: dict(v) for k, v in self.ledger_.dropped.items()}, **info,
                "curvature_penalty": self.fit_report_.penalty,
                "mean_penalty": getattr(self, "mean_report_", None) and self.mean_report_.penalty}
        posterior = Posterior(theta, names, info=meta)
        if saved_as is not None:
            save_samples(self.store, saved_as, posterior)
        if not check:
            return posterior
        return checked(self, posterior, lambda: self.sample(**again, check=False), remedy=remedy)

    def check(self, posterior: Posterior, *, num_data_sets: int | None = None, remedies: Sequence[str] = (),
              announce: bool = True) -> FitCheck:
        """The fit's verdict on ``posterior`` ([`scorebayes.sbi.checks.verdict.check_fit()`][scorebayes.sbi.checks.verdict.check_fit]): stored in
        ``posterior.info["check"]``; with ``announce``, printed as one line (with ``progress``) and a
        warning when it fails. ``remedies``: what was done before it."""
        with self.ledger_.stage("check"):
            result = check_fit(self, posterior, num_data_sets=num_data_sets or self.plan_.check,
                               remedies=list(remedies))
        posterior.info["check"] = result.to_dict()
        posterior.info["simulations"] = sum(self.simulations_.values())
        posterior.info["simulations_by_stage"] = dict(self.simulations_)
        posterior.info["dropped_by_stage"] = {k: dict(v) for k, v in self.ledger_.dropped.items()}
        if announce:
            announce_check(self, result)
        return result


#: the arguments of ScoreLangevin.sample that name its samples in a run store
_SAMPLE_ARGUMENTS = tuple(p for p in inspect.signature(ScoreLangevin.sample).parameters
                          if p not in ("self", "check", "remedy"))
