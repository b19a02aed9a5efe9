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
