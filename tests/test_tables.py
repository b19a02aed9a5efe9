"""Reference tables: seeded blocks, bit-identical across chunkings and executors."""

import math
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

import pytest
import torch

from scorebayes.parallel import make_generator
from scorebayes.priors import independent
from scorebayes.proposal import GaussianProposal, PriorSampler
from scorebayes.simulators import Simulator
from scorebayes.tables import (
    ReferenceTable,
    simulate_block,
    simulate_grouped_table,
    simulate_table,
)

F64 = torch.float64


def _gaussian_simulate(theta, n, generator):
    """x_i ~ N(theta, I), module level so that process pools can pickle it."""
    return theta[:, None, :] + torch.randn(theta.shape[0], n, theta.shape[1], generator=generator,
                                           dtype=F64)


def _exp_latent(batch, n, generator):
    return torch.rand(batch, n, 1, generator=generator, dtype=F64)


def _exp_transform(theta, z):
    return -torch.log(z) / theta[:, None, :1]


def _prior():
    return independent([torch.distributions.Normal(torch.tensor(0.0, dtype=F64),
                                                   torch.tensor(1.0, dtype=F64)),
                        torch.distributions.LogNormal(torch.tensor(0.0, dtype=F64),
                                                      torch.tensor(0.5, dtype=F64))])


def _pool():
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method),
                               initializer=torch.set_num_threads, initargs=(1,))


def test_shapes_units_and_partial_last_block():
    sim = Simulator(_gaussian_simulate)
    table = simulate_table(sim, PriorSampler(_prior()), 300, 5, seed=1, block_size=64, n_data=50)
    assert isinstance(table, ReferenceTable) and len(table) == 300
    assert table.theta.shape == (300, 2) and table.theta.dtype == F64
    assert table.x.shape == (300, 5, 2)
    assert table.simulations == pytest.approx(300 * 5 / 50)
    assert table.seed == 1 and table.tag == "S" and table.block_size == 64
    # the partial last block (rows 256..299) is block 4 with its own generator
    theta, x = simulate_block(sim, PriorSampler(_prior()), 44, 5, 1, "S", 4)
    assert torch.equal(table.theta[256:], theta) and torch.equal(table.x[256:], x)
    # fewer rows than one block
    small = simulate_table(sim, PriorSampler(_prior()), 3, 2, seed=1, block_size=64)
    assert small.theta.shape == (3, 2) and small.simulations == 3.0


def test_bit_identical_across_chunks_and_process_pool():
    sim = Simulator(latent=_exp_latent, transform=_exp_transform)
    sampler = GaussianProposal(PriorSampler(_prior()).space, torch.tensor([0.5, 0.1]),
                               torch.tensor([0.2, 0.3]))
    kwargs = dict(seed=11, tag="S", block_size=32)
    ref = simulate_table(sim, sampler, 250, 4, **kwargs)
    for chunk in (32, 50, 96, 10_000):
        other = simulate_table(sim, sampler, 250, 4, chunk_size=chunk, **kwargs)
        assert torch.equal(ref.theta, other.theta) and torch.equal(ref.x, other.x)
    with _pool() as pool:
        pooled = simulate_table(sim, sampler, 250, 4, chunk_size=64, executor=pool, **kwargs)
        pooled_default = simulate_table(sim, sampler, 250, 4, executor=pool, **kwargs)
    for other in (pooled, pooled_default):
        assert torch.equal(ref.theta, other.theta) and torch.equal(ref.x, other.x)
    # the block size is part of the recipe; the tag and the seed separate tables
    assert not torch.equal(ref.theta, simulate_table(sim, sampler, 250, 4, seed=11,
                                                     block_size=64).theta)
    assert not torch.equal(ref.theta, simulate_table(sim, sampler, 250, 4, seed=11, tag="R",
                                                     block_size=32).theta)
    assert not torch.equal(ref.theta, simulate_table(sim, sampler, 250, 4, seed=12,
                                                     block_size=32).theta)


def test_dask_executor_matches_serial():
    distributed = pytest.importorskip("distributed")
    sim = Simulator(_gaussian_simulate)
    sampler = PriorSampler(_prior())
    ref = simulate_table(sim, sampler, 100, 3, seed=5, block_size=16)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None) as client:
        other = simulate_table(sim, sampler, 100, 3, seed=5, block_size=16, chunk_size=40,
                               executor=client.get_executor())
    assert torch.equal(ref.theta, other.theta) and torch.equal(ref.x, other.x)


def test_thread_pool_matches_serial():
    # threads share the global RNG that priors.sample seeds: the draws must not race
    sim = Simulator(_gaussian_simulate)
    sampler = PriorSampler(_prior())
    ref = simulate_table(sim, sampler, 400, 2, seed=8, block_size=8)
    with ThreadPoolExecutor(4) as pool:
        other = simulate_table(sim, sampler, 400, 2, seed=8, block_size=8, chunk_size=8,
                               executor=pool)
    assert torch.equal(ref.theta, other.theta) and torch.equal(ref.x, other.x)


def test_grouped_table_is_simulate_table_with_tag_r():
    sim = Simulator(_gaussian_simulate)
    sampler = PriorSampler(_prior())
    grouped = simulate_grouped_table(sim, sampler, 40, 7, seed=3, block_size=16, n_data=70)
    plain = simulate_table(sim, sampler, 40, 7, seed=3, tag="R", block_size=16, n_data=70)
    assert grouped.x.shape == (40, 7, 2) and grouped.tag == "R"
    assert torch.equal(grouped.x, plain.x) and grouped.simulations == pytest.approx(4.0)


def test_table_follows_the_sampling_distribution():
    # theta ~ N(0, 1) x LogNormal(0, 0.5) and x | theta ~ N(theta, I): check moments
    table = simulate_table(Simulator(_gaussian_simulate), PriorSampler(_prior()), 4000, 2, seed=0)
    num = 4000
    assert abs(float(table.theta[:, 0].mean())) < 4 / num**0.5
    mean, sd = math.exp(0.125), math.sqrt((math.exp(0.25) - 1) * math.exp(0.25))
    assert abs(float(table.theta[:, 1].mean()) - mean) < 4 * sd / num**0.5
    resid = table.x - table.theta[:, None, :]
    assert abs(float(resid.mean())) < 4 / (2 * num * 2) ** 0.5
    assert abs(float(resid.var()) - 1) < 0.05


class _RefusingExecutor(Executor):
    def submit(self, fn, *args, **kwargs):  # pragma: no cover - must never be reached
        raise AssertionError("work was submitted")


def test_errors_before_any_work():
    sampler = PriorSampler(_prior())
    closure = Simulator(lambda theta, n, g: _gaussian_simulate(theta, n, g))
    with pytest.raises(TypeError, match="simulator cannot be sent"):
        simulate_table(closure, sampler, 10, 1, seed=0, executor=_RefusingExecutor())
    with pytest.raises(ValueError, match="num must be a positive integer"):
        simulate_table(closure, sampler, 0, 1, seed=0)
    with pytest.raises(ValueError, match="chunk_size"):
        simulate_table(closure, sampler, 10, 1, seed=0, chunk_size=0)
    with pytest.raises(TypeError, match="sample"):
        simulate_table(closure, object(), 10, 1, seed=0)


def test_block_generator_is_the_documented_one():
    sampler = PriorSampler(_prior())
    g = make_generator(9, "table", "S", 0)
    theta = sampler.sample(8, g)
    x = _gaussian_simulate(theta, 2, g)
    table = simulate_table(Simulator(_gaussian_simulate), sampler, 8, 2, seed=9, block_size=8)
    assert torch.equal(table.theta, theta) and torch.equal(table.x, x)
