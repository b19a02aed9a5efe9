"""Fast checks of benchmarks/dfd_brca_replay.py: the replayed reference RNG stream (no optimisation)."""

import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("dfd_brca_replay.py", "dfd_brca_replay_bench")


def _reference(d, n, num_bootstrap, cmp):
    """The reference script's own draws (global RNG; fork_rng restores its state afterwards)."""
    pairs = d * (d - 1) // 2
    with torch.random.fork_rng():
        torch.manual_seed(0)
        p1 = torch.distributions.Normal(torch.zeros(d), torch.ones(d)).sample()
        p2 = torch.distributions.Normal(torch.zeros(pairs), (1.0 / pairs) * torch.ones(pairs)).sample().abs()
        p3 = torch.distributions.Normal(torch.zeros(d), torch.ones(d)).sample().abs() if cmp else None
        idx = [torch.randint(n, (n,)) for _ in range(num_bootstrap)]
    return torch.cat([p1] + ([p3] if cmp else []) + [p2]).double()[None], torch.stack(idx)


@pytest.mark.parametrize("cmp, first", [(True, [42, 304, 789, 742, 772]), (False, [639, 376, 661, 859, 773])])
def test_private_generator_replays_the_reference_stream(bench, cmp, first):
    before = torch.random.get_rng_state()
    init, idx = bench.reference_stream(10, 878, 4, cmp=cmp)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global RNG is untouched
    ref_init, ref_idx = _reference(10, 878, 4, cmp)
    assert torch.equal(init, ref_init) and torch.equal(idx, ref_idx)
    assert init.shape == (1, 65 if cmp else 55) and idx.shape == (4, 878)
    assert idx[0, :5].tolist() == first  # the paper run's first resample (brca_10, n = 878)


def test_resample_weights_count_the_distinct_rows(bench):
    from scorebayes.discrete import DFDLoss, PoissonGraphicalModel

    x = np.array([[0, 1], [2, 0], [0, 1], [1, 1], [2, 0]], dtype=np.float64)
    loss = DFDLoss(PoissonGraphicalModel(2), x)
    idx = torch.tensor([[0, 0, 2, 3, 4], [1, 1, 1, 1, 1]])
    w = bench.resample_weights(loss, x, idx)
    for b in range(2):  # the weight of a distinct row = how often the resample drew any copy of it
        expect = [sum(1 for i in idx[b] if np.array_equal(x[int(i)], r.numpy())) for r in loss.rows]
        assert w[b].tolist() == expect
