"""Pilot (session 52): KS/W1 of the design row's first sampling beside the plain row's.

The paper-scale rows sample twice per repetition: a first sampling from the learned score, then,
after the kernel refit of the debiasing term, a warm-started re-sample (the recorded result). The
two rows share their stage names (same sampling configuration), so their first samplings
(``arrays/samples_<hash>.npz`` in ``runs/bench/monotone-single-model-paper-scale[-design]-SEED``)
can be compared before the design row's refit has run. Metrics against the benchmark's
5,000-draw Gibbs reference (``Monotone.table2_metrics``). Nothing is sampled or written.

Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/monotone_design_first_sampling.py``
(about 1 min).
"""
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import monotone as mb  # noqa: E402
from monotone_score_snapshots import SEEDS  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.posterior import Posterior  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    model = get_model("monotone")
    for rep in (0, 1):
        x = model.observed(make_generator(0, "observed", rep))
        ref = mb.References(model, mb.SMALL["gibbs"], 0)(rep, x)
        design = mb.paper_scale_store("single-model-paper-scale-design", SEEDS[rep]).path
        plain = mb.paper_scale_store("single-model-paper-scale", SEEDS[rep]).path
        for stage in sorted((design / "arrays").glob("samples_*.npz")):
            for label, folder in (("plain", plain), ("design", design)):
                draws = torch.as_tensor(np.load(folder / "arrays" / stage.name)["samples"])
                m = model.table2_metrics(Posterior(draws, model.parameter_names), ref)
                print(f"rep {rep} {stage.stem} {label:6s} draws {tuple(draws.shape)}",
                      {k: round(float(v), 4) for k, v in m.items()}, flush=True)


if __name__ == "__main__":
    main()
