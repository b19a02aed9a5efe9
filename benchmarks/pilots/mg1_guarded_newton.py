"""Pilot (session 35; mg1 note "GUARDED NEWTON AND NETWORKS IN THETA"): guarded trust-region rounds.

The single-model-trust scale and seeds; after each round the region moves to the learned
posterior score's Newton root from the chains' median (``laplace_step``) when its Jacobian is
negative definite and the step is within one region SD ("guarded"), with the SD cut to
max(1/4 of it, K Laplace SDs); otherwise it recentres on the median and halves ("halve" always
does that). Prints every round (widths, means, coverage of the truth, the Laplace step).

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/mg1_guarded_newton.py REP ROUNDS K guarded|halve``
(log of session 35's run: benchmarks/results/mg1_pilot_logs/guarded_newton_rep0.log; about 15 min
a round next to another process).
"""
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch
import mg1 as bench  # noqa: E402
from scorebayes.models import get_model
from scorebayes.trust_region import laplace_step
from scorebayes.parallel import make_generator, derive_seed

rep, rounds, K, mode = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
model = get_model("mg1")
x_obs = model.observed(make_generator(0, "observed", rep))
s = bench.SMALL["trust"]
seed = derive_seed(0, "single-model-trust", rep)
est = bench.single_estimator(model, s, seed)
truth = model.to_reported(model.true_parameters)
t0 = time.time()

def summary(post, tag):
    th = model.to_reported(post.draws.reshape(-1, 3))
    lo, hi = th.quantile(0.025, 0), th.quantile(0.975, 0)
    print(f"[{tag}] t={time.time()-t0:.0f}s widths {[round(v,3) for v in (hi-lo).tolist()]} "
          f"means {[round(v,3) for v in th.mean(0).tolist()]} covers {((lo<=truth)&(truth<=hi)).tolist()} "
          f"edge {post.info.get('edge_fraction')}", flush=True)

est.fit(x_obs)
for k in range(rounds - 1):
    q = est.proposal_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = est.sample(s["round_draws"], chains=s["round_chains"], max_steps=s["max_steps"])
    summary(post, f"round {k}")
    u = est._posterior_u(post)
    m = u.median(0).values
    edge = float(post.info.get("edge_fraction", 0.0))
    lap = laplace_step(est, m, q.sd, max_step=2.0)
    pd = bool((lap.curvature > 0).all())
    small = bool((lap.step.abs() <= 1.0 * q.sd).all())
    print(f"  centre_u {m.tolist()} sd {q.sd.tolist()} curv {lap.curvature.tolist()} step {lap.step.tolist()} "
          f"lapsd {lap.sd.tolist()} pd {pd} small {small}", flush=True)
    if mode == "guarded" and pd and small and edge <= 0.01:
        centre = m + lap.step
        sd = torch.minimum(q.sd, torch.maximum(0.25 * q.sd, K * lap.sd))
        why = "newton"
    elif edge <= 0.01:
        centre, sd, why = m, 0.5 * q.sd, "halve"
    else:
        centre, sd, why = m, q.sd, "move"
    print(f"  -> {why}: centre_theta {model.to_reported(est.space.to_constrained(centre[None]))[0].tolist()} sd {sd.tolist()}", flush=True)
    est.move_tables(centre, sd)
post = est.sample(s["samples"], chains=s["chains"], max_steps=s["max_steps"])
summary(post, "final")
