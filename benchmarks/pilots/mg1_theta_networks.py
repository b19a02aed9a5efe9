"""Pilot (session 35; mg1 note "GUARDED NEWTON AND NETWORKS IN THETA"): the single-model's nets in theta.

The paper's networks take theta itself (App. C); ours take u (logit of the prior box) unless
``network_coordinates="constrained"``. This fits mg1's single-model at the benchmark's ``single``
(N = 20,000, 1x64 tanh) or ``trust`` (N = 200,000, 2x64 SiLU, q uninflated) scale with the
single-model's seeds, one round, and prints widths, means and coverage of the truth.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/mg1_theta_networks.py REP single|trust constrained|unconstrained``
(logs of session 35's runs: benchmarks/results/mg1_pilot_logs/theta_networks_*.log; about 30 min a
run, most of it sampling).
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mg1 as bench  # noqa: E402

from scorebayes.models import get_model
from scorebayes.parallel import make_generator, derive_seed
from scorebayes.sbi import ScoreLangevin, TrainingSchedule

rep, key, coord = int(sys.argv[1]), sys.argv[2], sys.argv[3]
model = get_model("mg1")
x_obs = model.observed(make_generator(0, "observed", rep))
s = bench.SMALL[key]
seed = derive_seed(0, "single-model", rep)
est = ScoreLangevin(
    model.prior, model.simulator, mode="single", localize=s["localize"], localization=bench.LOCALIZATION,
    num_simulations=s["N"], num_groups=s["N_R"], group_size=s["m_R"], hidden=s.get("hidden", (64,)),
    activation=s.get("activation", "tanh"),
    schedule=TrainingSchedule(epochs=s["epochs"], penalty_epochs=s["penalty_epochs"], batch_size=s["batch"], lr=s["lr"]),
    mean_schedule=TrainingSchedule(epochs=s["mean_epochs"], penalty_epochs=s["mean_penalty_epochs"],
                                   batch_size=s.get("mean_batch", 10)),
    curvature_penalties=(1e-8,), mean_penalties=(1e-8,), noise_sd=0.25, noise_draws=3,
    proposal_inflation=s.get("inflation", 2.0), network_coordinates=coord,
    support_fn=model.support, parameter_names=model.parameter_names, seed=seed, progress=False)
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
