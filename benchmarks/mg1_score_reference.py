"""mg1-score-reference: how much of the smoothed model's score does mg1's single-model net learn? (diagnostic)

The single-model (Sec. 5.1) learns the score of the noise-smoothed M/G/1 model (sigma_eps = 0.25).
A particle filter gives that score per observation (scorebayes.models.mg1_reference, Fisher's
identity), so at the truth phi* we can measure:

1. the smoothed model's Fisher information I (covariance of the reference score over simulated
   observations, minus the filter's own Monte Carlo variance, estimated from two independent
   filters), and the Bernstein-von Mises CI95 widths 3.92 sqrt(diag(J (n I)^-1 J^T)) for n = 500:
   the widths a perfect single-model would report;
2. for score nets trained as mg1's single-model on repetition 0 (localized table, noise 0.25,
   curvature penalty), the share of the reference score they carry: E[s_net s_ref] / Var(s_ref)
   (information captured) and the noise-corrected R^2, with s_net centred by its mean at phi*;
3. the Laplace widths of the learned, debiased summed score at phi*: 3.92 sqrt(diag(J H^-1 J^T))
   with H = -d/du [sum_i s_net(u, x~_i) - n h(u)], averaged over the 3 noise copies of X*;
4. the summed score field away from phi*, along theta1 and along the width (the other two
   parameters at the truth), on repetition 0's first noisy copy of X*: reference (particle filter)
   against each net's, debiased by a Monte Carlo mean of the same net (common random numbers,
   M = 20,000), so that only the score net's own error shows;
5. whether the net can represent the score at all: the 2x64 SiLU net fitted by least squares to
   particle-filter scores (16,000 particles each) of N = 20,000 rows drawn from the same localized
   proposal, in place of implicit score matching (supervised; a diagnostic, not a method: it needs
   the particle filter, which only exists for this model).

Usage: scorebayes bench mg1-score-reference [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mg1 as mg1_bench  # noqa: E402
from _smh_common import parser, write_results  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.models.mg1_reference import smoothed_score  # noqa: E402
from scorebayes.parallel import derive_seed, make_generator  # noqa: E402
from scorebayes.scores.networks import ScoreNet  # noqa: E402

NOISE_SD = 0.25
PAPER_WIDTHS = mg1_bench.PAPER["single-model"]
# phi = (theta1, width, theta3) -> reported theta = (theta1, theta2, theta3)
TO_REPORTED = torch.tensor([[1.0, 0, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.float64)
# (label, N of D^S, hidden, activation); the rest as mg1's small-scale single-model
NETS = [("1x64 tanh (paper's net), N = 20,000 (mg1 small scale)", 20_000, (64,), "tanh"),
        ("1x64 tanh, N = 200,000 (the paper's N)", 200_000, (64,), "tanh"),
        ("2x64 SiLU, N = 20,000", 20_000, (64, 64), "silu"),
        ("2x64 SiLU, N = 200,000", 200_000, (64, 64), "silu"),
        ("2x256 SiLU, N = 20,000", 20_000, (256, 256), "silu")]


def reference(model, num: int, particles: int, seed: int) -> dict:
    """Reference scores of ``num`` smoothed observations at phi*, Fisher information, BvM widths."""
    g = torch.Generator().manual_seed(seed)
    phi = model.true_parameters
    x = model.simulator(phi[None], num, g)[0] + NOISE_SD * torch.randn(num, 5, generator=g, dtype=torch.float64)
    a, b = (smoothed_score(phi, x, noise_sd=NOISE_SD, particles=particles,
                           generator=torch.Generator().manual_seed(seed + k)).score for k in (1, 2))
    score = (a + b) / 2
    mc_var = ((a - b) ** 2).mean(0) / 4  # Monte Carlo variance of the averaged estimate
    info = torch.cov(score.T) - torch.diag(mc_var)
    cov = TO_REPORTED @ torch.linalg.inv(model.n_obs * info) @ TO_REPORTED.T
    return {"x": x, "score": score, "mc_var": mc_var, "info": info,
            "mean_z": (score.mean(0) / (score.std(0) / num**0.5)).tolist(),
            "widths": (3.92 * cov.diag().sqrt()).tolist()}


def compare_with_reference(net, space, model, ref: dict) -> tuple[list, list]:
    """Information captured E[s_net s_ref] / Var(s_ref) and noise-corrected R^2 at phi*, per phi coordinate."""
    u_star = space.to_unconstrained(model.true_parameters[None])[0]
    dphi_du = space.pushforward_score(u_star[None], torch.ones(1, 3, dtype=torch.float64))[0]  # diagonal J_T
    with torch.no_grad():  # per-observation score in phi coordinates, centred at phi*
        s_u = net(u_star.float().expand(len(ref["x"]), 3), ref["x"].float()).double()
    s_net = s_u / dphi_du
    s_net = s_net - s_net.mean(0)
    var_ref = ref["score"].var(0) - ref["mc_var"]
    cross = (s_net * ref["score"]).mean(0)
    return (cross / var_ref).tolist(), (cross**2 / ((s_net**2).mean(0) * var_ref)).tolist()


def supervised_row(model, ref: dict, est, num: int, particles: int, seed: int, epochs: int = 200) -> tuple[dict, object]:
    """2x64 SiLU fitted by least squares to particle-filter scores on ``num`` rows from ``est``'s proposal."""
    start = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    u = est.space.to_unconstrained(est.proposal_.sample(num, g).double())
    u = u[torch.isfinite(u).all(1)]
    phi = est.space.to_constrained(u)
    x = model.simulator(phi, 1, g)[:, 0] + NOISE_SD * torch.randn(len(u), 5, generator=g, dtype=torch.float64)
    target = est.space.pushforward_score(
        u, smoothed_score(phi, x, noise_sd=NOISE_SD, particles=particles, generator=g).score).float()
    label_seconds = time.perf_counter() - start
    net = ScoreNet(3, 5, (64, 64), "silu")
    net.fit_standardisation(u.float(), x.float())
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    decay = torch.optim.lr_scheduler.ExponentialLR(opt, (1e-4 / 3e-3) ** (1 / epochs))
    scale, uf, xf = target.std(0), u.float(), x.float()
    for _ in range(epochs):
        perm = torch.randperm(len(u), generator=g)
        for a in range(0, len(u), 256):
            b = perm[a:a + 256]
            loss = (((net(uf[b], xf[b]) - target[b]) / scale) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        decay.step()
    captured, r2 = compare_with_reference(net, est.space, model, ref)
    return {"N": len(u), "particles": particles, "hidden": [64, 64], "activation": "silu",
            "fit_seconds": round(time.perf_counter() - start, 1), "label_seconds": round(label_seconds, 1),
            "validation_loss": float("nan"), "captured": captured, "r2": r2, "laplace_widths": None,
            "definite_copies": 0}, SimpleNamespace(score_net_=net, space=est.space)


def net_row(model, ref: dict, N: int, hidden: tuple, activation: str, seed: int) -> tuple[dict, object]:
    """Fit the single-model with this net on repetition 0 and compare its score with the reference."""
    s = {**mg1_bench.SMALL["single"], "N": N, "hidden": hidden, "activation": activation}
    x_obs = model.observed(make_generator(seed, "observed", 0))
    start = time.perf_counter()
    est = mg1_bench.single_estimator(model, s, derive_seed(seed, "single-model", 0)).fit(x_obs)
    fit_seconds = time.perf_counter() - start
    captured, r2 = compare_with_reference(est.score_net_, est.space, model, ref)
    u_star = est.space.to_unconstrained(model.true_parameters[None])[0]
    widths = []
    map_reported = torch.autograd.functional.jacobian(
        lambda u: model.to_reported(est.space.to_constrained(u)), u_star)
    for c in range(est.noise_draws):
        x_copy = est.likelihood_.smoothing(est.x_obs_, "observed", c)
        H = -torch.autograd.functional.jacobian(lambda u: est.likelihood_score(u[None], x_copy)[0], u_star)
        H = 0.5 * (H + H.T)
        if bool((torch.linalg.eigvalsh(H) > 0).all()):
            cov = map_reported @ torch.linalg.inv(H) @ map_reported.T
            widths.append((3.92 * cov.diag().sqrt()).tolist())
    laplace = (torch.tensor(widths).mean(0).tolist() if len(widths) == est.noise_draws else None)
    return {"N": N, "hidden": list(hidden), "activation": activation, "fit_seconds": round(fit_seconds, 1),
            "validation_loss": est.fit_report_.validation_loss, "captured": captured, "r2": r2,
            "laplace_widths": laplace, "definite_copies": len(widths)}, est


# the field lines: (label, coordinate of phi that moves, values), the others at phi*
LINES = [("theta1", 0, [1.0, 0.85, 0.7, 0.55]), ("theta2 - theta1", 1, [4.0, 4.5, 5.0, 5.5])]


def field(model, estimators: dict, seed: int, particles: int, num_mc: int = 20_000) -> dict:
    """Summed score component along each line: reference (+- SE) and each net's, MC-debiased."""
    est0 = next(iter(estimators.values()))
    x_tilde = est0.likelihood_.smoothing(est0.x_obs_, "observed", 0).double()  # every net shares rep 0's seed and data
    g = torch.Generator().manual_seed(seed)
    latents = model.simulator.latent(1, num_mc, g)
    noise = NOISE_SD * torch.randn(1, num_mc, 5, generator=g, dtype=torch.float64)
    out = {}
    for name, k, values in LINES:
        rows = []
        for v in values:
            phi = model.true_parameters.clone()
            phi[k] = v
            a, b = (smoothed_score(phi, x_tilde, noise_sd=NOISE_SD, particles=particles // 2,
                                   generator=torch.Generator().manual_seed(seed + j)).score for j in (1, 2))
            row = {"value": v, "reference": float(((a + b) / 2)[:, k].sum()),
                   "reference_se": float(((a - b)[:, k] ** 2).sum().sqrt() / 2)}
            for label, est in estimators.items():
                u = est.space.to_unconstrained(phi[None])
                dphi_du = est.space.pushforward_score(u, torch.ones_like(u))[0]  # diagonal J_T
                with torch.no_grad():
                    sims = model.simulator.transform(phi[None], latents)[0] + noise[0]
                    h = est.score_net_(u.float(), sims.float()).double().mean(0)
                    total = est.score_net_(u.float().expand(len(x_tilde), 3), x_tilde.float()).double().sum(0)
                row[label] = float(((total - len(x_tilde) * h) / dphi_du)[k])
            rows.append(row)
        out[name] = rows
    return out


def markdown(ref: dict, rows: dict, lines: dict, num: int, particles: int, n_obs: int) -> str:
    fmt = lambda v: " / ".join(f"{x:.3f}" for x in v)  # noqa: E731
    md = ["## The smoothed model's information at the truth", "",
          f"{num} smoothed observations at phi* = (1, 4, 0.2), reference score by two particle filters of "
          f"{particles} particles each (mean score / SE: {fmt(ref['mean_z'])}, i.e. mean zero as it must be).", "",
          "| | theta1 | theta2 | theta3 |", "|---|---|---|---|",
          f"| Bernstein-von Mises CI95 width of the smoothed model, n = 500 | {' | '.join(f'{w:.3f}' for w in ref['widths'])} |",
          f"| paper's single-model (Table 1) | {PAPER_WIDTHS['theta1'][2]} | {PAPER_WIDTHS['theta2'][2]} | "
          f"{PAPER_WIDTHS['theta3'][2]} |", "",
          "Fisher information per observation, phi = (theta1, theta2 - theta1, theta3): "
          + "; ".join(fmt(r) for r in ref["info"].tolist()), "",
          "## What the learned score nets carry (repetition 0, mg1's small-scale single-model otherwise)", "",
          "Information captured = E[s_net s_ref] / Var(s_ref) per parameter of phi (1 = all of it); R^2 is the "
          "noise-corrected squared correlation; Laplace widths are those of the learned debiased summed score at "
          "phi* (theta1 / theta2 / theta3, mean over the 3 noise copies; '-' where its Hessian is indefinite).", "",
          "| net | validation loss | information captured (theta1, width, theta3) | R^2 | Laplace CI95 widths | fit s |",
          "|---|---|---|---|---|---|"]
    for label, r in rows.items():
        lap = (fmt(r["laplace_widths"]) if r["laplace_widths"] else "n/a (no debiasing net)" if "particles" in r
               else f"- ({r['definite_copies']}/3 definite)")
        md.append(f"| {label} | {r['validation_loss']:.2f} | {fmt(r['captured'])} | {fmt(r['r2'])} | {lap} | "
                  f"{r['fit_seconds']:.0f} |")
    md += ["", "## The summed score away from the truth (repetition 0, first noisy copy of X*)", "",
           "Component of sum_i s(phi, x~_i) along the line, in phi units; the other two parameters at the truth. "
           "Reference: particle filter (+- its Monte Carlo SE); nets: debiased by a Monte Carlo mean of the same net. "
           "A posterior concentrated near the truth needs this component to fall steeply through zero as the "
           "parameter moves past the truth (the smoothed model's curvature n I_jj: "
           + ", ".join(f"{name} {n_obs * float(ref['info'][k, k]):.0f}" for name, k, _ in LINES) + ").", ""]
    for name, _, _ in LINES:
        md += [f"**{name}**", "", "| value | reference | " + " | ".join(rows) + " |",
               "|---|---|" + "---|" * len(rows)]
        md += [f"| {r['value']:g} | {r['reference']:.0f} +- {r['reference_se']:.0f} | "
               + " | ".join(f"{r[label]:.0f}" for label in rows) + " |" for r in lines[name]]
        md.append("")
    return "\n".join(md)


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small reference and the first net only (smoke test)")
    args = p.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    model = get_model("mg1")
    num, particles = (60, 4000) if args.quick else (300, 64_000)
    ref = reference(model, num, particles, seed=args.seed + 1)
    rows, estimators = {}, {}
    for label, N, hidden, act in (NETS[:1] if args.quick else NETS):
        rows[label], estimators[label] = net_row(model, ref, N if not args.quick else 2_000, hidden, act, args.seed)
    label = f"2x64 SiLU fitted to particle-filter scores (supervised), N = {2_000 if args.quick else 20_000:,}"
    rows[label], estimators[label] = supervised_row(
        model, ref, next(iter(estimators.values())), num=2_000 if args.quick else 20_000,
        particles=1_000 if args.quick else 16_000, seed=args.seed + 21, epochs=20 if args.quick else 200)
    lines = field(model, estimators, seed=args.seed + 11, particles=2_000 if args.quick else 16_000)
    md = markdown(ref, rows, lines, num, particles, model.n_obs)
    payload = {"reference": {k: (v.tolist() if torch.is_tensor(v) else v) for k, v in ref.items()
                             if k not in ("x", "score")}, "nets": rows, "field": lines,
               "paper_widths": PAPER_WIDTHS}
    write_results("mg1_score_reference" + ("_quick" if args.quick else ""), payload, md, start)
    print(md)
