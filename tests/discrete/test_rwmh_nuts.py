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


def test_nuts_dense_mass_matrix_on_a_correlated_gaussian():
    mean = torch.tensor([1.0, -2.0], dtype=D64)
    cov = torch.tensor([[1.0, 1.98], [1.98, 4.0]], dtype=D64)  # correlation 0.99
    prec = torch.linalg.inv(cov)

    def log_prob(theta):
        z = theta - mean
        return -0.5 * ((z @ prec) * z).sum(-1)

    post = sample_nuts(log_prob, torch.zeros(2, 2, dtype=D64), 600, warmup=300, full_mass=True,
                       generator=torch.Generator().manual_seed(0))
    draws = post.samples.reshape(-1, 2)
    ess = torch.tensor([r["ess"] for r in post.summary()], dtype=D64)
    assert bool((ess > 500).all())  # a diagonal mass matrix gets about a quarter of this
    sd = cov.diagonal().sqrt()
    assert bool(((post.mean() - mean).abs() < 4 * sd / ess.sqrt()).all())
    # Monte Carlo standard errors of the covariance entries (Gaussian fourth moments), at the smaller ESS
    emp = torch.cov(draws.T)
    se = ((cov.diagonal()[:, None] * cov.diagonal()[None] + cov**2) / ess.min()).sqrt()
    assert bool(((emp - cov).abs() < 4 * se).all())
    inv_mass = torch.tensor(post.info["inverse_mass"], dtype=D64)  # [chains, 2, 2], adapted to ~cov
    assert inv_mass.shape == (2, 2, 2) and post.info["full_mass"]
    assert bool((inv_mass[:, 0, 1] / (inv_mass[:, 0, 0] * inv_mass[:, 1, 1]).sqrt() > 0.9).all())


def test_nuts_unconstrained_init_and_validation():
    prior, log_prob = _gamma_target()
    space = ParameterSpace(prior)
    kw = dict(space=space, warmup=10, generator=None)
    runs = [sample_nuts(log_prob, start, 5, **{**kw, "generator": torch.Generator().manual_seed(2)}, init_space=where)
            for start, where in ((torch.ones(1, 2, dtype=D64), "constrained"),
                                 (torch.zeros(1, 2, dtype=D64), "unconstrained"))]  # log 1 = 0
    assert torch.equal(runs[0].samples, runs[1].samples)
    init = torch.ones(1, 2, dtype=D64)
    for bad, message in (({"target_accept": 1.0}, "target_accept"), ({"target_accept": 0}, "target_accept"),
                         ({"full_mass": 1}, "full_mass"), ({"init_space": "u"}, "init_space"),
                         ({"thin": 0}, "thin"), ({"warmup": -1}, "warmup")):
        with pytest.raises(ValueError, match=message):
            sample_nuts(log_prob, init, 5, **{**kw, **bad})
    with pytest.raises(ValueError, match="finite"):
        sample_nuts(log_prob, torch.full((1, 2), float("nan"), dtype=D64), 5, **kw)


def test_generalised_bayes_passes_the_nuts_options():
    from scorebayes.discrete import DFDLoss, PoissonModel, generalised_bayes

    model = PoissonModel()
    x = torch.poisson(torch.full((100, 1), 3.0, dtype=D64), generator=torch.Generator().manual_seed(0))
    prior = model.default_prior()
    init = torch.full((2, 1), math.log(3.0), dtype=D64)  # unconstrained (log) starting points
    post = generalised_bayes(DFDLoss(model, x), prior, beta=1.0, sampler="nuts", num_chains=2, num_samples=20,
                             burn_in=30, thin=1, full_mass=True, target_accept=0.9, init=init)
    assert post.info["full_mass"] and post.info["target_accept"] == 0.9
    assert torch.tensor(post.info["inverse_mass"]).shape == (2, 1, 1)

    class Untouchable:  # any evaluation would mean work started before validation
        def __call__(self, theta):
            raise AssertionError("evaluated")

    for bad, message in (({"sampler": "rwmh", "full_mass": True}, "full_mass"),
                         ({"target_accept": 1.5}, "target_accept"), ({"full_mass": "yes"}, "full_mass"),
                         ({"init": init[:1]}, r"\[2, 1\]"), ({"init": init * float("inf")}, "finite")):
        with pytest.raises(ValueError, match=message):
            generalised_bayes(Untouchable(), prior, **{"sampler": "nuts", "num_chains": 2, **bad})
