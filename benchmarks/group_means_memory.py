"""Benchmark: resident memory of the single-model's group means, results appended to a list
against written into one preallocated tensor.

``ScoreLangevin._group_means`` evaluates the score net on every group of the table
:math:`\\mathcal D^R` (``N_R`` groups of ``m_R`` observations) in chunks of 64 groups:
:math:`\\bar s_l = \\frac1{m_R}\\sum_i s_\\phi(u_l, X_{l,i})`. Each chunk's activations are large
and short-lived (64 x 1,000 x 64 floats, 16 MB a layer at the monotone shapes); its result is
small (64 x d) and lives until the end. Appended to a list, those small results were scattered
between the large transient blocks, and glibc's heap could neither reuse the holes nor give them
back: loading the monotone paper-scale fit (``N_R`` = 1e5) grew to 18-24 GB and was killed by
the out-of-memory killer when two benchmark processes ran on a 24 GB machine.
Written into one preallocated tensor, the resident size stays flat.

Each pattern runs in its own fresh Python process (the allocator's state is per process), on the
same random table and net at the monotone paper-scale shapes (d = 11, p = 2, m_R = 1,000, a 3 x 64
ELU net in constrained coordinates); reported: resident size before and after the loop, its peak,
and whether both patterns give the same group means.

    scorebayes bench group-means-memory [--groups N]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
PATTERNS = ["list", "preallocated"]


def _rss_mb() -> tuple[float, float]:
    """(resident, peak resident) size of this process in MB, from /proc (Linux)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _child(pattern: str, groups: int, out_file: str) -> None:
    """Run one pattern in this (fresh) process and write its measurements to ``out_file``."""
    import torch

    from scorebayes.models import get_model
    from scorebayes.priors import ParameterSpace
    from scorebayes.scores.coordinates import ConstrainedScoreNet
    from scorebayes.scores.networks import ScoreNet

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = get_model("monotone")
    space = ParameterSpace(model.prior)
    net = ConstrainedScoreNet(space, ScoreNet(model.dim, 2, (64, 64, 64), "elu"))
    g = torch.Generator().manual_seed(1)
    u_r = 0.5 * torch.randn(groups, model.dim, generator=g, dtype=torch.float64)
    x_r = torch.rand(groups, 1000, 2, generator=g, dtype=torch.float64)
    chunk = 64
    before, _ = _rss_mb()
    with torch.no_grad():
        if pattern == "list":  # the pattern _group_means used to follow
            parts = []
            for start in range(0, groups, chunk):
                u, x = u_r[start : start + chunk].float(), x_r[start : start + chunk].float()
                parts.append(net(u[:, None, :], x).mean(1).cpu())
            means = torch.cat(parts)
        else:  # the current _group_means
            means = torch.empty(groups, model.dim, dtype=torch.float32)
            for start in range(0, groups, chunk):
                u, x = u_r[start : start + chunk].float(), x_r[start : start + chunk].float()
                means[start : start + chunk] = net(u[:, None, :], x).mean(1).cpu()
    after, peak = _rss_mb()
    torch.save(means, out_file + ".pt")
    Path(out_file).write_text(json.dumps({"rss_before_mb": before, "rss_after_mb": after, "peak_rss_mb": peak}))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20_000,
                        help="groups in the table (the monotone paper scale has 100,000)")
    parser.add_argument("--child", nargs=2, metavar=("PATTERN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.groups < 64:
        parser.error(f"--groups must be >= 64 (one chunk), got {args.groups}")
    if args.child:
        _child(args.child[0], args.groups, args.child[1])
        return {}
    if not Path("/proc/self/status").exists():
        raise SystemExit("group-means-memory reads /proc/self/status: it needs Linux")
    import tempfile

    import torch

    rows, means = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for pattern in PATTERNS:
            out = str(Path(tmp) / pattern)
            subprocess.run([sys.executable, __file__, "--groups", str(args.groups), "--child", pattern, out],
                           check=True)
            row = {"pattern": pattern, **json.loads(Path(out).read_text())}
            row["growth_mb"] = row["rss_after_mb"] - row["rss_before_mb"]
            means[pattern] = torch.load(out + ".pt")
            rows.append(row)
            print(f"{pattern}: resident {row['rss_before_mb']:.0f} -> {row['rss_after_mb']:.0f} MB, "
                  f"peak {row['peak_rss_mb']:.0f} MB", flush=True)
    same = bool(torch.equal(means["list"], means["preallocated"]))
    growth = {r["pattern"]: r["growth_mb"] for r in rows}
    command = "scorebayes bench group-means-memory " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {"name": "group-means-memory", "command": command.strip(),
              "machine": f"{platform.processor() or platform.machine()}, 1 torch thread, torch {torch.__version__}, "
                         f"{platform.libc_ver()[0]} {platform.libc_ver()[1]}",
              "table": {"groups": args.groups, "observations_per_group": 1000, "d": 11, "p": 2,
                        "chunk_groups": 64, "net": "3x64 ELU, constrained coordinates"},
              "same_group_means": same,
              "growth_ratio_list_vs_preallocated": growth["list"] / max(growth["preallocated"], 1.0),
              "results": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "group_means_memory.json").write_text(json.dumps(result, indent=2))
    lines = ["# Group means of D^R: resident memory, list of chunks against a preallocated tensor\n",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}  ",
             f"Table: {args.groups:,} groups x 1,000 observations (d = 11, p = 2), chunks of 64 groups, "
             "3 x 64 ELU net; each pattern in its own fresh process, in the same run.  ",
             f"Same group means from both patterns: {same}\n",
             "| pattern | resident before (MB) | resident after (MB) | growth (MB) | peak (MB) |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['pattern']} | {r['rss_before_mb']:.0f} | {r['rss_after_mb']:.0f} | "
                     f"{r['growth_mb']:.0f} | {r['peak_rss_mb']:.0f} |")
    lines.append(f"\nGrowth, list against preallocated: {result['growth_ratio_list_vs_preallocated']:.0f}x "
                 "(the preallocated growth is floored at 1 MB for the ratio).")
    (RESULTS / "group_means_memory.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
