"""Pilot (session 31; note "A LEAD" in ``epidemic10.py``): per-rate networks that also see floor-spread summaries of S.

Kept to reproduce the pilot's record. The method itself is now the benchmark variant
``n-model-views-spread`` (``ScoreLangevin(data_features=model.floor_spread,
score_views=model.score_views(spread=True))``, the same summaries), with a seed of its own.

n-model-views with the same seed (so the same localization, table and training RNG) as the
benchmark's record, but every rate's view is its two columns of S plus 4 per-time summaries of
how the observed infections spread over the floors:
  sd_j p_j(t), max_j p_j(t), min_j p_j(t), cov_j(p_j(t) - p_j(t-1), p_j(t-1)).
Facility-wide transmission lifts every floor alike, floor transmission grows floors in
proportion to their own prevalence.

Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/epidemic10_spread.py REP [VARIANT]``
(VARIANT: all | facility); appends to ``benchmarks/results/epidemic10_spread_scratch.jsonl``.
About 1.5 h a repetition on one core.
"""
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
import torch

import epidemic10
from scorebayes.sbi import ScoreLangevin
from scorebayes.scores.training import TrainingSchedule
from scorebayes.models import get_model
from scorebayes.parallel import make_generator
from _sbi_common import repetition_record

REP = int(sys.argv[1])
VARIANT = sys.argv[2] if len(sys.argv) > 2 else "all"
model = get_model("epidemic10")
T, W = model.steps, model.floors + 2
J = model.floors
K = 4


def spread(vec_s: torch.Tensor) -> torch.Tensor:
    """``vec(S) [..., T W] -> [..., T K]`` (row-major, entry (t, k) at t K + k)."""
    s = vec_s.reshape(*vec_s.shape[:-1], T, W)
    p = s[..., 1:J + 1]                                  # floors' prevalences [..., T, J]
    prev = torch.cat([torch.zeros_like(p[..., :1, :]), p[..., :-1, :]], -2)
    inc = p - prev
    sd = p.std(-1)
    mx = p.amax(-1)
    cov = ((inc - inc.mean(-1, keepdim=True)) * (prev - prev.mean(-1, keepdim=True))).mean(-1)
    mn = p.amin(-1)
    return torch.stack([sd, mx, mn, cov], -1).reshape(*vec_s.shape[:-1], T * K)


class SpreadLangevin(ScoreLangevin):
    def _observations(self, x_obs):
        v = super()._observations(x_obs)
        return torch.cat([v, spread(v)], -1)

    def _table_view(self, x):
        v = super()._table_view(x)
        return torch.cat([v, spread(v)], -1)


base = model.score_views()
extra = [T * W + t * K + k for t in range(T) for k in range(K)]
if VARIANT == "all":
    views = [v + extra for v in base]
else:  # only the facility rate's net
    views = [v + extra if j == 0 else v for j, v in enumerate(base)]

recs = [json.loads(l) for l in open(BENCH / "results" / "epidemic10_partial.jsonl")]
rec = next(r for r in recs if r["method"] == "n-model-views" and r["rep"] == REP)
s = epidemic10.SMALL["views"]
x_obs = model.observed(make_generator(0, "observed", REP))
est = SpreadLangevin(
    model.prior, model.simulator, mode="full", localize=True, localization=epidemic10.SMALL["localization"],
    num_simulations=s["N"], hidden=s["hidden"], activation="elu", score_views=views,
    schedule=TrainingSchedule(epochs=s["epochs"], penalty_epochs=0, batch_size=s["batch"], lr=s["lr"],
                              validation_fraction=s["validation"]),
    curvature_penalties=(0.0,), parameter_names=model.parameter_names, seed=rec["seed"], progress=False)
t0 = time.perf_counter()
post = est.fit(x_obs).sample(s["samples"], chains=s["samples"], max_steps=s["max_steps"])
out = {"method": f"spread-{VARIANT}", "rep": REP, "seed": rec["seed"], "seconds": time.perf_counter() - t0}
out.update(repetition_record(model, post, model.to_reported(model.true_parameters).numpy()))
with open(BENCH / "results" / "epidemic10_spread_scratch.jsonl", "a") as fh:
    fh.write(json.dumps(out, default=float) + "\n")
print("views  ", [round(w, 3) for w in rec["width"]], rec["covers"])
print("spread ", [round(w, 3) for w in out["width"]], out["covers"])
