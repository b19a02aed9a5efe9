"""FoldedSquares: NUTS in w = log(theta~^2) recovers the exact law of |theta~| (sign-symmetric bimodal target)."""

import math

import pytest
import torch
from torch.distributions import Gamma, Normal

from scorebayes.diagnostics import ess
from scorebayes.priors import ParameterSpace, independent
from scorebayes.samplers.folded import FoldedSquares
from scorebayes.samplers.nuts import sample_nuts

D64 = torch.float64


def _prior():
    return independent([Gamma(torch.tensor(3.0, dtype=D64), torch.tensor(2.0, dtype=D64)),
                        Normal(torch.tensor(0.0, dtype=D64), torch.tensor(1.0, dtype=D64))])


def _log_prob(theta):
    """[B, 2] -> [B]: Gamma(3, 2) for theta_0 (plain); N(0, 1) prior x "likelihood" theta~^2 for theta~_1.

    The density of theta~_1, t^2 e^{-t^2/2}, is sign-symmetric and bimodal (modes +-sqrt 2, zero at 0):
    |theta~_1| is chi with 3 degrees of freedom, mean 2 sqrt(2/pi), variance 3 - mean^2. In w the
    target is e^{3w/2 - e^w/2} (log chi^2_3); without the log-Jacobian w/2 it would be log chi^2_2,
    i.e. |theta~_1| Rayleigh with mean sqrt(pi/2) = 1.25 instead of 1.60.
    """
    return _prior().log_prob(theta) + (theta[:, 1] ** 2).log()


def test_log_abs_det_jacobian_matches_autograd_and_round_trip():
    space = FoldedSquares(ParameterSpace(independent(
        [Gamma(torch.tensor(2.0, dtype=D64), torch.tensor(1.0, dtype=D64)),
         Normal(torch.tensor(0.0, dtype=D64), torch.tensor(1.0, dtype=D64)),
         Normal(torch.tensor(0.0, dtype=D64), torch.tensor(1.0, dtype=D64))])), [1, 2])
    u = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=D64)
    for row in u:
        jac = torch.autograd.functional.jacobian(lambda v: space.to_constrained(v[None])[0], row)
        assert torch.allclose(space.log_abs_det_jacobian(row[None])[0], torch.linalg.slogdet(jac)[1], atol=1e-12)
    theta = space.to_constrained(u)
    assert bool((theta > 0).all())
    assert torch.allclose(space.to_unconstrained(theta), u, atol=1e-12)
    flipped = theta * torch.tensor([1.0, -1.0, -1.0], dtype=D64)  # the mirror copy maps to the same w
    assert torch.allclose(space.to_unconstrained(flipped), u, atol=1e-12)
    assert math.isclose(space.log_fold, 2 * math.log(2))


def test_folded_squares_validates():
    prior = _prior()
    with pytest.raises(ValueError, match="real line"):
        FoldedSquares(ParameterSpace(prior), [0])  # the Gamma coordinate is not sign-symmetric
    with pytest.raises(ValueError, match="distinct indices"):
        FoldedSquares(ParameterSpace(prior), [1, 1])
    with pytest.raises(ValueError, match="distinct indices"):
        FoldedSquares(ParameterSpace(prior), [2])


def test_nuts_in_folded_coordinates_recovers_exact_abs_moments():
    prior = _prior()
    space = FoldedSquares(ParameterSpace(prior), [1])
    init = torch.tensor([[1.0, -0.5], [2.0, 0.7]], dtype=D64)  # constrained, either sign
    post = sample_nuts(_log_prob, init, 600, space=space, warmup=150,
                       generator=torch.Generator().manual_seed(0))
    draws = post.samples.numpy()  # [2, 600, 2]
    assert post.info["divergences"] == 0 and bool((draws[..., 1] > 0).all())
    mean = 2 * math.sqrt(2 / math.pi)  # chi_3
    sd = math.sqrt(3 - mean**2)
    for j, (m, s) in enumerate(((1.5, math.sqrt(3) / 2), (mean, sd))):
        x = draws[..., j]
        sq = (x - x.mean()) ** 2
        se_mean = x.std() / math.sqrt(ess(x))  # Monte Carlo standard errors (ESS-based, delta method for SD)
        se_sd = sq.std() / math.sqrt(ess(sq)) / (2 * x.std())
        assert abs(x.mean() - m) < 4 * se_mean, (j, x.mean(), m, se_mean)
        assert abs(x.std() - s) < 4 * se_sd, (j, x.std(), s, se_sd)
