"""Pilot (session 53): a paper-scale row measured at the paper's sample size.

Table 2's paper rows are 10,000 draws (1,000 chains x 10); the paper-scale rows here record 1,000
(100 chains x 10), and KS between finite samples is biased upwards (1,000 exact draws against the
benchmark's 5,000-draw reference: 0.024-0.032). This rebuilds METHOD's recorded result on
repetition REP from its run store (fit, first sampling, kernel refit, warm-started re-sample: all
stored, nothing is re-run) and then draws 10,000 from 1,000 chains, each started at one of the
re-sample's 1,000 draws (chains that start in the learned posterior: no tempering, 1,000 steps of
burn-in, 10 draws 100 steps apart; 2e6 chain-steps, as many as the re-sample's 100 x 20,000).
The draws are stored in the run store like any sampling. Prints KS/W1 of the re-sample and of the
10,000 draws against the benchmark's 5,000-draw Gibbs reference and a 100,000-draw one.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/monotone_paper_sample_size.py REP [METHOD]``
(METHOD default single-model-paper-scale-design; about 30-40 min on one core, 3.6 GB to load).
Every stage resumes from the row's run store, so on a repetition not yet run (REP 2) this runs the
whole row (localization, tables, 4-5 h of training, refit, re-sample, then the 10,000 draws) and
may be stopped and restarted at any point (the store keeps its checkpoints; carry it with
``scorebayes bench monotone --carry``); ``scorebayes bench monotone --only-reps REP`` then records
it from the store, once the row's repetition cap (PAPER_SCALE) includes REP.
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import monotone as mb  # noqa: E402
from _sbi_common import derive_seed  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402

PAPER_DRAWS = mb.PAPER_SCALE_FINAL["single-model-paper-scale-design"]  # the benchmark stage it piloted


def main(rep: int, method: str) -> None:
    torch.set_num_threads(1)
    model = get_model("monotone")
    x = model.observed(make_generator(0, "observed", rep))
    ref = mb.References(model, mb.SMALL["gibbs"], 0)(rep, x)
    big = model.reference_posterior(x, 100_000, make_generator(7, "gibbs-big", rep))
    seed = derive_seed(0, "single-model-paper-scale", rep)  # the bench's (both rows share it: seed_as)
    paper = {**mb.FULL, "sampling": mb.PAPER_SCALE_SAMPLING}
    features = mb.PAPER_SCALE_FEATURES[method]
    store = mb.paper_scale_store(method, seed)
    sl = mb.score_model(model, paper, seed=seed, store=store,
                        data_features=getattr(model, features) if features else None).fit(x)
    first = mb._score_result(sl, paper, seed).posterior
    sl.refit_debiasing(first, bandwidth=mb.PAPER_SCALE_REFITS["bandwidth"])
    resample = mb._score_result(sl, paper, seed, init=first).posterior

    def show(label, post):
        m5 = {k: round(float(v), 4) for k, v in model.table2_metrics(post, ref).items()}
        m100 = {k: round(float(v), 4) for k, v in model.table2_metrics(post, big).items()}
        print(f"rep {rep} {method} {label}: vs 5,000-draw reference {m5} | vs 100,000 {m100}", flush=True)

    show(f"re-sample (the record), draws {tuple(resample.samples.shape)}", resample)
    start = time.perf_counter()
    final = mb.preconditioned_sample(sl, PAPER_DRAWS["num_samples"], chains=PAPER_DRAWS["chains"], seed=seed,
                                     kappa=mb.SINGLE_OPTIONS["step_size_factor"], tempering=False,
                                     max_steps=PAPER_DRAWS["max_steps"], init=resample)
    print(f"sampled in {time.perf_counter() - start:.0f} s", {k: final.info.get(k) for k in
          ("burn_in", "thin", "relaxation_steps", "start_memory")}, flush=True)
    show(f"1,000 chains from its draws, draws {tuple(final.samples.shape)}", final)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "single-model-paper-scale-design")
