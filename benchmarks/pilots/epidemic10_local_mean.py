"""Pilot (session 58): a local linear mean correction of the full-data learned score around the posterior.

The full-mode analogue of ScoreLangevin.refine_debiasing: sample the posterior of repetition REP's
data with the saved fit, draw K parameters from N(median, (INFLATION x 1.4826 MAD)^2) in u, simulate
one data set at each, regress the learned score on u (the true score has mean zero at every u) and
subtract the fit a + B(u - c) from the likelihood score; then sample again. Prints the score-mean
test at theta* before and after and both posteriors (``--cal``: also calibrate at theta*).

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_local_mean.py REP METHOD [K INFLATION] [--cal]``
(the fit as epidemic10_local_sbc.py saves it; about 10 min on one core without --cal). Session 58's
output: benchmarks/results/epidemic10_local_mean_rep{2,9}.log.
"""
import sys
import time
from pathlib import Path

import torch
from torch import nn

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "pilots"))
RUNS = BENCH.parent / "runs" / "pilots"  # saved fits (git-ignored), from epidemic10_local_sbc.py
from epidemic10_local_sbc import fitted  # noqa: E402
from scorebayes.calibration import _simulate_views, _data_set_scores, calibrate, score_mean_test
from scorebayes.scores.local_debias import LocalLinearCorrection, fit_local_correction
from scorebayes.models import get_model
from scorebayes.parallel import make_generator, derive_seed

class Zero(nn.Module):
    def forward(self, u): return torch.zeros_like(u)

torch.set_num_threads(1)
rep, method = int(sys.argv[1]), sys.argv[2]
K = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
infl = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
model = get_model('epidemic10')
est, _ = fitted(model, method, rep)
est.progress = False
truth = model.true_parameters
t0 = time.perf_counter()
def show(tag, post):
    th = post.samples.reshape(-1, post.samples.shape[-1])
    lo, hi = th.quantile(0.025, 0), th.quantile(0.975, 0)
    cov = ((lo <= truth) & (truth <= hi))
    print(tag, f"{time.perf_counter()-t0:.0f}s covered {int(cov.sum())}/{cov.numel()}",
          'fac mean %.4f [%.4f, %.4f]' % (th[:, 0].mean(), lo[0], hi[0]), flush=True)
    print('  mean', [f'{v:.3f}' for v in th.mean(0).tolist()])
    print('  width', [f'{v:.3f}' for v in (hi - lo).tolist()])
sm = score_mean_test(est, truth, 1000, seed=1)
print('score mean at truth, before:\n', sm.summary(), flush=True)
post0 = est.sample(1000, chains=1000, max_steps=20000); torch.save(post0, RUNS / f'post0_{method}_rep{rep}.pt')
show('before', post0)
u = est._posterior_u(post0)
c = u.median(0).values
r = infl * ((u - c).abs().median(0).values * 1.4826)
g = make_generator(7, 'local-mean', rep)
u_l = c + r * torch.randn(K, len(c), generator=g, dtype=torch.float64)
theta_l = est.space.to_constrained(u_l)
_, views = _simulate_views(est, theta_l, g)
print(f'simulated {K} at {time.perf_counter()-t0:.0f}s', flush=True)
with torch.no_grad():
    s = _data_set_scores(est, views)(u_l[:, None, :])[:, 0]
a, B, rsd = fit_local_correction(u_l, s, c)
print('intercept', [f'{v:+.2f}' for v in a.tolist()]); print('resid sd', [f'{v:.2f}' for v in rsd.tolist()])
print('intercept / (resid sd/sqrt K)', [f'{v:+.1f}' for v in (a / (rsd / K**.5)).tolist()])
est.mean_net_ = LocalLinearCorrection(Zero(), a, B, c)
sm = score_mean_test(est, truth, 1000, seed=1)
print('score mean at truth, after:\n', sm.summary(), flush=True)
post1 = est.sample(1000, chains=1000, max_steps=20000)
show('after', post1)
if '--cal' in sys.argv:
    cal = calibrate(est, 100, at=truth, chains=25, draws_per_chain=20, burn_in=3000, thin=50,
                    seed=derive_seed(1, 'local-sbc', 'truth'))
    print(cal.summary(), flush=True)
torch.save({'a': a, 'B': B, 'c': c, 'r': r}, RUNS / f'local_mean_{method}_rep{rep}_K{K}_i{infl}.pt')
