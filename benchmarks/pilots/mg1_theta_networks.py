"""Pilot (session 35; mg1 note "GUARDED NEWTON AND NETWORKS IN THETA"): the single-model's nets in theta.

The paper's networks take theta itself (App. C); ours take u (logit of the prior box) unless
``network_coordinates="constrained"``. This fits mg1's single-model at the benchmark's ``single``
(N = 20,000, 1x64 tanh) or ``trust`` (N = 200,000, 2x64 SiLU, q uninflated) scale with the
single-model's seeds, one round, and prints widths, means and coverage of the truth.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/mg1_theta_networks.py REP single|trust constrained|unconstrained``
(logs of session 35's runs: benchmarks/results/mg1_pilot_logs/theta_networks_*.log; about 30 min a
run at the ``single`` scale, most of it sampling; at ``trust`` the fit alone took 33 min).
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mg1 as bench  # noqa: E402

from scorebayes.models import get_model
from scorebayes.parallel import make_generator, derive_seed

rep, key, coord = int(sys.argv[1]), sys.argv[2], sys.argv[3]
model = get_model("mg1")
x_obs = model.observed(make_generator(0, "observed", rep))
s = bench.SMALL[key]
seed = derive_seed(0, "single-model", rep)
est = bench.single_estimator(model, {**s, "network_coordinates": coord}, seed)
t0 = time.time()
est.fit(x_obs)
print(f"fit {time.time()-t0:.0f}s", flush=True)
post = est.sample(s["samples"], chains=s["chains"], max_steps=s["max_steps"])
truth = model.to_reported(model.true_parameters)
th = model.to_reported(post.draws.reshape(-1, 3))
lo, hi = th.quantile(0.025, 0), th.quantile(0.975, 0)
print(f"rep {rep} {key} {coord} t={time.time()-t0:.0f}s widths {[round(v,3) for v in (hi-lo).tolist()]} "
      f"means {[round(v,3) for v in th.mean(0).tolist()]} covers {((lo<=truth)&(truth<=hi)).tolist()} "
      f"edge {post.info.get('edge_fraction')}", flush=True)
