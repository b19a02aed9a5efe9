r"""Shared machinery of the Langevin-SBI benchmarks (mg1, epidemic5, epidemic10, monotone, betabinomial).

Stable API (other benchmarks import it; keep these signatures):

``parse_args(description, default_reps, methods, argv=None) -> argparse.Namespace``
    ``--reps R``, ``--methods a,b`` (subset of ``methods``), ``--full``, ``--seed``, ``--quiet``,
    ``--fresh`` (ignore the partial file); ``plan=True`` adds ``--plan`` (``args.plan``: list
    what would run, see ``run_repetitions``). Sets ``torch.set_num_threads(1)``.
    ``args.methods`` is a list; ``args.reps`` is filled with ``default_reps`` when not given.

``MethodFn = Callable[[Tensor, int], Posterior | MethodResult]``
    ``fn(x_obs [n, p], seed) -> Posterior`` in the model's *internal* parametrisation (weights
    honoured). Cost in the paper's units (data sets of size n) is read from
    ``posterior.info["cost"]`` if present, else ``info["simulations"]``; localization cost from
    ``info["cost_localization"]`` (or ``info["simulations_by_stage"]["localization"]``, which is
    then subtracted from ``simulations``). The fit's check (``simulations_by_stage["check"]``, the
    verdict of ``ScoreLangevin.sample``) is no part of a method's cost: the papers have none.
    Return a :class:`MethodResult` to give them explicitly.

``run_repetitions(name, model, methods: dict[str, MethodFn], *, reps, seed, fresh=False,
                  progress=True, observed_fn=None, record_fn=None, max_reps=None,
                  configs=None, only_reps=None, plan=False) -> list[dict]``
    Loops over repetitions ``r = 0..reps-1``: ``x_obs = model.observed(make_generator(seed,
    "observed", r))`` (or ``observed_fn(r, generator)``), then every method with seed
    ``derive_seed(seed, method, r)``. Each (method, rep) record is appended to
    ``benchmarks/results/<name>_partial.jsonl`` as soon as it completes, and records already in
    the file (same seed) are reused, so an interrupted run resumes. A method given a
    ``configs[method]`` (its settings, JSON-able) stores their fingerprint in ``config`` and
    reuses only records with the same fingerprint, so a changed setting re-runs instead of
    silently reusing old records. A record holds ``method``,
    ``rep``, ``seed``, ``seconds`` (this process's plus, for a repetition resumed from run
    stores :func:`method_store` opened, the earlier processes' time their ledgers logged; both
    parts also as ``seconds_this_process`` and ``seconds_earlier_processes``), ``cost``,
    ``cost_localization``, per reported parameter
    ``mean``, ``low``, ``high``, ``bias``, ``width``, ``covers`` (lists over parameters), and
    whatever ``record_fn(method, posterior, x_obs, rep) -> dict`` adds (e.g. monotone KS/W1).
    ``plan=True`` prints ``format_plan(name, repetition_plan(...))`` (each method's recorded and
    missing repetitions, the time the missing ones would take) and exits without computing.

``summarise(records, names, reps=None) -> {METHOD: {"cost", "cost_localization", "seconds",
              "reps", "parameters": {PARAM: {"bias", "bias_sd", "ci_width", "ci_width_sd",
              "coverage"}}}}``
    Means/SDs over repetitions (ddof=1) of the per-repetition metrics (scorebayes.metrics).

``write_results(name, *, command, reps, methods, paper=None, scale_note="", notes=(), figures=(),
                seconds=None, extra=None)``
    ``results/<name>.json`` in the issue's layout ``{"name", "command", "reps", "methods": {...}}``
    (plus ``machine``, ``seconds``, ``scale`` and ``extra``) and ``results/<name>.md`` with the
    command, machine, seconds, and per parameter our rows beside the paper's rows ``paper =
    {METHOD: {PARAM: (bias, bias_sd, ci_width, ci_width_sd, coverage)}, "cost": {METHOD: c}}``.

``rows_left_out(name, chosen, methods) -> list[str]``: rendered rows a ``--methods`` subset
would drop (such a run saves its records and renders nothing).

``command_line(name) -> str``, ``machine() -> dict``, ``pyplot()``, ``RESULTS`` (Path);
``abc_w1_pruned(x_obs, prior, simulator, num, *, k, seed)``: exact W1-ABC with lower-bound pruning.

References:
    | Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang, Yang)
    | Sec. 5, App. C, seeds/000_1aaaaf87072c12bc.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from scorebayes import metrics
from scorebayes.parallel import derive_seed, make_generator
from scorebayes.posterior import Posterior

__all__ = ["RESULTS", "MethodResult", "parse_args", "machine", "command_line", "run_repetitions",
           "repetition_record", "summarise", "write_results", "pyplot", "abc_w1_pruned",
           "method_store"]

RESULTS = Path(__file__).resolve().parent / "results"
STORES = Path(__file__).resolve().parent.parent / "runs" / "bench"  # git-ignored


#: every store method_store opened in this process, in order: run_repetitions adds the compute
#: time earlier processes logged in the stores a repetition opened (scorebayes.store's ledger)
OPENED_STORES: list = []


def earlier_seconds(stores) -> float:
    """The seconds earlier processes logged in ``stores`` (each directory counted once)."""
    return sum({str(s.path.resolve()): s.earlier_seconds for s in stores}.values())


def method_store(name: str, method: str, seed: int, config: dict):
    """A :class:`~scorebayes.store.RunStore` for one long method run (``runs/bench/NAME-METHOD-SEED``).

    Passed as ``ScoreLangevin(store=...)``, it keeps the tables, per-epoch training checkpoints and
    the samples, so a repetition killed midway (session end, crash) resumes where it stopped on the
    next ``scorebayes bench NAME`` call instead of starting over. ``runs/`` is git-ignored: on a new
    machine the run starts from scratch. Another ``config`` under the same name raises
    :class:`~scorebayes.store.StoreError` (delete the folder to start over)."""
    from scorebayes.store import RunStore, StoreError

    path = STORES / f"{name}-{method}-{seed}"
    try:
        store = RunStore(path, config=config, seed=seed)
    except StoreError as err:  # the store's own advice (--fresh) means another thing for bench
        raise StoreError(
            f"{path} holds {method}'s run under other settings (its settings changed since): "
            f"delete that folder to start this repetition over ('bench --fresh' does not reset "
            f"run stores; it drops the recorded results). ({err})") from None
    OPENED_STORES.append(store)
    return store


@dataclass
class MethodResult:
    """A method's output with its cost in data sets of size n (localization separately)."""

    posterior: Posterior
    cost: float | None = None
    cost_localization: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def parse_args(description: str, default_reps: int, methods: Sequence[str],
               argv: Sequence[str] | None = None, *, only_reps: bool = False,
               plan: bool = False) -> argparse.Namespace:
    """Common command-line arguments; ``args.methods`` is the list of methods to run.

    ``only_reps``: offer ``--only-reps 3,4``, which runs just those repetitions (e.g. split over
    processes or machines; their records merge in the partial file) and renders nothing.
    ``plan``: offer ``--plan``, which lists what the run would compute and exits (``args.plan``,
    for :func:`run_repetitions`); ``args.plan`` is False where it is not offered."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--reps", type=int, default=None, help=f"repetitions (default {default_reps})")
    parser.add_argument("--methods", type=str, default=",".join(methods),
                        help="comma-separated subset of: " + ",".join(methods))
    parser.add_argument("--full", action="store_true", help="the paper's scale (slow)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--fresh", action="store_true", help="ignore results/<name>_partial.jsonl")
    if only_reps:
        parser.add_argument("--only-reps", type=str, default=None,
                            help="comma-separated repetitions to run (records only; render with --reps)")
    if plan:
        parser.add_argument("--plan", action="store_true",
                            help="list each method's repetitions still to run and their estimated "
                                 "time (from its recorded ones), then exit without computing")
    args = parser.parse_args(argv)
    chosen = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in methods]
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {list(methods)}")
    args.methods = chosen
    args.plan = getattr(args, "plan", False)
    if args.reps is None:
        args.reps = default_reps
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    if getattr(args, "only_reps", None) is not None:
        try:
            args.only_reps = sorted({int(v) for v in args.only_reps.split(",") if v.strip()})
        except ValueError:
            parser.error(f"--only-reps takes comma-separated integers, got {args.only_reps!r}")
        if not args.only_reps or args.only_reps[0] < 0:
            parser.error("--only-reps needs at least one repetition, none negative")
        if args.fresh:
            parser.error("--only-reps cannot be combined with --fresh (it would drop the other records)")
        args.reps = max(args.reps, args.only_reps[-1] + 1)
    torch.set_num_threads(1)
    return args


def rows_left_out(name: str, chosen: Sequence[str], methods: Sequence[str]) -> list[str]:
    """The rows of the rendered ``results/<name>.json`` that a run of the ``chosen`` methods alone
    would drop: rows of ``methods`` (the benchmark's current ones) that are rendered but not
    chosen. A run with ``--methods`` a subset saves its records and, when this is not empty,
    renders nothing, so it does not overwrite a fuller table (render with every method)."""
    path = RESULTS / f"{name}.json"
    if not path.exists():
        return []
    rendered = json.loads(path.read_text()).get("methods", {})
    return [m for m in methods if m in rendered and m not in chosen]


def announce_rows_left_out(name: str, chosen: Sequence[str], methods: Sequence[str], *,
                           announce: bool = True) -> list[str]:
    """:func:`rows_left_out`, and, when not empty and ``announce``, say before the run that it
    will save records only."""
    left_out = rows_left_out(name, chosen, methods)
    if left_out and announce:
        print(f"records only: rendering {', '.join(chosen)} alone would drop the rows "
              f"{', '.join(left_out)} of {name}.md", flush=True)
    return left_out


def records_only(chosen: Sequence[str], left_out: Sequence[str], render: str) -> bool:
    """True when rows are ``left_out`` (see :func:`rows_left_out`): the run then says where its
    records went and the command that renders every method (``render``), and renders nothing."""
    if left_out:
        print(f"saved the records of {', '.join(chosen)}; render with every method: {render}")
    return bool(left_out)


def machine() -> dict:
    """Python/torch versions, platform, CPU count and torch threads."""
    return {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads()}


def command_line(name: str) -> str:
    """``scorebayes bench <name-with-dashes> <argv>``."""
    return ("scorebayes bench " + name.replace("_", "-") + " " + " ".join(sys.argv[1:])).strip()


def costs(post: Posterior) -> tuple[float, float]:
    info = post.info or {}
    loc = float(info.get("cost_localization", 0.0) or 0.0)
    if "cost" in info:
        return float(info["cost"]), loc
    total = float(info.get("simulations", float("nan")))
    stages = info.get("simulations_by_stage") or {}
    total -= float(stages.get("check", 0.0))  # the fit's verdict, not the method's cost
    if "localization" in stages and "cost_localization" not in info:
        loc = float(stages["localization"])
        total -= loc
    return total, loc


def repetition_record(model: Any, post: Posterior, truth_reported: np.ndarray) -> dict:
    """Per-repetition metrics of one posterior on the reported parameters (lists over params)."""
    draws = post.draws.reshape(-1, post.draws.shape[-1])
    reported = model.to_reported(torch.as_tensor(draws, dtype=torch.float64))
    weights = None if post.weights is None else post.weights.reshape(-1)
    low, high = metrics.credible_interval(reported, weights)
    mean = metrics.posterior_mean(reported, weights)
    return {"mean": mean.tolist(), "low": low.tolist(), "high": high.tolist(),
            "bias": np.abs(mean - truth_reported).tolist(), "width": (high - low).tolist(),
            "covers": ((low <= truth_reported) & (truth_reported <= high)).astype(float).tolist()}


def config_fingerprint(config: Any) -> str:
    """Short hash of a method's settings (JSON with sorted keys; tuples as lists)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _load_partial(path: Path, seed: int, fingerprints: dict[str, str]) -> dict[tuple[str, int], dict]:
    """Records of ``path`` made with ``seed`` and, for the methods in ``fingerprints``, the same
    configuration; the last record of a (method, rep) wins."""
    done: dict[tuple[str, int], dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                wanted = fingerprints.get(rec["method"])
                if rec.get("base_seed") == seed and (wanted is None or rec.get("config") == wanted):
                    done[(rec["method"], int(rec["rep"]))] = rec
    return done


Cap = int | Sequence[int]  # a method's repetition cap: its first k, or those repetitions


def run_repetitions(name: str, model: Any, methods: dict[str, Callable[[Tensor, int], Any]], *,
                    reps: int, seed: int = 0, fresh: bool = False, progress: bool = True,
                    observed_fn: Callable[[int, torch.Generator], Tensor] | None = None,
                    record_fn: Callable[..., dict] | None = None,
                    max_reps: dict[str, Cap] | None = None,
                    configs: dict[str, Any] | None = None,
                    only_reps: Sequence[int] | None = None, plan: bool = False,
                    seed_as: dict[str, str] | None = None) -> list[dict]:
    """Run every method on ``reps`` observed data sets, saving each record as it completes.

    ``max_reps`` caps the repetitions of expensive methods (``{method: k}``: only the first k;
    ``{method: (r1, r2, ...)}``: those repetitions only);
    ``configs`` (``{method: settings}``) makes reuse of a stored record require the same settings;
    ``only_reps`` runs (and returns) those repetitions alone, and names those it reused from
    the records instead of running them again. ``seed_as`` (``{variant: method}``) gives a variant
    the repetition seeds of another method (common random numbers: the same localization and
    tables, so the two rows differ by the variant's change alone). Records are appended one line per
    write, so processes running different repetitions may share the partial file. ``plan``
    prints :func:`repetition_plan` instead and exits (``SystemExit(0)``), computing nothing."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}_partial.jsonl"
    fingerprints = {m: config_fingerprint(c) for m, c in (configs or {}).items()}
    if plan:  # before --fresh deletes anything: a plan changes no file
        done = {} if fresh else _load_partial(path, seed, fingerprints)
        print(format_plan(name, repetition_plan(done, list(methods), reps, max_reps=max_reps,
                                                only_reps=only_reps)))
        raise SystemExit(0)
    if fresh and path.exists():
        path.unlink()
    done = _load_partial(path, seed, fingerprints)
    truth = model.to_reported(model.true_parameters).numpy()
    records, reused = [], []
    for r in _chosen_reps(reps, only_reps):
        active = {m: fn for m, fn in methods.items() if _within_cap(m, r, reps, max_reps)}
        todo = [m for m in active if (m, r) not in done]
        if todo:
            gen = make_generator(seed, "observed", r)
            x_obs = observed_fn(r, gen) if observed_fn is not None else model.observed(gen)
        for method, fn in active.items():
            if (method, r) in done:
                records.append(done[(method, r)])
                reused.append(f"{method} {r}")
                continue
            rep_seed = derive_seed(seed, (seed_as or {}).get(method, method), r)
            start, opened = time.perf_counter(), len(OPENED_STORES)
            out = fn(x_obs, rep_seed)
            seconds_here = time.perf_counter() - start
            # a repetition resumed from a run store also cost its earlier processes' time
            seconds_before = earlier_seconds(OPENED_STORES[opened:])
            seconds = seconds_here + seconds_before
            if isinstance(out, MethodResult):
                post, cost, loc, extra = out.posterior, out.cost, out.cost_localization, dict(out.extra)
                if cost is None:
                    cost, loc = costs(post)
            else:
                post, extra = out, {}
                cost, loc = costs(post)
            rec = {"method": method, "rep": r, "seed": rep_seed, "base_seed": seed,
                   "seconds": seconds, "seconds_this_process": seconds_here,
                   "seconds_earlier_processes": seconds_before, "cost": cost, "cost_localization": loc}
            if method in fingerprints:
                rec["config"] = fingerprints[method]
            rec.update(repetition_record(model, post, truth))
            if record_fn is not None:
                rec.update(record_fn(method, post, x_obs, r))
            rec.update(extra)
            with path.open("a") as fh:
                fh.write(json.dumps(rec, default=float) + "\n")
            records.append(rec)
            if progress:
                print(f"[{name}] rep {r} {method}: {seconds:.1f}s width={np.round(rec['width'], 4)} "
                      f"covers={rec['covers']}", flush=True)
    if only_reps is not None and reused:  # asked for by name: say which were not run again
        print(f"[{name}] already recorded with these settings, not recomputed: {', '.join(reused)} "
              f"(delete their lines in {path.name} to run them again)", flush=True)
    return records


def _chosen_reps(reps: int, only_reps: Sequence[int] | None) -> list[int]:
    return [r for r in range(reps) if only_reps is None or r in only_reps]


def _within_cap(method: str, rep: int, reps: int, max_reps: dict[str, Cap] | None) -> bool:
    """Whether ``method`` runs on repetition ``rep``: ``max_reps`` caps it at its first k, or
    (a sequence of repetitions) at those alone."""
    cap = (max_reps or {}).get(method, reps)
    return rep in cap if isinstance(cap, Sequence) else rep < cap


def repetition_plan(done: dict[tuple[str, int], dict], methods: Sequence[str], reps: int, *,
                    max_reps: dict[str, Cap] | None = None,
                    only_reps: Sequence[int] | None = None) -> list[dict]:
    """What :func:`run_repetitions` would compute: per method, ``{"method", "recorded" (reusable
    repetitions among the chosen), "missing" (repetitions to run), "seconds" (the mean seconds of
    its reusable records of any repetition times the missing count; None if missing ones cannot
    be timed)}``. ``done`` as from the partial file (same seed and settings)."""
    rows = []
    for method in methods:
        chosen = [r for r in _chosen_reps(reps, only_reps) if _within_cap(method, r, reps, max_reps)]
        recorded = [r for r in chosen if (method, r) in done]
        missing = [r for r in chosen if (method, r) not in done]
        times = [float(rec["seconds"]) for (m, _), rec in done.items() if m == method]
        rows.append({"method": method, "recorded": recorded, "missing": missing,
                     "seconds": len(missing) * float(np.mean(times)) if times else (None if missing else 0.0)})
    return rows


def _reps_text(reps: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    runs: list[list[int]] = []
    for r in reps:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(str(g[0]) if len(g) == 1 else f"{g[0]}-{g[-1]}" for g in runs) or "none"


def format_plan(name: str, rows: Sequence[dict]) -> str:
    """The plan of :func:`repetition_plan` as text, one line per method and a total."""
    lines = [f"{name}: what this command would compute (nothing is run with --plan)"]
    for row in rows:
        est = ("unknown time (no record to time it by)" if row["seconds"] is None
               else f"about {row['seconds'] / 60:.0f} min" if row["missing"] else "nothing to run")
        lines.append(f"  {row['method']}: recorded {_reps_text(row['recorded'])}; "
                     f"to run {_reps_text(row['missing'])}: {est}")
    known = [row["seconds"] for row in rows if row["seconds"] is not None]
    unknown = [row["method"] for row in rows if row["seconds"] is None]
    lines.append(f"  total: about {sum(known) / 60:.0f} min on one process"
                 + (f", plus {', '.join(unknown)} (untimed)" if unknown else "")
                 + "; times are the recorded repetitions' seconds, a record resumed from a run store "
                   "counting its earlier processes' time as logged in the store (stores written before "
                   "the ledger existed log none)")
    return "\n".join(lines)


def summarise(records: Sequence[dict], names: Sequence[str], reps: int | None = None) -> dict:
    """Means/SDs over repetitions per method, in the issue's JSON layout (see module docstring)."""
    out: dict[str, dict] = {}
    for method in dict.fromkeys(r["method"] for r in records):
        rows = [r for r in records if r["method"] == method and (reps is None or r["rep"] < reps)]
        ddof = 1 if len(rows) > 1 else 0
        b, w, c = (np.array([r[k] for r in rows], dtype=float) for k in ("bias", "width", "covers"))
        params = {nm: {"bias": float(b[:, k].mean()), "bias_sd": float(b[:, k].std(ddof=ddof)),
                       "ci_width": float(w[:, k].mean()), "ci_width_sd": float(w[:, k].std(ddof=ddof)),
                       "coverage": float(c[:, k].mean())} for k, nm in enumerate(names)}
        out[method] = {"cost": float(np.mean([r["cost"] for r in rows])),
                       "cost_localization": float(np.mean([r["cost_localization"] for r in rows])),
                       "seconds": float(np.mean([r["seconds"] for r in rows])),
                       "reps": len(rows), "parameters": params}
    return out


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    v = float(v)
    return f"{v:.3g}" if abs(v) >= 1e3 or (v != 0 and abs(v) < 1e-3) else f"{v:.3f}"


def write_results(name: str, *, command: str, reps: int, methods: dict, paper: dict | None = None,
                  scale_note: str = "", notes: Sequence[str] = (), figures: Sequence[str] = (),
                  seconds: float | None = None, extra: dict | None = None) -> None:
    """Write ``results/<name>.json`` (issue layout) and ``results/<name>.md`` (tables vs the paper)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {"name": name, "command": command, "reps": reps, "methods": methods,
              "machine": machine(), "seconds": seconds, "scale": scale_note}
    if extra:
        record["extra"] = extra
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2, default=float))
    paper = paper or {}
    lines = [f"# {name}", "", f"Command: `{command}`  ", f"Repetitions: {reps}  ",
             f"Scale: {scale_note}  ",
             f"Total seconds (sum of the method runs, resumed runs included): {seconds:.0f} s  " if seconds is not None else "",
             f"Machine: {record['machine']}", "",
             "## Cost and time per repetition", "",
             "| method | cost (ours, data sets of size n) | localization | paper cost | seconds |",
             "|---|---|---|---|---|"]
    for m, row in methods.items():
        lines.append(f"| {m} | {_fmt(row['cost'])} | {_fmt(row.get('cost_localization'))} | "
                     f"{_fmt(paper.get('cost', {}).get(m))} | {row['seconds']:.1f} |")
    pnames = list(next(iter(methods.values()))["parameters"]) if methods else []
    for p in pnames:
        lines += ["", f"## {p}", "", "| method | source | bias (sd) | CI95 width (sd) | coverage |",
                  "|---|---|---|---|---|"]
        for m, row in methods.items():
            q = row["parameters"][p]
            lines.append(f"| {m} | ours | {_fmt(q['bias'])} ({_fmt(q['bias_sd'])}) | "
                         f"{_fmt(q['ci_width'])} ({_fmt(q['ci_width_sd'])}) | {_fmt(q['coverage'])} |")
            ref = paper.get(m, {}).get(p)
            if ref is not None:
                lines.append(f"| {m} | paper | {_fmt(ref[0])} ({_fmt(ref[1])}) | "
                             f"{_fmt(ref[2])} ({_fmt(ref[3])}) | {_fmt(ref[4])} |")
    write_markdown(name, lines, notes, figures)


def write_markdown(name: str, lines: list[str], notes: Sequence[str] = (),
                   figures: Sequence[str] = ()) -> None:
    """Write ``RESULTS/NAME.md``: ``lines``, then a Notes and a Figures section when given."""
    if notes:
        lines = lines + ["", "## Notes", ""] + [f"- {n}" for n in notes]
    if figures:
        lines = lines + ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def scale_note(scale: dict, reps: int, full: bool) -> str:
    """The ``Scale:`` line of a table benchmark: the paper's scale, or the small settings used."""
    if full:
        return "paper scale"
    return (f"small scale for a shared 2-core machine: {reps} repetitions; "
            + "; ".join(f"{k}: {v}" for k, v in scale.items() if k != "reps"))


def pyplot():
    """matplotlib.pyplot with the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def abc_w1_pruned(x_obs: Tensor, prior: Any, simulator: Any, num: int, *, k: int, seed: int,
                  chunk: int = 1000, keep_candidates: int | None = None,
                  names: Sequence[str] | None = None) -> Posterior:
    r"""Rejection ABC with the exact :math:`W_1`, pruned by an exact lower bound (same result, faster).

    Every projection onto a coordinate is 1-Lipschitz, so
    :math:`W_1(\mu, \nu) \ge \max_j W_1(\mu_j, \nu_j)` (1-D marginals, exact by sorting). Draw the
    ``num`` prior parameters and data sets ``x [num, n, p]`` in seeded chunks, compute the bound
    for all, keep the data of the ``keep_candidates`` smallest bounds, and solve exact transport
    problems (``scorebayes.baselines.wasserstein1``) in increasing order of the bound until the
    next bound exceeds the current k-th smallest exact distance: the k kept draws are then
    exactly those of full ABC. ``info["exact"]`` is False if the candidates ran out first.

    Arguments:
        x_obs: observed data ``[n, p]``.
        num: :math:`N` prior draws; k: draws kept.

    Returns:
        Posterior ``[k, d]`` with ``info`` ``simulations`` (= num), ``exact_solves``, ``exact``.
    """
    from scorebayes.baselines import wasserstein1
    from scorebayes.priors import sample as prior_sample

    keep_candidates = keep_candidates or max(15 * k, 2000)
    n = x_obs.shape[0]
    thetas, bounds, cand_x, cand_idx = [], [], None, None
    for c, start in enumerate(range(0, num, chunk)):
        b = min(chunk, num - start)
        g = make_generator(seed, "abc", c)
        theta = prior_sample(prior, b, generator=g).to(torch.float64)
        x = simulator(theta, n, g)
        lb = torch.stack([wasserstein1(x[..., j:j + 1], x_obs[:, j:j + 1]) for j in range(x.shape[-1])]).amax(0)
        thetas.append(theta)
        bounds.append(lb)
        idx = torch.arange(start, start + b)
        cand_x = x if cand_x is None else torch.cat([cand_x, x])
        cand_idx = idx if cand_idx is None else torch.cat([cand_idx, idx])
        if len(cand_idx) > keep_candidates:
            allb = torch.cat(bounds)[cand_idx]
            best = torch.argsort(allb)[:keep_candidates]
            cand_x, cand_idx = cand_x[best], cand_idx[best]
    theta, lb = torch.cat(thetas), torch.cat(bounds)
    order = torch.argsort(lb[cand_idx])
    exact_d: dict[int, float] = {}
    kth = float("inf")
    exact = False
    for pos in order.tolist():
        i = int(cand_idx[pos])
        if len(exact_d) >= k and float(lb[i]) > kth:
            exact = True
            break
        exact_d[i] = float(wasserstein1(cand_x[pos], x_obs))
        if len(exact_d) >= k:
            kth = sorted(exact_d.values())[k - 1]
    else:  # candidates exhausted: exact only if every unseen bound exceeds the k-th distance
        unseen = torch.ones(len(lb), dtype=torch.bool)
        unseen[cand_idx] = False
        exact = bool(len(exact_d) >= k and (not unseen.any() or float(lb[unseen].min()) > kth))
    best = sorted(exact_d, key=exact_d.get)[:k]
    keep = torch.tensor(sorted(best))
    return Posterior(theta[keep], names, info={
        "method": "abc", "simulations": float(num), "k": k, "epsilon": kth,
        "exact_solves": len(exact_d), "exact": exact})


def bsl_pilot_init(x_obs: Tensor, simulator: Any, prior: Any, summary: Callable, *, num_chains: int,
                   candidates: int, num_sims: int, generator: torch.Generator) -> tuple[Tensor, float]:
    r"""Start BSL chains at the best of ``candidates`` prior draws by synthetic likelihood.

    Chains started at raw prior draws can sit where :math:`\hat p(s_{obs}\mid\theta)` is
    negligible and never accept (M/G/1: 1 of 4 chains stuck at acceptance 0 after 3,000 steps).
    The pilot evaluates the Gaussian synthetic log-likelihood (``num_sims`` simulations) at
    ``candidates`` prior draws and returns the ``num_chains`` best as ``theta [C, d]`` together
    with its cost in data sets of the observed size (``candidates * num_sims``).
    """
    from scorebayes.baselines.bsl import gaussian_synthetic_loglik
    from scorebayes.priors import sample as sample_prior

    if candidates < num_chains:
        raise ValueError(f"candidates ({candidates}) must be >= num_chains ({num_chains})")
    theta = sample_prior(prior, candidates, generator=generator).to(torch.float64)
    n = x_obs.shape[0]
    reps = theta.repeat_interleave(num_sims, 0)
    s = summary(simulator(reps, n, generator)).reshape(candidates, num_sims, -1)
    s_obs = summary(x_obs[None]).reshape(-1)
    loglik = gaussian_synthetic_loglik(s_obs, s)
    best = torch.argsort(loglik, descending=True)[:num_chains]
    return theta[best], float(candidates * num_sims)
