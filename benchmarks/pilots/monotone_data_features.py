"""Pilot (session 51): does giving the score net the design's features shrink its own error?

The paper-scale row misses Table 2's KS through the score net's own error on the observed data
(F, see monotone_score_snapshots.py; note "THE KS GAP IS THE LEARNED SCORE'S LOCATION ERROR").
One observation's true score in theta is (y - sum_k theta_k b_M(x, k)) b_M(x, .) / sigma^2: a
product of y and degree-10 polynomials in x, which a 3 x 64 ELU net given (x, y) only has to build
from scratch. This trains fresh score nets, with the same schedule shortened, on the first ROWS
rows of repetition REP's table D^S (no new simulation), once per input:

- ``plain``: (x, y), as the row;
- ``design``: (x, y) and b_M(x, 1..M) (ScoreLangevin(data_features=...));
- ``design-y``: (x, y), b_M(x, 1..M) and y b_M(x, 1..M);

and prints each one's best validation loss and F at the same 32 exact posterior draws (whitened,
posterior-SD units). Same initialisation seed and minibatch order for all three.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/monotone_data_features.py REP [ROWS] [EPOCHS]``
(defaults 500,000 rows and 20 epochs: about 4 min a net on one core, after a 3-minute load).
"""
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from monotone_score_snapshots import fluctuation_errors, load_fit  # noqa: E402

from scorebayes.models.monotone import bernstein_design  # noqa: E402
from scorebayes.parallel import derive_seed, make_generator  # noqa: E402
from scorebayes.scores.coordinates import ConstrainedScoreNet  # noqa: E402
from scorebayes.scores.training import fit_score_network  # noqa: E402


def design(view: torch.Tensor) -> torch.Tensor:
    """``[..., 2] (x, y) -> [..., M]``: b_M(x, 1..M)."""
    return bernstein_design(view[..., 0], 10)[..., 1:]


def design_y(view: torch.Tensor) -> torch.Tensor:
    """``[..., 2] (x, y) -> [..., 2M]``: b_M(x, 1..M) and y b_M(x, 1..M)."""
    b = design(view)
    return torch.cat([b, view[..., 1:2] * b], -1)


FEATURES = {"plain": None, "design": design, "design-y": design_y}


def main(rep: int, rows: int = 500_000, epochs: int = 20) -> None:
    torch.set_num_threads(1)
    model, x, store, sl = load_fit(rep)
    u_s, x_s, _ = sl._table(sl.proposal_, 2_000_000, 1, "S", paired=sl._paired())
    u_s, x_s = u_s[:rows], x_s[:rows]
    pairs = sl._pairs(u_s)
    print(f"{rows} rows, {0 if pairs is None else 2 * len(pairs)} in antithetic pairs", flush=True)
    prior_score = sl.proposal_.grad_log_prob_unconstrained(u_s).float()
    schedule = dataclasses.replace(sl.schedule, epochs=epochs, penalty_epochs=0)
    nets = {label: train_fresh_net(sl, u_s, x_s, prior_score, pairs, schedule, features, label)
            for label, features in FEATURES.items()}
    for label, (net, view) in nets.items():
        fluctuation_errors(rep, model, x, sl, {label: net.state_dict()}, net=net, view=view)


def train_fresh_net(sl, u_s, x_s, prior_score, pairs, schedule, features, label: str,
                    init_key: str = "features-pilot", order_key: str = "features-pilot"):
    """A fresh score net (initialisation seeded by ``init_key``, minibatch order by ``order_key``)
    trained on ``(u_s, x_s)`` with ``features`` appended to each observation (or none); returns
    ``(net, view)``, ``view`` mapping data ``[..., 2]`` to the net's inputs. Prints its validation loss."""
    def view(data, features=features):
        return data if features is None else torch.cat([data, features(data)], -1)

    table = view(x_s)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(sl.seed, "init", init_key))
        net = sl._in_coordinates(sl._score_network(sl.space.dim, table.shape[-1]), ConstrainedScoreNet)
    report = fit_score_network(net, u_s.float(), table.float(), prior_score, schedule=schedule, pairs=pairs,
                               generator=make_generator(sl.seed, "training", order_key),
                               progress=True, desc=f"score net, {label}")
    print(label, "validation loss", round(report.validation_loss, 3), "after", report.epochs, "epochs", flush=True)
    return net, view


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
