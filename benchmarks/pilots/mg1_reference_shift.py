"""Pilot (session 39): is an off-centre mg1 single-model posterior the net's error or the data set's?

On some repetitions the single-model's theta2 interval misses the truth by about one width
(single-model-features-1m-mh: repetitions 0 and 3). Either the learned summed score is biased
there, or the smoothed model's own posterior is off-centre on that data set (then even a perfect
score would miss it). For each noisy copy c of the data set (ScoreLangevin.noisy_copies), at the
centre phi_c of that copy's chains (median of the chain means, in phi = (theta1, width, theta3),
so stuck chains do not move it), this evaluates

- the reference summed score S_ref(phi_c) = sum_i grad log p~(x~_ci | phi_c) by two independent
  particle filters (scorebayes.models.mg1_reference.smoothed_score; +- its Monte Carlo SE);
- the net's debiased summed score sum_i s(phi_c, x~_ci) - n h(phi_c), with the fitted h and with a
  Monte Carlo h (the net's mean over M simulated smoothed observations at phi_c);

and the reference's Newton step d = (n I)^-1 S_ref(phi_c), with I the smoothed model's Fisher
information per observation at the truth (benchmarks/results/mg1_score_reference.json). phi_c + d
estimates where the smoothed model's likelihood peaks on copy c: near the truth means the net
moved the posterior; near phi_c means the data set did. The same at the truth: S_ref(phi*) and
its step, the smoothed likelihood's peak seen from the truth.

Usage, from the repository root (after the benchmark has stored the fits):
``.venv/bin/python benchmarks/pilots/mg1_reference_shift.py 0,3,1,5 [--fits 1m] [--particles 32000]``
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sbi_common as common  # noqa: E402
from mg1_resample_features import FITS, load_fit  # noqa: E402
from mg1_score_reference import NOISE_SD, TO_REPORTED  # noqa: E402

from scorebayes.models import get_model  # noqa: E402
from scorebayes.models.mg1_reference import smoothed_score  # noqa: E402



def fisher_information() -> torch.Tensor:
    """Per-observation Fisher information of the smoothed model at the truth, [3, 3] in phi."""
    ref = json.loads((common.RESULTS / "mg1_score_reference.json").read_text())["reference"]
    return torch.tensor(ref["info"], dtype=torch.float64)


def reference_sum(phi: torch.Tensor, x_tilde: torch.Tensor, particles: int, seed: int) -> tuple:
    """S_ref(phi) [3] from two filters of particles/2 each, and its Monte Carlo SE [3]."""
    a, b = (smoothed_score(phi, x_tilde, noise_sd=NOISE_SD, particles=particles // 2,
                           generator=torch.Generator().manual_seed(seed + j)).score for j in (1, 2))
    return ((a + b) / 2).sum(0), ((a - b) ** 2).sum(0).sqrt() / 2


def net_sum(est, model, phi: torch.Tensor, x_tilde: torch.Tensor, num_mc: int, seed: int) -> tuple:
    """The net's debiased summed score at phi in phi units [3]: with the fitted h and a Monte Carlo h
    (the net's mean over ``num_mc`` simulated smoothed observations at phi)."""
    g = torch.Generator().manual_seed(seed)
    u = est.space.to_unconstrained(phi[None])
    dphi_du = est.space.pushforward_score(u, torch.ones_like(u))[0]  # diagonal J_T
    sims = model.simulator(phi[None], num_mc, g)[0] + NOISE_SD * torch.randn(
        num_mc, x_tilde.shape[1], generator=g, dtype=torch.float64)
    with torch.no_grad():
        fitted = est.likelihood_score(u, x_obs=x_tilde)[0]  # sum_i s(u, x~_i) - n h(u)
        h_fit = est.mean_net_(u.float()).double()[0]
        h_mc = est.likelihood_score(u, x_obs=sims)[0] / num_mc + h_fit  # mean of s(u, x) over sims
    n = len(x_tilde)
    return fitted / dphi_du, (fitted + n * (h_fit - h_mc)) / dphi_du


def sandwich(est, u: torch.Tensor, x_tilde: torch.Tensor, to_reported: torch.Tensor) -> dict:
    r"""The learned score's Godambe sandwich at ``u [3]``: with g_i = s(u, x~_i) - h(u) (u units),
    K = sum_i g_i g_i^T and H = -d/du sum_i g_i, the posterior's local covariance is H^-1, while
    the spread of its centre over data sets is H^-1 K H^-1 (they agree when the net carries all of
    the score's information). Returns the reported parameters' posterior SDs, sandwich SDs and
    Lyddon's weight beta_L = tr(H K^-1 H) / tr(H) (White 1982; Lyddon, Holmes and Walker 2019)."""
    u = u.detach().double()
    with torch.no_grad():
        view = est._observed_view(x_tilde)
        per_obs = est.score_net_(u.float().expand(len(view), 3), view).double()
        g = per_obs - est.mean_net_(u.float()[None]).double()  # [n, 3]
    K = g.T @ g
    H = -torch.autograd.functional.jacobian(lambda v: est.likelihood_score(v[None], x_obs=x_tilde)[0], u)
    H = (H + H.T) / 2
    d = torch.diag(est.space.pushforward_score(u[None], torch.ones(1, 3, dtype=torch.float64))[0])  # dphi/du
    h_inv = torch.linalg.inv(H)
    post = to_reported @ d @ h_inv @ d @ to_reported.T
    sand = to_reported @ d @ h_inv @ K @ h_inv @ d @ to_reported.T
    return {"posterior_sd": post.diag().sqrt(), "sandwich_sd": sand.diag().sqrt(),
            "beta_L": float(torch.trace(H @ torch.linalg.inv(K) @ H) / torch.trace(H)),
            "H_eigenvalues": torch.linalg.eigvalsh(H)}


def fmt(v) -> str:
    return " / ".join(f"{float(x):.3f}" for x in v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reps", help="comma-separated repetitions")
    parser.add_argument("--fits", choices=sorted(FITS), default="1m")
    parser.add_argument("--particles", type=int, default=32_000)
    parser.add_argument("--no-reference", action="store_true", help="only the sandwich (no particle filter)")
    parser.add_argument("--mc", type=int, default=20_000, help="simulations of the Monte Carlo h")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one process per core
    model = get_model("mg1")
    n_info_inv = torch.linalg.inv(model.n_obs * fisher_information())
    truth = model.true_parameters
    for rep in (int(r) for r in args.reps.split(",")):
        start = time.perf_counter()
        est, x_obs, s = load_fit(model, rep, args.fits)
        post = est.sample(s["samples"], chains=s["chains"], max_steps=s["max_steps"])  # stored: instant
        chain_means = torch.as_tensor(post.samples, dtype=torch.float64).mean(1)  # [chains, 3], phi
        copies = np.asarray(post.info["chain_copies"])
        print(f"rep {rep} (truth phi {fmt(truth)}; min x {float(x_obs.min()):.4f})", flush=True)
        for c, x_tilde in enumerate(est.noisy_copies()):
            x_tilde = x_tilde.double()
            centre = chain_means[torch.as_tensor(copies == c)].median(0).values
            sw = sandwich(est, est.space.to_unconstrained(centre[None])[0], x_tilde, TO_REPORTED)
            print(f"  copy {c} sandwich at the chains' centre: posterior SD (H^-1) {fmt(sw['posterior_sd'])}, "
                  f"sandwich SD {fmt(sw['sandwich_sd'])}, ratio {fmt(sw['sandwich_sd'] / sw['posterior_sd'])}, "
                  f"beta_L {sw['beta_L']:.3f}, H eigenvalues {fmt(sw['H_eigenvalues'])}", flush=True)
            if args.no_reference:
                continue
            for label, phi in (("chains' centre", centre), ("truth", truth)):
                s_ref, se = reference_sum(phi, x_tilde, args.particles, seed=1000 * rep + 10 * c)
                s_fit, s_mc = net_sum(est, model, phi, x_tilde, args.mc, seed=1000 * rep + 10 * c + 5)
                step = n_info_inv @ s_ref
                step_se = (n_info_inv ** 2 @ se ** 2).sqrt()
                print(f"  copy {c} at {label} phi {fmt(phi)}: S_ref {fmt(s_ref)} (+- {fmt(se)}); "
                      f"net, fitted h {fmt(s_fit)}; net, MC h {fmt(s_mc)}; "
                      f"reference peak phi + (nI)^-1 S_ref = {fmt(phi + step)} (+- {fmt(step_se)})", flush=True)
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
