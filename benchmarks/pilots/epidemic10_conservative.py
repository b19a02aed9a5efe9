r"""Pilot (session 60): the posterior of the nearest conservative field to the learned score.

The learned score field s(u, x) of the per-rate networks is not a gradient field (its circulation
around small squares in the facility-floor planes is 3-20% of the integral of |s . dl|;
epidemic10_field_root.py), so Langevin chains on it sample no density at all, and on repetition
9's spread fit their mean sits 1.3 draws' SDs from the field's root, the learned mode, which is
itself nearly unbiased at theta*. Here, per data set x ~ p(x | theta*), the field is replaced by the
gradient of its radial potential from the learned mode m,

    phi(u) = int_0^1 s(m + t (u - m), x) . (u - m) dt     (Gauss-Legendre, 16 points),

which equals log p(x | u) - log p(x | m) whenever s is a gradient field, and the posterior
pi(u) exp(phi(u)) is sampled by self-normalised importance sampling from N(m, c^2 Sigma), Sigma the
Laplace covariance at m (symmetrised learned curvature plus the prior's). Reported per rate over
the data sets: mean z, coverage of the weighted central 95% interval, median width over the
paper's n-model row, and the effective sample sizes.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_conservative.py [FIT [M K C]]`` (FIT in
runs/pilots/, default the spread row's repetition 9; M = 200 data sets at theta*, K = 400 proposals
each, inflation C = 1.5; a few minutes on one core).
"""
import sys

import numpy as np
import torch

torch.set_num_threads(1)
from epidemic10_truth import laplace_precision, learned_modes, prior_hessian, saved_fit_at_truth  # noqa: E402

from scorebayes.scores.losses import evaluate_score  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "epidemic10_n-model-views-spread_rep9.pt"
M, K, C = (int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])) if len(sys.argv) > 4 else (200, 400, 1.5)
PAPER = [0.055, 0.127, 0.131, 0.128, 0.131, 0.138, 0.141, 0.160, 0.172, 0.174, 0.197, 0.110]
model, est, u_star, views = saved_fit_at_truth(name, M)  # the data sets of epidemic10_field_root.py
net, space = est.score_net_, est.space
star = model.true_parameters.to(torch.float64)
d = len(u_star)


def score(u, view):
    with torch.no_grad():
        return net(u.float()[:, None, :], view.expand(len(u), 1, -1))[:, 0].double()


prior_hess = prior_hessian(space, u_star)
# learned modes: Newton steps with the curvature at u* (as epidemic10_field_root.py), then refined
ev = evaluate_score(net, u_star.float().expand(M, -1), views, create_graph=False)
J0 = ev.jacobian.detach().double().mean(0)
step_cov = torch.linalg.inv(-0.5 * (J0 + J0.T) - prior_hess)
U = learned_modes(net, space, u_star, views, step_cov, 100)
precision = laplace_precision(net, U, views, prior_hess)
ok = (torch.linalg.eigvalsh(precision) > 0).all(-1)
nodes, weights = np.polynomial.legendre.leggauss(16)
t_nodes = torch.tensor((nodes + 1) / 2, dtype=torch.float64)
t_weights = torch.tensor(weights / 2, dtype=torch.float64)
gen = torch.Generator().manual_seed(23)
z, covered, widths, ess, z_gauss = [], [], [], [], []
for m in range(M):
    if not ok[m]:
        continue
    cov = torch.linalg.inv(precision[m])
    L = torch.linalg.cholesky(cov)
    xi = torch.randn(K, d, generator=gen, dtype=torch.float64)
    v = U[m] + C * xi @ L.T  # [K, d]
    delta = v - U[m]
    pts = U[m] + t_nodes[:, None, None] * delta[None]  # [16, K, d]
    s = score(pts.reshape(-1, d), views[m]).reshape(len(t_nodes), K, d)
    phi = (t_weights[:, None] * (s * delta[None]).sum(-1)).sum(0)  # [K]
    log_w = phi + space.log_prob_unconstrained(v) + 0.5 * (xi**2).sum(-1)  # proposal: N(m, C^2 cov)
    w = torch.softmax(log_w, 0)
    ess.append(float(1 / (w**2).sum()))
    mean = (w[:, None] * v).sum(0)
    sd = ((w[:, None] * (v - mean) ** 2).sum(0)).sqrt()
    z.append((mean - u_star) / sd)
    z_gauss.append((U[m] - u_star) / cov.diagonal().sqrt())
    order = v.argsort(0)
    cw = torch.gather(w[:, None].expand(-1, d), 0, order).cumsum(0)  # [K, d] weighted CDF per rate
    lo = torch.gather(v, 0, order)[(cw < 0.025).sum(0).clamp(max=K - 1), torch.arange(d)]
    hi = torch.gather(v, 0, order)[(cw < 0.975).sum(0).clamp(max=K - 1), torch.arange(d)]
    covered.append((lo < u_star) & (u_star < hi))
    widths.append(torch.exp(hi) - torch.exp(lo))
z, covered, widths, z_gauss = torch.stack(z), torch.stack(covered).double(), torch.stack(widths), torch.stack(z_gauss)
print(f"{name}: {len(z)} of {M} data sets with a positive-definite curvature at the learned mode; "
      f"K = {K} proposals, inflation {C}; ESS median {np.median(ess):.0f}, 10% quantile {np.quantile(ess, 0.1):.0f}")
print("radial-potential posterior (importance sampling):")
print("  mean z   ", [round(v, 2) for v in z.mean(0).tolist()])
print("  sd z     ", [round(v, 2) for v in z.std(0).tolist()])
print("  coverage ", [round(v, 2) for v in covered.mean(0).tolist()])
print("  median width / paper's n-model", [round(v / p, 2) for v, p in zip(widths.median(0).values.tolist(), PAPER)])
print("Laplace at the mode: mean z", [round(v, 2) for v in z_gauss.mean(0).tolist()])
print("                     coverage", [round(v, 2) for v in (z_gauss.abs() < 1.96).double().mean(0).tolist()])
ok_idx = ok.nonzero()[:, 0]
lap_sd = torch.linalg.inv(precision[ok_idx]).diagonal(dim1=-2, dim2=-1).sqrt()
lap_width = torch.exp(U[ok_idx] + 1.96 * lap_sd) - torch.exp(U[ok_idx] - 1.96 * lap_sd)
print("                     median width / paper's n-model",
      [round(v / p, 2) for v, p in zip(lap_width.median(0).values.tolist(), PAPER)])

# the repetition's own observed data set: the Laplace interval at its learned mode
obs = est._observations(est.x_obs_).float()[None]  # [1, 1, p]
u = learned_modes(net, space, u_star, obs, step_cov, 200)
sd_o = torch.linalg.inv(laplace_precision(net, u, obs, prior_hess)[0]).diagonal().sqrt()
lo, hi = torch.exp(u[0] - 1.96 * sd_o), torch.exp(u[0] + 1.96 * sd_o)
print("observed data set: Laplace at the learned mode covers theta*:",
      [int(v) for v in ((lo < star) & (star < hi)).tolist()], "width / paper's n-model",
      [round(float(w) / p, 2) for w, p in zip(hi - lo, PAPER)])
