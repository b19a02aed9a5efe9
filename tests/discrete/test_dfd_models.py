import math
from itertools import product

import torch

from scorebayes.discrete import IsingModel, PoissonGraphicalModel, CMPGraphicalModel, sample_cmp, sample_graphical, \
    sample_ising

D64 = torch.float64


def test_cmp_sampler_is_exact():
    theta = torch.tensor([4.0, 0.75], dtype=D64)
    x = sample_cmp(theta, 20000, generator=torch.Generator().manual_seed(0))[:, 0]
    y = torch.arange(200, dtype=D64)
    logp = y * math.log(4.0) - 0.75 * torch.lgamma(y + 1)
    p = torch.softmax(logp, 0)
    mean, var = (p * y).sum(), (p * y**2).sum() - (p * y).sum() ** 2
    assert abs(x.mean() - mean) < 4 * (var / 20000).sqrt()
    # chi-square on the bulk
    counts = torch.bincount(x.long(), minlength=200)[:15].to(D64)
    expected = 20000 * p[:15]
    assert float(((counts - expected) ** 2 / expected).sum()) < 45  # chi2_15 99.99% quantile ~ 44


def test_ising_sampler_matches_enumeration():
    model = IsingModel(2, coding="pm1", edge_count="single", boundary="free")
    theta = 1.5
    states = torch.tensor(list(product([-1.0, 1.0], repeat=4)), dtype=D64)
    t_stat = model.sufficient_statistics(states)[:, 0]
    p = torch.softmax(t_stat / theta, 0)
    exact = (p * t_stat).sum()
    sd = ((p * t_stat**2).sum() - exact**2).sqrt()
    x = sample_ising(model, theta, 4000, num_steps=200, generator=torch.Generator().manual_seed(0))
    got = model.sufficient_statistics(x)[:, 0].mean()
    assert abs(got - exact) < 4 * sd / math.sqrt(4000)


def test_graphical_gibbs_matches_enumeration():
    for model in (PoissonGraphicalModel(2), CMPGraphicalModel(2)):
        theta = torch.tensor([[0.8, 0.3, 0.5]] if model.num_params == 3 else [[0.8, 0.3, 1.1, 0.8, 0.5]], dtype=D64)
        grid = torch.tensor(list(product(range(40), repeat=2)), dtype=D64)
        p = torch.softmax(model.log_unnormalized(theta, grid)[0], 0)
        exact = (p[:, None] * grid).sum(0)
        draws = sample_graphical(model, theta.expand(400, -1), 20, burn_in=20, thin=2,
                                 generator=torch.Generator().manual_seed(1)).reshape(-1, 2)
        sd = ((p[:, None] * grid**2).sum(0) - exact**2).sqrt()
        assert torch.all((draws.mean(0) - exact).abs() < 5 * sd / math.sqrt(draws.shape[0] / 2))
