"""Fault-injection matrix for issue 6: simulator faults, executors, worker death, kill -9.

Run as ``scorebayes bench faults [--full]``. Writes ``benchmarks/results/faults.json`` and
``faults.md``: for each scenario, what was injected, what happened, and whether the result
matches the fault-free reference bit for bit (where it should).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import torch

from scorebayes.config import load_callable
from scorebayes.parallel import make_executor
from scorebayes.priors import independent
from scorebayes.proposal import PriorSampler
from scorebayes.baselines import bsl
from scorebayes.tables import simulate_table

RESULTS = Path(__file__).resolve().parent / "results"
F64 = torch.float64

SIMS = '''
import time
import torch
def clean(theta, n, generator=None):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator,
                                           dtype=theta.dtype)
def slow(theta, n, generator=None):
    time.sleep(0.1)
    return clean(theta, n, generator)
def raises(theta, n, generator=None):       # theta-dependent: fails beyond 2 sd
    if (theta > 2.0).any():
        raise RuntimeError("solver diverged")
    return clean(theta, n, generator)
def nonfinite(theta, n, generator=None):
    x = clean(theta, n, generator)
    x[theta[:, 0] > 1.8] = float("nan")
    x[theta[:, 0] < -1.8] = float("inf")
    return x
def flaky(theta, n, generator=None):        # random, transient faults
    u = torch.rand(theta.shape[0], generator=generator, dtype=theta.dtype)
    if (u < 0.3).any() and theta.shape[0] == 1 or theta.shape[0] > 1 and (u < 0.01).any():
        raise OSError("transient")
    return clean(theta, n, generator)
'''

# the same model, data and prior for every method
HEADER = '''
seed = 3
[model]
simulator = "sims.py:slow"
[[prior]]
dist = "normal"
loc = 0.0
scale = 5.0
[data]
true_parameters = [1.0]
n = 30
[options]
'''

CONFIG = '\nmethod = "score-langevin"' + HEADER + '''preset = "paper"
table_size = 1500
block_size = 50
num_groups = 100
group_size = 30
localize = false
curvature_penalties = [0.0]
mean_penalties = [0.0]
schedule = { epochs = 15, patience = 100 }
mean_schedule = { epochs = 3 }
num_samples = 200
remedy = false
'''

BSL_CONFIG = '\nmethod = "bsl"' + HEADER + '''num_chains = 4
num_steps = 80
burn_in = 20
num_sims = 20
checkpoint_every = 10
'''


def _sampler():
    return PriorSampler(independent([torch.distributions.Normal(torch.tensor(0.0, dtype=F64),
                                                                torch.tensor(1.0, dtype=F64))]))


def _table_case(name, sims, fn, injected, num, **kwargs):
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            table = simulate_table(sims[fn], _sampler(), num, 5, seed=0, block_size=50, **kwargs)
            outcome = (f"kept {len(table)} of {num}; failed {table.failed}, non-finite "
                       f"{table.nonfinite}")
        except Exception as err:  # noqa: BLE001 - the outcome is what we report
            table, outcome = None, f"{type(err).__name__}: {str(err)[:140]}"
    warned = any("biased" in str(w.message) for w in caught)
    return {"scenario": name, "injected": injected, "options": {k: v for k, v in kwargs.items()},
            "outcome": outcome + ("; bias warning" if warned else ""),
            "seconds": round(time.perf_counter() - start, 2)}, table


def _run_cli(cfg, out, kill_marker=None, timeout=300.0):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "scorebayes.cli", "run", str(cfg), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start = time.time()
    while proc.poll() is None and time.time() - start < timeout:
        if kill_marker is not None and kill_marker.exists():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return "killed"
        time.sleep(0.01)
    if proc.poll() is None:
        proc.kill()
        return "timeout"
    return f"exit {proc.returncode}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="larger tables")
    parser.add_argument("--reps", type=int, default=1, help="(unused: one pass of the matrix)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    num = 20_000 if args.full else 2_000
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "sims.py").write_text(SIMS)
        # one import of the file (load_callable re-executes it on every call)
        module = sys.modules[load_callable("sims.py:clean", tmp).__module__]
        sims = {fn: getattr(module, fn) for fn in ("clean", "raises", "nonfinite", "flaky", "slow")}
        row, ref = _table_case("clean", sims, "clean", "none", num)
        rows.append(row)
        for mode in ("raise", "skip", "retry"):
            rows.append(_table_case(f"raises/{mode}", sims, "raises",
                                    "raises for a batch containing theta > 2", num,
                                    on_simulator_error=mode, max_failure_fraction=0.2)[0])
        for mode in ("raise", "skip"):
            rows.append(_table_case(f"nonfinite/{mode}", sims, "nonfinite",
                                    "NaN for theta > 1.8, inf for theta < -1.8", num,
                                    on_simulator_error=mode, max_failure_fraction=0.2)[0])
        rows.append(_table_case("nonfinite/too-many", sims, "nonfinite",
                                "NaN/inf for theta > 1.8 or < -1.8 (about 7%)", num,
                                on_simulator_error="skip", max_failure_fraction=0.01)[0])
        for mode in ("skip", "retry"):
            rows.append(_table_case(f"flaky/{mode}", sims, "flaky",
                                    "random transient OSError (30% per single-row try)", num,
                                    on_simulator_error=mode, retries=5,
                                    max_failure_fraction=0.5)[0])
        start = time.perf_counter()
        x_obs = sims["clean"](torch.tensor([[1.0]], dtype=F64), 30, torch.Generator().manual_seed(0))[0]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            post = bsl(x_obs, sims["raises"], _sampler().prior, num_chains=4, num_steps=300,
                       burn_in=100, num_sims=20, generator=torch.Generator().manual_seed(1),
                       on_simulator_error="skip", max_failure_fraction=0.5)
        rows.append({"scenario": "bsl/raises-skip", "injected": "raises for theta > 2 (prior "
                     "N(0, 1) start, data at theta = 1)", "outcome":
                     f"failed proposals {post.info['failed_simulations']} of {4 * 300}, rejected; "
                     f"max draw {float(post.samples.max()):.2f} (<= 2); bias warning: "
                     f"{any('biased' in str(w.message) for w in caught)}",
                     "seconds": round(time.perf_counter() - start, 2)})
        for kind in ("processes", "dask"):
            start = time.perf_counter()
            with make_executor(kind, workers=2) as ex:
                other = simulate_table(sims["clean"], _sampler(), num, 5, seed=0, block_size=50,
                                       executor=ex)
            same = torch.equal(other.x, ref.x) and torch.equal(other.theta, ref.theta)
            rows.append({"scenario": f"executor/{kind}", "injected": "2 workers",
                         "outcome": f"bit-identical to serial: {same}",
                         "seconds": round(time.perf_counter() - start, 2)})
        start = time.perf_counter()
        with make_executor("dask", workers=2) as ex:
            victim = sorted(ex._client.run(os.getpid).values())[0]
            timer = threading.Timer(1.0, os.kill, (victim, signal.SIGKILL))
            timer.start()
            other = simulate_table(sims["slow"], _sampler(), 800, 5, seed=0, block_size=50,
                                   chunk_size=50, executor=ex)
            timer.join()
            alive = victim in ex._client.run(os.getpid, on_error="ignore").values()
        ref800 = simulate_table(sims["clean"], _sampler(), 800, 5, seed=0, block_size=50)
        rows.append({"scenario": "dask/worker-killed", "injected": "SIGKILL to a worker after 1 s",
                     "outcome": f"run completed; worker replaced: {not alive}; bit-identical: "
                                f"{torch.equal(other.x, ref800.x)}",
                     "seconds": round(time.perf_counter() - start, 2)})
        for stage, marker in (("simulation", "json/table_S/000005.json"),
                              ("training", "checkpoints/train/phase000.pt")):
            start = time.perf_counter()
            (tmp / "run.toml").write_text(CONFIG)
            reference, out = tmp / f"ref_{stage}", tmp / f"kill_{stage}"
            _run_cli(tmp / "run.toml", reference)
            first = _run_cli(tmp / "run.toml", out, kill_marker=out / marker)
            second = _run_cli(tmp / "run.toml", out)
            summary = json.loads((out / "summary.json").read_text())
            same = (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()
            rows.append({"scenario": f"kill-9/{stage}", "injected": f"SIGKILL once {marker} exists",
                         "outcome": f"first run {first}, resume {second}; resumed "
                                    f"{summary['resumed_simulations']:.0f} of "
                                    f"{summary['simulations']:.0f} simulations; samples.csv "
                                    f"bit-identical: {same}",
                         "seconds": round(time.perf_counter() - start, 2)})
        start = time.perf_counter()  # the bsl chain state, killed and resumed
        (tmp / "bsl.toml").write_text(BSL_CONFIG)
        reference, out = tmp / "ref_bsl", tmp / "kill_bsl"
        _run_cli(tmp / "bsl.toml", reference)
        first = _run_cli(tmp / "bsl.toml", out, kill_marker=out / "checkpoints" / "bsl" / "chain.pt")
        second = _run_cli(tmp / "bsl.toml", out)
        summary = json.loads((out / "summary.json").read_text())
        same = (out / "samples.csv").read_bytes() == (reference / "samples.csv").read_bytes()
        rows.append({"scenario": "kill-9/bsl", "injected": "SIGKILL once checkpoints/bsl/chain.pt "
                     "exists", "outcome": f"first run {first}, resume {second}; resumed "
                     f"{summary['resumed_simulations']:.0f} of {summary['simulations']:.0f} "
                     f"simulations; samples.csv bit-identical: {same}",
                     "seconds": round(time.perf_counter() - start, 2)})
        start = time.perf_counter()  # the score-langevin tables memory-mapped from disk
        (tmp / "stream.toml").write_text(CONFIG + "stream_tables = true\n")
        streamed = _run_cli(tmp / "stream.toml", tmp / "stream")
        same = ((tmp / "stream" / "samples.csv").read_bytes()
                == (tmp / "ref_simulation" / "samples.csv").read_bytes())
        rows.append({"scenario": "stream-tables", "injected": "tables memory-mapped from DIR, "
                     "streamed into training", "outcome": f"{streamed}; samples.csv bit-identical "
                     f"to the in-memory run: {same}",
                     "seconds": round(time.perf_counter() - start, 2)})
    total = time.perf_counter() - started
    RESULTS.mkdir(exist_ok=True)
    meta = {"command": "scorebayes bench faults" + (" --full" if args.full else ""),
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
            "table_rows": num, "seconds": round(total, 1)}
    (RESULTS / "faults.json").write_text(json.dumps({**meta, "rows": rows}, indent=2))
    lines = [f"# Fault injection ({meta['command']})", "",
             f"Machine: {meta['machine']}; tables of {num} rows, 5 observations each; "
             f"total {meta['seconds']} s.", "",
             "| scenario | injected | what happened | s |", "|---|---|---|---|"]
    lines += [f"| {r['scenario']} | {r['injected'].replace('|', '')} | {r['outcome'].replace('|', '/')} | "
              f"{r['seconds']} |" for r in rows]
    (RESULTS / "faults.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
