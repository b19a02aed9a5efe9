"""Pilot (session 58): the paper's own n-model (one network on vec(S), the paper's training: n-model-paper-training)
on repetition 2, fitted with its row's seed (saved in runs/pilots/ by epidemic10_local_sbc.fitted): the
score-mean test and calibrate(at=theta*) over 100 data sets, as for the per-rate fits.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_plain_truth.py`` (about 20 min of fitting and 5 min of
checks on one core next to another job).
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
torch.set_num_threads(1)
from epidemic10_local_sbc import fitted  # noqa: E402
from scorebayes.calibration import calibrate, score_mean_test  # noqa: E402
from scorebayes.models import get_model  # noqa: E402
model = get_model('epidemic10'); t = time.perf_counter()
est, rec = fitted(model, 'n-model-paper-training', 2)
print(f'fit {time.perf_counter()-t:.0f}s', [round(v, 1) for v in est.fit_report_.history][:20], flush=True)
est.progress = False
print(score_mean_test(est, model.true_parameters, 1000, seed=5).summary(), flush=True)
cal = calibrate(est, 100, at=model.true_parameters, chains=25, draws_per_chain=20, burn_in=3000, thin=50, seed=41, progress=False)
print(cal.summary()); print('posterior mean', [round(v, 3) for v in cal.posterior_mean.mean(0).tolist()], flush=True)
