r"""Pilot (session 60): is the learned posterior's skew along the facility-floor ridge in the data?

Langevin chains on the learned score put the posterior mean 1.2-1.3 SDs from the learned mode, up
the ridge (facility up, floors down); a Gaussian at the mode does not. Along the line through a
data set's learned mode m in the direction v of the chains' mean, this compares two 1-D
conditional densities in s (u = m + s sd_v v, sd_v the draws' SD along v):

- learned: log pi(u) + int_0^s s_learned(m + r sd_v v, x) . v sd_v dr (exact along a line);
- ABC: log pi(u) + log of the fraction of N data sets simulated at u whose summary
  t(x) = s_learned(m, x) (the learned score at the mode, locally sufficient near m) falls within
  eps of the data set's own, in the Mahalanobis metric of t's covariance at m; eps is the 5%
  quantile of the distances at m. Its likelihood is the data's, smoothed by eps, with no trained
  network between the parameter and the data except as a fixed summary.

Printed per grid point, and each curve's mean and skewness in s: if ABC's curve is skewed the way
the learned one is, the skew is the data's (through t), not the network's.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_ridge_abc.py [FIT [DATA_SET [N]]]`` (FIT in
runs/pilots/, default the spread row's repetition 9; DATA_SET the index of the data set at theta*,
as in epidemic10_field_root.py, default 0, or the next one whose learned curvature at the mode is
positive-definite; N = 4,000 simulations per grid point; about 6 min on
one core).
"""
import sys

import torch

torch.set_num_threads(1)
from epidemic10_truth import (laplace_precision, learned_modes, prior_grad,  # noqa: E402
                              prior_hessian, saved_fit_at_truth)

from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.scores.losses import evaluate_score  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "epidemic10_n-model-views-spread_rep9.pt"
k = int(sys.argv[2]) if len(sys.argv) > 2 else 0
N = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
model, est, u_star, views = saved_fit_at_truth(name, k + 20)
net, space = est.score_net_, est.space
d = len(u_star)


def score(u):
    with torch.no_grad():
        return net(u.float()[:, None, :], view.expand(len(u), 1, -1))[:, 0].double()


prior_hess = prior_hessian(space, u_star)


# Newton steps with the curvature at u* averaged over the data sets (as epidemic10_conservative.py)
J0 = evaluate_score(net, u_star.float().expand(len(views), -1), views, create_graph=False).jacobian.detach()
J0 = J0.double().mean(0)
step_cov = torch.linalg.inv(-0.5 * (J0 + J0.T) - prior_hess)


def mode_and_cov():
    """The learned mode of data set ``k`` and the Laplace covariance there (None if not positive-definite)."""
    m = learned_modes(net, space, u_star, view, step_cov, 200)
    if not bool(torch.isfinite(m).all()):
        return m, None
    precision = laplace_precision(net, m, view, prior_hess)[0]
    return m, (torch.linalg.inv(precision) if bool((torch.linalg.eigvalsh(precision) > 0).all()) else None)


while True:  # the first data set from DATA_SET on whose learned curvature at the mode is positive-definite
    view = views[k : k + 1]  # [1, 1, p]
    m, cov = mode_and_cov()
    if cov is not None:
        break
    print(f"data set {k}: curvature at the mode not positive-definite, next", flush=True)
    k += 1
L = torch.linalg.cholesky(cov)
# Langevin chains from the mode (as epidemic10_field_root.py): their mean gives the direction
gen = make_generator(31, "ridge-chains")
W = m.expand(100, -1).clone()
draws = []
for step in range(4000):
    W = W + 0.025 * (score(W) + prior_grad(space, W)) @ cov + 0.05**0.5 * torch.randn(W.shape, generator=gen, dtype=torch.float64) @ L.T
    if step >= 1000 and step % 20 == 0:
        draws.append(W.clone())
post = torch.cat(draws)
v = post.mean(0) - m[0]
v = v / v.norm()
sd_v = float(((post - post.mean(0)) @ v).std())
print(f"{name}, data set {k}: mode z", [round(a, 2) for a in ((m[0] - u_star) / cov.diagonal().sqrt()).tolist()])
print("direction v (mode -> chains' mean)", [round(a, 2) for a in v.tolist()], f"sd along it {sd_v:.3f}")
print(f"chains' mean along v: {float((post.mean(0) - m[0]) @ v) / sd_v:+.2f} sd_v", flush=True)

grid = torch.arange(-3.0, 4.01, 0.5, dtype=torch.float64)
# learned: exact line integral (trapezoid on a fine grid)
fine = torch.linspace(-3.0, 4.0, 281, dtype=torch.float64)
pts = m[0] + fine[:, None] * sd_v * v
slope = (score(pts) @ v) * sd_v  # d/ds of the learned log-likelihood
i0 = int((fine.abs()).argmin())
cum = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(0.5 * (slope[1:] + slope[:-1]) * (fine[1] - fine[0]), 0)])
cum = cum - cum[i0]
learned = torch.stack([cum[int((fine - s).abs().argmin())] for s in grid])
prior_line = space.log_prob_unconstrained(m[0] + grid[:, None] * sd_v * v)
# ABC on the summary t(x) = learned score at the mode
t_obs = score(m)[0]
g = make_generator(37, "ridge-abc")


def summaries(u):
    theta = space.to_constrained(u[None]).expand(N, -1).clone()
    x = est.simulator(theta, est.n_obs_, g)
    vw = est._table_view(x.to(est.x_obs_.dtype))
    with torch.no_grad():
        return net(m.float().expand(N, 1, -1), vw)[:, 0].double()


t_mode = summaries(m[0])
metric = torch.linalg.inv(torch.cov(t_mode.T))
dist = lambda t: (((t - t_obs) @ metric) * (t - t_obs)).sum(-1)  # noqa: E731
eps = float(torch.quantile(dist(t_mode), 0.05))
abc = []
for s in grid:
    t = t_mode if float(s) == 0.0 else summaries(m[0] + s * sd_v * v)
    frac = float((dist(t) < eps).double().mean())
    abc.append(frac)
    print(f"  s {float(s):+.1f}: learned log-lik {float(learned[grid == s][0]):+7.2f}, ABC acceptance {frac:.4f}", flush=True)
abc = torch.tensor(abc, dtype=torch.float64)


def moments(logdens):
    w = torch.softmax(logdens, 0)
    mean = float((w * grid).sum())
    sd = float((w * (grid - mean) ** 2).sum().sqrt())
    return mean, sd, float((w * (grid - mean) ** 3).sum()) / sd**3


lm = moments(learned + prior_line)
am = moments(torch.log(abc.clamp_min(1e-12)) + prior_line)
print(f"learned 1-D conditional along v: mean {lm[0]:+.2f}, sd {lm[1]:.2f}, skewness {lm[2]:+.2f}")
print(f"ABC     1-D conditional along v: mean {am[0]:+.2f}, sd {am[1]:.2f}, skewness {am[2]:+.2f} "
      f"(eps: 5% acceptance at the mode; {N} simulations a point)")
