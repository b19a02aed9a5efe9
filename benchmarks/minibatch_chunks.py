"""Benchmark: n-model training epochs with minibatches in one piece against chunks of rows.

An n-model row holds all n observations of a data set, so a minibatch of B rows is B x n
observations (the M/G/1 paper batch: 500 x 500 = 250,000), and its activations, tangents and
gradients reach hundreds of MB per step. ``TrainingSchedule.chunk_observations`` evaluates the
minibatch in chunks of at most that many observations and accumulates the gradients: the same
step (tests/scores/test_chunked_minibatches.py), with working sets that stay in the allocator's
heap instead of being mapped and unmapped (page faults) at every step. Each setting trains the
same net from the same start for one epoch (training steps plus the validation pass) on an
M/G/1-shaped table (d = 3, p = 5, n = 500, 1 x 64 tanh, the weight-function loss), timed side by
side in one run; the best of R epochs counts.

    scorebayes bench minibatch-chunks [--repeats R] [--rows N] [--threads T]
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
from pathlib import Path

import torch

from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_score_network

sys.path.insert(0, str(Path(__file__).resolve().parent))
from langevin_drift import best_time  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CHUNKS = [None, 32_768, 8_192, 2_048]  # None: the whole minibatch at once
BATCHES = [500, 100]  # the paper's M/G/1 n-model batch, and our small-scale one


def _box_weight(theta, x):
    """A smooth stand-in for eq. (19)'s distance to the support's boundary, per coordinate."""
    return (4.0 - theta.abs()).clamp_min(0.0)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2_000, help="table rows (half train, half validate)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the benchmarks use 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    d, p, n = 3, 5, 500
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(args.rows, d, generator=g)
    x = theta[:, None, :2].repeat(1, n, 3)[..., :p] + torch.randn(args.rows, n, p, generator=g)
    grad_log_p = -theta
    torch.manual_seed(0)
    start_net = ScoreNet(d, p, (64,), "tanh")
    rows = []
    for batch in BATCHES:
        nets = {}

        def epoch(chunk):
            net = copy.deepcopy(start_net)
            fit_score_network(net, theta, x, grad_log_p, weight_fn=_box_weight,
                              schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=batch,
                                                        patience=1, lr=(1e-3, 1e-3), chunk_observations=chunk),
                              generator=torch.Generator().manual_seed(1))
            nets[chunk] = net

        times = {chunk: best_time(lambda: epoch(chunk), args.repeats) for chunk in CHUNKS}
        for chunk in CHUNKS:
            same = all(torch.allclose(a, b, rtol=1e-4, atol=1e-6)
                       for a, b in zip(nets[None].parameters(), nets[chunk].parameters()))
            rows.append({"batch_rows": batch, "chunk_observations": chunk, "seconds_per_epoch": times[chunk],
                         "speedup_vs_one_piece": times[None] / times[chunk], "same_net_as_one_piece": same})
            print(f"batch {batch}, chunk {chunk}: {times[chunk]:.3f} s/epoch, "
                  f"{times[None] / times[chunk]:.2f}x, same net: {same}", flush=True)
    command = "scorebayes bench minibatch-chunks " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {"name": "minibatch-chunks", "command": command.strip(),
              "machine": f"{platform.processor() or platform.machine()}, {args.threads} torch thread(s), "
                         f"torch {torch.__version__}",
              "table": {"rows": args.rows, "observations_per_row": n, "d": d, "p": p, "net": "1x64 tanh"},
              "results": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "minibatch_chunks.json").write_text(json.dumps(result, indent=2))
    lines = ["# n-model training epoch: minibatch in one piece against chunks of rows\n",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}  ",
             f"Table: {args.rows} rows x {n} observations (half validation); best of {args.repeats} epochs, "
             "all settings in the same run. Default: chunk_observations = 8,192.\n",
             "| batch (rows) | chunk (observations) | s/epoch | speed-up vs one piece | same net |",
             "|---|---|---|---|---|"]
    for r in rows:
        chunk = "one piece" if r["chunk_observations"] is None else f"{r['chunk_observations']:,}"
        lines.append(f"| {r['batch_rows']} | {chunk} | {r['seconds_per_epoch']:.3f} | "
                     f"{r['speedup_vs_one_piece']:.2f}x | {r['same_net_as_one_piece']} |")
    (RESULTS / "minibatch_chunks.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
