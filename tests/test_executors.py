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


def test_dask_address_of_an_existing_cluster_is_bit_identical(tmp_path):
    """`dask_address =` connects to a running scheduler (here a LocalCluster started by the
    test) instead of starting one; the table equals the serial one."""
    distributed = pytest.importorskip("distributed")
    sim = _user_simulator(tmp_path)
    ref = simulate_table(sim, _sampler(), 200, 2, seed=6, block_size=25)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  silence_logs=40) as cluster:
        with make_executor("dask", dask_address=cluster.scheduler_address) as ex:
            assert ex._client.scheduler.address == cluster.scheduler_address
            table = simulate_table(sim, _sampler(), 200, 2, seed=6, block_size=25, executor=ex)
        assert len(cluster.workers) == 1  # the cluster is the test's, still running
    assert torch.equal(ref.theta, table.theta) and torch.equal(ref.x, table.x)


def test_dask_tls_options_map_onto_security(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    from scorebayes.apps.common import pop_execution
    from scorebayes.config import ConfigError
    from scorebayes.parallel import tls_security

    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("-----BEGIN CERTIFICATE-----\n")
    options = {"executor": "dask", "dask_address": "tls://10.0.0.1:8786",
               "dask_tls": {"ca_file": "ca.pem", "cert": "cert.pem", "key": "key.pem"}}
    execution = pop_execution(dict(options), base_dir=tmp_path)
    assert execution.dask_tls == {"ca_file": str(tmp_path / "ca.pem"),
                                  "cert": str(tmp_path / "cert.pem"),
                                  "key": str(tmp_path / "key.pem"), "require_encryption": True}
    security = tls_security(**execution.dask_tls)
    assert security.tls_ca_file == str(tmp_path / "ca.pem")
    assert security.tls_client_cert == str(tmp_path / "cert.pem")
    assert security.tls_client_key == str(tmp_path / "key.pem")
    assert security.require_encryption is True
    # the security object reaches the Client
    seen = {}

    class FakeClient:
        def __init__(self, address, security=None):
            seen.update(address=address, security=security)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def register_plugin(self, plugin, name):
            seen["plugin"] = name

        def get_executor(self, pure):
            return "executor"

    import distributed

    monkeypatch.setattr(distributed, "Client", FakeClient)
    with execution.executor() as ex:
        assert ex == "executor"
    assert seen["address"] == "tls://10.0.0.1:8786"
    assert seen["security"].tls_client_key == str(tmp_path / "key.pem")
    # clear errors
    bad = dict(options, dask_tls={"ca_file": "ca.pem", "cert": "cert.pem", "key": "nope.pem"})
    with pytest.raises(ConfigError, match="dask_tls key: file .*nope.pem not found"):
        pop_execution(bad, base_dir=tmp_path)
    with pytest.raises(ConfigError, match="needs key"):
        pop_execution(dict(options, dask_tls={"ca_file": "ca.pem", "cert": "cert.pem"}),
                      base_dir=tmp_path)
    with pytest.raises(ConfigError, match="tls://"):
        pop_execution(dict(options, dask_address="tcp://10.0.0.1:8786"), base_dir=tmp_path)
    with pytest.raises(ConfigError, match="unknown|typo|ca_fil"):
        pop_execution(dict(options, dask_tls={"ca_fil": "ca.pem", "cert": "cert.pem",
                                              "key": "key.pem"}), base_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="ca_file"):
        tls_security(str(tmp_path / "missing.pem"), str(tmp_path / "cert.pem"),
                     str(tmp_path / "key.pem"))


def _fails_at_three(unit):
    if unit == 3:
        raise RuntimeError("node lost")
    return unit * 10


@pytest.mark.parametrize("kind", ["serial", "threads"])
def test_map_units_hands_over_each_result_before_a_later_unit_fails(kind):
    from concurrent.futures import ThreadPoolExecutor

    from scorebayes.parallel import map_units

    seen = []
    pool = ThreadPoolExecutor(2) if kind == "threads" else None
    try:
        assert map_units(_fails_at_three, [0, 1, 2], executor=pool, on_result=lambda i, r: seen.append((i, r))) \
            == [0, 10, 20]
        seen.clear()
        with pytest.raises(RuntimeError, match="node lost"):
            map_units(_fails_at_three, range(6), executor=pool, on_result=lambda i, r: seen.append((i, r)))
    finally:
        if pool is not None:
            pool.shutdown()
    assert seen == [(0, 0), (1, 10), (2, 20)]  # what finished before the failure was handed over
