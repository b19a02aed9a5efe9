"""Pilot (session 47): does an MH correction bring n-model-views-spread to Table 6?

The epidemic10 row ``n-model-views-spread`` (per-rate networks on their columns of S and the
floor-spread summaries, ULA chains) is near the paper's n-model widths but not within +10% on 9 of
12 rates, and covers 3 rates on only 8 of 10 repetitions (epidemic10 note "FLOOR-SPREAD SUMMARIES
ON 10 REPETITIONS"). On mg1 the MH correction of the ULA chains
(:func:`scorebayes.samplers.sbi_mh.mh_correct`, quadrature acceptance, pCN jumps) narrowed the
n-model's theta1 from 0.035 to the exact width 0.014 (mg1 note "N-MODEL-FEATURES-MH"): ULA's
discretisation had widened it. This refits the row on repetition REP with the row's recorded seed
(so its localization, table and training), samples its ULA chains as the row does (printing their
widths beside the record's), MH-corrects them with mg1's features-mh settings, and prints both against
the paper's n-model widths (Table 6).

Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/epidemic10_mh.py REP``;
appends to ``benchmarks/results/epidemic10_mh_scratch.jsonl``. About 50 min a repetition on
one core next to another job.

Result (session 47, repetitions 0 and 7; logs in benchmarks/results/epidemic10_pilot_logs/mh_rep*.log):
MH accepts 92% of the moves and leaves the widths and means where ULA put them (geometric-mean
width over the paper's 0.99 -> 0.98 and 0.93 -> 0.91; repetition 7 still misses the facility rate
and floors 5-6, and floor 7 after MH), so the correction is no fix for Table 6 (epidemic10 note "MH CORRECTION").
"""
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
import numpy as np  # noqa: E402

import epidemic10  # noqa: E402
import epidemic5  # noqa: E402
import mg1  # noqa: E402
from _sbi_common import repetition_record  # noqa: E402
from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.samplers.sbi_mh import mh_correct  # noqa: E402

# the MH settings of mg1's features-mh rows (mg1.SMALL), so the two corrections stay the same
MH = {key: value for key, value in mg1.SMALL["features_mh"].items() if key.startswith("mh_")}


def main(rep: int) -> None:
    model = get_model("epidemic10")
    names = model.parameter_names
    paper = np.array([epidemic10.TABLE6[name][2][3] for name in names])  # the paper's n-model widths
    records = [json.loads(line) for line in open(BENCH / "results" / "epidemic10_partial.jsonl")]
    rec = next(r for r in records if r["method"] == "n-model-views-spread" and r["rep"] == rep)
    s = epidemic10.SMALL["views_spread"]
    x_obs = model.observed(make_generator(0, "observed", rep))
    est = epidemic5.n_estimator(model, s, epidemic10.SMALL["localization"], rec["seed"])
    truth = model.to_reported(model.true_parameters).numpy()
    start = time.perf_counter()
    est.fit(x_obs)
    fit_seconds = time.perf_counter() - start
    ula = est.sample(s["samples"], chains=s["samples"], max_steps=s["max_steps"])
    ula_seconds = time.perf_counter() - start - fit_seconds
    ula_rec = repetition_record(model, ula, truth)
    print(f"fit {fit_seconds:.0f} s, ULA {ula_seconds:.0f} s", flush=True)
    print("record / paper", np.round(np.array(rec["width"]) / paper, 2).tolist(), rec["covers"], flush=True)
    print("ULA    / paper", np.round(np.array(ula_rec["width"]) / paper, 2).tolist(), ula_rec["covers"], flush=True)
    post = mh_correct(est, s["samples"], chains=ula.samples.shape[0], init=ula, acceptance="quadrature",
                      num_nodes=MH["mh_nodes"], jump_every=MH["mh_jump_every"], jump_beta=MH["mh_jump_beta"],
                      jump_nodes=MH["mh_jump_nodes"], max_steps=MH["mh_steps"])
    mh_seconds = time.perf_counter() - start - fit_seconds - ula_seconds
    mh_rec = repetition_record(model, post, truth)
    print(f"MH {mh_seconds:.0f} s, acceptance {post.info.get('acceptance_rate')}, "
          f"jumps {post.info.get('jump_acceptance_rate')}", flush=True)
    print("MH     / paper", np.round(np.array(mh_rec["width"]) / paper, 2).tolist(), mh_rec["covers"], flush=True)
    out = {"rep": rep, "seed": rec["seed"], "fit_seconds": fit_seconds, "ula_seconds": ula_seconds,
           "mh_seconds": mh_seconds, "paper_width": paper.tolist(), "record_width": rec["width"],
           "record_covers": rec["covers"], "ula_width": ula_rec["width"], "ula_covers": ula_rec["covers"],
           "ula_mean": ula_rec["mean"], "mh_width": mh_rec["width"], "mh_covers": mh_rec["covers"],
           "mh_mean": mh_rec["mean"], "acceptance": post.info.get("acceptance_rate"),
           "jump_acceptance": post.info.get("jump_acceptance_rate"), **MH}
    with open(BENCH / "results" / "epidemic10_mh_scratch.jsonl", "a") as fh:
        fh.write(json.dumps(out, default=float) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]))
