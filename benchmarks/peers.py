r"""scorebayes against sbi's NPE, NLE and NPSE on the exact-posterior suite (``scorebayes bench peers``).

Protocol. For every model of :mod:`scorebayes.models.suite` (a prior, a batched simulator
``theta [B, d] -> x [B, n, p]``, ``n`` i.i.d. observations, exact posterior moments) and every
repetition ``rep`` (the observed data set ``model.observed`` seeded with ``rep``, at the true
parameters), each method gets the same simulation budget of ``B`` data sets of size ``n`` and
returns posterior draws (2,000). By default ``B`` is, per model, what scorebayes' default fit
plans for that ``n`` (``ScoreLangevin(...).fit`` with ``num_simulations=None``: localization,
the tables, the calibration's 4 rounds and the reserve for a second table round;
``scorebayes.sbi.budget.plan_fit(...).planned()`` rounded up, computed without fitting, see
``planned_budget``): 7,040 to 8,800 data sets on the suite, printed as the tables' header.
``--budget B`` gives every model and method ``B`` instead (a ``B`` below the floors of
scorebayes' plan, 1,260 at ``n = 100`` with the calibration, makes its row an error). Each row
records ``budget`` (the ``B`` it was given) and ``simulations`` (what it spent):

``scorebayes``
    ``ScoreLangevin(prior, simulator, seed=rep).fit(x_obs).sample(2000)``: the defaults,
    ``tables=Tables()`` without ``--budget`` (the default plan, whose total is the budget),
    ``Tables(num_simulations=B)`` with it; ``verdict`` is the fit's check (pass / warn / fail),
    ``simulations`` what it spent (``info["simulations"]``: less than the budget when the
    calibration stops early or the reserve is not needed), ``plan`` the fit's plan.
``npe``
    ``sbi.inference.NPE`` (NPE-C, sbi's default MAF, z-scoring, training and early stopping)
    on ``(theta_i, summary_fn(x_i))`` for ``B`` data sets with ``theta_i`` drawn from the prior;
    ``DirectPosterior.sample((2000,), x=summary_fn(x_obs))`` (draws outside the prior's support
    rejected, sbi's default). NPE is the only method given more than the raw data: the model's
    summaries (sufficient statistics where the model has them).
``npe-embedding``
    What an sbi user without summaries does: ``sbi.inference.NPE`` with
    ``density_estimator=posterior_nn(model="maf", embedding_net=net)`` (sbi's default MAF and
    z-scoring, on the embedding's output) trained with sbi's defaults on the ``B`` whole data
    sets ``x [B, n, p]`` (``theta_i`` from the prior), sampled as ``npe`` at ``x_obs [1, n, p]``
    (a batch of one data set; sbi takes ``[batch, *event_shape]``). ``net`` is built as in sbi's
    tutorial "SBI with iid data and permutation-invariant embeddings" (advanced tutorial 12,
    the sbi 0.27 docs): a per-trial ``FCEmbedding(input_dim=p, num_hiddens=40, num_layers=2,
    output_dim=10)`` inside ``PermutationInvariantEmbedding(trial_net,
    trial_net_output_dim=10, num_layers=1, num_hiddens=10, output_dim=10)``, whose aggregation
    is sbi's default, the sum over the ``n`` trials, followed by the pooled net on (sum, ``n``).
    The sizes are the tutorial's, taken as they are for every model (``num_layers=1`` builds
    sbi's minimum of two linear layers). The tutorial pads data sets of varying size with NaNs
    and therefore switches z-scoring off and uses an MDN; here every data set has the same
    ``n``, so sbi's defaults (MAF, ``z_score_x="independent"``, i.e. per position of ``[n, p]``,
    equal up to about ``1/sqrt(B)`` over the positions) are kept. Memory: the float64
    simulations, then ``x`` in float32 and sbi's z-scoring copy of its training part, at most
    0.6 GB at ``B n p = 7,040 x 1,000 x 5`` (``linear_regression5``); the per-trial net sees
    ``200 n`` rows per training batch (sbi's batch of 200 data sets). The time guard below applies to
    simulation + training + sampling together.
``nle``
    ``sbi.inference.NLE`` (NLE-A, sbi's default MAF and training) on single observations
    ``(theta_i, x_i)``, ``theta_i`` from the prior, one observation each: the budget's ``B n``
    rows, capped at ``--max-rows`` (default 200,000; the cap is recorded as
    ``training_rows``/``budget_rows``/``capped``, and ``simulations`` counts what was simulated,
    in data sets of size ``n``). ``MCMCPosterior.sample((2000,), x=x_obs)`` with ``x_obs [n, p]``
    the ``n`` i.i.d. trials (the likelihood is summed over them) and sbi's default MCMC:
    ``slice_np_vectorized``, 20 chains, 200 warm-up steps, ``resample`` initialisation,
    in the unconstrained space of the prior's support (``mcmc_transform``). ``resample``
    starts each chain at one of 10,000 prior draws weighted by the potential, i.e. 10,000 x n
    flow evaluations per chain: with 20 chains it can dominate the wall time (about 40 s per
    chain at n = 100 on one contended core). ``--nle-init proposal`` (chains start at prior
    draws) is the one alternative offered, applied to every model alike; the row records it
    (``nle_init``).
``npse-<iid method>``
    ``sbi.inference.NPSE`` (sbi's default ``mlp`` score network, ``ve`` SDE, training and early
    stopping) trained once on the same single-observation rows as NLE; then, for each of sbi's
    i.i.d. composition methods (``iid_method`` of ``VectorFieldPosterior.sample``: ``fnpe``,
    ``gauss``, ``auto_gauss``, ``jac_gauss``), ``sample((2000,), x=x_obs, iid_method=...)`` with
    sbi's default sampler (Euler-Maruyama SDE, 500 steps, draws outside the support rejected).
    Each composition is its own row; ``seconds`` is the shared simulation + training plus that
    row's sampling (both also apart: ``seconds_training``, ``seconds_sampling``). Not in the
    default ``--methods``: its training did not finish within 600 s in earlier runs.

Guards, the same for every method: a method, the NPSE training and each NPSE composition get
at most ``--timeout`` seconds (default 7,200) and the process at most ``--max-memory-gb`` of
address space (default 12); past either the method's row records the error (``MethodTimeout``,
a MemoryError or torch's "can't allocate memory") and the run goes on. Both were needed in the
smoke tests: ``auto_gauss`` estimates its precisions from per-observation posteriors drawn by
rejection to the prior's support without a time limit, which with a poor network ran past 20
GB; ``jac_gauss`` takes Jacobians over (draws x n observations) at once.

No sbi setting is tuned per model (fairness): every sbi call uses the package's defaults, the
only inputs being the prior, the simulations, for NPE the summaries and for ``npe-embedding``
the tutorial's embedding net. The prior goes to sbi
in float32 as the prior an sbi user would write: ``Independent(Family(params [d]), 1)`` when all
marginals are of one family (a ``BoxUniform`` for boxes; sbi's i.i.d. score corrections then
denoise it analytically), else sbi's ``MultipleIndependent``; both through ``process_prior``.
With one-dimensional data (``p = 1``) or one parameter sbi's MAF is a conditional Gaussian (sbi
warns: "In one-dimensional output space, this flow is limited to Gaussians"); that is sbi's
default and is kept (the warning is recorded in the row's ``warnings``).

Per (model, method, rep) row: ``seconds`` (wall, simulation + training + sampling),
``mean_error`` (max over the parameters of |mean - exact mean| / exact SD), ``sd_ratio`` (SD /
exact SD, min and max over the parameters), ``covered`` (the truth inside every 95% interval;
the coverage is its share over the repetitions), ``passed`` (``check_posterior``: mean within
0.3 SD and SD within 25% for every parameter), ``verdict`` (scorebayes' own check; ``null`` for
sbi), ``budget`` and ``simulations`` (in data sets of size ``n``), and ``error`` when the method
raised (the run goes on). ``summary`` holds per (model, method) the repetitions, passes,
coverage, errors and the median seconds; ``budgets`` per model ``n`` and the budget(s) of its
rows.

``--merge`` keeps the rows already in ``--out`` and replaces those of the same (model, method,
rep) with this run's, so methods can run in separate jobs; the summary, the budgets and the
printed tables are recomputed over the merged rows, and the earlier files' settings are kept
as ``earlier_settings``.

Run from the repository root (``OMP_NUM_THREADS=1`` and ``--threads 1`` for comparable timings):

    scorebayes bench peers [--models gaussian_mean,gandk] [--methods scorebayes,npe,nle]
        [--reps 3] [--first-rep 0] [--budget B] [--max-rows 200000]
        [--nle-init resample|proposal] [--timeout 7200] [--max-memory-gb 12] [--threads 1]
        [--quick] [--out benchmarks/results/peers.json] [--merge]

``--methods`` (default ``scorebayes,npe,npe-embedding,nle``) takes ``scorebayes``, ``npe``,
``npe-embedding``, ``nle``, ``npse`` (every composition) or ``npse-<iid method>``. ``--quick``
is for smoke tests only: the same budgets, at most 20,000 single-observation rows (unless
given), two epochs of training (scorebayes: two epochs per phase), 200 draws, 4 short NLE
chains started at prior draws, 20-step SDEs. It prints markdown tables (the budgets, the rows,
the summary) and writes ``benchmarks/results/peers.json`` (``--out`` elsewhere). The sbi side's
helpers (the prior and simulations as sbi takes them, seeds, the guards) are in
``_peers_common.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _peers_common import (
    MethodTimeout,
    NoTracker,
    as_posterior,
    epochs_trained,
    error_text,
    limit_memory,
    method_seed,
    sbi_prior,
    seed_everything,
    simulate_data_sets,
    simulate_single_rows,
    time_limit,
    unique_warnings,
)
from _suite_common import accuracy, model_names, observed, write_json
from torch import Tensor

from scorebayes.models.base import Model
from scorebayes.models.suite import SUITE
from scorebayes.posterior import Posterior

IID_METHODS = ("fnpe", "gauss", "auto_gauss", "jac_gauss")
METHODS = ("scorebayes", "npe", "npe-embedding", "nle", *(f"npse-{m}" for m in IID_METHODS))
DEFAULT_METHODS = ("scorebayes", "npe", "npe-embedding", "nle")
#: the row labels of the markdown tables
LABELS = {"scorebayes": "scorebayes (defaults)", "npe": "sbi NPE (model's summaries)",
          "npe-embedding": "sbi NPE, permutation-invariant embedding (raw data)",
          "nle": "sbi NLE (i.i.d. observations)",
          **{f"npse-{m}": f"sbi NPSE, {m} composition" for m in IID_METHODS}}
#: the embedding net of sbi's i.i.d. tutorial: the per-trial ``FCEmbedding`` (besides
#: ``input_dim=p``) and the ``PermutationInvariantEmbedding`` around it (see the module docstring)
TRIAL_NET = {"num_hiddens": 40, "num_layers": 2, "output_dim": 10}
POOLED_NET = {"num_layers": 1, "num_hiddens": 10, "output_dim": 10}


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every method gets: the budget, the draws, the row cap and the smoke-test switch.

    ``budget`` ``None`` (the default): per model, what scorebayes' default fit plans
    (:func:`planned_budget`); :meth:`budget_for` gives a model's.
    """

    budget: int | None = None
    num_samples: int = 2000
    max_rows: int | None = 200_000
    quick: bool = False
    threads: int | None = None
    nle_init: str = "resample"
    timeout: float | None = 7200.0

    def budget_for(self, model: Model) -> int:
        """The data sets of size ``n`` every method gets for ``model``."""
        return self.budget if self.budget is not None else planned_budget(model.name)

    def sbi_train(self) -> dict[str, Any]:
        """Keyword arguments of sbi's ``train``: none (its defaults), two epochs if quick."""
        return {"max_num_epochs": 2} if self.quick else {}

    def nle_sample(self) -> dict[str, Any]:
        """Keyword arguments of ``MCMCPosterior.sample``: sbi's defaults but the chains'
        initialisation ``nle_init`` (sbi's default ``resample``); short chains if quick."""
        quick = {"warmup_steps": 10, "num_chains": 4} if self.quick else {}
        return {"init_strategy": self.nle_init, **quick}

    def npse_sample(self) -> dict[str, Any]:
        """Keyword arguments of ``VectorFieldPosterior.sample``: defaults, 20 steps if quick."""
        return {"steps": 20} if self.quick else {}


@dataclasses.dataclass
class Result:
    """One method's output for one (model, rep): draws and what they cost."""

    method: str
    posterior: Posterior
    seconds: float
    simulations: float
    verdict: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


# --- the budget -------------------------------------------------------------------------------

@functools.cache
def planned_budget(name: str) -> int:
    """Data sets of size ``n`` that scorebayes' default fit plans for the suite model ``name``
    (``plan_fit`` as ``ScoreLangevin.fit`` calls it, with ``num_simulations=None``: localization,
    tables, calibration rounds and reserve), rounded up; nothing is simulated or fitted."""
    from scorebayes.sbi import ScoreLangevin
    from scorebayes.sbi.budget import plan_fit

    model = SUITE[name]()
    est = ScoreLangevin(model.prior, model.simulator, parameter_names=model.parameter_names,
                        progress=False)
    plan = plan_fit(est.tables, est.localization, model.n_obs,
                    single=est.view.single_observations, calibrate=est.calibrates)
    return math.ceil(plan.planned() - 1e-9)


def single_row_budget(model: Model, settings: Settings) -> dict[str, Any]:
    """The single-observation rows of the budget (``B n``), the cap and the rows trained on."""
    budget_rows = settings.budget_for(model) * model.n_obs
    rows = budget_rows if not settings.max_rows else min(budget_rows, settings.max_rows)
    return {"budget_rows": budget_rows, "training_rows": rows, "capped": rows < budget_rows}


# --- the methods -------------------------------------------------------------------------------

def scorebayes_estimator(model: Model, rep: int, settings: Settings) -> Any:
    """The ``ScoreLangevin`` of the scorebayes row: the defaults, ``Tables()`` without a budget
    (the default plan) or ``Tables(num_simulations=budget)``; two epochs per phase if quick."""
    from scorebayes.sbi import ScoreLangevin, Tables, Training
    from scorebayes.sbi.settings import default_schedule

    training = None
    if settings.quick:
        tiny = {"epochs": 2, "penalty_epochs": 1, "patience": 1}
        training = Training(schedule=dataclasses.replace(default_schedule(True), **tiny),
                            mean_schedule=dataclasses.replace(default_schedule(True, mean=True), **tiny),
                            curvature_penalties=(0.0,))
    tables = Tables() if settings.budget is None else Tables(num_simulations=settings.budget)
    return ScoreLangevin(model.prior, model.simulator, tables=tables, training=training,
                         parameter_names=model.parameter_names, seed=rep, threads=settings.threads,
                         progress=False)


def run_scorebayes(model: Model, x_obs: Tensor, rep: int, settings: Settings) -> list[Result]:
    """scorebayes' defaults: the default plan, or ``num_simulations`` the whole ``--budget``."""
    start = time.perf_counter()
    est = scorebayes_estimator(model, rep, settings)
    posterior = est.fit(x_obs).sample(settings.num_samples)
    seconds = time.perf_counter() - start
    check = posterior.info["check"]
    return [Result("scorebayes", posterior, seconds, float(posterior.info["simulations"]),
                   verdict=check["verdict"],
                   extra={"reasons": check["reasons"], "remedies": check["remedies"],
                          "plan": est.plan_.describe(),
                          "stages": [{k: (round(v, 2) if isinstance(v, float) else v)
                                      for k, v in r.items()} for r in est.ledger_.records]})]


def run_npe(model: Model, x_obs: Tensor, rep: int, settings: Settings) -> list[Result]:
    """sbi's NPE (defaults) on the model's summaries of ``B`` data sets of size ``n``."""
    from sbi.inference import NPE

    start = time.perf_counter()
    generator = seed_everything(method_seed(model.name, "npe", rep))
    budget = settings.budget_for(model)
    theta, x = simulate_data_sets(model, budget, generator)
    summaries = model.summary_fn(x).to(torch.float32)
    inference = NPE(prior=sbi_prior(model.prior), show_progress_bars=False, tracker=NoTracker())
    inference.append_simulations(theta.to(torch.float32), summaries).train(**settings.sbi_train())
    posterior = inference.build_posterior()
    s_obs = model.summary_fn(x_obs[None]).to(torch.float32)
    draws = posterior.sample((settings.num_samples,), x=s_obs, show_progress_bars=False)
    return [Result("npe", as_posterior(draws, model, "npe"), time.perf_counter() - start,
                   float(budget),
                   extra={"summary_dim": int(summaries.shape[1]), "epochs": epochs_trained(inference)})]


def permutation_invariant_net(p: int) -> torch.nn.Module:
    """sbi's tutorial embedding for i.i.d. trials of ``p`` columns: ``x [B, n, p] -> [B, 10]``."""
    from sbi.neural_nets.embedding_nets import FCEmbedding, PermutationInvariantEmbedding

    trial_net = FCEmbedding(input_dim=p, **TRIAL_NET)
    return PermutationInvariantEmbedding(trial_net, trial_net_output_dim=TRIAL_NET["output_dim"],
                                         **POOLED_NET)


def run_npe_embedding(model: Model, x_obs: Tensor, rep: int, settings: Settings) -> list[Result]:
    """sbi's NPE (default MAF and training) with a permutation-invariant embedding of the raw
    data sets ``x [B, n, p]``; sampled at ``x_obs [1, n, p]``."""
    from sbi.inference import NPE
    from sbi.neural_nets import posterior_nn

    start = time.perf_counter()
    generator = seed_everything(method_seed(model.name, "npe-embedding", rep))
    budget = settings.budget_for(model)
    theta, x = simulate_data_sets(model, budget, generator)
    x = x.to(torch.float32)  # the float64 simulations freed before sbi copies them
    estimator = posterior_nn(model="maf", embedding_net=permutation_invariant_net(x.shape[-1]))
    inference = NPE(prior=sbi_prior(model.prior), density_estimator=estimator,
                    show_progress_bars=False, tracker=NoTracker())
    inference.append_simulations(theta.to(torch.float32), x).train(**settings.sbi_train())
    posterior = inference.build_posterior()
    draws = posterior.sample((settings.num_samples,), x=x_obs[None].to(torch.float32),
                             show_progress_bars=False)
    return [Result("npe-embedding", as_posterior(draws, model, "npe-embedding"),
                   time.perf_counter() - start, float(budget),
                   extra={"embedding": {"trial_net": TRIAL_NET, "pooled_net": POOLED_NET},
                          "epochs": epochs_trained(inference)})]


def run_nle(model: Model, x_obs: Tensor, rep: int, settings: Settings) -> list[Result]:
    """sbi's NLE (defaults) on single observations; MCMC over the ``n`` i.i.d. observations."""
    from sbi.inference import NLE

    start = time.perf_counter()
    generator = seed_everything(method_seed(model.name, "nle", rep))
    rows = single_row_budget(model, settings)
    theta, x = simulate_single_rows(model, rows["training_rows"], generator)
    inference = NLE(prior=sbi_prior(model.prior), show_progress_bars=False, tracker=NoTracker())
    inference.append_simulations(theta.to(torch.float32), x.to(torch.float32))
    inference.train(**settings.sbi_train())
    posterior = inference.build_posterior()
    draws = posterior.sample((settings.num_samples,), x=x_obs.to(torch.float32),
                             show_progress_bars=False, **settings.nle_sample())
    return [Result("nle", as_posterior(draws, model, "nle"), time.perf_counter() - start,
                   rows["training_rows"] / model.n_obs,
                   extra={**rows, "epochs": epochs_trained(inference), "nle_init": settings.nle_init})]


def run_npse(model: Model, x_obs: Tensor, rep: int, settings: Settings,
             iid_methods: tuple[str, ...] = IID_METHODS) -> list[Result | dict]:
    """sbi's NPSE (defaults) on single observations, once; one row per i.i.d. composition.

    A composition that raises is returned as an error dict (``method``, ``error``, ``seconds``)
    and the others still run.
    """
    from sbi.inference import NPSE

    start = time.perf_counter()
    generator = seed_everything(method_seed(model.name, "npse", rep))
    rows = single_row_budget(model, settings)
    theta, x = simulate_single_rows(model, rows["training_rows"], generator)
    inference = NPSE(prior=sbi_prior(model.prior), show_progress_bars=False, tracker=NoTracker())
    inference.append_simulations(theta.to(torch.float32), x.to(torch.float32))
    with time_limit(settings.timeout):
        inference.train(**settings.sbi_train())
    posterior = inference.build_posterior()
    training_seconds = time.perf_counter() - start
    extra = {**rows, "epochs": epochs_trained(inference), "seconds_training": round(training_seconds, 2)}
    results: list[Result | dict] = []
    for iid_method in iid_methods:
        method = f"npse-{iid_method}"
        begin = time.perf_counter()
        try:
            torch.manual_seed(method_seed(model.name, method, rep))
            with time_limit(settings.timeout):
                draws = posterior.sample((settings.num_samples,), x=x_obs.to(torch.float32),
                                         iid_method=iid_method, show_progress_bars=False,
                                         **settings.npse_sample())
        except (Exception, MethodTimeout) as err:  # noqa: BLE001 - recorded, the others go on
            results.append({"method": method, "error": error_text(err),
                            "seconds": round(training_seconds + time.perf_counter() - begin, 2),
                            **extra})
            continue
        sampling = time.perf_counter() - begin
        results.append(Result(method, as_posterior(draws, model, method), training_seconds + sampling,
                              rows["training_rows"] / model.n_obs,
                              extra={**extra, "seconds_sampling": round(sampling, 2)}))
    return results


# --- rows, errors and tables -------------------------------------------------------------------

def base_row(model: Model, method: str, rep: int, budget: int) -> dict[str, Any]:
    """The fields every row has, the metrics still empty."""
    return {"model": model.name, "method": method, "rep": rep, "d": model.dim, "n": model.n_obs,
            "seconds": None, "budget": budget, "simulations": None, "mean_error": None,
            "sd_ratio": None, "passed": None, "covered": None, "verdict": None, "error": None}


def result_row(model: Model, x_obs: Tensor, rep: int, budget: int, result: Result,
               caught: list[str]) -> dict:
    """A method's row: timing, cost and the posterior against the exact one."""
    row = base_row(model, result.method, rep, budget)
    row.update(seconds=round(result.seconds, 2), simulations=round(result.simulations, 1),
               **accuracy(model, x_obs, result.posterior), verdict=result.verdict)
    return {**row, **result.extra, "warnings": caught}


def error_row(model: Model, method: str, rep: int, budget: int, error: str, seconds: float,
              **extra: Any) -> dict:
    """A method that raised: its error message and the time until it did."""
    row = base_row(model, method, rep, budget)
    row.update(seconds=round(seconds, 2), error=error)
    return {**row, **extra}


RunFn = Callable[[Model, Tensor, int, Settings], list]


def run_method(name: str, fn: RunFn, model: Model, x_obs: Tensor, rep: int,
               settings: Settings, labels: list[str]) -> list[dict]:
    """Run one method (its rows ``labels``) within ``--timeout`` (NPSE: its training and each
    composition); an exception becomes error rows, never an abort."""
    start = time.perf_counter()
    limit = None if name == "npse" else settings.timeout
    budget = settings.budget_for(model)
    # sbi prints its convergence message to stdout: kept off the streamed markdown rows
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("always")
        try:
            with time_limit(limit):
                results = fn(model, x_obs, rep, settings)
        except (Exception, MethodTimeout) as err:  # noqa: BLE001 - recorded as its row(s)
            seconds = time.perf_counter() - start
            return [error_row(model, label, rep, budget, error_text(err), seconds,
                              warnings=unique_warnings(caught)) for label in labels]
    notes = unique_warnings(caught)
    rows = []
    for r in results:
        if isinstance(r, Result):
            rows.append(result_row(model, x_obs, rep, budget, r, notes))
        else:
            rows.append(error_row(model, r.pop("method"), rep, budget, r.pop("error"),
                                  r.pop("seconds"), **r, warnings=notes))
    return rows


def method_plan(methods: list[str]) -> list[tuple[str, RunFn, list[str]]]:
    """The runs for the chosen row labels: (name, function, its labels); NPSE trains once."""
    plan: list[tuple[str, RunFn, list[str]]] = []
    simple = {"scorebayes": run_scorebayes, "npe": run_npe, "npe-embedding": run_npe_embedding,
              "nle": run_nle}
    for name, fn in simple.items():
        if name in methods:
            plan.append((name, fn, [name]))
    iid = tuple(m.removeprefix("npse-") for m in methods if m.startswith("npse-"))
    if iid:
        def npse(model, x_obs, rep, settings, _iid=iid):
            return run_npse(model, x_obs, rep, settings, _iid)

        plan.append(("npse", npse, [f"npse-{m}" for m in iid]))
    return plan


def parse_methods(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """Row labels of ``--methods`` (``npse`` is every composition), in the canonical order."""
    chosen: set[str] = set()
    for token in (t for t in text.split(",") if t):
        expanded = [m for m in METHODS if m.startswith("npse-")] if token == "npse" else [token]
        unknown = [m for m in expanded if m not in METHODS]
        if unknown:
            parser.error(f"unknown method {token!r}; choose from scorebayes, npe, npe-embedding, "
                         "nle, npse, " + ", ".join(m for m in METHODS if m.startswith("npse-")))
        chosen.update(expanded)
    return [m for m in METHODS if m in chosen]


def _fmt(value: Any, spec: str = ".2f") -> str:
    """A number formatted, ``-`` for a missing one."""
    return "-" if value is None else format(value, spec)


def label(method: str) -> str:
    """A method's name in the markdown tables."""
    return LABELS.get(method, method)


def table(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    header = ("| model | method | rep | seconds | budget | simulations | mean error / SD | SD ratio "
              "| right | covered | verdict | note |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sd = "-" if r["sd_ratio"] is None else f"{r['sd_ratio'][0]:.2f}-{r['sd_ratio'][1]:.2f}"
        yes = {True: "yes", False: "no", None: "-"}
        note = r["error"] or (f"{r['training_rows']} of {r['budget_rows']} rows" if r.get("capped")
                              else "")
        lines.append(f"| {r['model']} | {label(r['method'])} | {r['rep']} | "
                     f"{_fmt(r['seconds'], '.1f')} | {_fmt(r.get('budget'), ',.0f')} | "
                     f"{_fmt(r['simulations'], ',.0f')} | {_fmt(r['mean_error'])} | {sd} | "
                     f"{yes[r['passed']]} | {yes[r['covered']]} | {r['verdict'] or '-'} | "
                     f"{note.replace('|', '/')} |")
    return "\n".join(lines)


def budgets(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Per model: ``n`` and the distinct budgets of its rows (one, unless merged runs differ)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = out.setdefault(r["model"], {"n": r["n"], "budgets": []})
        if r.get("budget") not in entry["budgets"]:
            entry["budgets"].append(r.get("budget"))
    return out


def budget_table(per_model: dict[str, dict[str, Any]]) -> str:
    """The budgets as the markdown header of the tables."""
    intro = ("Budget: data sets of size n per method and model, the same for every method "
             "(scorebayes' default plan unless `--budget` was given).")
    lines = [intro, "", "| model | n | budget |", "|---|---|---|"]
    for model, entry in per_model.items():
        values = " / ".join(_fmt(b, ",.0f") for b in entry["budgets"])
        mixed = " (rows of different budgets)" if len(entry["budgets"]) > 1 else ""
        lines.append(f"| {model} | {entry['n']:,} | {values}{mixed} |")
    return "\n".join(lines)


def summarise(rows: list[dict]) -> list[dict]:
    """Per (model, method): repetitions, errors, passes, coverage and the median seconds."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["method"]), []).append(r)
    out = []
    for (model, method), group in groups.items():
        ok = [r for r in group if r["error"] is None]
        out.append({"model": model, "method": method, "reps": len(group),
                    "errors": len(group) - len(ok), "passed": sum(r["passed"] for r in ok),
                    "coverage": sum(r["covered"] for r in ok) / len(ok) if ok else None,
                    "median_seconds": statistics.median(r["seconds"] for r in ok) if ok else None,
                    "median_mean_error": statistics.median(r["mean_error"] for r in ok) if ok else None})
    return out


def summary_table(summary: list[dict]) -> str:
    """The summary as a markdown table."""
    lines = ["| model | method | reps | errors | right | coverage | median seconds | median mean error |",
             "|---|---|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s['model']} | {label(s['method'])} | {s['reps']} | {s['errors']} | "
                     f"{s['passed']}/{s['reps'] - s['errors']} | {_fmt(s['coverage'])} | "
                     f"{_fmt(s['median_seconds'], '.1f')} | {_fmt(s['median_mean_error'])} |")
    return "\n".join(lines)


def row_order(row: dict) -> tuple:
    """Rows sorted as the suite lists the models, then by method (``METHODS``) and rep."""
    models, methods = list(SUITE), list(METHODS)
    return (models.index(row["model"]) if row["model"] in models else len(models), row["model"],
            methods.index(row["method"]) if row["method"] in methods else len(methods),
            row["method"], row["rep"])


def merge_rows(path: str | Path, rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """This run's ``rows`` over those already in ``path`` (the same (model, method, rep)
    replaced), sorted; and the settings of the earlier file (its own earlier ones first)."""
    out = Path(path)
    if not out.exists():
        return sorted(rows, key=row_order), []
    earlier = json.loads(out.read_text())
    merged = {(r["model"], r["method"], r["rep"]): r for r in earlier.get("rows", [])}
    merged.update({(r["model"], r["method"], r["rep"]): r for r in rows})
    settings = [*earlier.get("earlier_settings", []),
                {"settings": earlier.get("settings"), "versions": earlier.get("versions"),
                 "threads": earlier.get("threads"), "machine": earlier.get("machine")}]
    return sorted(merged.values(), key=row_order), settings


def versions() -> dict[str, str]:
    """The versions of torch, sbi and scorebayes (imports ``sbi.inference``: called before any
    timing, so that no method's seconds include it)."""
    import importlib

    import sbi

    import scorebayes
    importlib.import_module("sbi.inference")
    return {"torch": torch.__version__, "sbi": sbi.__version__,
            "scorebayes": getattr(scorebayes, "__version__", "unknown")}


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run every (model, rep, method) and write the JSON and tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(SUITE), help="comma-separated suite models")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                        help="scorebayes, npe, npe-embedding, nle, npse (all compositions) or "
                             "npse-<iid method>")
    parser.add_argument("--reps", type=int, default=1, help="observed data sets per model")
    parser.add_argument("--first-rep", type=int, default=0)
    parser.add_argument("--budget", type=int, default=None,
                        help="data sets of size n per method and model (default: per model, what "
                             "scorebayes' default fit plans)")
    parser.add_argument("--max-rows", type=int, default=None,
                        help="cap on NLE/NPSE single-observation rows (default 200000; 20000 with "
                             "--quick; 0: no cap)")
    parser.add_argument("--nle-init", choices=("resample", "sir", "proposal"), default=None,
                        help="NLE's MCMC initialisation (default sbi's resample; proposal if quick)")
    parser.add_argument("--timeout", type=float, default=7200.0,
                        help="seconds per method, NPSE training and NPSE composition (0: none)")
    parser.add_argument("--max-memory-gb", type=float, default=12.0,
                        help="address-space cap of the process; a method past it fails (0: none)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="tiny training, for smoke tests only")
    parser.add_argument("--out", default="benchmarks/results/peers.json")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows already in --out; this run's replace those of the same "
                             "(model, method, rep)")
    args = parser.parse_args(argv)
    names, methods = model_names(parser, args.models), parse_methods(parser, args.methods)
    if args.budget is not None and args.budget <= 0:
        parser.error("--budget must be a positive number of data sets")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    max_rows = args.max_rows if args.max_rows is not None else (20_000 if args.quick else 200_000)
    settings = Settings(budget=args.budget, num_samples=200 if args.quick else 2000,
                        max_rows=max_rows or None, quick=args.quick, threads=args.threads,
                        nle_init=args.nle_init or ("proposal" if args.quick else "resample"),
                        timeout=args.timeout or None)
    limit_memory(args.max_memory_gb or None)
    plan, rows, meta = method_plan(methods), [], versions()
    for name in names:
        for rep in range(args.first_rep, args.first_rep + args.reps):
            model = SUITE[name]()
            x_obs = observed(model, rep)
            for method, fn, labels in plan:
                rows.extend(run_method(method, fn, model, x_obs, rep, settings, labels))
                for line in table(rows[-len(labels):]).splitlines()[2:]:
                    print(line, flush=True)
    rows, earlier = merge_rows(args.out, rows) if args.merge else (rows, [])
    summary, per_model = summarise(rows), budgets(rows)
    write_json(args.out, rows, settings=dataclasses.asdict(settings), versions=meta,
               budgets=per_model, summary=summary,
               **({"earlier_settings": earlier} if args.merge else {}))
    print()
    print(budget_table(per_model))
    print()
    print(table(rows))
    print()
    print(summary_table(summary))


if __name__ == "__main__":
    main()
