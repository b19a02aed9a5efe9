r"""Pilot (session 60): where does the learned score field, averaged over data sets at theta*, put
the posterior?

For data sets x_1..x_M ~ p(x | theta*), the averaged drift F(u) = mean_m s(u, x_m) + grad log pi_u(u)
has its root near the average posterior mode. For the exact score, mean_m s(u*, x_m) -> 0 and, along
any ray from u*, E s(u* + delta v, x) . v = -d/d delta KL(p(.|theta*) || p(.|theta* + delta v)) < 0 for
small delta > 0: the averaged field points back to the truth (slope -v'Iv). The score-mean test
checks only F's first term at u*; this pilot finds F's root (Newton steps with the Laplace
covariance) and profiles the facility rate's component along its axis, against the first-order
truth -I_ff delta. A root far from u* with a small mean at u* says the bias lives off the diagonal.

Usage: ``.venv/bin/python benchmarks/pilots/epidemic10_field_root.py [FIT [TAU]]`` (FIT a file in
runs/pilots/, default the 6-epoch annealed spread fit of repetition 2; TAU the chains' step in the
Laplace covariance's units, default 0.05; about 3 min on one core at 0.05).
"""
import sys

import torch

torch.set_num_threads(1)
from epidemic10_truth import (laplace_precision, learned_modes, prior_grad,  # noqa: E402
                              prior_hessian, saved_fit_at_truth)

from scorebayes.calibration import score_mean_test  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "epidemic10_n-model-views-spread_epochs6_rep2.pt"
M = 200
model, est, u_star, views = saved_fit_at_truth(name, M)
net, space = est.score_net_, est.space
star = model.true_parameters.to(torch.float64)


def field(u):
    """mean over the M data sets of the learned likelihood score at u [d], in u."""
    with torch.no_grad():
        s = net(u.float().expand(M, 1, -1), views)[:, 0]  # [M, d]
    return s.double().mean(0)


test = score_mean_test(est, star, 1000, seed=5)
cov = test.posterior_cov.to(torch.float64)
sd = cov.diagonal().sqrt()
print(f"{name}: score-mean test at theta*: implied shift / sd", [round(v, 2) for v in test.shift_sd.tolist()])
u = u_star.clone()
for it in range(60):  # damped Newton steps u <- u + 0.5 Cov F(u)
    F = field(u) + prior_grad(space, u[None])[0]
    u = u + 0.5 * cov @ F
    if it % 10 == 9:
        print(f"step {it + 1}: |Cov F| / sd max {float(((cov @ F) / sd).abs().max()):.3f}", flush=True)
print("root of the averaged drift, (u_root - u*) / posterior sd:",
      [round(v, 2) for v in ((u - u_star) / sd).tolist()])
info = test.information.to(torch.float64)
print("facility axis: delta (posterior SDs) | E s_f learned | first-order truth -I_ff delta sd_f")
for k in (-2, -1, -0.5, 0, 0.5, 1, 1.5, 2):
    v = u_star.clone()
    v[0] += k * sd[0]
    print(f"  {k:+.1f} | {float(field(v)[0]):+.2f} | {float(-info[0, 0] * k * sd[0]):+.2f}")
print("the ray from u* to the root: t | E s . direction (should fall through zero at t = 0)")
direction = (u - u_star) / (u - u_star).norm()
for t in (0, 0.25, 0.5, 0.75, 1.0, 1.25):
    v = u_star + t * (u - u_star)
    print(f"  {t:.2f} | {float(field(v) @ direction):+.2f}")

# per data set: the learned posterior's mode (root of s(u, x_m) + grad log pi(u)), started at u*
U = learned_modes(net, space, u_star, views, cov, 80)
z_mode = (U - u_star) / sd
print("per data set modes, (mode - u*) / posterior sd: mean", [round(v, 2) for v in z_mode.mean(0).tolist()])
print("                                                 sd  ", [round(v, 2) for v in z_mode.std(0).tolist()])
q = torch.quantile(z_mode[:, 0], torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9], dtype=torch.float64))
print("facility rate's mode z quantiles 10/25/50/75/90%:", [round(v, 2) for v in q.tolist()])

# preconditioned Langevin chains on the first 20 data sets (25 chains each, from their modes):
# is the posterior mean where the mode is?
m_sets, chains = 20, 25
tau = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05  # step in the Laplace covariance's units
n_steps = int(round(200 / tau))  # 4,000 steps at tau = 0.05: the same time per chain at any tau
L = torch.linalg.cholesky(cov)
V = views[:m_sets].repeat_interleave(chains, 0)  # [m_sets * chains, 1, p]
W = U[:m_sets].repeat_interleave(chains, 0).clone()
draws = []
gen = make_generator(17, "field-root-chains")
for step in range(n_steps):
    vq = W.detach().clone().requires_grad_(True)
    (pg,) = torch.autograd.grad(space.log_prob_unconstrained(vq).sum(), vq)
    with torch.no_grad():
        s = net(W.float()[:, None, :], V)[:, 0].double()
    noise = torch.randn(W.shape, generator=gen, dtype=torch.float64) @ L.T
    W = W + 0.5 * tau * (s + pg) @ cov + tau**0.5 * noise
    if step >= n_steps // 4 and step % max(1, n_steps // 200) == 0:
        draws.append(W.reshape(m_sets, chains, -1))
post = torch.cat(draws, 1)  # [m_sets, draws, d]
psd = post.std(1)
z_mean = (post.mean(1) - u_star) / psd
z_mode_own = (U[:m_sets] - u_star) / psd
print(f"tau {tau}, {n_steps} steps; {m_sets} data sets, facility rate: posterior-mean z {float(z_mean[:, 0].mean()):+.2f} "
      f"(sd {float(z_mean[:, 0].std()):.2f}), mode z {float(z_mode_own[:, 0].mean()):+.2f}, "
      f"draws' sd / Laplace sd {float((psd[:, 0] / sd[0]).mean()):.2f}")
print("floors' posterior-mean z", [round(v, 2) for v in z_mean[:, 1:11].mean(0).tolist()])
print("floors' mode z          ", [round(v, 2) for v in z_mode_own[:, 1:11].mean(0).tolist()])
covered = ((post < u_star).double().mean(1) - 0.5).abs() < 0.475
print("covered (95%)", [round(v, 2) for v in covered.double().mean(0).tolist()])

# is the learned drift a gradient field? circulation around squares (2 Laplace SDs a side, centred
# at each data set's mode) in the planes of the facility rate and each other rate, against the
# integral of |s . dl| around the same square (0 circulation for any gradient field)
def circulation(j, k, points=50):
    t = torch.linspace(0, 1, points + 1, dtype=torch.float64)[:-1]
    e_j, e_k = torch.zeros(len(sd), dtype=torch.float64), torch.zeros(len(sd), dtype=torch.float64)
    e_j[j], e_k[k] = sd[j], sd[k]
    corners = [-e_j - e_k, e_j - e_k, e_j + e_k, -e_j + e_k, -e_j - e_k]
    circ, absolute = torch.zeros(m_sets, dtype=torch.float64), torch.zeros(m_sets, dtype=torch.float64)
    for a, b in zip(corners[:-1], corners[1:]):
        dl = (b - a) / points
        for tt in t + 0.5 / points:  # midpoint rule
            pts = U[:m_sets] + a + tt * (b - a)
            with torch.no_grad():
                s = net(pts.float()[:, None, :], views[:m_sets])[:, 0].double()
            circ += s @ dl
            absolute += (s @ dl).abs()
    return circ, absolute


names = model.parameter_names
for k in range(1, len(sd)):
    circ, absolute = circulation(0, k)
    print(f"circulation, facility x {names[k]}: mean {float(circ.mean()):+.2f} (sd {float(circ.std()):.2f}), "
          f"mean |ratio| to the integral of |s.dl| {float((circ.abs() / absolute).mean()):.3f}", flush=True)
direction = post.mean(1) - U[:m_sets]  # [m_sets, d]: mode -> mean
proj = ((post - post.mean(1, keepdim=True)) * direction[:, None, :]).sum(-1) / direction.norm(dim=-1)[:, None]
skew = (proj**3).mean(1) / proj.std(1) ** 3
print(f"draws' skewness along mode -> mean: mean {float(skew.mean()):+.2f} (per data set sd {float(skew.std()):.2f}); "
      f"mode -> mean distance in draws' sd along it: {float((direction.norm(dim=-1) / proj.std(1)).mean()):.2f}")

# a Gaussian at each data set's learned mode with the symmetrised learned curvature: the nearest
# gradient field to the learned one near the mode (Helmholtz: the antisymmetric part of the
# Jacobian dropped); its mean is the mode, its covariance (-sym(J) - prior Hessian)^-1

precision = laplace_precision(net, U, views, prior_hessian(space, u_star))
eig = torch.linalg.eigvalsh(precision)
ok = (eig > 0).all(-1)
lap_cov = torch.linalg.inv(precision[ok])
lap_sd = lap_cov.diagonal(dim1=-2, dim2=-1).sqrt()
z_lap = (U[ok] - u_star) / lap_sd
width = torch.exp(U[ok] + 1.96 * lap_sd) - torch.exp(U[ok] - 1.96 * lap_sd)
paper = [0.055, 0.127, 0.131, 0.128, 0.131, 0.138, 0.141, 0.160, 0.172, 0.174, 0.197, 0.110]
print(f"Laplace at the learned mode, {int(ok.sum())} of {M} data sets with a positive-definite curvature:")
print("  mean z   ", [round(v, 2) for v in z_lap.mean(0).tolist()])
print("  sd z     ", [round(v, 2) for v in z_lap.std(0).tolist()])
print("  coverage ", [round(v, 2) for v in (z_lap.abs() < 1.96).double().mean(0).tolist()])
print("  width / paper's n-model", [round(v / p, 2) for v, p in zip(width.mean(0).tolist(), paper)])
