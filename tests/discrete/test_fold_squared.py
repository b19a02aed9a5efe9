"""generalised_bayes(fold_squared=True): sampling in w = log(theta~^2) gives the exact law of |theta~|."""

import math

import pytest
import torch
from torch.distributions import Gamma, Normal

from scorebayes.diagnostics import ess
from scorebayes.discrete import CMPGraphicalModel, PoissonGraphicalModel
from scorebayes.discrete.bayes import generalised_bayes
from scorebayes.priors import independent

D64 = torch.float64


class _SquaredLoss:
    """D_n(theta) = -log theta~_1^2 (beta = 1): with the N(0, 1) prior, |theta~_1| is chi_3."""

    class model:  # noqa: N801 (a stand-in for a graphical model)
        names = ["theta_1", "theta0_1"]

        @staticmethod
        def squared_indices():
            return torch.tensor([1])

    def __call__(self, theta):
        return -(theta[:, 1] ** 2).log()


def _prior():
    return independent([Gamma(torch.tensor(3.0, dtype=D64), torch.tensor(2.0, dtype=D64)),
                        Normal(torch.tensor(0.0, dtype=D64), torch.tensor(1.0, dtype=D64))])


def test_graphical_models_list_their_squared_coordinates():
    assert PoissonGraphicalModel(4).squared_indices().tolist() == list(range(4, 10))
    model = CMPGraphicalModel(4)
    assert [model.names[i] for i in model.squared_indices()] == model.names[4:]
    assert model.names[4] == "theta0_1" and len(model.names) == 14


def test_fold_squared_rwmh_recovers_chi3():
    post = generalised_bayes(_SquaredLoss(), _prior(), beta=1.0, num_chains=10, num_samples=500, burn_in=1000,
                             thin=2, fold_squared=True, seed=0)
    assert post.info["folded"] == [1] and post.names == ["theta_1", "theta0_1"]
    x = post.samples[..., 1].numpy()  # [10, 500], all > 0
    assert (x > 0).all()
    mean = 2 * math.sqrt(2 / math.pi)  # chi_3; Rayleigh (no Jacobian) would give 1.25
    sd = math.sqrt(3 - mean**2)
    sq = (x - x.mean()) ** 2
    assert abs(x.mean() - mean) < 4 * x.std() / math.sqrt(ess(x))
    assert abs(x.std() - sd) < 4 * sq.std() / math.sqrt(ess(sq)) / (2 * x.std())


def test_fold_squared_validates():
    with pytest.raises(ValueError, match="squared_indices"):
        generalised_bayes(lambda t: t[:, 0], _prior(), beta=1.0, fold_squared=True)
    with pytest.raises(ValueError, match="fold_squared"):
        generalised_bayes(_SquaredLoss(), _prior(), beta=1.0, fold_squared=1)
