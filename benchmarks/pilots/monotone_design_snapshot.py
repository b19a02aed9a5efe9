"""Pilot (session 51): the paper-scale design-features net's own error F, read from its checkpoint.

While ``single-model-paper-scale-design`` trains (benchmarks/monotone.py), this reads the best
state so far of its score net from its run store (``runs/bench/monotone-single-model-paper-scale-
design-SEED``) and prints F (monotone_score_snapshots.py: the score net's error on the observed
data that no debiasing removes, at 32 exact posterior draws, posterior-SD units) beside the plain
row's net at the end of its 100 warm-start epochs, on the same repetition (same tables: the rows
share their seeds). Nothing is trained or written.

Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/monotone_design_snapshot.py REP
[PHASE]`` (about 5 min, 4 GB, after the design row has checkpointed at least one epoch). PHASE 0
(default): the warm-start phase; PHASE 1 (session 52): the penalised phase of both rows, i.e. the
score nets the rows sample with.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import monotone as mb  # noqa: E402
from monotone_score_snapshots import fluctuation_errors, load_fit  # noqa: E402

from scorebayes.scores.coordinates import ConstrainedScoreNet  # noqa: E402


def main(rep: int, phase: int = 0) -> None:
    torch.set_num_threads(1)
    model, x, store, sl = load_fit(rep)
    design_store = mb.paper_scale_store("single-model-paper-scale-design", sl.seed)
    checkpoint = f"phase{phase:03d}.pt"
    design = torch.load(design_store.path / "checkpoints" / "train" / checkpoint, weights_only=False)
    print(f"design net, phase {phase}: {design['done']} epochs, best validation {design['best']:.2f}",
          flush=True)

    def view(data: torch.Tensor) -> torch.Tensor:
        return torch.cat([data, model.design_features(data)], -1)

    net = sl._in_coordinates(sl._score_network(sl.space.dim, 2 + model.degree), ConstrainedScoreNet)
    plain = torch.load(store.path / "checkpoints" / "train" / checkpoint, weights_only=False)
    print(f"plain net, phase {phase}: {plain['done']} epochs, best validation {plain['best']:.2f}", flush=True)
    fluctuation_errors(rep, model, x, sl, {f"plain (phase {phase} end)": plain["best_state"]})
    fluctuation_errors(rep, model, x, sl, {"design (best so far)": design["best_state"]}, net=net, view=view)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
