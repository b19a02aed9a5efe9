"""Pilot (session 58): the spread row on repetition REP trained for E epochs (lr 1e-3 -> 1e-5 annealed over
E epochs; the row: 100 epochs, kept epoch the best validation one), the row's seed and table.

The recorded spread fits' validation loss turns up after epoch 5-6 (-35 at best, +26,000 by epoch 45):
the kept network is a snapshot at lr ~7e-4. Prints the validation losses, the score-mean test at
theta* and calibrate(at=theta*) over 100 data sets (seed 41, as the other epidemic10 pilots).

Session 59: ``DETECTION ROOM`` (default ``current capacity``, Chatha et al.'s code) simulate the data,
the table and the calibration with ``get_model("epidemic10", detection=, room_normalisation=)``;
``previous n`` is the paper's prose (record part "annealed_conventions"; the fit is not saved).

``--constrained``: the networks take theta instead of u = log theta (network_coordinates, as the
paper's networks do; record part "annealed_constrained").

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_annealed.py REP E [METHOD [DETECTION ROOM]] [--constrained]``
(about 4-8 min on one core; one torch thread: two threads next to another job made the
localization alone take 40 min instead of 1).
"""
import json
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
RUNS = BENCH.parent / "runs" / "pilots"  # saved fits (git-ignored), from epidemic10_local_sbc.py
RECORDS = BENCH / "results" / "epidemic10_local_sbc_scratch.jsonl"
import epidemic10  # noqa: E402
import epidemic5  # noqa: E402
from epidemic10_truth import checks_at_truth  # noqa: E402
from scorebayes.models import get_model
from scorebayes.parallel import make_generator
constrained = "--constrained" in sys.argv
args = [a for a in sys.argv[1:] if a != "--constrained"]
rep, E = int(args[0]), int(args[1])
method = args[2] if len(args) > 2 else "n-model-views-spread"
key = epidemic5.VARIANT_SCALES[method]
detection, room = args[3:5] if len(args) > 4 else ("current", "capacity")
conventions = (detection, room) != ("current", "capacity")
model = get_model("epidemic10", detection=detection, room_normalisation=room)
recs = [json.loads(l) for l in open(BENCH / "results" / "epidemic10_partial.jsonl")]
rec = next(r for r in recs if r["method"] == method and r["rep"] == rep)
s = {**epidemic10.SMALL[key], "epochs": E, **({"coordinates": "constrained"} if constrained else {})}
est = epidemic5.n_estimator(model, s, epidemic10.SMALL["localization"], rec["seed"])
t = time.time()
est.fit(model.observed(make_generator(0, "observed", rep)))
print(f"fit {time.time() - t:.0f} s; validation", [round(v, 1) for v in est.fit_report_.history], flush=True)
if not conventions:
    torch.save(est, f"{RUNS}/epidemic10_{method}_epochs{E}{'_constrained' if constrained else ''}_rep{rep}.pt")
sm, cal = checks_at_truth(est, model)
print(f"total {time.time() - t:.0f} s")
with open(RECORDS, "a") as fh:
    fh.write(json.dumps({"rep": rep, "epochs": E, "method": method, "part": ("annealed_conventions" if conventions else "annealed") + ("_constrained" if constrained else ""),
                         **({"detection": detection, "room_normalisation": room} if conventions else {}), "truth": cal.to_dict(),
                         "score_mean": sm.to_dict(), "history": est.fit_report_.history}, default=float) + "\n")
