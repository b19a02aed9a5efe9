"""Pilot (session 53): the two paper-scale rows' recorded posteriors, pooled.

``single-model-paper-scale`` and ``single-model-paper-scale-design`` train different score nets
(the second also sees each observation's design row) on the same localization and tables, so a
mixture of their posteriors costs no extra simulation (twice the training). Their nets' errors on
the observed data are partly shared (monotone NOTES, sessions 51-52), so pooling can only average
the part that is not. This finds each row's recorded re-sample in its run store (the stored
``samples_*.npz`` whose draws' mean is the record's ``mean``), and prints the KS/W1 against the
benchmark's 5,000-draw Gibbs reference of: each row, their pooled draws (all 200 chains), and an
equal-size pool (the first 50 chains of each), per repetition and averaged. Nothing is sampled.

Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/monotone_pooled_rows.py``
(about 1 min).
"""
import json
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

ROWS = ("single-model-paper-scale", "single-model-paper-scale-design")


def recorded_draws(method: str, rep: int) -> torch.Tensor:
    """The draws ``[chains, draws, d]`` of the last record of ``method`` on ``rep``."""
    records = [json.loads(line) for line in (mb.RESULTS / "monotone_partial.jsonl").read_text().splitlines()]
    record = [r for r in records if r["method"] == method and r["rep"] == rep][-1]
    folder = mb.paper_scale_store(method, SEEDS[rep]).path / "arrays"
    for path in sorted(folder.glob("samples_*.npz")):
        draws = np.load(path)["samples"]
        if np.allclose(draws.reshape(-1, draws.shape[-1]).mean(0), record["mean"], rtol=0, atol=1e-9):
            return torch.as_tensor(draws)
    raise LookupError(f"no stored sampling of {folder} has the mean of {method}'s record on repetition {rep}")


def main() -> None:
    torch.set_num_threads(1)
    model = get_model("monotone")
    totals: dict[str, list[dict]] = {}
    for rep in (0, 1):
        x = model.observed(make_generator(0, "observed", rep))
        ref = mb.References(model, mb.SMALL["gibbs"], 0)(rep, x)
        plain, design = (recorded_draws(method, rep) for method in ROWS)
        half = plain.shape[0] // 2
        for label, draws in (("plain", plain), ("design", design),
                             ("pooled (200 chains)", torch.cat([plain, design])),
                             ("pooled (50 + 50 chains)", torch.cat([plain[:half], design[:half]]))):
            m = {k: float(v) for k, v in model.table2_metrics(Posterior(draws, model.parameter_names), ref).items()}
            totals.setdefault(label, []).append(m)
            print(f"rep {rep} {label:24s} draws {tuple(draws.shape)}", {k: round(v, 4) for k, v in m.items()}, flush=True)
    for label, ms in totals.items():
        print(f"mean {label:24s}", {k: round(float(np.mean([m[k] for m in ms])), 4) for k in ms[0]})


if __name__ == "__main__":
    main()
