r"""scorebayes against sbi's NPE, NLE and NPSE on the exact-posterior suite (``scorebayes bench peers``).

Protocol. For every model of :mod:`scorebayes.models.suite` (a prior, a batched simulator
``theta [B, d] -> x [B, n, p]``, ``n`` i.i.d. observations, exact posterior moments) and every
repetition ``rep`` (the observed data set ``model.observed`` seeded with ``rep``, at the true
parameters), each method gets the same simulation budget of ``B`` data sets of size ``n``
(``--budget``, default 3,400 for every model and method) and returns posterior draws (2,000):

``scorebayes``
    ``ScoreLangevin(prior, simulator, tables=Tables(num_simulations=B), seed=rep).fit(x_obs)
    .sample(2000)``: the defaults, ``B`` the whole budget (localization, tables and the fit's own
    check included); ``verdict`` is the fit's check (pass / warn / fail), ``simulations`` what
    it spent (``info["simulations"]``).
``npe``
    ``sbi.inference.NPE`` (NPE-C, sbi's default MAF, z-scoring, training and early stopping)
    on ``(theta_i, summary_fn(x_i))`` for ``B`` data sets with ``theta_i`` drawn from the prior;
    ``DirectPosterior.sample((2000,), x=summary_fn(x_obs))`` (draws outside the prior's support
    rejected, sbi's default). NPE is the only method given more than the raw data: the model's
    summaries (sufficient statistics where the model has them).
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
    row's sampling (both also apart: ``seconds_training``, ``seconds_sampling``).

Guards, the same for every method: a method, the NPSE training and each NPSE composition get
at most ``--timeout`` seconds (default 7,200) and the process at most ``--max-memory-gb`` of
address space (default 12); past either the method's row records the error (``MethodTimeout``,
a MemoryError or torch's "can't allocate memory") and the run goes on. Both were needed in the
smoke tests: ``auto_gauss`` estimates its precisions from per-observation posteriors drawn by
rejection to the prior's support without a time limit, which with a poor network ran past 20
GB; ``jac_gauss`` takes Jacobians over (draws x n observations) at once.

No sbi setting is tuned per model (fairness): every sbi call uses the package's defaults, the
only inputs being the prior, the simulations and, for NPE, the summaries. The prior goes to sbi
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
sbi), ``simulations`` (in data sets of size ``n``), and ``error`` when the method raised (the
run goes on). ``summary`` holds per (model, method) the repetitions, passes, coverage, errors
and the median seconds.

Run from the repository root (``OMP_NUM_THREADS=1`` and ``--threads 1`` for comparable timings):

    scorebayes bench peers [--models gaussian_mean,gandk] [--methods scorebayes,npe,nle,npse]
        [--reps 3] [--budget 3400] [--max-rows 200000] [--nle-init resample|proposal]
        [--timeout 7200] [--max-memory-gb 12] [--threads 1] [--quick]

``--methods`` takes ``scorebayes``, ``npe``, ``nle``, ``npse`` (every composition) or
``npse-<iid method>``. ``--quick`` is for smoke tests only: a budget of 600 and at most 20,000
single-observation rows (unless given), two epochs of training, 200 draws, 4 short NLE chains
started at prior draws, 20-step SDEs. It prints markdown tables and writes
``benchmarks/results/peers.json`` (``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import resource
import signal
import statistics
import time
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from _suite_common import accuracy, model_names, observed, write_json
from torch import Tensor
from torch.distributions import Distribution, Independent

from scorebayes.models.base import Model
from scorebayes.models.suite import SUITE
from scorebayes.posterior import Posterior
from scorebayes.priors import IndependentPrior

IID_METHODS = ("fnpe", "gauss", "auto_gauss", "jac_gauss")
METHODS = ("scorebayes", "npe", "nle", *(f"npse-{m}" for m in IID_METHODS))
SINGLE_ROW_CHUNK = 50_000  # single observations simulated per simulator call


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every method gets: the budget, the draws, the row cap and the smoke-test switch."""

    budget: int = 3400
    num_samples: int = 2000
    max_rows: int | None = 200_000
    quick: bool = False
    threads: int | None = None
    nle_init: str = "resample"
    timeout: float | None = 7200.0

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


class NoTracker:
    """An sbi tracker that records nothing (sbi's default writes TensorBoard logs to ./sbi-logs)."""

    log_dir = None

    def log_metric(self, name: str, value: float, step: int | None = None) -> None:
        """Ignore a metric."""

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        """Ignore metrics."""

    def log_params(self, params: dict) -> None:
        """Ignore parameters."""

    def add_figure(self, name: str, figure: Any, step: int | None = None) -> None:
        """Ignore a figure."""

    def flush(self) -> None:
        """Nothing to flush."""


class MethodTimeout(BaseException):
    """A method (or an NPSE training or composition) ran past ``--timeout``; a BaseException, so
    that sbi's own ``except Exception`` fallbacks cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`MethodTimeout` in the block after ``seconds`` (``None``: no limit).

    sbi's rejection loops can run without end (e.g. ``auto_gauss``'s per-observation posteriors
    when most draws leave the prior's support); the alarm turns that into the method's error row.
    Not nestable (one SIGALRM timer).
    """
    if not seconds:
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise MethodTimeout(f"no result within {seconds:.0f} s (--timeout)")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def limit_memory(gigabytes: float | None) -> None:
    """Cap this process's address space, so a runaway method fails with a MemoryError (its
    error row) instead of exhausting the machine (``None``: no cap)."""
    if gigabytes:
        limit = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


# --- the prior and the simulations, as sbi takes them ------------------------------------------

def _float32_marginal(marginal: Distribution, shape: tuple[int, ...] = (1,)) -> Distribution:
    """A float32 copy of a univariate torch distribution with parameters of ``shape``."""
    params = {k: getattr(marginal, k).to(torch.float32).reshape(shape)
              for k in marginal.arg_constraints}
    return type(marginal)(**params)


def sbi_prior(prior: Distribution) -> Distribution:
    """The suite's product prior in float32 as sbi takes it (see the module docstring)."""
    from sbi.utils import MultipleIndependent, process_prior

    if not isinstance(prior, IndependentPrior):
        raise TypeError(f"expected a scorebayes IndependentPrior, got {type(prior).__name__}")
    marginals = prior.marginals
    families = {type(m) for m in marginals}
    if len(families) == 1:
        params = {k: torch.stack([getattr(m, k) for m in marginals]).to(torch.float32)
                  for k in marginals[0].arg_constraints}
        joint = Independent(type(marginals[0])(**params), 1)
    else:
        joint = MultipleIndependent([_float32_marginal(m) for m in marginals])
    return process_prior(joint)[0]


def method_seed(model: str, method: str, rep: int) -> int:
    """A seed of its own for each (model, method, rep), the same in every run."""
    return zlib.crc32(f"{model}/{method}/{rep}".encode()) % 2**31


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch's and numpy's global RNGs (sbi draws from them); a simulation generator."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    return torch.Generator().manual_seed(seed)


def simulate_data_sets(model: Model, num: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``num`` prior draws ``theta [num, d]`` and a data set of size ``n`` each ``[num, n, p]``."""
    theta = model.prior.sample((num,))
    return theta, model.simulator(theta, model.n_obs, generator)


def simulate_single_rows(model: Model, rows: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``rows`` prior draws ``theta [rows, d]`` and one observation each ``x [rows, p]``."""
    thetas, xs = [], []
    for start in range(0, rows, SINGLE_ROW_CHUNK):
        theta = model.prior.sample((min(SINGLE_ROW_CHUNK, rows - start),))
        thetas.append(theta)
        xs.append(model.simulator(theta, 1, generator)[:, 0])
    return torch.cat(thetas), torch.cat(xs)


def single_row_budget(model: Model, settings: Settings) -> dict[str, Any]:
    """The single-observation rows of the budget (``B n``), the cap and the rows trained on."""
    budget_rows = settings.budget * model.n_obs
    rows = budget_rows if not settings.max_rows else min(budget_rows, settings.max_rows)
    return {"budget_rows": budget_rows, "training_rows": rows, "capped": rows < budget_rows}


def epochs_trained(inference: Any) -> int | None:
    """Epochs of sbi's last training (``None`` if it did not say)."""
    epochs = (getattr(inference, "_summary", {}) or {}).get("epochs_trained") or [None]
    return None if epochs[-1] is None else int(epochs[-1])


def as_posterior(draws: Tensor, model: Model, method: str) -> Posterior:
    """sbi's draws ``[S, d]`` as a scorebayes Posterior (float64, the model's names)."""
    return Posterior(draws.reshape(-1, model.dim).double(), model.parameter_names,
                     info={"method": method})


# --- the methods -------------------------------------------------------------------------------

def run_scorebayes(model: Model, x_obs: Tensor, rep: int, settings: Settings) -> list[Result]:
    """scorebayes' defaults with ``num_simulations`` the whole budget."""
    from scorebayes.sbi import ScoreLangevin, Tables, Training
    from scorebayes.sbi.settings import default_schedule

    training = None
    if settings.quick:
        tiny = {"epochs": 2, "penalty_epochs": 1, "patience": 1}
        training = Training(schedule=dataclasses.replace(default_schedule(True), **tiny),
                            mean_schedule=dataclasses.replace(default_schedule(True, mean=True), **tiny),
                            curvature_penalties=(0.0,))
    start = time.perf_counter()
    est = ScoreLangevin(model.prior, model.simulator, tables=Tables(num_simulations=settings.budget),
                        training=training, parameter_names=model.parameter_names, seed=rep,
                        threads=settings.threads, progress=False)
    posterior = est.fit(x_obs).sample(settings.num_samples)
    seconds = time.perf_counter() - start
    check = posterior.info["check"]
    return [Result("scorebayes", posterior, seconds, float(posterior.info["simulations"]),
                   verdict=check["verdict"],
                   extra={"reasons": check["reasons"], "remedies": check["remedies"],
                          "stages": [{k: (round(v, 2) if isinstance(v, float) else v)
                                      for k, v in r.items()} for r in est.ledger_.records]})]


def run_npe(model: Model, x_obs: Tensor, rep: int, settings: Settings) -> list[Result]:
    """sbi's NPE (defaults) on the model's summaries of ``B`` data sets of size ``n``."""
    from sbi.inference import NPE

    start = time.perf_counter()
    generator = seed_everything(method_seed(model.name, "npe", rep))
    theta, x = simulate_data_sets(model, settings.budget, generator)
    summaries = model.summary_fn(x).to(torch.float32)
    inference = NPE(prior=sbi_prior(model.prior), show_progress_bars=False, tracker=NoTracker())
    inference.append_simulations(theta.to(torch.float32), summaries).train(**settings.sbi_train())
    posterior = inference.build_posterior()
    s_obs = model.summary_fn(x_obs[None]).to(torch.float32)
    draws = posterior.sample((settings.num_samples,), x=s_obs, show_progress_bars=False)
    return [Result("npe", as_posterior(draws, model, "npe"), time.perf_counter() - start,
                   float(settings.budget),
                   extra={"summary_dim": int(summaries.shape[1]), "epochs": epochs_trained(inference)})]


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

def error_text(err: BaseException) -> str:
    """``Type: message`` of an exception, on one line, with where it was raised (for a timeout,
    where the alarm interrupted the method)."""
    frames = traceback.extract_tb(err.__traceback__) if err.__traceback__ else []
    if isinstance(err, MethodTimeout) and len(frames) > 1:
        frames = frames[:-1]  # the alarm handler itself
    frame = frames[-1] if frames else None
    where = f" ({frame.filename.split('site-packages/')[-1]}:{frame.lineno})" if frame else ""
    message = " ".join(str(err).split())
    return f"{type(err).__name__}: {message[:500]}{where}"


def base_row(model: Model, method: str, rep: int) -> dict[str, Any]:
    """The fields every row has, the metrics still empty."""
    return {"model": model.name, "method": method, "rep": rep, "d": model.dim, "n": model.n_obs,
            "seconds": None, "simulations": None, "mean_error": None, "sd_ratio": None,
            "passed": None, "covered": None, "verdict": None, "error": None}


def result_row(model: Model, x_obs: Tensor, rep: int, result: Result, caught: list[str]) -> dict:
    """A method's row: timing, cost and the posterior against the exact one."""
    row = base_row(model, result.method, rep)
    row.update(seconds=round(result.seconds, 2), simulations=round(result.simulations, 1),
               **accuracy(model, x_obs, result.posterior), verdict=result.verdict)
    return {**row, **result.extra, "warnings": caught}


def error_row(model: Model, method: str, rep: int, error: str, seconds: float, **extra: Any) -> dict:
    """A method that raised: its error message and the time until it did."""
    row = base_row(model, method, rep)
    row.update(seconds=round(seconds, 2), error=error)
    return {**row, **extra}


def unique_warnings(caught: list[warnings.WarningMessage], limit: int = 8) -> list[str]:
    """The distinct warning messages (first line, category), at most ``limit``."""
    seen: list[str] = []
    for w in caught:
        text = f"{w.category.__name__}: {' '.join(str(w.message).split())[:200]}"
        if text not in seen:
            seen.append(text)
    return seen[:limit]


RunFn = Callable[[Model, Tensor, int, Settings], list]


def run_method(name: str, fn: RunFn, model: Model, x_obs: Tensor, rep: int,
               settings: Settings, labels: list[str]) -> list[dict]:
    """Run one method (its rows ``labels``) within ``--timeout`` (NPSE: its training and each
    composition); an exception becomes error rows, never an abort."""
    start = time.perf_counter()
    limit = None if name == "npse" else settings.timeout
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with time_limit(limit):
                results = fn(model, x_obs, rep, settings)
        except (Exception, MethodTimeout) as err:  # noqa: BLE001 - recorded as its row(s)
            seconds = time.perf_counter() - start
            return [error_row(model, label, rep, error_text(err), seconds,
                              warnings=unique_warnings(caught)) for label in labels]
    notes = unique_warnings(caught)
    rows = []
    for r in results:
        if isinstance(r, Result):
            rows.append(result_row(model, x_obs, rep, r, notes))
        else:
            rows.append(error_row(model, r.pop("method"), rep, r.pop("error"), r.pop("seconds"),
                                  **r, warnings=notes))
    return rows


def method_plan(methods: list[str]) -> list[tuple[str, RunFn, list[str]]]:
    """The runs for the chosen row labels: (name, function, its labels); NPSE trains once."""
    plan: list[tuple[str, RunFn, list[str]]] = []
    simple = {"scorebayes": run_scorebayes, "npe": run_npe, "nle": run_nle}
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
            parser.error(f"unknown method {token!r}; choose from scorebayes, npe, nle, npse, "
                         + ", ".join(m for m in METHODS if m.startswith("npse-")))
        chosen.update(expanded)
    return [m for m in METHODS if m in chosen]


def _fmt(value: Any, spec: str = ".2f") -> str:
    """A number formatted, ``-`` for a missing one."""
    return "-" if value is None else format(value, spec)


def table(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    header = ("| model | method | rep | seconds | simulations | mean error / SD | SD ratio | right "
              "| covered | verdict | note |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sd = "-" if r["sd_ratio"] is None else f"{r['sd_ratio'][0]:.2f}-{r['sd_ratio'][1]:.2f}"
        yes = {True: "yes", False: "no", None: "-"}
        note = r["error"] or (f"{r['training_rows']} of {r['budget_rows']} rows" if r.get("capped")
                              else "")
        lines.append(f"| {r['model']} | {r['method']} | {r['rep']} | {_fmt(r['seconds'], '.1f')} | "
                     f"{_fmt(r['simulations'], '.0f')} | {_fmt(r['mean_error'])} | {sd} | "
                     f"{yes[r['passed']]} | {yes[r['covered']]} | {r['verdict'] or '-'} | "
                     f"{note.replace('|', '/')} |")
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
        lines.append(f"| {s['model']} | {s['method']} | {s['reps']} | {s['errors']} | "
                     f"{s['passed']}/{s['reps'] - s['errors']} | {_fmt(s['coverage'])} | "
                     f"{_fmt(s['median_seconds'], '.1f')} | {_fmt(s['median_mean_error'])} |")
    return "\n".join(lines)


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
    parser.add_argument("--methods", default="scorebayes,npe,nle,npse",
                        help="scorebayes, npe, nle, npse (all compositions) or npse-<iid method>")
    parser.add_argument("--reps", type=int, default=1, help="observed data sets per model")
    parser.add_argument("--first-rep", type=int, default=0)
    parser.add_argument("--budget", type=int, default=None,
                        help="data sets of size n per method (default 3400; 600 with --quick)")
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
    args = parser.parse_args(argv)
    names, methods = model_names(parser, args.models), parse_methods(parser, args.methods)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    budget = args.budget if args.budget is not None else (600 if args.quick else 3400)
    max_rows = args.max_rows if args.max_rows is not None else (20_000 if args.quick else 200_000)
    settings = Settings(budget=budget, num_samples=200 if args.quick else 2000,
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
    summary = summarise(rows)
    write_json(args.out, rows, settings=dataclasses.asdict(settings), versions=meta,
               summary=summary)
    print(table(rows))
    print()
    print(summary_table(summary))


if __name__ == "__main__":
    main()
