"""Benchmark: the Langevin drift sum_i s(theta_c, X_i) for C chains x n observations.

Reports GFLOP/s of three implementations beside the machine's matmul rate measured in the
same run (the ratio is what matters on a noisy machine):

- ``naive``: concatenate (theta, x) for every pair and run the whole MLP;
- ``precomputed``: ScoreNet.sum_over_observations (first layer's data part W_x X + b computed
  once per data set, chains in chunks);
- ``compiled``: the same under ``torch.compile`` (skipped if compilation fails).

A second table times the per-parameter networks (CoordinateViewScoreNet) at the shapes of
epidemic10's ``n-model-views-spread``: 12 networks of 128 x 64 ELU, each on 312 inputs of one data
set, C = 1000 chains: the plain forward pass against sum_over_observations, which computes each
network's first-layer data part once.

Shapes follow the monotone-regression score net: d = 11, p = 2, 3 x 64 ELU, n = 1000,
C = 1000 (``--small`` for a quick run). FLOPs count multiply-adds as 2 in the matmuls
(activations and additions not counted).

    scorebayes bench langevin-drift [--chains C] [--n N] [--repeats R] [--small]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from scorebayes.scores.networks import CoordinateViewScoreNet, ScoreNet

RESULTS = Path(__file__).resolve().parent / "results"


def best_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_rate(repeats: int) -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    seconds = best_time(lambda: a @ b, repeats)
    return 2 * 1024**3 / seconds / 1e9


def drift_flops(net: ScoreNet, chains: int, n: int, naive: bool) -> float:
    per_pair = 0
    for module in net.rest:
        if isinstance(module, torch.nn.Linear):
            per_pair += 2 * module.in_features * module.out_features
    first = net.first
    if naive:
        per_pair += 2 * first.in_features * first.out_features
        return float(chains * n * per_pair)
    return float(chains * n * per_pair + 2 * n * net.x_dim * first.out_features
                 + 2 * chains * net.theta_dim * first.out_features)


def view_networks(chains: int, repeats: int) -> dict:
    """Seconds per drift of the per-parameter networks: forward pass vs data part computed once."""
    d, T, width, k = 12, 52, 12, 4  # epidemic10: 12 rates, vec(S) of 52 x 12, 4 spread summaries a time
    views = [[t * width + c for c in (0, j % width) for t in range(T)] + list(range(T * width, T * (width + k)))
             for j in range(d)]
    net = CoordinateViewScoreNet(d, T * (width + k), views, hidden=(128, 64)).eval()
    theta, x = torch.randn(chains, d), torch.rand(1, T * (width + k))
    forward = lambda: net(theta[:, None, :], x[None]).sum(1)  # noqa: E731
    split = lambda: net.sum_over_observations(theta, x)  # noqa: E731
    with torch.no_grad():
        assert torch.allclose(forward(), split(), rtol=1e-4, atol=1e-4)
        rows = {"forward": best_time(forward, repeats), "data part once": best_time(split, repeats)}
    return {"shape": {"chains": chains, "networks": d, "inputs": len(views[0]), "hidden": [128, 64]},
            "seconds": rows, "speed-up": rows["forward"] / rows["data part once"]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=1000)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--small", action="store_true", help="C = n = 200")
    args = parser.parse_args(argv)
    if args.small:
        args.chains = args.n = 200
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d, p = 11, 2
    net = ScoreNet(d, p, (64, 64, 64), "elu").eval()
    theta, x = torch.randn(args.chains, d), torch.rand(args.n, p)

    def naive() -> torch.Tensor:
        return net(theta[:, None, :], x[None]).sum(1)

    def precomputed() -> torch.Tensor:
        return net.sum_over_observations(theta, x)

    with torch.no_grad():
        assert torch.allclose(naive(), precomputed(), rtol=1e-4, atol=1e-3)
        peak = matmul_rate(args.repeats)
        rows = {}
        for name, fn, is_naive in (("naive", naive, True), ("precomputed", precomputed, False)):
            seconds = best_time(fn, args.repeats)
            rows[name] = {"seconds": seconds, "gflops": drift_flops(net, args.chains, args.n, is_naive) / seconds / 1e9}
        try:
            compiled_net = torch.compile(net.sum_over_observations)
            seconds = best_time(lambda: compiled_net(theta, x), args.repeats)
            rows["compiled"] = {"seconds": seconds,
                                "gflops": drift_flops(net, args.chains, args.n, False) / seconds / 1e9}
        except Exception as err:  # noqa: BLE001 - compilation needs a C++ toolchain
            rows["compiled"] = {"error": f"{type(err).__name__}: {err}"[:200]}
    for row in rows.values():
        if "gflops" in row:
            row["fraction_of_matmul"] = row["gflops"] / peak
    result = {
        "name": "langevin-drift",
        "command": "scorebayes bench langevin-drift " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        "shape": {"chains": args.chains, "n": args.n, "d": d, "p": p, "hidden": [64, 64, 64]},
        "matmul_gflops": peak,
        "methods": rows,
        "view_networks": view_networks(args.chains, args.repeats),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "langevin_drift.json").write_text(json.dumps(result, indent=2))
    lines = ["# Langevin drift benchmark\n", f"Command: `{result['command']}`  ", f"Machine: {result['machine']}  ",
             f"Shape: C = {args.chains} chains x n = {args.n} observations, d = {d}, p = {p}, 3 x 64 ELU\n",
             f"Machine matmul rate (1024^3 float32, same run): **{peak:.1f} GFLOP/s**\n",
             "| implementation | seconds per drift | GFLOP/s | fraction of matmul |", "|---|---|---|---|"]
    for name, row in rows.items():
        if "gflops" in row:
            lines.append(f"| {name} | {row['seconds']:.4f} | {row['gflops']:.1f} | {row['fraction_of_matmul']:.2f} |")
        else:
            lines.append(f"| {name} | failed: {row['error']} | | |")
    views = result["view_networks"]
    lines += ["", f"Per-parameter networks (CoordinateViewScoreNet, epidemic10's n-model-views-spread): "
              f"{views['shape']['networks']} networks of 128 x 64 ELU on {views['shape']['inputs']} inputs, "
              f"C = {args.chains} chains, one data set\n",
              "| implementation | seconds per drift |", "|---|---|"]
    lines += [f"| {name} | {sec:.4f} |" for name, sec in views["seconds"].items()]
    lines.append(f"\nSpeed-up of computing the data part once: **{views['speed-up']:.2f}x**")
    (RESULTS / "langevin_drift.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    main()
