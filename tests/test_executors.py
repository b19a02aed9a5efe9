"""Executors: serial, spawn process pool and Dask give bit-identical tables; a Dask worker
killed mid-run does not fail the run; unpicklable simulators get a clear error (issue 6)."""

import os
import signal
import threading
import time

import pytest
import torch

from scorebayes.config import load_callable
from scorebayes.parallel import make_executor
from scorebayes.priors import independent
from scorebayes.proposal import PriorSampler
from scorebayes.tables import simulate_table

F64 = torch.float64

SIM = '''
import time
import torch
def simulate(theta, n, generator=None):
    time.sleep({sleep})
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator,
                                           dtype=theta.dtype)
'''


def _user_simulator(folder, sleep=0.0):
    """A simulator from a user file, as `[model] simulator = "sim.py:simulate"` loads it."""
    name = f"execsim{int(sleep * 1000)}.py"
    (folder / name).write_text(SIM.format(sleep=sleep))
    return load_callable(f"{name}:simulate", folder)


def _sampler():
    return PriorSampler(independent([torch.distributions.Normal(torch.tensor(0.0, dtype=F64),
                                                                torch.tensor(1.0, dtype=F64))]))


def test_make_executor_validates_its_options():
    with pytest.raises(ValueError, match="executor must be one of"):
        with make_executor("threads"):
            pass
    with pytest.raises(ValueError, match="workers"):
        with make_executor("processes", workers=0):
            pass
    with pytest.raises(ValueError, match="dask_address"):
        with make_executor("processes", dask_address="tcp://127.0.0.1:8786"):
            pass
    with make_executor("serial") as ex:
        assert ex is None


def test_unpicklable_simulator_is_refused_before_any_work():
    from concurrent.futures import ThreadPoolExecutor  # any executor triggers the check

    with ThreadPoolExecutor(1) as pool, pytest.raises(TypeError, match="importable"):
        simulate_table(lambda th, n, g: th[:, None, :], _sampler(), 10, 1, seed=0,
                       executor=pool)


def test_serial_processes_and_dask_are_bit_identical(tmp_path):
    pytest.importorskip("distributed")
    sim = _user_simulator(tmp_path)
    ref = simulate_table(sim, _sampler(), 300, 3, seed=4, block_size=20)
    for kind in ("processes", "dask"):
        with make_executor(kind, workers=2) as ex:
            other = simulate_table(sim, _sampler(), 300, 3, seed=4, block_size=20, executor=ex)
        assert torch.equal(ref.theta, other.theta) and torch.equal(ref.x, other.x), kind


@pytest.mark.slow
def test_dask_worker_killed_mid_run_is_survived(tmp_path):
    pytest.importorskip("distributed")
    sim = _user_simulator(tmp_path, sleep=0.2)
    ref_fast = _user_simulator(tmp_path, sleep=0.0)
    ref = simulate_table(ref_fast, _sampler(), 400, 2, seed=9, block_size=20)
    with make_executor("dask", workers=2) as ex:
        pids = ex._client.run(os.getpid)
        victim = sorted(pids.values())[0]

        def kill_later():
            time.sleep(1.0)
            os.kill(victim, signal.SIGKILL)

        killer = threading.Thread(target=kill_later)
        killer.start()
        table = simulate_table(sim, _sampler(), 400, 2, seed=9, block_size=20, chunk_size=20,
                               executor=ex)
        killer.join()
        after = ex._client.run(os.getpid, on_error="ignore")
    assert victim not in after.values()  # the worker did die (and the nanny replaced it)
    assert torch.equal(table.theta, ref.theta) and torch.equal(table.x, ref.x)
