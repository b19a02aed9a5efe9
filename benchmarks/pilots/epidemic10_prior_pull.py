"""Pilot (session 59): how much of the facility rate's shift at theta* could the exact posterior own?

For the exact likelihood score the mean over data sets at theta* is zero, so an exact posterior
is pulled off theta* only by the prior (and by higher-order terms). In a Laplace picture with
Fisher information I (estimated by the covariance of the learned score over 1,000 data sets at
theta*, as score_mean_test does) and the prior N(mu0, diag(s0^2)) in u = log theta, the posterior
precision is H = I + P, P = diag(1 / s0^2), and the posterior mean's expected offset from u* is

    b = H^{-1} (P (mu0 - u*) + s_bar),

the prior's pull plus, for the learned score, the score's mean s_bar at theta*. Printed per rate in
posterior SDs: the prior's part (score_mean_test's prior_pull_sd), the learned score's part (its
shift_sd, I^{-1} s_bar), their sum, and the
mean z measured by calibrate(at=theta*) for the same fit (records in
epidemic10_local_sbc_scratch.jsonl), to set against it.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_prior_pull.py [METHOD REP]`` (default the
spread row, repetition 2; a saved fit in runs/pilots/, or a refit of 20-40 min; about 30 s on one
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

from scorebayes.calibration import score_mean_test  # noqa: E402
from scorebayes.models import get_model  # noqa: E402

RECORDS = Path(__file__).resolve().parents[1] / "results" / "epidemic10_local_sbc_scratch.jsonl"

method = sys.argv[1] if len(sys.argv) > 1 else "n-model-views-spread"
rep = int(sys.argv[2]) if len(sys.argv) > 2 else 2
model = get_model("epidemic10")
est, _ = fitted(model, method, rep)
star = model.true_parameters.to(torch.float64)
test = score_mean_test(est, star, 1000, seed=5)  # its prior_pull: the Laplace estimate above
prior_part = test.prior_pull_sd
score_part = test.shift_sd  # I^-1 s_bar, in SDs of I^-1 (the prior left out)

mz = None  # the local-SBC record's calibrate(at=theta*) for this fit (epidemic10_local_sbc.py)
for line in open(RECORDS):
    r = json.loads(line)
    if (r.get("method") == method and r.get("rep") == rep and r.get("part") is None
            and isinstance(r.get("truth", {}).get("mean_z"), list)):
        mz = r["truth"]["mean_z"]
print(f"{method}, repetition {rep}: expected offset of the posterior mean from theta*, in posterior SDs")
print("| parameter | theta* | prior's pull | learned score's mean | sum | measured mean z |")
print("|---|---|---|---|---|---|")
names = model.parameter_names
for j in range(len(names)):
    m = f"{mz[j]:+.2f}" if mz is not None else "-"
    print(f"| {names[j]} | {float(star[j]):.3f} | {float(prior_part[j]):+.2f} | {float(score_part[j]):+.2f} | "
          f"{float(prior_part[j] + score_part[j]):+.2f} | {m} |")
with open(RECORDS, "a") as fh:
    fh.write(json.dumps({"rep": rep, "method": method, "part": "prior_pull", **test.to_dict()}) + "\n")
