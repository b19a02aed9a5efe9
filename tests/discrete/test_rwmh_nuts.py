import math

import pytest
import torch
from torch.distributions import Gamma

from scorebayes.priors import ParameterSpace, independent
from scorebayes.samplers.nuts import sample_nuts
from scorebayes.samplers.rwmh import sample_rwmh

D64 = torch.float64


def _gamma_target():
    prior = independent([Gamma(torch.tensor(3.0, dtype=D64), torch.tensor(2.0, dtype=D64)),
                         Gamma(torch.tensor(9.0, dtype=D64), torch.tensor(3.0, dtype=D64))])
    return prior, prior.log_prob


@pytest.mark.parametrize("adapt", [True, False])
def test_rwmh_recovers_gamma_moments_with_log_jacobian(adapt):
    prior, log_prob = _gamma_target()
    init = torch.full((8, 2), 1.0, dtype=D64)
    post = sample_rwmh(log_prob, init, 1000, space=ParameterSpace(prior), burn_in=1000, thin=3,
                       step_size=0.5, adapt=adapt, generator=torch.Generator().manual_seed(0))
    assert post.samples.shape == (8, 1000, 2)
    true_mean = torch.tensor([1.5, 3.0], dtype=D64)
    true_sd = torch.tensor([math.sqrt(3) / 2, 1.0], dtype=D64)
    ess = torch.tensor([r["ess"] for r in post.summary()], dtype=D64)
    assert torch.all((post.mean() - true_mean).abs() < 5 * true_sd / ess.sqrt())
    assert torch.allclose(post.sd(), true_sd, rtol=0.12)
    assert 0.1 < post.info["acceptance_rate"] < 0.8


def test_rwmh_is_reproducible_and_validates():
    prior, log_prob = _gamma_target()
    kw = dict(space=ParameterSpace(prior), burn_in=50, generator=None)
    a = sample_rwmh(log_prob, torch.ones(2, 2, dtype=D64), 20, **{**kw, "generator": torch.Generator().manual_seed(1)})
    b = sample_rwmh(log_prob, torch.ones(2, 2, dtype=D64), 20, **{**kw, "generator": torch.Generator().manual_seed(1)})
    assert torch.equal(a.samples, b.samples)
    with pytest.raises(ValueError, match="C, k"):
        sample_rwmh(log_prob, torch.ones(2, dtype=D64), 10, **kw)


def test_nuts_recovers_gamma_moments():
    prior, log_prob = _gamma_target()
    post = sample_nuts(log_prob, torch.ones(2, 2, dtype=D64), 200, space=ParameterSpace(prior), warmup=100,
                       generator=torch.Generator().manual_seed(0))
    assert post.samples.shape == (2, 200, 2)
    assert torch.allclose(post.mean(), torch.tensor([1.5, 3.0], dtype=D64), rtol=0.15)
    assert torch.allclose(post.sd(), torch.tensor([math.sqrt(3) / 2, 1.0], dtype=D64), rtol=0.25)
