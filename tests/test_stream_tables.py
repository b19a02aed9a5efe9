"""Tables memory-mapped from the run directory and streamed into training (issue 6):
same values, bit-identical networks and samples, memory that does not grow with the table."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from scorebayes.cli import main
from scorebayes.priors import independent
from scorebayes.proposal import PriorSampler
from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_score_network
from scorebayes.store import RunStore
from scorebayes.table_store import as_training_tensor, load_mapped, mapped_source, write_mapped
from scorebayes.tables import simulate_table

F64 = torch.float64


def _simulate(theta, n, g):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=g, dtype=F64)


def _sampler():
    return PriorSampler(independent([torch.distributions.Normal(torch.tensor(0.0, dtype=F64),
                                                                torch.tensor(2.0, dtype=F64))]))


def test_mapped_table_has_the_rows_of_the_in_memory_table_and_resumes(tmp_path):
    ref = simulate_table(_simulate, _sampler(), 230, 7, seed=5, block_size=50)
    store = RunStore(tmp_path, config={"a": 1}, seed=5)
    table = simulate_table(_simulate, _sampler(), 230, 7, seed=5, block_size=50, store=store,
                           in_memory=False)
    assert mapped_source(table.x) == tmp_path / "arrays" / "table_S" / "x.npy"
    assert mapped_source(table.theta) is not None
    assert torch.equal(table.theta, ref.theta) and torch.equal(table.x, ref.x)
    assert table.resumed == 0
    # a re-run maps the same file, without reading the blocks into memory
    again = simulate_table(_simulate, _sampler(), 230, 7, seed=5, block_size=50, store=store,
                           in_memory=False)
    assert again.resumed == pytest.approx(again.simulations) and torch.equal(again.x, ref.x)
    # store.stream_tables switches the default
    store.stream_tables = True
    third = simulate_table(_simulate, _sampler(), 230, 7, seed=5, block_size=50, store=store)
    assert mapped_source(third.x) is not None
    with pytest.raises(ValueError, match="store="):
        simulate_table(_simulate, _sampler(), 10, 1, seed=0, in_memory=False)


def test_mapped_table_keeps_fault_handling(tmp_path):
    def nan_above(theta, n, g):
        x = _simulate(theta, n, g)
        x[theta[:, 0] > 2.5] = float("nan")
        return x

    with pytest.warns(UserWarning, match="biased"):
        ref = simulate_table(nan_above, _sampler(), 300, 2, seed=1, block_size=40,
                             on_simulator_error="skip", max_failure_fraction=0.5)
    store = RunStore(tmp_path, config=None, seed=1)
    with pytest.warns(UserWarning, match="biased"):
        table = simulate_table(nan_above, _sampler(), 300, 2, seed=1, block_size=40,
                               store=store, on_simulator_error="skip",
                               max_failure_fraction=0.5, in_memory=False)
    assert table.nonfinite == ref.nonfinite > 0
    assert torch.equal(table.x, ref.x) and torch.equal(table.theta, ref.theta)


def test_training_tensor_conversion_stays_mapped_and_exact(tmp_path):
    x = np.random.default_rng(0).standard_normal((100, 6, 2))
    path = write_mapped(tmp_path / "x.npy", (x[:30], x[30:]), x.shape, np.float64)
    mapped = load_mapped(path)
    view = mapped.reshape(100, 1, 12)  # the "full" mode's view is still recognised
    assert mapped_source(view) == path
    converted = as_training_tensor(view, "cpu", torch.float32, chunk_bytes=1000)
    assert mapped_source(converted) == tmp_path / "x.float32.npy"
    assert converted.shape == (100, 1, 12)
    assert torch.equal(converted, torch.from_numpy(x).float().reshape(100, 1, 12))
    assert mapped_source(torch.from_numpy(x.copy())) is None
    # a part of the file is not the table: converted in memory as usual
    assert mapped_source(mapped[:50]) is None and mapped_source(mapped[1:]) is None


def test_training_on_a_mapped_table_is_bit_identical(tmp_path):
    ref = simulate_table(_simulate, _sampler(), 400, 5, seed=2, block_size=64)
    store = RunStore(tmp_path, config=None, seed=2)
    mapped = simulate_table(_simulate, _sampler(), 400, 5, seed=2, block_size=64, store=store,
                            in_memory=False)
    schedule = TrainingSchedule(epochs=3, penalty_epochs=2, batch_size=32, patience=10)
    states = []
    for table in (ref, mapped):
        torch.manual_seed(0)
        net = ScoreNet(1, 1, (16,))
        theta = table.theta.float()
        fit_score_network(net, theta, table.x, -theta / 4, schedule=schedule,
                          penalties=(0.0, 0.1), generator=torch.Generator().manual_seed(3))
        states.append(net.state_dict())
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key
    assert (tmp_path / "arrays" / "table_S" / "x.float32.npy").is_file()


MEMORY_SCRIPT = textwrap.dedent('''
    import resource, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    from scorebayes.scores.networks import ScoreNet
    from scorebayes.scores.training import TrainingSchedule, fit_score_network
    from scorebayes.table_store import load_mapped

    def vm_data():
        for line in open("/proc/self/status"):
            if line.startswith("VmData"):
                return int(line.split()[1]) * 1024

    path, mode = sys.argv[1], sys.argv[2]
    n_rows = np.load(path, mmap_mode="r").shape[0]
    theta = torch.randn(n_rows, 1, generator=torch.Generator().manual_seed(0))
    schedule = TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=16)

    def fit(x):
        fit_score_network(ScoreNet(1, 1, (8,)), theta[: len(x)], x, -theta[: len(x)],
                          schedule=schedule, generator=torch.Generator().manual_seed(1))

    fit(torch.randn(64, 3, 1, dtype=torch.float64))  # warm up (lazy imports, allocator)
    limit = vm_data() + 40 * 2**20  # 40 MB more than now, for a 64 MB table
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    try:
        fit(load_mapped(path) if mode == "mapped" else torch.from_numpy(np.load(path)))
    except (MemoryError, RuntimeError) as err:  # numpy / torch allocation failures
        print("MemoryError" if "alloc" in str(err) or isinstance(err, MemoryError) else err)
    else:
        print("ok")
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA, /proc")
def test_training_memory_does_not_grow_with_a_mapped_table(tmp_path):
    """Train on a 64 MB float64 table (converted to float32 for the network) with the data
    segment limited to 40 MB above the baseline: the mapped table fits, the same table
    loaded into memory does not (so the limit is real)."""
    rows, m = 4000, 2000
    rng = np.random.default_rng(0)
    path = write_mapped(tmp_path / "x.npy", (rng.standard_normal((500, m, 1)) for _ in range(8)),
                        (rows, m, 1), np.float64)
    out = {}
    for mode in ("mapped", "memory"):
        run = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(path), mode],
                             capture_output=True, text=True, timeout=300)
        out[mode] = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert out == {"mapped": "ok", "memory": "MemoryError"}


CONFIG = '''
method = "score-langevin"
seed = 11
[model]
simulator = "sim.py:simulate"
parameters = ["mu"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 3.0
[data]
true_parameters = [0.5]
n = 20
[options]
mode = "n"
table_size = 300
block_size = 64
localize = false
curvature_penalties = [0.0]
schedule = {{ epochs = 4, patience = 100, batch_size = 32 }}
num_samples = 50
remedy = false
{extra}
'''

SIM = '''
import torch
def simulate(theta, n, generator=None):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator,
                                           dtype=theta.dtype)
'''


def test_cli_stream_tables_gives_the_same_samples(tmp_path, monkeypatch):
    import scorebayes.sbi.rounds.table_rounds as sbi

    seen = []
    original = sbi.fit_score_network

    def spy(net, theta, x, *args, **kwargs):
        seen.append(mapped_source(x))
        return original(net, theta, x, *args, **kwargs)

    monkeypatch.setattr(sbi, "fit_score_network", spy)
    outputs = {}
    for label, extra in (("memory", ""), ("stream", "stream_tables = true")):
        folder = tmp_path / label
        folder.mkdir()
        (folder / "sim.py").write_text(SIM)
        (folder / "run.toml").write_text(CONFIG.format(extra=extra))
        assert main(["run", str(folder / "run.toml"), "--out", str(folder / "out"),
                     "--quiet"]) == 0
        outputs[label] = (folder / "out" / "samples.csv").read_bytes()
    assert seen[0] is None and seen[1] == tmp_path / "stream" / "out" / "arrays" / "table_N" / "x.npy"
    assert outputs["memory"] == outputs["stream"]
    summary = json.loads((tmp_path / "stream" / "out" / "summary.json").read_text())
    assert summary["simulations"] > 0


def test_mapped_table_through_an_executor_is_the_same(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    ref = simulate_table(_simulate, _sampler(), 500, 3, seed=8, block_size=20)
    store = RunStore(tmp_path, config=None, seed=8)
    with ThreadPoolExecutor(2) as pool:
        table = simulate_table(_simulate, _sampler(), 500, 3, seed=8, block_size=20,
                               store=store, in_memory=False, executor=pool)
    assert mapped_source(table.x) is not None
    assert torch.equal(table.theta, ref.theta) and torch.equal(table.x, ref.x)


def test_score_langevin_single_mode_streams_both_tables_bit_identically(tmp_path):
    """Single-observation model: the table D^S and the grouped table D^R (curvature penalty,
    debiasing) both come memory-mapped; networks identical to the in-memory fit."""
    from scorebayes.sbi import ScoreLangevin

    prior = independent([torch.distributions.Normal(torch.tensor(0.0, dtype=F64),
                                                    torch.tensor(2.0, dtype=F64))])
    x_obs = _simulate(torch.tensor([[0.4]], dtype=F64), 15, torch.Generator().manual_seed(0))[0]
    nets = []
    for stream in (False, True):
        store = RunStore(tmp_path / str(stream), config=None, seed=3)
        store.stream_tables = stream
        est = ScoreLangevin.from_options(prior, _simulate, seed=3, localize=False, table_size=300,
                            num_groups=40, group_size=15, curvature_penalties=(0.0, 0.05),
                            mean_penalties=(0.0,), progress=False, store=store,
                            schedule=TrainingSchedule(epochs=3, penalty_epochs=2, batch_size=32),
                            mean_schedule=TrainingSchedule(epochs=2, penalty_epochs=0,
                                                           batch_size=16))
        est.fit(x_obs)
        nets.append((est.score_net_.state_dict(), est.mean_net_.state_dict()))
    assert (tmp_path / "True" / "arrays" / "table_R" / "x.npy").is_file()
    for a, b in zip(nets[0], nets[1]):
        for key in a:
            assert torch.equal(a[key], b[key]), key
