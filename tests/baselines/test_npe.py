"""NPE (sbi MAF) and the Gaussian NPE on a linear-Gaussian model with an analytic posterior."""


import pytest
import torch

from scorebayes.baselines import GaussianDensityNetwork, gaussian_npe, npe
from scorebayes.priors import ParameterSpace, independent
from scorebayes.proposal import GaussianProposal
from scorebayes.tables import simulate_table

F64 = torch.float64
A = torch.tensor([[1.0, 0.5], [0.0, 1.0], [1.0, -1.0]], dtype=F64)
NOISE = 0.5


def normal(loc, scale):
    return torch.distributions.Normal(torch.tensor(float(loc), dtype=F64),
                                      torch.tensor(float(scale), dtype=F64))


PRIOR = independent([normal(0, 2), normal(0, 2)])


def linear_simulator(theta, n, generator):
    """One observation y = A theta + 0.5 eps in R^3 per data set: ``[B, n, 3]``."""
    eps = torch.randn(theta.shape[0], n, 3, generator=generator, dtype=F64)
    return (theta @ A.T)[:, None, :] + NOISE * eps


def analytic_posterior(y):
    cov = torch.linalg.inv(torch.eye(2, dtype=F64) / 4 + A.T @ A / NOISE**2)
    return cov @ A.T @ y / NOISE**2, cov.diagonal().sqrt()


Y_OBS = torch.tensor([[1.2, 0.4, 0.9]], dtype=F64)


def test_gaussian_npe_recovers_linear_gaussian_posterior():
    """The posterior is exactly Gaussian with a mean linear in y, so the Gaussian family
    contains it; with N = 4000 the fitted mean and sd are within a tenth of a posterior sd
    (amortisation error), far below the prior sd 2 a broken fit would show."""
    post = gaussian_npe(Y_OBS, PRIOR, simulator=linear_simulator, num_simulations=4000,
                        num_samples=20_000, generator=torch.Generator().manual_seed(0))
    mean, sd = analytic_posterior(Y_OBS[0])
    assert ((post.mean() - mean).abs() / sd).max() < 0.15
    assert ((post.sd() / sd) - 1).abs().max() < 0.15
    assert post.info["method"] == "npe" and post.info["estimator"] == "gaussian"
    assert post.info["simulations"] == 4000 and post.weights is None


def test_gaussian_npe_on_proposal_is_reweighted():
    """Trained on q = N(posterior mean + 0.3, 0.5^2) draws, the pi/q weights undo q's prior;
    the same table with the weights dropped would be shrunk towards q's mean."""
    mean, sd = analytic_posterior(Y_OBS[0])
    q = GaussianProposal(ParameterSpace(PRIOR), mean + 0.3, torch.full((2,), 0.5))
    table = simulate_table(linear_simulator, q, 4000, 1, seed=1)
    post = gaussian_npe(Y_OBS, PRIOR, table=table, sampler=q, num_samples=20_000,
                        generator=torch.Generator().manual_seed(1))
    assert post.weights is not None and 2000 < post.info["ess"] < 20_000
    assert ((post.mean() - mean).abs() / sd).max() < 0.2
    assert ((post.sd() / sd) - 1).abs().max() < 0.2


def test_gaussian_npe_reproducible_and_network_shapes():
    runs = [gaussian_npe(Y_OBS, PRIOR, simulator=linear_simulator, num_simulations=300,
                         max_epochs=20, num_samples=50, generator=torch.Generator().manual_seed(2))
            for _ in range(2)]
    torch.testing.assert_close(runs[0].samples, runs[1].samples)
    net = GaussianDensityNetwork(5, 3)
    mean, tril = net(torch.randn(4, 5))
    assert mean.shape == (4, 3) and tril.shape == (4, 3, 3)
    assert (torch.triu(tril, 1) == 0).all() and (tril.diagonal(dim1=1, dim2=2) > 0).all()


def test_npe_maf_recovers_linear_gaussian_posterior():
    """sbi MAF (5 transforms x 2 x 50) on a tiny budget: N = 2000, 40 epochs. Looser
    tolerances (a third of a posterior sd) reflect the short training."""
    post = npe(Y_OBS, PRIOR, simulator=linear_simulator, num_simulations=2000, max_epochs=40,
               num_samples=5000, generator=torch.Generator().manual_seed(0))
    mean, sd = analytic_posterior(Y_OBS[0])
    assert post.samples.shape == (1, 5000, 2)
    assert ((post.mean() - mean).abs() / sd).max() < 0.35
    assert ((post.sd() / sd) - 1).abs().max() < 0.35
    assert post.info["estimator"] == "maf" and post.info["epochs"] <= 41


@pytest.mark.slow
def test_npe_maf_reproducible():
    kw = dict(simulator=linear_simulator, num_simulations=500, max_epochs=3, num_samples=100)
    a = npe(Y_OBS, PRIOR, generator=torch.Generator().manual_seed(5), **kw)
    b = npe(Y_OBS, PRIOR, generator=torch.Generator().manual_seed(5), **kw)
    torch.testing.assert_close(a.samples, b.samples)


def test_npe_input_errors():
    with pytest.raises(ValueError, match="num_samples"):
        npe(Y_OBS, PRIOR, simulator=linear_simulator, num_simulations=10, num_samples=0)
    with pytest.raises(ValueError, match="either a reference"):
        gaussian_npe(Y_OBS, PRIOR)
    table = simulate_table(linear_simulator, GaussianProposal(
        ParameterSpace(PRIOR), torch.zeros(2), torch.ones(2)), 20, 2, seed=0)
    with pytest.raises(ValueError, match="data sets are"):
        gaussian_npe(Y_OBS, PRIOR, table=table)
    with pytest.raises(ValueError, match="summary"):
        gaussian_npe(Y_OBS, PRIOR, simulator=linear_simulator, num_simulations=10,
                     summary=lambda x: x.sum())
    with pytest.raises(ValueError, match="validation_fraction"):
        gaussian_npe(Y_OBS, PRIOR, simulator=linear_simulator, num_simulations=10,
                     validation_fraction=1.5)


def test_gaussian_npe_bounded_prior_rejection_and_unconstrained():
    """Uniform(0, 1)^2 prior with data near the boundary: a Gaussian fitted to theta leaks
    outside the box and is cut back by rejection; fitted to logit(theta) it never leaks."""
    box = independent([torch.distributions.Uniform(torch.tensor(0.0, dtype=F64),
                                                   torch.tensor(1.0, dtype=F64))] * 2)
    y = torch.tensor([[0.05, 0.1, -0.05]], dtype=F64)
    kw = dict(simulator=linear_simulator, num_simulations=500, max_epochs=50,
              num_samples=2000)
    raw = gaussian_npe(y, box, unconstrained=False, generator=torch.Generator().manual_seed(0),
                       **kw)
    assert raw.info["support_acceptance"] < 0.95
    logit = gaussian_npe(y, box, generator=torch.Generator().manual_seed(0), **kw)
    assert logit.info["support_acceptance"] == 1.0
    for post in (raw, logit):
        assert ((post.draws > 0) & (post.draws < 1)).all()
