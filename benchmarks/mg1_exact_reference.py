"""mg1-exact-reference: the exact posteriors of mg1's observed data sets, and each method's intervals against them

Table 1 judges the methods by coverage of the true parameter, which over 10 repetitions cannot
tell a method that is right from one that is wide. The M/G/1 likelihood without noise smoothing
is computable (scorebayes.models.mg1_exact: the arrival times are confined to intervals, and
sequential importance sampling gives an unbiased likelihood estimate), so each repetition's exact
posterior is available by adaptive importance sampling (``reference_posterior``). This benchmark
computes it on mg1's observed data sets (``model.observed(make_generator(seed, "observed", r))``,
the same data as ``scorebayes bench mg1``) and compares, for every method with a record of that
repetition in ``results/mg1_partial.jsonl`` (the last record of each method and repetition made
under mg1's current settings):

- width ratio: the method's CI95 width over the exact posterior's;
- offset: |method mean - exact mean| in exact posterior SDs.

The exact posterior is the n-model's target (its weight function handles theta1 <= min x
exactly). The single-model targets the noise-smoothed model (sigma_eps = 0.25), whose posterior
is wider (``mg1-score-reference``), so its width ratios above 1 are partly by design.

Each repetition's reference is saved as it completes (``results/mg1_exact_reference_partial.jsonl``)
and reused by later runs with the same settings. The importance proposal's draws come from the repetition's seed alone, so a
rerun gives the same draws.

Usage: scorebayes bench mg1-exact-reference [--reps R] [--only-reps 0,3] [--draws D] [--rounds K]
       [--particles M] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mg1  # noqa: E402
from _sbi_common import _load_partial, config_fingerprint  # noqa: E402
from _smh_common import RESULTS, pyplot, write_results  # noqa: E402

from scorebayes import metrics  # noqa: E402
from scorebayes.models import get_model  # noqa: E402
from scorebayes.models.mg1_exact import reference_posterior  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402

NAME = "mg1_exact_reference"
NAMES = ["theta1", "theta2", "theta3"]
PAPER = {"single-model": [0.149, 0.247, 0.033], "n-model": [0.014, 0.717, 0.032]}  # Table 1 CI95 widths
#: methods drawn in the figure (when they have records), besides the exact posterior
FIGURE_METHODS = ("n-model", "single-model", "n-model-features-mh", "single-model-features-deep-mh-nocut",
                  "abc", "bsl", "npe")


def exact_record(model, r: int, seed: int, settings: dict, progress: bool) -> dict:
    """The exact posterior of repetition ``r``'s observed data: mean, SD, CI95 and diagnostics."""
    x = model.observed(make_generator(seed, "observed", r))
    start = time.perf_counter()
    post = reference_posterior(x, draws=settings["draws"], rounds=settings["rounds"],
                               particles=settings["particles"], seed=seed * 1_000 + r, progress=progress)
    s, w = post.samples.reshape(-1, 3).numpy(), post.weights.reshape(-1).numpy()
    mean = metrics.posterior_mean(s, w)
    low, high = metrics.credible_interval(s, w)
    truth = model.to_reported(model.true_parameters[None])[0].numpy()
    return {"rep": r, "seed": seed, "settings": settings, "seconds": time.perf_counter() - start,
            "mean": mean.tolist(), "sd": np.sqrt(metrics.posterior_mean((s - mean) ** 2, w)).tolist(),
            "low": low.tolist(), "high": high.tolist(), "width": (high - low).tolist(),
            "covers": ((low <= truth) & (truth <= high)).tolist(), "ess": post.info["ess"],
            "min_x": post.info["min_x"]}


def method_records(seed: int) -> dict[tuple[str, int], dict]:
    """The last record of every (method, repetition) of ``results/mg1_partial.jsonl`` for ``seed``
    that has intervals, leaving out records made under settings other than mg1's current
    (small-scale) ones, as ``scorebayes bench mg1`` does."""
    fingerprints = {m: config_fingerprint(c) for m, c in mg1.record_configs(mg1.SMALL).items()}
    found = _load_partial(RESULTS / "mg1_partial.jsonl", seed, fingerprints=fingerprints)
    return {key: rec for key, rec in found.items() if "low" in rec}


def compare(exact: dict[int, dict], records: dict[tuple[str, int], dict]) -> dict[str, dict]:
    """Per method, over the repetitions with both: mean width ratio and mean offset per parameter,
    and how often the method's interval holds the exact posterior mean."""
    rows: dict[str, dict] = {}
    for method in sorted({m for m, r in records if r in exact}):
        reps = sorted(r for m, r in records if m == method and r in exact)
        ratio, offset, holds = [], [], []
        for r in reps:
            rec, ref = records[(method, r)], exact[r]
            ratio.append(np.subtract(rec["high"], rec["low"]) / np.array(ref["width"]))
            offset.append(np.abs(np.subtract(rec["mean"], ref["mean"])) / np.array(ref["sd"]))
            holds.append((np.array(rec["low"]) <= ref["mean"]) & (np.array(ref["mean"]) <= rec["high"]))
        rows[method] = {"reps": reps, "width_ratio": np.mean(ratio, 0).tolist(),
                        "offset_sd": np.mean(offset, 0).tolist(), "holds_exact_mean": np.sum(holds, 0).tolist()}
    return rows


def figure(exact: dict[int, dict], records: dict, truth: np.ndarray, path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.5 * len(exact) + 2.5))
    shown = [m for m in FIGURE_METHODS if any((m, r) in records for r in exact)]
    colors = plt.get_cmap("tab10")
    for k, ax in enumerate(axes):
        for i, r in enumerate(sorted(exact)):
            ref = exact[r]
            ax.plot([ref["low"][k], ref["high"][k]], [i, i], color="black", lw=4, solid_capstyle="butt",
                    label="exact posterior" if i == 0 else None)
            for j, m in enumerate(shown):
                if (m, r) in records:
                    rec = records[(m, r)]
                    y = i + 0.1 * (j + 1)
                    ax.plot([rec["low"][k], rec["high"][k]], [y, y], color=colors(j), lw=1.5,
                            label=m if i == min(rr for mm, rr in records if mm == m and rr in exact) else None)
        ax.axvline(truth[k], color="grey", ls="--", lw=1)
        ax.set_yticks(range(len(exact)), [f"rep {r}" for r in sorted(exact)])
        ax.set_title(f"{NAMES[k]}: CI95 per repetition")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=4)  # below the panels, off the bars
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(exact: dict[int, dict], rows: dict[str, dict], settings: dict) -> str:
    reps = sorted(exact)
    widths = np.mean([exact[r]["width"] for r in reps], 0)
    lines = [f"Exact posteriors (adaptive importance sampling, {settings['rounds']} rounds of "
             f"{settings['draws']:,} draws, {settings['particles']} particles per observation) of "
             f"repetitions {reps}.", "",
             "| rep | min x | theta1 CI95 | theta2 CI95 | theta3 CI95 | covers truth | ESS (last round) |",
             "|---|---|---|---|---|---|---|"]
    for r in reps:
        e = exact[r]
        cells = [f"{e['low'][k]:.4f}-{e['high'][k]:.4f}" for k in range(3)]
        lines.append(f"| {r} | {e['min_x']:.4f} | " + " | ".join(cells)
                     + f" | {'/'.join('yes' if c else 'no' for c in e['covers'])} | {e['ess'][-1]:.0f} |")
    lines += ["", f"Mean exact CI95 widths: {widths[0]:.4f} / {widths[1]:.4f} / {widths[2]:.4f} "
              f"(Table 1: single-model {PAPER['single-model']}, n-model {PAPER['n-model']}).", "",
              "Each method against the exact posterior (means over its repetitions here): CI95 width "
              "over the exact width; |mean - exact mean| in exact SDs; intervals holding the exact mean.",
              "", "| method | reps | width ratio | offset (SDs) | hold exact mean |", "|---|---|---|---|---|"]
    for m, row in rows.items():
        lines.append(f"| {m} | {len(row['reps'])} | " + " / ".join(f"{v:.2f}" for v in row["width_ratio"])
                     + " | " + " / ".join(f"{v:.1f}" for v in row["offset_sd"])
                     + " | " + " / ".join(str(v) for v in row["holds_exact_mean"]) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=10, help="repetitions 0..R-1 (mg1's observed data sets)")
    p.add_argument("--only-reps", help="comma-separated repetitions to compute now (the rest are read)")
    p.add_argument("--seed", type=int, default=0, help="mg1's base seed (its observed data)")
    p.add_argument("--draws", type=int, default=4_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--particles", type=int, default=256)
    p.add_argument("--quick", action="store_true", help="a smoke run: repetition 0, 2 rounds of 400 draws")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.reps < 1 or min(args.draws, args.rounds, args.particles) < 1:
        raise SystemExit("--reps, --draws, --rounds and --particles must be positive")
    todo = (list(range(args.reps)) if args.only_reps is None
            else sorted({int(v) for v in args.only_reps.split(",")}))
    settings = {"draws": args.draws, "rounds": args.rounds, "particles": args.particles}
    if args.quick:
        todo, settings = [0], {"draws": 400, "rounds": 2, "particles": 64}
    name = NAME + ("_quick" if args.quick else "")
    torch.set_num_threads(1)
    model = get_model("mg1")
    partial = RESULTS / f"{name}_partial.jsonl"
    exact: dict[int, dict] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            rec = json.loads(line)
            if rec["seed"] == args.seed and rec["settings"] == settings:
                exact[rec["rep"]] = rec
    start = time.perf_counter()
    for r in todo:
        if r in exact:
            continue
        exact[r] = exact_record(model, r, args.seed, settings, progress=not args.quiet)
        RESULTS.mkdir(parents=True, exist_ok=True)
        with open(partial, "a") as fh:
            fh.write(json.dumps(exact[r]) + "\n")
        if not args.quiet:
            e = exact[r]
            print(f"[{name}] rep {r}: CI95 " + ", ".join(f"{e['low'][k]:.4f}-{e['high'][k]:.4f}" for k in range(3))
                  + f", ESS {e['ess'][-1]:.0f}, {e['seconds']:.0f} s", flush=True)
    if args.only_reps is not None:
        print(f"saved repetitions {todo}; render with: scorebayes bench mg1-exact-reference --reps R")
        return
    exact = {r: exact[r] for r in range(args.reps) if r in exact}
    records = method_records(args.seed)
    rows = compare(exact, records)
    truth = model.to_reported(model.true_parameters[None])[0].numpy()
    figure(exact, records, truth, RESULTS / f"{name}.png")
    md = markdown(exact, rows, settings) + f"\n\n![intervals]({name}.png)"
    write_results(name, {"settings": settings, "exact": exact, "methods": rows}, md, start)
    if not args.quiet:
        print(md)


if __name__ == "__main__":
    main()
