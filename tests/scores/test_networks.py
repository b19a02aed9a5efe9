"""Input standardisation of the score network (robust to heavy-tailed simulators)."""

import torch
from scorebayes.scores.networks import ScoreNet


def test_standardisation_is_robust_to_heavy_tails():
    # 99% of the rows ~ N(5, 2^2), 1% Pareto-like outliers up to 1e6 (M/G/1 with rate near 0)
    g = torch.Generator().manual_seed(0)
    x = 5 + 2 * torch.randn(20_000, 1, generator=g)
    x[:200] = 1e6 * torch.rand(200, 1, generator=g)
    net = ScoreNet(1, 1, hidden=(8,))
    net.fit_standardisation(torch.randn(20_000, 1, generator=g), x)
    z = net.data_input(5 + 2 * torch.randn(5_000, 1, generator=g))
    # the typical data keep a unit-order spread (mean/SD scaling would give SD ~ 1e-4)
    assert 0.8 < float(z.std()) < 1.25
    assert abs(float(z.mean())) < 0.1


def test_standardisation_falls_back_when_iqr_is_zero():
    g = torch.Generator().manual_seed(1)
    x = torch.zeros(1_000, 2)
    x[:50, 0] = 1.0  # 95% zeros: IQR = 0, SD > 0
    x[:, 1] = 3.0  # constant column
    net = ScoreNet(1, 2, hidden=(8,))
    net.fit_standardisation(torch.randn(1_000, 1, generator=g), x)
    scale = net.x_norm.scale
    assert torch.allclose(scale[0], x[:, 0].std(), rtol=1e-5)
    assert float(scale[1]) == 1.0
    assert torch.isfinite(net(torch.zeros(3, 1), x[:3])).all()
