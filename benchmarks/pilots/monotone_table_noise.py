"""Pilot (session 51): is the score net's own error set by the table's rows or by the training run?

Every net trained on repetition 0's table D^S so far (the row's, a second seed's, one with the
design's features) shows nearly the same error F on the observed data on coordinates 6-9 (means
0.2-0.3 posterior SDs; monotone_score_snapshots.py). This trains three fresh nets (inputs (x, y),
the row's schedule shortened to EPOCHS epochs without penalty) on ROWS rows each:

- ``A``: rows [0, ROWS), initialisation and minibatch order "a";
- ``A'``: the same rows, initialisation and minibatch order "b";
- ``B``: rows [ROWS, 2 ROWS) (other simulations from the same proposal), order "a";

and prints F for each at the same 32 exact draws, and the rms over draws of F_A - F_A' (the
training run's share) and of F_A - F_B (the rows' share on top of it). If the second is much the
larger, the table's sampling noise limits the net, and only more (or less noisy) rows reduce it.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/monotone_table_noise.py REP [ROWS] [EPOCHS]``
(defaults 500,000 and 20: about 4 min a net on one core, after a 3-minute load).
"""
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from monotone_data_features import train_fresh_net  # noqa: E402
from monotone_score_snapshots import fluctuation_errors, load_fit  # noqa: E402


def main(rep: int, rows: int = 500_000, epochs: int = 20) -> None:
    torch.set_num_threads(1)
    model, x, store, sl = load_fit(rep)
    u_all, x_all, _ = sl._table(sl.proposal_, 2_000_000, 1, "S", paired=sl._paired())
    schedule = dataclasses.replace(sl.schedule, epochs=epochs, penalty_epochs=0)
    runs = {"A": (0, "a"), "A'": (0, "b"), "B": (rows, "a")}
    errors = {}
    for label, (start, key) in runs.items():
        u_s, x_s = u_all[start : start + rows], x_all[start : start + rows]
        pairs = sl._pairs(u_s)
        prior_score = sl.proposal_.grad_log_prob_unconstrained(u_s).float()
        net, view = train_fresh_net(sl, u_s, x_s, prior_score, pairs, schedule, None, label,
                                    init_key=f"table-noise-{key}", order_key=f"table-noise-{key}")
        errors.update(fluctuation_errors(rep, model, x, sl, {label: net.state_dict()}, net=net, view=view))
    for a, b in (("A", "A'"), ("A", "B")):
        gap = errors[a] - errors[b]
        print(f"F_{a} - F_{b}: mean", [round(v, 2) for v in gap.mean(0).tolist()],
              "rms", [round(v, 2) for v in gap.pow(2).mean(0).sqrt().tolist()], flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
