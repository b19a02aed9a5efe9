"""Pilot (session 58): recalibration (Rodrigues, Prangle & Sisson 2018, CSDA 126) of the n-model posterior,
checked at theta*.

K data sets at theta* are sampled with the saved fit (calibrate(at=theta*), the model prior). For each,
a local simulation-based calibration: M parameters drawn from that data set's posterior draws, one
data set at each, C chains per data set on the model prior (calibrate(at=[M, d])); the ranks' 2.5%
and 97.5% quantiles then replace 0.025 and 0.975 as the interval's posterior quantiles (the
recalibrated marginal CDF is G(F(t)), G the ranks' empirical CDF). Prints, per data set, whether
theta* is covered before and after.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_recalibration.py REP METHOD K M C``
(session 58: 10 100 10; about 3 min a data set on one core).
"""
import json
import sys
import time
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "pilots"))
RUNS = BENCH.parent / "runs" / "pilots"  # saved fits (git-ignored), from epidemic10_local_sbc.py
RECORDS = BENCH / "results" / "epidemic10_local_sbc_scratch.jsonl"
from epidemic10_local_sbc import fitted  # noqa: E402
from scorebayes.calibration import calibrate
from scorebayes.models import get_model
from scorebayes.parallel import derive_seed
torch.set_num_threads(1)
rep, method, K = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
M, C = int(sys.argv[4]), int(sys.argv[5])
model = get_model('epidemic10')
est, _ = fitted(model, method, rep)
est.progress = False
truth = model.true_parameters
t0 = time.perf_counter()
kw = dict(draws_per_chain=20, burn_in=3000, thin=50)
first = calibrate(est, K, at=truth, chains=25, seed=derive_seed(5, 'recal-first', rep), **kw)
print(f'first {time.perf_counter()-t0:.0f}s covered {int(first.covered.sum())}/{first.covered.numel()}', flush=True)
out = []
for k in range(K):
    dr = first.draws[k]  # [L, d]
    g = torch.Generator().manual_seed(k)
    at = dr[torch.randperm(len(dr), generator=g)[:M]] if M <= len(dr) else dr[torch.randint(len(dr), (M,), generator=g)]
    loc = calibrate(est, M, at=at, chains=C, seed=derive_seed(5, 'recal-local', rep, k), **kw)
    R = loc.ranks
    p_lo, p_hi = R.quantile(0.025, 0), R.quantile(0.975, 0)
    lo = torch.stack([dr[:, j].quantile(p_lo[j]) for j in range(dr.shape[1])])
    hi = torch.stack([dr[:, j].quantile(p_hi[j]) for j in range(dr.shape[1])])
    lo0, hi0 = dr.quantile(0.025, 0), dr.quantile(0.975, 0)
    rec = {'k': k, 'cov0': ((lo0 <= truth) & (truth <= hi0)).tolist(), 'cov1': ((lo <= truth) & (truth <= hi)).tolist(),
           'w0': (hi0 - lo0).tolist(), 'w1': (hi - lo).tolist(), 'local_cov': loc.covered.double().mean(0).tolist(),
           'local_z': loc.z.mean(0).tolist(), 'p_lo': p_lo.tolist(), 'p_hi': p_hi.tolist()}
    out.append(rec)
    print(f'{k} {time.perf_counter()-t0:.0f}s before {sum(rec["cov0"])}/12 after {sum(rec["cov1"])}/12 '
          f'fac [{float(lo0[0]):.3f},{float(hi0[0]):.3f}] -> [{float(lo[0]):.3f},{float(hi[0]):.3f}] local z fac {rec["local_z"][0]:+.2f}', flush=True)
c0 = torch.tensor([r['cov0'] for r in out]).double(); c1 = torch.tensor([r['cov1'] for r in out]).double()
w0 = torch.tensor([r['w0'] for r in out]); w1 = torch.tensor([r['w1'] for r in out])
print('coverage before', int(c0.sum()), 'after', int(c1.sum()), 'of', c0.numel())
print('per param before', c0.mean(0).tolist()); print('per param after', c1.mean(0).tolist())
print('width ratio after/before', [f'{v:.2f}' for v in (w1.mean(0) / w0.mean(0)).tolist()])
with open(RECORDS, 'a') as fh:
    fh.write(json.dumps({'rep': rep, 'method': method, 'part': 'recalibration', 'K': K, 'M': M, 'C': C, 'data_sets': out}) + '\n')
