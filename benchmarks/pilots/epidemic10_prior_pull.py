"""Pilot (session 59): how much of the facility rate's shift at theta* could the exact posterior own?

For the exact likelihood score the mean over data sets at theta* is zero, so an exact posterior
is pulled off theta* only by the prior (and by higher-order terms). In a Laplace picture with
Fisher information I (estimated by the covariance of the learned score over 1,000 data sets at
theta*, as score_mean_test does) and the prior N(mu0, diag(s0^2)) in u = log theta, the posterior
precision is H = I + P, P = diag(1 / s0^2), and the posterior mean's expected offset from u* is

    b = H^{-1} (P (mu0 - u*) + s_bar),

the prior's pull plus, for the learned score, the score's mean s_bar at theta*. Printed per rate in
posterior SDs sqrt(diag H^{-1}): the prior's part, the learned score's part, their sum, and the
mean z measured by calibrate(at=theta*) for the same fit (records in
epidemic10_local_sbc_scratch.jsonl), to set against it.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_prior_pull.py [METHOD REP]`` (default the
spread row, repetition 2; a saved fit in runs/pilots/, or a refit of 20-40 min; about 2 min on one
core once fitted).
"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
torch.set_num_threads(1)
from epidemic10_local_sbc import fitted  # noqa: E402

from scorebayes.calibration import _data_set_scores, _simulate_views  # noqa: E402
from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402

RECORDS = Path(__file__).resolve().parents[1] / "results" / "epidemic10_local_sbc_scratch.jsonl"

method = sys.argv[1] if len(sys.argv) > 1 else "n-model-views-spread"
rep = int(sys.argv[2]) if len(sys.argv) > 2 else 2
model = get_model("epidemic10")
est, _ = fitted(model, method, rep)
space, d = est.space, est.space.dim
star = model.true_parameters.to(torch.float64)
u_star = space.to_unconstrained(star)

# the prior in u, from draws (lognormal(-3, 2): N(-3, 2) in log theta)
u_prior = space.to_unconstrained(model.prior.sample((200_000,)).to(torch.float64))
mu0, s0 = u_prior.mean(0), u_prior.std(0)

M = 1000
_, views = _simulate_views(est, star.expand(M, d).clone(), make_generator(5, "score-mean-test"))
with torch.no_grad():
    scores = _data_set_scores(est, views)(u_star.expand(M, 1, d))[:, 0]  # [M, d]
s_bar, info = scores.mean(0), torch.cov(scores.T)
H_inv = torch.linalg.inv(info + torch.diag(1.0 / s0**2))
sd = H_inv.diagonal().sqrt()
prior_part = H_inv @ (torch.diag(1.0 / s0**2) @ (mu0 - u_star)) / sd
score_part = H_inv @ s_bar / sd

mz = None  # the local-SBC record's calibrate(at=theta*) for this fit (epidemic10_local_sbc.py)
for line in open(RECORDS):
    r = json.loads(line)
    if (r.get("method") == method and r.get("rep") == rep and r.get("part") is None
            and isinstance(r.get("truth", {}).get("mean_z"), list)):
        mz = r["truth"]["mean_z"]
print(f"{method}, repetition {rep}: expected offset of the posterior mean from theta*, in posterior SDs")
print("| parameter | theta* | prior mu0 (u) | Laplace sd (u) | prior's pull | learned score's mean | sum | measured mean z |")
print("|---|---|---|---|---|---|---|---|")
names = model.parameter_names
for j in range(d):
    m = f"{mz[j]:+.2f}" if mz is not None else "-"
    print(f"| {names[j]} | {float(star[j]):.3f} | {float(mu0[j]):+.2f} | {float(sd[j]):.3f} | "
          f"{float(prior_part[j]):+.2f} | {float(score_part[j]):+.2f} | "
          f"{float(prior_part[j] + score_part[j]):+.2f} | {m} |")
with open(RECORDS, "a") as fh:
    fh.write(json.dumps({"rep": rep, "method": method, "part": "prior_pull", "laplace_sd": sd.tolist(),
                         "prior_pull_z": prior_part.tolist(), "score_mean_z": score_part.tolist()}) + "\n")
