"""The default settings on the suite of models with exact posteriors (``scorebayes bench defaults``).

For every model of :mod:`scorebayes.models.suite` and every repetition (a fresh observed data set
at the model's true parameters), one ``ScoreLangevin(prior, simulator).fit(x).sample(2000)`` with
no options (the calibrated posterior; ``--summed``: Langevin chains on the summed score,
``calibrate = false``), timed end to end (fit, posterior and the fit's check), against the exact
posterior:

- ``mean_error``: max over the parameters of |mean - exact mean| / exact SD (target <= 0.3);
- ``sd_ratio``: SD / exact SD, the extremes over the parameters (target within 25%);
- ``passed``: both targets met; ``covered``: the truth in every 95% interval;
- ``verdict``: the fit's own check (pass / warn / fail) and its reasons;
- ``sampling_seconds``, ``ess``, ``ess_per_second``: the last sampling stage's seconds, the
  smallest bulk ESS over the parameters of its draws (the sampler stops at its ESS target, a
  quarter of the draws), and their ratio: what a user waits per effective draw.

Run from the repository root:

    scorebayes bench defaults [--models gaussian_mean,gandk] [--reps 3] [--threads 1] [--summed]

It prints a markdown table and writes ``benchmarks/results/defaults.json`` (``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import time
import warnings

from _suite_common import accuracy, model_names, observed, write_json

from scorebayes import ScoreLangevin
from scorebayes.models.suite import SUITE


def run_one(name: str, rep: int, threads: int | None, calibrate: bool | None = None) -> dict:
    model = SUITE[name]()
    x_obs = observed(model, rep)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the verdict is recorded below
        est = ScoreLangevin.from_options(model.prior, model.simulator, parameter_names=model.parameter_names,
                                         seed=rep, threads=threads, progress=False, calibrate=calibrate)
        posterior = est.fit(x_obs).sample(2000)
    seconds = time.perf_counter() - start
    check = posterior.info["check"]
    sampling = sum(r["seconds"] for r in est.ledger_.records
                   if r["stage"] == "sampling" or r["stage"].startswith("calibration"))
    ess = posterior.info.get("ess") or min(r["ess"] for r in posterior.summary())
    return {"model": name, "rep": rep, "d": model.dim, "n": model.n_obs, "seconds": round(seconds, 2),
            **accuracy(model, x_obs, posterior),
            "sampling_seconds": round(sampling, 2), "steps": posterior.info.get("total_steps"),
            "ess": ess and round(ess, 1), "ess_met": posterior.info.get("ess_met", bool(ess and ess >= 500)),
            "ess_per_second": ess and round(ess / sampling, 1),
            "verdict": check["verdict"], "reasons": check["reasons"], "remedies": check["remedies"],
            "simulations": posterior.info["simulations"],
            "calibration": {k: v for k, v in posterior.info.get("calibration", {}).items() if k != "rounds"},
            "stages": [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}
                       for r in est.ledger_.records]}


def table(rows: list[dict]) -> str:
    """The markdown table; ``table rounds``, ``summary`` (the learned score's regression onto the
    parameters, with the data statistics when they joined it) and how many calibrated SDs away the summed-score posterior (Laplace)
    lies describe the calibrated posterior, ``steps`` the Langevin chains."""
    lines = ["| model | d | n | rep | seconds | mean error / SD | SD ratio | right | covered | verdict "
             "| table rounds | summary | summed score, SDs away | sampling s | steps | ESS |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ess = "n/a" if r["ess"] is None else f"{r['ess']:.0f}{'' if r['ess_met'] else ' (short)'}"
        calibration = r.get("calibration") or {}
        gains = calibration.get("projection_gain") or [None]
        summary = "n/a" if not calibration else ("score" if gains[-1] is None else "score + statistics")
        summed = calibration.get("summed_score")
        summed = "n/a" if not summed else f"{summed['distance_sd']:.2f}"
        lines.append(f"| {r['model']} | {r['d']} | {r['n']} | {r['rep']} | {r['seconds']:.1f} | "
                     f"{r['mean_error']:.2f} | {r['sd_ratio'][0]:.2f}-{r['sd_ratio'][1]:.2f} | "
                     f"{'yes' if r['passed'] else 'no'} | {'yes' if r['covered'] else 'no'} | {r['verdict']} "
                     f"| {calibration.get('table_rounds', 'n/a')} | {summary} | {summed} "
                     f"| {r['sampling_seconds']:.1f} | {r['steps']} | {ess} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(SUITE), help="comma-separated suite models")
    parser.add_argument("--reps", type=int, default=1, help="observed data sets per model")
    parser.add_argument("--first-rep", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--summed", action="store_true", help="Langevin chains on the summed score (calibrate = false)")
    parser.add_argument("--out", default="benchmarks/results/defaults.json")
    args = parser.parse_args(argv)
    names = model_names(parser, args.models)
    rows = []
    for name in names:
        for rep in range(args.first_rep, args.first_rep + args.reps):
            rows.append(run_one(name, rep, args.threads, False if args.summed else None))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    write_json(args.out, rows)
    print(table(rows))


if __name__ == "__main__":
    main()
