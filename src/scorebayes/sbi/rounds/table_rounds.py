r"""The estimator's rounds: the localized proposal, the first table round, and later rounds.

Each round draws tables ([`TableSource`][scorebayes.sbi.reference_tables.TableSource]), trains the
networks on them and sets the estimator's ``likelihood_``
([`LearnedLikelihoodScore`][scorebayes.sbi.likelihood.LearnedLikelihoodScore]).

- [`first_round()`][scorebayes.sbi.rounds.table_rounds.first_round]: the tables from $q$ (or the prior), then score matching: in single
  mode on $\mathcal D^S$ with the curvature penalty on $\mathcal D^R$ and the
  debiasing network (Algorithm 3); otherwise on whole data sets (Algorithm 2).
- [`refine_proposal()`][scorebayes.sbi.rounds.table_rounds.refine_proposal] (modes n, full, markov): a round around a posterior; the pooled table
  is a sample of the rounds' mixture $p(u) = \sum_r (N_r/N)\,q_r(u)$, whose score replaces
  $\nabla\log q$ in the loss.
- [`move_tables()`][scorebayes.sbi.rounds.table_rounds.move_tables] (single mode): the tables redrawn from a Gaussian around the posterior and
  both networks retrained (a trust-region round, [`scorebayes.sbi.rounds.trust_region.trust_region_fit()`][scorebayes.sbi.rounds.trust_region.trust_region_fit]).
- [`refine_debiasing()`][scorebayes.sbi.rounds.table_rounds.refine_debiasing], [`refit_debiasing()`][scorebayes.sbi.rounds.table_rounds.refit_debiasing] (single mode): local corrections of
  $h_\psi$ ([`scorebayes.sbi.debias`][scorebayes.sbi.debias]).

The rounds are beyond the paper: the implicit score-matching loss is most accurate where the
table is dense, and the debiasing must be accurate to $\operatorname{sd}(s)/\sqrt n$ where
the posterior lives, so a table concentrated around the posterior buys accuracy at the same cost.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ...parallel import derive_seed, make_generator
from ...posterior import Posterior
from ...proposal import GaussianProposal, MixtureProposal, PriorSampler
from ...scores.networks import CrossFitMean
from ...scores.training import checkpointing, fit_score_network
from ..antithetic import antithetic_pairs
from ..debias import add_kernel_correction, add_local_correction, fit_debiasing, local_region
from ..fitted import FittedEstimator
from ..likelihood import LearnedLikelihoodScore
from ..localization import minimum_distance

__all__ = ["localized_proposal", "first_round", "refine_proposal", "move_tables", "refine_debiasing",
           "refit_debiasing"]


def localized_proposal(est: FittedEstimator, x_obs: Tensor) -> Any:
    """The tables' proposal: $q$ from the localization (saved in and resumed from the run
    store), its SDs inflated, or the prior without localization. Sets ``localization_``."""
    settings, store = est.localization, est.store
    est.localization_ = None
    if not settings.enabled:
        return PriorSampler(est.prior)
    if store is not None and store.is_done("localization"):
        saved = store.load_checkpoint("localization")
        est.simulations_["localization"] = float(saved["simulations"])
        est.faults_["resumed"] += float(saved["simulations"])
        return GaussianProposal(est.space, saved["mean"], saved["sd"] * settings.inflation)
    planned = dict(est.plan_.localization)
    if "iterations" in settings.options and "max_evaluations" not in settings.options:
        planned.pop("max_evaluations")  # localize's own default for an explicit iteration count
    faults = {"on_simulator_error": est.simulation.on_simulator_error, "retries": est.simulation.retries}
    options = {"progress": est.progress, "seed": est.seed, **faults, **planned, **settings.options}
    if settings.in_support:
        options["support"] = est.localization.support_fn(x_obs)
    est.localization_ = minimum_distance.localize(est.simulator, x_obs, est.prior, **options)
    est.faults_["failed"] += est.localization_.failed
    est.faults_["nonfinite"] += est.localization_.nonfinite
    q = est.localization_.proposal
    est.simulations_["localization"] = float(est.localization_.simulations)
    if store is not None:
        store.save_checkpoint("localization", {"mean": q.mean, "sd": q.sd,
                                               "simulations": float(est.localization_.simulations)})
        store.mark_done("localization")
    return GaussianProposal(est.space, q.mean, q.sd * settings.inflation)


def _paired(est: FittedEstimator) -> bool:
    return est.antithetic and isinstance(est.proposal_, GaussianProposal)


def _pairs(est: FittedEstimator, u: Tensor) -> Tensor | None:
    """Antithetic pairs of a table drawn with ``paired=True`` (``None`` otherwise)."""
    return antithetic_pairs(u, est.proposal_.mean) if _paired(est) else None


def _training_region(u: Tensor) -> tuple[Tensor, Tensor]:
    """The box of ``u [N, d]`` a network was trained on, widened by 10%."""
    low, high = u.min(0).values, u.max(0).values
    pad = 0.1 * (high - low)
    return low - pad, high + pad


def _new_networks(est: FittedEstimator, p_net: int, *keys: Any) -> tuple[Any, CrossFitMean]:
    """A fresh score network and debiasing network, initialised from the run seed and ``keys``."""
    members = 2 if est.training.cross_fit else 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(est.seed, "init", *keys))
        score_net = est.networks.score_network(est.space, p_net).to(est.device)
        mean_net = est.networks.mean_network(est.space, members).to(est.device)
    return score_net, mean_net


def _likelihood(est: FittedEstimator, x_obs: Tensor, score_net: Any, mean_net: Any,
                region: tuple[Tensor, Tensor]) -> LearnedLikelihoodScore:
    return LearnedLikelihoodScore(est.space, est.view, score_net, mean_net, x_obs, training_region=region,
                                  support_fn=est.localization.support_fn, smoothing=est.smoothing, device=est.device)


def first_round(est: FittedEstimator, x_obs: Tensor) -> None:
    """Round 0: tables from ``est.proposal_`` and the networks trained on them."""
    gen = make_generator(est.seed, "training")
    p_net = est.view.observed(x_obs).shape[-1]
    score_net, mean_net = _new_networks(est, p_net)
    if est.view.single_observations:
        est.table_rounds_ = [{"proposal": est.proposal_}]
        _fit_single_model(est, x_obs, score_net, mean_net, gen, "")
    else:
        with est.ledger_.stage("table_N"):
            u_t, x_t, cost = est.source_.draw(est.proposal_, est.plan_.num_data_sets, len(x_obs), "N",
                                              paired=_paired(est))
            est.simulations_["table_N"] = cost
        est.rounds_ = [{"proposal": est.proposal_, "u": u_t, "x": x_t}]
        _fit_data_set_score(est, x_obs, score_net, est.proposal_, u_t, x_t, _pairs(est, u_t), gen)


def _fit_single_model(est: FittedEstimator, x_obs: Tensor, score_net: Any, mean_net: CrossFitMean,
                      gen: torch.Generator, suffix: str) -> None:
    r"""Tables $\mathcal D^S, \mathcal D^R$ from ``est.proposal_`` (tags ``S<suffix>``,
    ``R<suffix>``), then the score network and the debiasing network on them."""
    plan = est.plan_
    with est.ledger_.stage(f"table_S{suffix}"):
        u_s, x_s, cost_s = est.source_.draw(est.proposal_, plan.single_rows, 1, f"S{suffix}", paired=_paired(est))
        est.simulations_[f"table_S{suffix}"] = cost_s
    with est.ledger_.stage(f"table_R{suffix}"):
        u_r, x_r, cost_r = est.source_.draw(est.proposal_, plan.num_groups, plan.group_size, f"R{suffix}")
        est.simulations_[f"table_R{suffix}"] = cost_r
    x_s, x_r = est.view.table(x_s), est.view.table(x_r)  # any data_features appended
    training = est.training
    with est.ledger_.stage("score net"):
        est.fit_report_ = fit_score_network(
            score_net, u_s.float(), x_s, est.proposal_.grad_log_prob_unconstrained(u_s).float(),
            schedule=est.schedule, penalties=training.curvature_penalties, curvature_theta=u_r.float(),
            curvature_x=x_r, pairs=_pairs(est, u_s), generator=gen, progress=est.progress, desc="score net")
    est.likelihood_ = _likelihood(est, x_obs, score_net, None, _training_region(u_s))
    if est.debias == "none":
        return
    with est.ledger_.stage("mean net"):
        fit = fit_debiasing(score_net, mean_net, (u_s, x_s, u_r, x_r), debias=est.debias, schedule=est.schedule,
                            mean_schedule=est.mean_schedule, mean_penalties=training.mean_penalties,
                            score_penalty=est.fit_report_.penalty, proposal=est.proposal_, generator=gen,
                            progress=est.progress, device=est.device)
    est.mean_reports_, est.mean_report_, est.debias_groups_ = fit.reports, fit.reports[0], fit.groups
    est.likelihood_.mean_net = mean_net


def _fit_data_set_score(est: FittedEstimator, x_obs: Tensor, score_net: Any, density: Any, u_t: Tensor,
                        x_t: Tensor, pairs: Tensor | None, gen: torch.Generator) -> None:
    """Score matching on a table of whole data sets (modes n, full, markov) drawn from ``density``."""
    weight_fn = None
    if est.training.weight_fn is not None:
        user_weight, space = est.training.weight_fn, est.space

        def weight_fn(u: Tensor, x: Tensor) -> Tensor:  # g evaluated at theta = T(u)
            return user_weight(space.to_constrained(u.double()).to(u.dtype), x)

    penalties = est.training.curvature_penalties if est.view.curvature_penalty else (0.0,)
    with est.ledger_.stage("score net"):
        est.fit_report_ = fit_score_network(
            score_net, u_t.float(), est.view.table(x_t), density.grad_log_prob_unconstrained(u_t).float(),
            schedule=est.schedule, penalties=penalties, weight_fn=weight_fn, pairs=pairs, generator=gen,
            progress=est.progress, desc="score net")
    est.likelihood_ = _likelihood(est, x_obs, score_net, None, _training_region(u_t))


def refine_proposal(est: FittedEstimator, posterior: Posterior, *, num_simulations: int | None = None,
                    inflation: float | Tensor = 1.0) -> None:
    r"""Add a table round around ``posterior`` and retrain on every round's table (modes ``"n"``,
    ``"full"``, ``"markov"``).

    Round $k+1$ draws ``num_simulations`` parameters (default: the first round's size) from
    $q_{k+1} = \mathcal N(\bar u, \operatorname{diag}(c\,s_u)^2)$, the mean and ``inflation``
    $c$ x SD of the posterior draws in ``u`` (``inflation``: a number or one per parameter, ``[d]``), and trains a fresh score network on the pooled
    table of all rounds. Use it when the localization's $q$ misses part of the posterior
    (a weakly identified parameter whose replicates drift to the prior's edge). Cost:
    ``simulations_["table_N<k>"]``.
    """
    likelihood = est.likelihood_
    if est.view.single_observations:
        raise ValueError("refine_proposal needs mode 'n', 'full' or 'markov'; for the "
                         "single-model use refine_debiasing")
    if not (torch.as_tensor(inflation, dtype=torch.float64) > 0).all():
        raise ValueError(f"inflation must be > 0, got {inflation}")
    u = est.posterior_u(posterior)
    if not (u.std(0) > 0).all():  # also false (NaN) for fewer than 2 finite draws
        raise ValueError("the posterior's draws do not spread in every coordinate (fewer than 2 "
                         "distinct finite draws?): cannot fit a proposal to them")
    k = len(est.rounds_)
    num = num_simulations or len(est.rounds_[0]["u"])
    if num < 2:
        raise ValueError(f"num_simulations must be >= 2, got {num}")
    q = GaussianProposal(est.space, u.mean(0), inflation * u.std(0))
    x_obs = likelihood.x_obs
    with checkpointing(est.store, f"round{k}"):
        u_k, x_k, cost = est.source_.draw(q, num, len(x_obs), f"N{k}")
        est.simulations_[f"table_N{k}"] = cost
        est.rounds_.append({"proposal": q, "u": u_k, "x": x_k})
        u_t = torch.cat([r["u"] for r in est.rounds_])
        x_t = torch.cat([r["x"] for r in est.rounds_])
        est.proposal_ = MixtureProposal([r["proposal"] for r in est.rounds_], [len(r["u"]) for r in est.rounds_])
        score_net = _new_score_net(est, likelihood.observed_view(x_obs).shape[-1], "round", k)
        _fit_data_set_score(est, x_obs, score_net, est.proposal_, u_t, x_t, None,
                            make_generator(est.seed, "training", "round", k))


def _new_score_net(est: FittedEstimator, p_net: int, *keys: Any) -> Any:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(est.seed, "init", *keys))
        return est.networks.score_network(est.space, p_net).to(est.device)


def move_tables(est: FittedEstimator, center: Tensor, sd: Tensor) -> None:
    r"""Redraw the single mode's tables from $q = \mathcal N(c, \operatorname{diag} s^2)$ in
    ``u`` (``center`` $c$ and ``sd`` $s$, ``[d]``) and retrain both networks from a fresh
    start. Round $k$ records ``simulations_["table_S<k>"]``, ``["table_R<k>"]`` and appends to
    ``table_rounds_``; local debiasing corrections of earlier rounds are dropped. The chains are then
    confined to the new table's region, so it must contain the posterior."""
    likelihood = est.likelihood_
    if not est.view.single_observations:
        raise ValueError("move_tables needs mode='single'; for the other modes use refine_proposal")
    center = torch.as_tensor(center, dtype=torch.float64).reshape(-1)
    sd = torch.as_tensor(sd, dtype=torch.float64).reshape(-1)
    if center.numel() != est.space.dim or sd.numel() != est.space.dim:
        raise ValueError(f"center and sd must have {est.space.dim} entries, got "
                         f"{center.numel()} and {sd.numel()}")
    if not torch.isfinite(center).all() or not (torch.isfinite(sd) & (sd > 0)).all():
        raise ValueError("center must be finite and sd finite and positive")
    k = len(est.table_rounds_)
    est.proposal_ = GaussianProposal(est.space, center, sd)
    est.table_rounds_.append({"proposal": est.proposal_})
    x_obs = likelihood.x_obs
    score_net = _new_score_net(est, likelihood.observed_view(x_obs).shape[-1], "round", k)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(est.seed, "init", "mean", k))
        mean_net = est.networks.mean_network(est.space, 2 if est.training.cross_fit else 1).to(est.device)
    with checkpointing(est.store, f"round{k}"):
        _fit_single_model(est, x_obs, score_net, mean_net, make_generator(est.seed, "training", "round", k),
                          str(k))


def refine_debiasing(est: FittedEstimator, posterior: Posterior | None = None, *, num_groups: int | None = None,
                     group_size: int | None = None, inflation: float = 2.0) -> None:
    r"""Refine the debiasing network around ``posterior`` (single mode).

    Draws ``num_groups`` parameters from $\mathcal N(c, \mathrm{diag}(r^2))$ in ``u``
    ([`local_region()`][scorebayes.sbi.debias.local_region]), simulates ``group_size`` observations for each,
    and adds the linear fit of the residual group means to $h_\psi$. Later chains stay within
    the correction's centre +- 4 spreads. ``posterior=None`` refines over the localized proposal
    $q$. Cost: ``simulations_["refine<k>"]``.
    """
    likelihood = est.likelihood_
    if not est.view.single_observations or likelihood.mean_net is None:
        raise ValueError("refine_debiasing needs mode='single' with debiasing (debias != 'none')")
    if inflation <= 0:
        raise ValueError(f"inflation must be > 0, got {inflation}")
    if posterior is None:
        if not isinstance(est.proposal_, GaussianProposal):
            raise ValueError("refine_debiasing(None) needs a localized proposal (localize=True)")
        center, spread = est.proposal_.mean.double(), est.proposal_.sd.double()
    else:
        center, spread = local_region(est.posterior_u(posterior), inflation=inflation,
                                      edge_fraction=posterior.info.get("edge_fraction", 0.0),
                                      region=likelihood.sampling_region())
    k = len(likelihood.refinements)
    m = group_size or est.plan_.group_size
    u_r, x_r, cost = est.source_.draw(GaussianProposal(est.space, center, spread), num_groups or est.plan_.num_groups,
                                      m, f"refine{k}")
    add_local_correction(likelihood, u_r, est.view.table(x_r), center, spread, m)
    est.simulations_[f"refine{k}"] = cost


def refit_debiasing(est: FittedEstimator, posterior: Posterior, *, bandwidth: float = 5.0) -> None:
    r"""Correct the debiasing network near ``posterior`` with the groups of $\mathcal D^R$
    already simulated (single mode; no new simulations;
    [`add_kernel_correction()`][scorebayes.sbi.debias.add_kernel_correction]). Needs an elementwise transform."""
    likelihood = est.likelihood_
    if not est.view.single_observations or likelihood.mean_net is None or not hasattr(est, "debias_groups_"):
        raise ValueError("refit_debiasing needs mode='single' with debiasing (debias != 'none')")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
    if not est.space.is_elementwise():
        raise ValueError("refit_debiasing needs an elementwise parameter transform")
    theta_post = est.space.to_constrained(est.posterior_u(posterior))
    add_kernel_correction(likelihood, est.debias_groups_, theta_post, bandwidth)
