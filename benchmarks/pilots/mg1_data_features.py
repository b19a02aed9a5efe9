"""Pilot (session 36; mg1 note "SUMMARIES OF THE OBSERVATION"): does the single-model's net learn the
service width's score better when it also sees summaries of each observation?

Each mg1 observation is 5 inter-departure times of a queue that starts empty (the noise-smoothed
x~ = x + N(0, 0.25^2)). The width's information comes from the upper edge of the busy service
times (mg1_score_reference.md), which a 1x64 net on the raw 5 times must assemble itself. The
summaries are deterministic functions of x~, so the score target is unchanged
(``ScoreLangevin(data_features=...)``, single mode):

- ``raw``: none (the benchmark's single-model);
- ``sorted``: the 5 order statistics;
- ``departures``: the cumulative sums (the departure times since the queue opened);
- ``both``: sorted and departures.

For repetition REP at the benchmark's small single-model scale (N = 20,000, 1x64 tanh, the
single-model's seeds) it prints the fit time, the share of the particle-filter reference score the
net carries at the truth (as benchmarks/mg1_score_reference.py: E[s_net s_ref] / Var s_ref per
phi = (theta1, width, theta3); reference of 300 observations, 2 x 16,000 particles), and with
``--sample`` the posterior's CI95 widths, means and coverage of the truth.

Usage, from the repository root:
``.venv/bin/python benchmarks/pilots/mg1_data_features.py REP raw|sorted|departures|both
unconstrained|constrained [--sample] [--refits K] [--refine K] [--mc-debias M] [--edges] [--N 20000] [--epochs 100] [--penalty-epochs 20] [--hidden 64]
[--activation tanh]``
(session 36's runs and their logs: benchmarks/results/mg1_pilot_logs/data_features_*.log; the
results are summarised in the mg1 note "SUMMARIES OF THE OBSERVATION"). About 2 min a fit at the
small scale and 10-11 min at N = 200,000 with 2x64 SiLU (two processes on 2 cores), 4-7 min of
sampling.
"""
import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mg1 as bench  # noqa: E402
import mg1_mc_debias  # noqa: E402
import mg1_score_reference as score_ref  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.models.mg1 import queue_features  # noqa: E402
from scorebayes.parallel import derive_seed, make_generator  # noqa: E402
from scorebayes.scores.networks import ScoreNet  # noqa: E402


def order_statistics(view: torch.Tensor) -> torch.Tensor:
    """``[..., 5] -> [..., 5]``: the inter-departure times sorted."""
    return torch.sort(view, dim=-1).values


def departures(view: torch.Tensor) -> torch.Tensor:
    """``[..., 5] -> [..., 5]``: departure times since the queue opened."""
    return torch.cumsum(view, dim=-1)


FEATURES = {"raw": None, "sorted": order_statistics, "departures": departures, "both": queue_features}


class EdgeScoreNet(torch.nn.Module):
    r"""``--edges``: a ScoreNet in phi = (theta1, width, theta3) that also sees, per time x~_k, the
    smoothed uniform's edge terms phi((theta2 - x~_k) / s), Phi((theta2 - x~_k) / s),
    phi((theta1 - x~_k) / s) and Phi((x~_k - theta1) / s), s = 0.25 (20 inputs that depend on
    theta and x~: an architecture for this model, not a summary of the data). Needs
    ``network_coordinates="constrained"`` (it takes phi, not u)."""

    def __init__(self, d: int, p_net: int, hidden, activation):
        super().__init__()
        self.theta_dim, self.x_dim = d, p_net
        self.inner = ScoreNet(d, p_net + 20, hidden, activation)

    def _inputs(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        theta, x = torch.broadcast_tensors(theta[..., None], x[..., None, :5])  # [..., 3, 5]
        low, high = theta[..., 0, :], theta[..., 0, :] + theta[..., 1, :]
        gauss = torch.distributions.Normal(0.0, 1.0)
        z_high, z_low = (high - x[..., 0, :]) / score_ref.NOISE_SD, (low - x[..., 0, :]) / score_ref.NOISE_SD
        return torch.cat([gauss.log_prob(z_high).exp(), gauss.cdf(z_high),
                          gauss.log_prob(z_low).exp(), gauss.cdf(-z_low)], -1)

    def fit_standardisation(self, theta: torch.Tensor, x: torch.Tensor) -> None:
        theta_rows = theta[:, None, :].expand(*x.shape[:-1], theta.shape[-1]) if x.dim() == 3 else theta
        self.inner.fit_standardisation(theta, torch.cat([x, self._inputs(theta_rows, x)], -1))

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        theta, x = torch.broadcast_tensors(theta[..., :, None], x[..., None, :])
        theta, x = theta[..., 0], x[..., 0, :]
        return self.inner(theta, torch.cat([x, self._inputs(theta, x)], -1))

    def sum_over_observations(self, theta: torch.Tensor, x: torch.Tensor, **_) -> torch.Tensor:
        return torch.cat([self(t[:, None, :], x[None]).sum(1) for t in theta.split(16)], 0)


p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("rep", type=int)
p.add_argument("features", choices=list(FEATURES))
p.add_argument("coordinates", choices=["unconstrained", "constrained"])
p.add_argument("--sample", action="store_true")
p.add_argument("--hidden", type=int, nargs="+", default=[64])
p.add_argument("--activation", default="tanh")
p.add_argument("--N", type=int, default=bench.SMALL["single"]["N"])
p.add_argument("--epochs", type=int, default=bench.SMALL["single"]["epochs"], help="warm-start epochs")
p.add_argument("--penalty-epochs", type=int, default=bench.SMALL["single"]["penalty_epochs"])
p.add_argument("--lr", type=float, nargs=2, default=list(bench.SMALL["single"]["lr"]),
               help="the score net's Adam learning rate, initial and final")
p.add_argument("--batch", type=int, default=bench.SMALL["single"]["batch"], help="the score net's batch")
p.add_argument("--N-R", type=int, default=bench.SMALL["single"]["N_R"], help="D^R groups (m_R = 100 each)")
p.add_argument("--mean-epochs", type=int, nargs=2, default=[bench.SMALL["single"]["mean_epochs"],
                                                            bench.SMALL["single"]["mean_penalty_epochs"]],
               help="the debiasing net's warm-start and penalty epochs")
p.add_argument("--mean-batch", type=int, default=10, help="the debiasing net's batch (groups)")
p.add_argument("--edges", action="store_true", help="EdgeScoreNet (needs constrained)")
p.add_argument("--refits", type=int, default=0, help="kernel refits of the debiasing net after sampling")
p.add_argument("--refine", type=int, default=0, metavar="K",
               help="then K rounds of refine_debiasing (new D^R groups around the posterior, as "
                    "mg1's single-model-refined; more, up to K + 2, while the draws pile at the edge)")
p.add_argument("--groups", type=int, default=2_000, help="groups per refine round (m_R each)")
p.add_argument("--mc-debias", type=int, default=0, metavar="M",
               help="then sample again with a Monte Carlo h of M simulations (mg1_mc_debias.py)")
args = p.parse_args()
torch.set_num_threads(1)

model = get_model("mg1")
x_obs = model.observed(make_generator(0, "observed", args.rep))
s = {**bench.SMALL["single"], "N": args.N, "epochs": args.epochs, "penalty_epochs": args.penalty_epochs,
     "lr": tuple(args.lr), "batch": args.batch, "N_R": args.N_R, "mean_epochs": args.mean_epochs[0], "mean_penalty_epochs": args.mean_epochs[1],
     "mean_batch": args.mean_batch, "hidden": tuple(args.hidden), "activation": args.activation,
     "network_coordinates": args.coordinates, "data_features": FEATURES[args.features]}
est = bench.single_estimator(model, s, derive_seed(0, "single-model", args.rep))
if args.edges:
    if args.coordinates != "constrained":
        raise SystemExit("--edges needs constrained coordinates")
    est._score_network = lambda d, p_net: EdgeScoreNet(d, p_net, tuple(args.hidden), args.activation)
t0 = time.time()
est.fit(x_obs)
fit_seconds = time.time() - t0

t1 = time.time()
ref = score_ref.reference(model, 300, 16_000, seed=1)
u_star = est.space.to_unconstrained(model.true_parameters[None])[0]
dphi_du = est.space.pushforward_score(u_star[None], torch.ones(1, 3, dtype=torch.float64))[0]
with torch.no_grad():
    view = est._observations(ref["x"]).float()
    s_net = est.score_net_(u_star.float().expand(len(view), 3), view).double() / dphi_du
s_net = s_net - s_net.mean(0)
captured = ((s_net * ref["score"]).mean(0) / (ref["score"].var(0) - ref["mc_var"])).tolist()
history = est.fit_report_.history
print(f"warm-start validation loss every 10th epoch {[round(v, 3) for v in history[9::10]]}", flush=True)
print(f"rep {args.rep} {args.features}{' edges' if args.edges else ''} {args.coordinates} hidden {args.hidden} {args.activation} "
      f"N {args.N} epochs {args.epochs}+{args.penalty_epochs} lr {args.lr} batch {args.batch} N_R {args.N_R} "
      f"h epochs {args.mean_epochs} batch {args.mean_batch}: fit {fit_seconds:.0f}s, validation loss"
      f" {est.fit_report_.validation_loss:.3f}, "
      f"information captured {[round(c, 3) for c in captured]} (reference {time.time() - t1:.0f}s)",
      flush=True)


def report(post, label: str, seconds: float) -> None:
    """Widths, means, coverage of the truth, and which face of the chains' box holds the draws."""
    truth = model.to_reported(model.true_parameters)
    th = model.to_reported(post.draws.reshape(-1, 3))
    lo, hi = th.quantile(0.025, 0), th.quantile(0.975, 0)
    chain_theta1 = model.to_reported(post.samples.reshape(-1, 3)).reshape(post.samples.shape)[..., 0]
    chain_theta1 = chain_theta1.mean(1).sort().values
    low, high = est.chain_box()
    u = est.space.to_unconstrained(post.draws.reshape(-1, 3))
    tol = 0.01 * (high - low)
    faces = [f"{(u[:, k] < low[k] + tol[k]).double().mean():.2f}/{(u[:, k] > high[k] - tol[k]).double().mean():.2f}"
             for k in range(3)]
    print(f"  {label} in {seconds:.0f}s: widths {[round(v, 3) for v in (hi - lo).tolist()]} "
          f"means {[round(v, 3) for v in th.mean(0).tolist()]} "
          f"covers {((lo <= truth) & (truth <= hi)).tolist()} edge {post.info.get('edge_fraction'):.3f} "
          f"lowest chain means of theta1 {[round(v, 3) for v in chain_theta1[:5].tolist()]} "
          f"(low/high face per phi coordinate {faces}; box in phi "
          f"{[round(v, 3) for v in est.space.to_constrained(low[None])[0].tolist()]} - "
          f"{[round(v, 3) for v in est.space.to_constrained(high[None])[0].tolist()]})", flush=True)


if args.sample:
    t2 = time.time()
    post = est.sample(s["samples"], chains=s["chains"], max_steps=s["max_steps"])
    report(post, "sampled", time.time() - t2)
    for k in range(args.refits):
        t2 = time.time()
        est.refit_debiasing(post)
        post = est.sample(s["samples"], chains=s["chains"], max_steps=s["max_steps"])
        report(post, f"refit {k + 1}", time.time() - t2)
    if args.refine:
        t2 = [time.time()]

        def refined(k, post):
            sd = [round(v, 2) for v in est.refinements_[-1]["residual_sd"].tolist()]
            report(post, f"refine {k + 1} (residual sd {sd})", time.time() - t2[0])
            t2[0] = time.time()

        post = bench.refine_rounds(est, post, s, rounds=args.refine, max_rounds=args.refine + 2,
                                   groups=args.groups, on_round=refined)
    if args.mc_debias:
        t2 = time.time()
        est.mean_net_ = mg1_mc_debias.MonteCarloDebias(est, args.mc_debias, seed=7)
        post = est.sample(s["samples"], chains=s["chains"], max_steps=10_000)
        report(post, f"Monte Carlo h (M = {args.mc_debias})", time.time() - t2)
