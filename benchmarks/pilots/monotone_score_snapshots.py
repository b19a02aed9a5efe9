"""Pilot (session 50): is the score net's own error on the observed data stable across training?

At K exact (Gibbs) posterior draws of repetition REP, in u whitened by the exact posterior
covariance (posterior-SD units), the part of the learned likelihood score's error that no
debiasing can remove:

    F(u) = sum_i s_net(X_i, u) - n E_{X|theta}[s_net(X, u)] - (true score),

the expectation by Monte Carlo with M observations per draw (the same draws for every net). F is
printed for the score net of the row ``single-model-paper-scale`` at the end of its 100 warm-start
epochs and after its 50 penalty epochs (the fitted net), last and best states. If F moved between
snapshots by about its own size, averaging nets (an ensemble) would shrink it; if it stays, it is
systematic for this training set-up.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/monotone_score_snapshots.py REP [K] [M]`` (about 5 min).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import monotone as mb  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402

SEEDS = {0: 2442950534821571425, 1: 3287889073522785514}  # the row's recorded seeds


def load_fit(rep: int):
    """The row's fitted ScoreLangevin on repetition ``rep`` (from its run store), and its data."""
    model = get_model("monotone")
    x = model.observed(make_generator(0, "observed", rep))
    paper = {**mb.FULL, "sampling": mb.PAPER_SCALE_SAMPLING}
    store = mb.paper_scale_store("single-model-paper-scale", SEEDS[rep])
    return model, x, store, mb.score_model(model, paper, seed=SEEDS[rep], store=store).fit(x)


def fluctuation_errors(rep: int, model, x, sl, states: dict, K: int = 32, M: int = 100_000, *,
                       net=None, view=None) -> dict:
    """``{label: F [K, d]}`` for the score net ``net`` (default ``sl.score_net_``) with each of
    ``states`` loaded (whitened in u by the exact posterior covariance), and a print of each one's
    mean and rms. ``view`` maps data sets ``[n, p]`` to the net's inputs (default
    ``sl._observations``)."""
    ref = mb.References(model, mb.SMALL["gibbs"], 0)(rep, x)
    n, space = x.shape[0], sl.space
    net = sl.score_net_ if net is None else net
    view = sl._observations if view is None else view
    u_all = space.to_unconstrained(ref.draws.reshape(-1, model.dim).double())
    u_all = u_all[torch.isfinite(u_all).all(1)]
    L = torch.linalg.cholesky(torch.cov(u_all.T))  # whitened error: L^T e
    u = u_all[torch.randperm(len(u_all), generator=torch.Generator().manual_seed(1))[:K]]
    theta = space.to_constrained(u)
    true = mb.u_true_score(model, space)(u, x[None].expand(K, -1, -1))
    obs = view(x).float()
    g = make_generator(99, "h-mc", rep)
    mc = [view(model.simulator(theta[k : k + 1], M, g)[0]).float() for k in range(K)]

    def fluctuation() -> torch.Tensor:
        with torch.no_grad():
            total = net.sum_over_observations(u.float(), obs).double()
            mean = torch.stack([sum(net.sum_over_observations(u[k : k + 1].float(), mc[k][j : j + 20_000]).double()[0]
                                    for j in range(0, M, 20_000)) / M for k in range(K)])
        return (total - n * mean - true) @ L

    fitted = {k: v.clone() for k, v in net.state_dict().items()}
    errors = {}
    for label, state in states.items():
        net.load_state_dict(state)
        errors[label] = F = fluctuation()
        print(f"{label:22s} F mean", [round(v, 2) for v in F.mean(0).tolist()],
              "rms", [round(v, 2) for v in F.pow(2).mean(0).sqrt().tolist()], flush=True)
    net.load_state_dict(fitted)
    return errors


def main(rep: int, K: int = 32, M: int = 100_000) -> None:
    torch.set_num_threads(1)
    model, x, store, sl = load_fit(rep)
    checkpoints = store.path / "checkpoints" / "train"
    states = {"fitted": {k: v.clone() for k, v in sl.score_net_.state_dict().items()}}
    for phase, label in (("phase000", "warm-start end"), ("phase001", "penalty end")):
        state = torch.load(checkpoints / f"{phase}.pt", weights_only=False)
        states[f"{label}, last"] = state["net"]
        states[f"{label}, best"] = state["best_state"]
    errors = fluctuation_errors(rep, model, x, sl, states, K, M)
    d = errors["fitted"] - errors["warm-start end, best"]
    print("fitted - warm-start end: mean", [round(v, 2) for v in d.mean(0).tolist()],
          "rms", [round(v, 2) for v in d.pow(2).mean(0).sqrt().tolist()])


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
