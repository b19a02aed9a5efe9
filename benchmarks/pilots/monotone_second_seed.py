"""Pilot (sessions 50-51): would an ensemble of score nets shrink the score's own error?

Answer (session 51, log benchmarks/results/monotone_pilot_logs/second_seed_rep0.log): no. The
second net shares the row net's F; their average's rms is within 0.1 of each net's.

The paper-scale row misses Table 2's KS through the learned score's location error (monotone note
"THE KS GAP IS THE LEARNED SCORE'S LOCATION ERROR"). Its part F that no debiasing can remove (the
score net's error on the observed data, see monotone_score_snapshots.py) barely moves over the 50
penalty epochs. This trains a second score net on the *same* simulations (the row's tables D^S of
repetition REP, no new simulation) from another initialisation and minibatch order, for the row's
100 warm-start epochs (no penalty epochs), checkpointing every epoch in its own run store
``runs/bench/monotone-pilot-second-seed-SEED`` (carried with ``scorebayes bench monotone --carry``,
so another session resumes it). Once trained it prints F, at the same exact draws, for the row's
net at the end of its warm-start epochs, for the second net, and for their average (an ensemble of
two). If the average's F is well below each net's, ensembling is worth building; if the two nets
share F, the error comes from the simulations or the architecture.

Usage, from the repository root: ``.venv/bin/python benchmarks/pilots/monotone_second_seed.py REP``
(about 70 s an epoch on one core after a 3-minute load; interrupt and rerun at will).
"""
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import monotone as mb  # noqa: E402
from _sbi_common import method_store  # noqa: E402
from monotone_score_snapshots import fluctuation_errors, load_fit  # noqa: E402

from scorebayes.parallel import derive_seed, make_generator  # noqa: E402
from scorebayes.scores.coordinates import ConstrainedScoreNet  # noqa: E402
from scorebayes.scores.training import checkpointing, fit_score_network  # noqa: E402


def main(rep: int) -> None:
    torch.set_num_threads(1)
    model, x, store, sl = load_fit(rep)
    seed = sl.seed
    # its own run store, restored from benchmarks/carried/ on another machine
    pilot = method_store(mb.NAME, "pilot-second-seed", seed,
                         {"single": mb.FULL["single"], "pilot": "second seed, warm-start epochs only"})
    # the row's table D^S (from its store: no new simulation), as _fit_single_model builds it
    u_s, x_s, _ = sl._table(sl.proposal_, mb.FULL["single"]["N"], 1, "S", paired=sl._paired())
    x_s = sl._table_view(x_s)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "init", "second-seed"))
        net = sl._in_coordinates(sl._score_network(sl.space.dim, x_s.shape[-1]), ConstrainedScoreNet)
    schedule = dataclasses.replace(sl.schedule, penalty_epochs=0)
    with checkpointing(pilot, "train"):
        fit_score_network(net, u_s.float(), x_s, sl.proposal_.grad_log_prob_unconstrained(u_s).float(),
                          schedule=schedule, pairs=sl._pairs(u_s),
                          generator=make_generator(seed, "training", "second-seed"),
                          progress=True, desc="second score net")
    del u_s, x_s
    first = torch.load(store.path / "checkpoints" / "train" / "phase000.pt", weights_only=False)["best_state"]
    second = {k: v.clone() for k, v in net.state_dict().items()}
    errors = fluctuation_errors(rep, model, x, sl, {"row net (warm-start)": first, "second net": second})
    average = (errors["row net (warm-start)"] + errors["second net"]) / 2  # F is linear in the net's output
    print(f"{'average of the two':22s} F mean", [round(v, 2) for v in average.mean(0).tolist()],
          "rms", [round(v, 2) for v in average.pow(2).mean(0).sqrt().tolist()])
    gap = errors["row net (warm-start)"] - errors["second net"]
    print("row net - second net: mean", [round(v, 2) for v in gap.mean(0).tolist()])


if __name__ == "__main__":
    main(int(sys.argv[1]))
