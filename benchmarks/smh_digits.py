"""smh-digits: the MNIST experiment of Score-Based MH (Figs. 6, 9, 16) on scikit-learn's 8x8 digits.

MNIST cannot be downloaded here, so we use the 1,797 bundled 8x8 digits (64-d, pixels scaled to
[-1, 1]; 1,400 for training, the rest held out). A noise-conditional MLP score network is trained
by denoising score matching over geometric noise levels, then annealed ULA and annealed MALA
(same proposals; MALA accepts with the Gauss-Lobatto path-integral rule, k = 3, on each level's
score, since no conditional acceptance network was trained in the time available) are run over
a grid of step multipliers tau (h_i = tau * h0 * sigma_i^2 / sigma_L^2). In place of the paper's
visual comparison: W1 (POT, pixel space) and MMD^2 between the generated and the held-out digits,
with the floor of training digits vs held-out digits. Figures: sample grids and W1 vs tau.
"""

from __future__ import annotations

import time

import torch
from _smh_common import RESULTS, all_metrics, parser, pyplot, write_results

from scorebayes.samplers.acceptance import QuadratureRule
from scorebayes.samplers.annealed import annealed_langevin
from scorebayes.scoremh import fit_noise_conditional_score, geometric_noise_levels

if __name__ == "__main__":
    from sklearn.datasets import load_digits

    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    full = args.full
    g = torch.Generator().manual_seed(args.seed)
    pixels = torch.as_tensor(load_digits().data, dtype=torch.float32) / 16 * 2 - 1
    perm = torch.randperm(len(pixels), generator=g)
    train, held = pixels[perm[:1400]], pixels[perm[1400:]]
    levels = 20 if not full else 100
    sigmas = geometric_noise_levels(4.0, 0.05, levels)
    model = fit_noise_conditional_score(train, sigmas, hidden=512, num_hidden=3, epochs=300 if not full else 2000,
                                        batch_size=128, lr=1e-3, standardize=False, generator=g,
                                        progress=not args.quiet)
    chains, per_level, final = (500, 5, 100) if not full else (1000, 5, 1000)
    h0 = 5e-4
    taus = [0.5, 0.7, 0.9, 1.1, 2.0, 4.0]

    def score(x, sigma):
        with torch.no_grad():
            return model(x, sigma)

    def mala_rule(sigma, step):
        return QuadratureRule(lambda x: score(x, sigma), 3)

    floor = all_metrics(train[:len(held)].double().numpy(), held.double().numpy(), num=len(held), reps=1)
    rows, grids = {}, {}
    for tau in taus:
        for label, acc in [("annealed ULA", None), ("annealed MALA", mala_rule)]:
            x0 = sigmas[0] * torch.randn(chains, 64, generator=g)
            x, info = annealed_langevin(score, x0, sigmas.tolist(), steps_per_level=per_level, final_steps=final,
                                        step_rule="geometric", step_size=tau * h0, acceptance=acc, generator=g)
            x = x.clamp(-1, 1)
            m = all_metrics(x.double().numpy(), held.double().numpy(), num=len(held), reps=1)
            rows[f"{label} tau={tau}"] = {"tau": tau, "method": label, **m,
                                          "final_acceptance": info["acceptance_rate"][-1]}
            grids[(label, tau)] = x[:16].numpy()
            print(label, tau, {k: round(v, 4) for k, v in m.items()}, round(info["acceptance_rate"][-1], 3),
                  flush=True)
    md = [f"Floor (training vs held-out digits): W1 {floor['W1']:.3f}, MMD^2 {floor['MMD']:.4f}", "",
          "| tau | ULA W1 | MALA W1 | ULA MMD^2 | MALA MMD^2 | MALA final acceptance |", "|---|---|---|---|---|---|"]
    for tau in taus:
        u, m = rows[f"annealed ULA tau={tau}"], rows[f"annealed MALA tau={tau}"]
        md.append(f"| {tau} | {u['W1']:.3f} | {m['W1']:.3f} | {u['MMD']:.4f} | {m['MMD']:.4f} | "
                  f"{m['final_acceptance']:.3f} |")
    plt = pyplot()
    fig, axes = plt.subplots(2, len(taus), figsize=(2.2 * len(taus), 4.6))
    for j, tau in enumerate(taus):
        for i, label in enumerate(["annealed MALA", "annealed ULA"]):
            tiles = grids[(label, tau)].reshape(4, 4, 8, 8).transpose(0, 2, 1, 3).reshape(32, 32)
            axes[i, j].imshow(tiles, cmap="gray_r", vmin=-1, vmax=1)
            axes[i, j].set_title(f"{label.split()[1]} tau={tau}", fontsize=8)
            axes[i, j].axis("off")
    fig.tight_layout()
    fig.savefig(RESULTS / "smh_digits_samples.png", dpi=80)
    fig, ax = plt.subplots(figsize=(4, 3))
    for label in ["annealed ULA", "annealed MALA"]:
        ax.plot(taus, [rows[f"{label} tau={t}"]["W1"] for t in taus], "o-", label=label)
    ax.axhline(floor["W1"], color="0.5", ls="--", label="train vs held-out")
    ax.set_xlabel("tau")
    ax.set_ylabel("W1 to held-out digits")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "smh_digits_w1.png", dpi=80)
    write_results("smh_digits", {"floor": floor, "rows": rows, "levels": levels, "chains": chains,
                                 "h0": h0}, "\n".join(md), start)
    print("\n".join(md))
