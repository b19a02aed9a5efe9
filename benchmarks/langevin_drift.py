"""Benchmark: the Langevin drift sum_i s(theta_c, X_i) for C chains x n observations.

Reports GFLOP/s of three implementations as a fraction of the machine's matmul rate measured in
the same run:

- ``naive``: concatenate (theta, x) for every pair and run the whole MLP;
- ``precomputed``: ScoreNet.sum_over_observations (first layer's data part W_x X + b computed
  once per data set, chains in chunks, the sum over observations taken before the last layer);
- ``compiled``: the same with its chunk body (ScoreNet._hidden_sum) under ``torch.compile``,
  compiled once for the chunk shape (an error row if compilation fails).

Two reference rows bound what the drift can reach at its shapes: ``products alone`` runs only
the drift's two 64 x 64 matrix products per pair (same chunks, preallocated buffers) and
``elementwise alone`` only its elementwise passes, compiled as in the drift (broadcast sum + ELU,
bias + ELU, bias + ELU + sum over observations).

The ratio is made stable by interleaving: every round times each implementation once, each right
after the 1024^3 matmul reference (median of ``--repeats`` calls), so machine noise hits both
sides; the first round (warm-up, compilation) is dropped; per-round ratios are summarised by
min / median / max over ``--rounds`` rounds. Both sides run on the same ``--threads`` (set once,
recorded). With one thread both sides are timed in process CPU seconds, so another job sharing
the core (time-slicing, which a long drift call suffers more than short matmul calls) does not
enter the ratio; with more threads, in wall-clock seconds. The 1-minute load average is recorded.

A second table times the per-parameter networks (CoordinateViewScoreNet) at the shapes of
epidemic10's ``n-model-views-spread``: 12 networks of 128 x 64 ELU, each on 312 inputs of one data
set, C = 1000 chains: the plain forward pass against sum_over_observations, which computes each
network's first-layer data part once.

Shapes follow the monotone-regression score net: d = 11, p = 2, 3 x 64 ELU, n = 1000,
C = 1000 (``--small`` for a quick run). FLOPs count the multiply-adds each implementation
executes as 2 (activations and additions not counted).

    scorebayes bench langevin-drift [--chains C] [--n N] [--rounds R] [--threads T] [--small]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from scorebayes.scores.networks import CoordinateViewScoreNet, ScoreNet

RESULTS = Path(__file__).resolve().parent / "results"
NOTES = "## Notes"


def best_time(fn, repeats: int) -> float:
    """Fastest of ``repeats`` calls after one warm-up call (used by other benchmarks)."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def clock_seconds(fn, cpu: bool) -> float:
    """Wall-clock seconds of one call, or with ``cpu`` the process's CPU seconds (single-threaded
    runs: time the process was scheduled, so another job time-slicing the core is not counted)."""
    clock = time.process_time if cpu else time.perf_counter
    start = clock()
    fn()
    return clock() - start


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    return statistics.median(seconds(fn) for _ in range(repeats))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def drift_flops(net: ScoreNet, chains: int, n: int, naive: bool) -> float:
    """Multiply-adds x 2 that an implementation executes."""
    linears = [m for m in net.rest if isinstance(m, torch.nn.Linear)]
    first, last = net.first, linears[-1]
    hidden = sum(2 * m.in_features * m.out_features for m in linears[:-1])
    if naive:
        return float(chains * n * (hidden + 2 * first.in_features * first.out_features
                                   + 2 * last.in_features * last.out_features))
    return float(chains * n * hidden + 2 * n * net.x_dim * first.out_features
                 + 2 * chains * net.theta_dim * first.out_features
                 + 2 * chains * last.in_features * last.out_features)


def summary(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def view_networks(chains: int, repeats: int) -> dict:
    """Seconds per drift (median of repeats) of the per-parameter networks: forward pass vs data part computed once."""
    d, T, width, k = 12, 52, 12, 4  # epidemic10: 12 rates, vec(S) of 52 x 12, 4 spread summaries a time
    views = [[t * width + c for c in (0, j % width) for t in range(T)] + list(range(T * width, T * (width + k)))
             for j in range(d)]
    net = CoordinateViewScoreNet(d, T * (width + k), views, hidden=(128, 64)).eval()
    theta, x = torch.randn(chains, d), torch.rand(1, T * (width + k))
    forward = lambda: net(theta[:, None, :], x[None]).sum(1)  # noqa: E731
    split = lambda: net.sum_over_observations(theta, x)  # noqa: E731
    with torch.no_grad():
        assert torch.allclose(forward(), split(), rtol=1e-4, atol=1e-4)
        rows = {"forward": median_time(forward, repeats), "data part once": median_time(split, repeats)}
    return {"shape": {"chains": chains, "networks": d, "inputs": len(views[0]), "hidden": [128, 64]},
            "seconds": rows, "speed-up": rows["forward"] / rows["data part once"]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=1000)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds after the warm-up round")
    parser.add_argument("--repeats", type=int, default=5, help="matmul calls per round (median), view-network repeats")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--small", action="store_true", help="C = n = 200")
    args = parser.parse_args(argv)
    if args.small:
        args.chains = args.n = 200
    torch.set_num_threads(args.threads)  # one setting for the matmul and the drift
    torch.manual_seed(0)
    d, p, width = 11, 2, 64
    net = ScoreNet(d, p, (width,) * 3, "elu").eval()
    theta, x = torch.randn(args.chains, d), torch.rand(args.n, p)
    compiled_net = copy.deepcopy(net)
    compiled_net._hidden_sum = torch.compile(compiled_net._hidden_sum, dynamic=False)
    # the drift's chunks (sum_over_observations' default max_elements) for the reference rows
    chunk = max(1, 2**18 // (args.n * width))
    rows_per_chunk = chunk * args.n
    starts = range(0, args.chains, chunk)
    buf_a, buf_b = torch.randn(rows_per_chunk, width), torch.empty(rows_per_chunk, width)
    lin2, lin3 = net.rest[1], net.rest[3]
    w2, w3 = lin2.weight.T.contiguous(), lin3.weight.T.contiguous()
    data_part = torch.randn(args.n, width)
    theta_part = torch.randn(args.chains, width)

    def naive() -> torch.Tensor:
        return net(theta[:, None, :], x[None]).sum(1)

    def precomputed() -> torch.Tensor:
        return net.sum_over_observations(theta, x)

    def compiled() -> torch.Tensor:
        return compiled_net.sum_over_observations(theta, x)

    def products_alone() -> None:
        for _ in starts:
            torch.mm(buf_a, w2, out=buf_b)
            torch.mm(buf_b, w3, out=buf_a)

    first_pass = torch.compile(lambda t, z: F.elu(t[:, None, :] + z[None]).reshape(-1, z.shape[1]), dynamic=False)
    middle_pass = torch.compile(lambda h, b: F.elu(h + b), dynamic=False)
    last_pass = torch.compile(lambda h, b, c: F.elu(h + b).view(c, -1, h.shape[1]).sum(1), dynamic=False)

    def elementwise_alone() -> None:
        for start in starts:
            h = first_pass(theta_part[start : start + chunk], data_part)
            h = middle_pass(h, lin2.bias)
            last_pass(h, lin3.bias, h.shape[0] // args.n)

    hidden = 2 * 2 * width * width
    methods = {"naive": (naive, drift_flops(net, args.chains, args.n, True)),
               "precomputed": (precomputed, drift_flops(net, args.chains, args.n, False)),
               "compiled": (compiled, drift_flops(net, args.chains, args.n, False)),
               "products alone": (products_alone, float(args.chains * args.n * hidden)),
               "elementwise alone": (elementwise_alone, None)}
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)

    cpu_clock = torch.get_num_threads() == 1

    def matmul_gflops() -> float:
        return 2 * 1024**3 / statistics.median(clock_seconds(lambda: a @ b, cpu_clock)
                                                for _ in range(args.repeats)) / 1e9

    rows: dict[str, dict] = {}
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with torch.no_grad():
        assert torch.allclose(naive(), precomputed(), rtol=1e-4, atol=1e-3)
        errors = {}
        try:
            assert torch.allclose(naive(), compiled(), rtol=1e-4, atol=1e-3)
        except Exception as err:  # noqa: BLE001 - compilation needs a C++ toolchain
            errors["compiled"] = f"{type(err).__name__}: {err}"[:200]
        a @ b  # warm-up round, dropped: first calls, compilation
        for name, (fn, _) in methods.items():
            if name not in errors:
                fn()
        samples = {name: {"seconds": [], "matmul_gflops": []} for name in methods if name not in errors}
        for _ in range(args.rounds):
            for name, record in samples.items():  # matmul right before each drift: same noise
                record["matmul_gflops"].append(matmul_gflops())
                record["seconds"].append(clock_seconds(methods[name][0], cpu_clock))
    for name, (_, flops) in methods.items():
        if name in errors:
            rows[name] = {"error": errors[name]}
            continue
        record = samples[name]
        row = {"seconds": summary(record["seconds"]), "matmul_gflops": summary(record["matmul_gflops"])}
        if flops is not None:
            gflops = [flops / s / 1e9 for s in record["seconds"]]
            row["gflops"] = summary(gflops)
            row["fraction_of_matmul"] = summary([g / m for g, m in zip(gflops, record["matmul_gflops"])])
        rows[name] = row
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    all_matmul = [g for record in samples.values() for g in record["matmul_gflops"]]
    result = {
        "name": "langevin-drift",
        "command": "scorebayes bench langevin-drift " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{cpu_name()} ({os.cpu_count()} logical CPUs), {torch.get_num_threads()} threads "
                   f"(matmul and drift), torch {torch.__version__}",
        "load_average_1min": {"before": load_before, "after": load_after},
        "threads": torch.get_num_threads(),
        "shape": {"chains": args.chains, "n": args.n, "d": d, "p": p, "hidden": [width] * 3,
                  "chains_per_chunk": chunk},
        "rounds": args.rounds,
        "clock": "process CPU time" if cpu_clock else "wall clock",
        "matmul_gflops": summary(all_matmul),
        "methods": rows,
        "view_networks": view_networks(args.chains, args.repeats),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "langevin_drift.json").write_text(json.dumps(result, indent=2))
    mm = result["matmul_gflops"]
    lines = ["# Langevin drift benchmark\n", f"Command: `{result['command']}`  ", f"Machine: {result['machine']}  ",
             f"1-minute load average: {load_before:.2f} before, {load_after:.2f} after the timings  ",
             f"Shape: C = {args.chains} chains x n = {args.n} observations, d = {d}, p = {p}, 3 x {width} ELU, "
             f"{chunk} chains a chunk\n",
             f"Clock: {result['clock']} (both sides)  ",
             f"Reference: 1024^3 float32 matmul, median of {args.repeats} calls timed right before each drift call, "
             f"{args.rounds} rounds after a dropped warm-up round: **{mm['median']:.1f} GFLOP/s** "
             f"(min {mm['min']:.1f}, max {mm['max']:.1f})\n",
             "| implementation | seconds per drift (median) | GFLOP/s (median) | fraction of matmul: min / median / max |",
             "|---|---|---|---|"]
    for name, row in rows.items():
        if "error" in row:
            lines.append(f"| {name} | failed: {row['error']} | | |")
        elif "gflops" in row:
            f = row["fraction_of_matmul"]
            lines.append(f"| {name} | {row['seconds']['median']:.4f} | {row['gflops']['median']:.1f} | "
                         f"{f['min']:.2f} / **{f['median']:.2f}** / {f['max']:.2f} |")
        else:
            lines.append(f"| {name} | {row['seconds']['median']:.4f} | | |")
    views = result["view_networks"]
    lines += ["", f"Per-parameter networks (CoordinateViewScoreNet, epidemic10's n-model-views-spread): "
              f"{views['shape']['networks']} networks of 128 x 64 ELU on {views['shape']['inputs']} inputs, "
              f"C = {args.chains} chains, one data set\n",
              "| implementation | seconds per drift (median) |", "|---|---|"]
    lines += [f"| {name} | {sec:.4f} |" for name, sec in views["seconds"].items()]
    lines.append(f"\nSpeed-up of computing the data part once: **{views['speed-up']:.2f}x**")
    md = RESULTS / "langevin_drift.md"
    old = md.read_text() if md.exists() else ""
    notes = old[old.index(NOTES):] if NOTES in old else ""  # hand-written notes survive a rerun
    md.write_text("\n".join(lines) + "\n" + ("\n" + notes if notes else ""))
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    main()
