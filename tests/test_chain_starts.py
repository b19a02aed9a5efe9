"""Chain starts: redrawn inside the sampling region, and flagged when the chains have not forgotten them."""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from scorebayes.sbi import DataSmoothing
from scorebayes.diagnostics import remembers_start, start_memory


def test_start_memory_recovers_a_known_r_squared_and_ignores_monotone_maps():
    r"""end = r start_1 + sqrt(1 - r^2) noise (Gaussian), so the population R^2 is r^2; the ranks
    do not see exp() (on starts and ends). Sampling sd of R^2 at C = 10,000 is below 2 r sqrt(1 - r^2)/sqrt(C) + d/C."""
    rng = np.random.default_rng(0)
    chains, d = 10_000, 3
    for r in (0.0, 0.5, 0.95):
        a = rng.standard_normal((chains, d))
        b = r * a[:, :1] + math.sqrt(1 - r**2) * rng.standard_normal((chains, 1))
        ends = np.column_stack([b, rng.standard_normal((chains, d - 1))])
        ends[:, 0] = np.exp(3 * ends[:, 0])
        memory = start_memory(np.exp(a), ends)
        tol = 4 * (2 * r * math.sqrt(1 - r**2) / math.sqrt(chains)) + 5 * d / chains
        assert abs(memory.r_squared[0] - r**2) < tol, (r, memory)
        assert (memory.r_squared[1:] < 5 * d / chains).all()  # unrelated coordinates: E R^2 = d/(C-1)


def test_start_memory_p_values_are_uniform_for_mixed_chains():
    """Independent starts and ends: the F test's p-values are U(0, 1) (KS over 400 runs)."""
    rng = np.random.default_rng(2)
    p = np.concatenate([start_memory(rng.standard_normal((40, 5)), rng.standard_normal((40, 5))).p_value
                        for _ in range(400)])
    assert stats.kstest(p, "uniform").pvalue > 1e-3


def test_remembers_start_threshold_and_undefined_cases():
    rng = np.random.default_rng(1)
    # independent starts and ends over 20 coordinates and 40 chains: not flagged
    flagged = [remembers_start(start_memory(rng.standard_normal((40, 20)), rng.standard_normal((40, 20))))
               for _ in range(50)]
    assert not any(flagged)
    same = rng.standard_normal((40, 3))
    assert remembers_start(start_memory(same, same + 0.1 * rng.standard_normal((40, 3))))
    # a memory too small to matter is not flagged, however many chains prove it
    big = rng.standard_normal((100_000, 1))
    weak = start_memory(big, 0.1 * big + rng.standard_normal((100_000, 1)))
    assert weak.p_value[0] < 1e-10 and not remembers_start(weak)
    assert np.isnan(start_memory(same[:19], same[:19]).r_squared).all()  # fewer than 20 chains
    assert np.isnan(start_memory(np.ones((30, 1)), rng.standard_normal((30, 1))).p_value).all()  # constant starts
    with pytest.raises(ValueError, match=r"\[C, d\]"):
        start_memory(np.zeros((5, 2)), np.zeros((4, 2)))


def test_sample_warns_when_chains_cannot_leave_their_starts(known_score_estimator):
    r"""Curvatures 1e4 and 1: the automatic step (set by the stiff coordinate) moves the soft one
    by about 0.01 relaxation times in 2,000 steps, so its last draws are its prior starts."""
    precision = torch.diag(torch.tensor([1e4, 1.0], dtype=torch.float64))
    est = known_score_estimator(precision, torch.tensor([0.5, -0.3], dtype=torch.float64))
    with pytest.warns(UserWarning, match=r"not forgotten their starts.*theta1"):
        post = est.sample(200, chains=100, max_steps=2000, seed=1)
    assert post.info["start_memory"] > 0.9  # share of the soft coordinate's end spread
    # whitened chains mix in the same budget: no warning, and the correlation is at noise level
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        post = est.sample(200, chains=100, max_steps=2000, seed=1, precondition="dense")
    assert post.info["start_memory"] < 0.15  # E R^2 = 2/99 under independence, sd about 0.02


def test_starts_outside_the_support_are_redrawn_inside_it(known_score_estimator, langevin_spy):
    r"""Prior starts N(0, 9) and a support 0.4 <= theta_0 <= 0.6 (as M/G/1's theta1 <= min x): about
    97% of the starts fall outside; they are redrawn from the prior truncated to the box, not
    reflected (which would pile far starts up near the box's other side)."""
    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    est.likelihood_.support_fn = lambda x: (torch.tensor([0.4, -50.0]), torch.tensor([0.6, 50.0]))
    seen = langevin_spy
    post = est.sample(400, chains=400, max_steps=100, seed=3)
    init = seen["init"]
    assert len(init) == 400 and ((init[:, 0] >= 0.4) & (init[:, 0] <= 0.6)).all()
    assert post.info["starts_reflected"] == 0 and 350 < post.info["starts_redrawn"] < 400
    # truncated N(0, 9) on [0.4, 0.6] is nearly uniform: the mean start is 0.5 (se 0.058/sqrt(400))
    assert abs(float(init[:, 0].mean()) - 0.5) < 4 * 0.058 / 20
    # the other coordinate keeps the prior's N(0, 9) starts (se of the sd: 3/sqrt(800))
    assert abs(float(init[:, 1].std()) - 3.0) < 4 * 3.0 / 800**0.5


def test_starts_are_reflected_with_a_warning_when_the_box_is_out_of_reach(known_score_estimator, langevin_spy):
    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    est.likelihood_.support_fn = lambda x: (torch.tensor([40.0, -50.0]), torch.tensor([41.0, 50.0]))  # 13 prior SDs out
    seen = langevin_spy
    with pytest.warns(UserWarning, match="40 chain starts could not be drawn inside the sampling region"):
        post = est.sample(40, chains=40, max_steps=100, seed=3)
    assert post.info["starts_reflected"] == 40
    assert ((seen["init"][:, 0] >= 40.0) & (seen["init"][:, 0] <= 41.0)).all()


def test_stored_samples_are_not_reused_for_another_support(known_score_estimator, tmp_path):
    """Samples in a run store are keyed by the box the chains are reflected in: dropping
    ``support_fn`` after a cut run draws anew (the posterior N(0, 0.95^2) puts about 84% of the
    draws outside 0.4 <= theta_0 <= 0.6) instead of returning the cut draws; the same call again loads them."""
    from scorebayes.store import RunStore

    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    est.store = RunStore(tmp_path, config=None, seed=0)
    est.likelihood_.support_fn = lambda x: (torch.tensor([0.4, -50.0]), torch.tensor([0.6, 50.0]))
    cut = est.sample(400, chains=100, max_steps=300, seed=3).draws[:, 0]
    assert ((cut >= 0.4) & (cut <= 0.6)).all()
    est.likelihood_.support_fn = None
    free = est.sample(400, chains=100, max_steps=300, seed=3).draws[:, 0]
    outside = float(((free < 0.4) | (free > 0.6)).double().mean())
    assert outside > 0.7, outside  # binomial sd of the share at 400 draws: 0.02
    again = est.sample(400, chains=100, max_steps=300, seed=3).draws[:, 0]
    assert torch.equal(again, free)


def test_samples_stored_before_chain_copies_get_them_back(known_score_estimator, tmp_path):
    """A stored posterior without ``info["chain_copies"]`` (saved by an older version) loads with
    the equal blocks in copy order that sample() ran (mh_correct needs them)."""
    from scorebayes.posterior import Posterior
    from scorebayes.store import RunStore

    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    est.likelihood_.smoothing = DataSmoothing(0.5, 3, est.seed)
    est.store = RunStore(tmp_path, config=None, seed=0)
    first = est.sample(60, chains=30, max_steps=100, seed=1)
    path = next((tmp_path / "arrays").glob("samples_*.npz"))
    old = Posterior.load(path)
    del old.info["chain_copies"]
    old.save(path)
    again = est.sample(60, chains=30, max_steps=100, seed=1)
    assert again.info["chain_copies"] == first.info["chain_copies"] == [0] * 10 + [1] * 10 + [2] * 10
