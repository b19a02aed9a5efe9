"""ScoreLangevin.fit input checks that run before any expensive work."""

import pytest
import torch
from torch.distributions import Normal

from scorebayes.priors import independent
from scorebayes.sbi import ScoreLangevin
from scorebayes.scores.training import TrainingSchedule

T = 7


def fixed_length(theta, n, generator):
    """A time-series simulator: only data sets of length T exist."""
    if n != T:
        raise ValueError(f"this simulator returns T={T} rows; got n={n}")
    return theta[:, None, :] + torch.randn(len(theta), n, 1, generator=generator, dtype=theta.dtype)


def estimator(**kw):
    return ScoreLangevin(independent([Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)]), fixed_length,
                         mode="full", localize=False, num_simulations=32, progress=False,
                         schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=16), **kw)


def test_fixed_length_simulator_passes_the_pilot_check():
    est = estimator().fit(torch.zeros(T, 1))
    assert est.sample(8, chains=4, max_steps=40).draws.shape == (8, 1)


def test_column_mismatch_is_reported_before_the_tables():
    with pytest.raises(ValueError, match="p=1 columns per observation but the observed data have p=2"):
        estimator().fit(torch.zeros(T, 2))


def test_dense_preconditioning_samples_an_ill_conditioned_posterior(known_score_estimator, langevin_spy):
    r"""Known likelihood score :math:`-P(u - m)` with curvatures 1e4 and 1 along rotated axes.

    The automatic step is set by the stiff direction, so plain chains barely move along the soft
    one within ``max_steps``; whitened chains must match the exact Gaussian posterior.
    """
    rot = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.float64) / 2**0.5
    precision = rot @ torch.diag(torch.tensor([1e4, 1.0], dtype=torch.float64)) @ rot.T
    m = torch.tensor([0.5, -0.3], dtype=torch.float64)
    est = known_score_estimator(precision, m)
    post_precision = precision + torch.eye(2, dtype=torch.float64) / 9.0
    cov = torch.linalg.inv(post_precision)
    mean = cov @ (precision @ m)
    sd = cov.diagonal().sqrt()

    post = est.sample(4000, chains=200, precondition="dense", max_steps=4000, seed=1)
    draws = post.draws
    # MC error with 4000 (weakly correlated) draws: se(mean) ~ sd/sqrt(ESS); allow ESS >= 1000
    assert ((draws.mean(0) - mean).abs() < 4 * sd / 1000**0.5).all(), (draws.mean(0), mean)
    assert ((draws.std(0) / sd - 1).abs() < 0.1).all(), (draws.std(0), sd)
    assert post.info["precondition"] == "dense"

    # the automatic schedule respects max_steps also with tempering (relaxation ~1e4 steps here)
    est.sample(40, chains=4, tempering=True, max_steps=2000, seed=2)
    seen = langevin_spy
    total = len(seen["tempering"]) * seen["steps_per_stage"] + seen["burn_in"] + seen["num_draws"] * seen["thin"]
    assert total <= 2000, seen
