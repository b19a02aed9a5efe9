"""Benchmark: one training step of score matching, Jacobian by forward mode against autograd.

A training step evaluates the per-observation scores, their theta-Jacobian summed over the
observations of each row, the implicit score-matching loss (plus the curvature penalty where the
estimator uses one) and its gradient. Two implementations, timed side by side in one run (the
ratio is what counts on a noisy machine):

- ``autograd``: d backward passes with ``create_graph=True``, then a double backward
  (:func:`scorebayes.scores.losses.jacobian`, the path every net without a closed-form
  activation derivative still takes);
- ``forward``: :meth:`ScoreNet.score_and_jacobian` (tangents pushed through the layers, summed
  over observations after the last activation), then one ordinary backward pass.

Shapes are the paper's estimators at the batch sizes of our benchmarks: the M/G/1 n-model
(n = 500 observations per row, 1 x 64 tanh), the M/G/1 single-model (1 observation per row, with
a curvature group of m_R = 100), the monotone single-model (d = 11, 3 x 64 ELU), and the
epidemic full-data nets (vec(S) inputs, 512-256-128 ELU, batch 5).

    scorebayes bench score-jacobian [--repeats R] [--threads T]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

from scorebayes.scores import losses
from scorebayes.scores.losses import curvature_penalty, implicit_score_matching
from scorebayes.scores.networks import ScoreNet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from langevin_drift import best_time  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

# name: (d, p, hidden, activation, rows per step, observations per row, curvature group size or 0)
SHAPES = {
    "mg1 n-model": (3, 5, (64,), "tanh", 100, 500, 0),
    "mg1 single-model + penalty": (3, 5, (64,), "tanh", 500, 1, 100),
    "monotone single-model": (11, 2, (64, 64, 64), "elu", 1000, 1, 0),
    "epidemic5 full-data": (7, 364, (512, 256, 128), "elu", 5, 1, 0),
    "epidemic10 full-data": (12, 624, (512, 256, 128), "elu", 5, 1, 0),
}


def autograd_path(net, theta, x):
    leaf = theta.detach().requires_grad_(True)
    per_obs = net(leaf[:, None, :], x)
    return per_obs, losses.jacobian(per_obs.sum(1), leaf, create_graph=True)


def forward_path(net, theta, x):
    return net.score_and_jacobian(theta, x)


def step(evaluate, net, theta, x, grad_log_p, groups):
    """One step's loss and gradient; returns the loss (for the agreement check)."""
    per_obs, jac = evaluate(net, theta, x)
    loss = implicit_score_matching(per_obs.sum(1), jac, grad_log_p).mean()
    if groups is not None:
        g_obs, g_jac = evaluate(net, *groups)
        loss = loss + 1e-3 * curvature_penalty(g_obs, g_jac).mean()
    net.zero_grad(set_to_none=True)
    loss.backward()
    return float(loss.detach())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the benchmarks use 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = {}
    for name, (d, p, hidden, act, batch, m, group) in SHAPES.items():
        torch.manual_seed(0)
        net = ScoreNet(d, p, hidden, act)
        theta, x = torch.randn(batch, d), torch.randn(batch, m, p)
        net.fit_standardisation(theta, x)
        grad_log_p = torch.randn(batch, d)
        groups = (torch.randn(max(1, batch // 10), d), torch.randn(max(1, batch // 10), group, p)) if group else None
        loss_a = step(autograd_path, net, theta, x, grad_log_p, groups)
        grads_a = [q.grad.clone() for q in net.parameters()]
        loss_f = step(forward_path, net, theta, x, grad_log_p, groups)
        agree = abs(loss_a - loss_f) <= 1e-4 * (1 + abs(loss_a)) and all(
            torch.allclose(q.grad, g, rtol=1e-3, atol=1e-5) for q, g in zip(net.parameters(), grads_a))
        t_a = best_time(lambda: step(autograd_path, net, theta, x, grad_log_p, groups), args.repeats)
        t_f = best_time(lambda: step(forward_path, net, theta, x, grad_log_p, groups), args.repeats)
        rows[name] = {"d": d, "p": p, "hidden": list(hidden), "activation": act, "rows": batch,
                      "observations_per_row": m, "curvature_group": group, "autograd_seconds": t_a,
                      "forward_seconds": t_f, "speedup": t_a / t_f, "same_loss_and_gradients": agree}
        print(f"{name}: autograd {t_a:.4f} s, forward {t_f:.4f} s, speed-up {t_a / t_f:.2f}x, agree={agree}",
              flush=True)
    command = "scorebayes bench score-jacobian " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {"name": "score-jacobian", "command": command.strip(),
              "machine": f"{platform.processor() or platform.machine()}, {args.threads} torch thread(s), "
                         f"torch {torch.__version__}",
              "methods": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "score_jacobian.json").write_text(json.dumps(result, indent=2))
    lines = ["# Score-matching training step: forward-mode Jacobian against autograd\n",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}  ",
             f"Best of {args.repeats} steps each, both paths in the same run.\n",
             "| estimator shape | d | obs/row | rows | net | autograd s/step | forward s/step | speed-up | same loss and gradients |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        net_desc = "x".join(map(str, r["hidden"])) + " " + r["activation"]
        lines.append(f"| {name} | {r['d']} | {r['observations_per_row']} | {r['rows']} | {net_desc} | "
                     f"{r['autograd_seconds']:.4f} | {r['forward_seconds']:.4f} | {r['speedup']:.2f}x | "
                     f"{r['same_loss_and_gradients']} |")
    (RESULTS / "score_jacobian.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
