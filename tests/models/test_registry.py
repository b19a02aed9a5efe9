"""The built-in model registry and the common model contract."""

import pickle

import pytest
import torch

from scorebayes.models import MODELS, get_model, smooth_indicator
from scorebayes.models._utils import smooth_indicator as smooth_from_utils
from scorebayes.priors import ParameterSpace, sample


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_contract(name):
    model = get_model(name)
    d = model.dim
    assert model.name == name
    assert len(model.parameter_names) == d == model.true_parameters.shape[0]
    assert len(model.reported_names) == d
    assert tuple(model.prior.event_shape) == (d,)
    assert torch.isfinite(model.prior.log_prob(model.true_parameters))
    assert isinstance(model.paper_settings, dict)
    g = torch.Generator().manual_seed(0)
    theta = sample(model.prior, 3, generator=g)
    n = model.n_obs if name.startswith("epidemic") else 7
    x = model.simulator(theta, n, g)
    assert x.shape == (3, n, model.obs_dim)
    assert model.simulator.reparametrised
    z = model.simulator.latent(3, n, torch.Generator().manual_seed(1))
    assert model.simulator.transform(theta, z).shape == (3, n, model.obs_dim)
    x_obs = model.observed(torch.Generator().manual_seed(2))
    assert x_obs.shape == (model.n_obs, model.obs_dim)
    assert model.to_reported(theta).shape == theta.shape
    if model.summary_fn is not None:
        assert model.summary_fn(x).shape[0] == 3
    if model.true_score is not None:
        assert model.true_score(theta, x).shape == (3, d)
    ParameterSpace(model.prior)  # an unconstrained bijection exists
    pickle.loads(pickle.dumps(model.simulator))
    pickle.loads(pickle.dumps(model))


def test_get_model_names_and_errors():
    assert get_model("builtin:MG1").name == "mg1"
    assert get_model("epidemic10").dim == 12
    assert get_model("betabinomial", true_parameters=(0.2,)).true_parameters.item() == 0.2
    with pytest.raises(ValueError, match="unknown built-in model"):
        get_model("queue")


def test_smooth_indicator():
    assert smooth_indicator is smooth_from_utils
    t = torch.tensor([-0.1, -0.001, 0.0, 0.001, 0.1], dtype=torch.float64)
    s = smooth_indicator(t)
    assert torch.allclose(s, 1 / (1 + torch.exp(-500 * t)))
    assert s[0] < 1e-20 and s[2] == 0.5 and 1 - s[4] < 1e-12
    with pytest.raises(ValueError):
        smooth_indicator(t, sharpness=0.0)
