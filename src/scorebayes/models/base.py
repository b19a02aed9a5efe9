r"""The common interface of the built-in models.

A built-in model bundles everything a benchmark needs about one experiment:

- ``name``, ``parameter_names`` (``d`` names of the *internal* parameter),
  ``reported_names`` and `Model.to_reported()` (the parameter as the paper reports it);
- ``prior``: a ``torch.distributions.Distribution`` with event shape ``[d]``;
- ``simulator``: a [`scorebayes.simulators.Simulator`][scorebayes.simulators.Simulator], called as
  ``simulator(theta [B, d], n, generator) -> x [B, n, p]`` (reparametrised
  ``latent``/``transform`` wherever localization needs gradients);
- ``true_parameters [d]``, ``n_obs`` (the paper's $n$), ``obs_dim`` ($p$) and
  `Model.observed()` to draw the observed data ``x_obs [n, p]``;
- ``paper_settings``: a plain dict of the paper's table sizes, networks, epochs, ...

Optional capabilities are ``None`` on models that lack them (test with ``is not None``):

- ``true_score(theta [B, d], x) -> [B, d]``: the exact likelihood score
  $\nabla_\theta \log p_\theta$; ``x [B, p]`` is one observation per parameter,
  ``x [B, n, p]`` a data set (the per-observation scores summed over ``n``);
- ``support(x_obs [n, p]) -> (low [d], high [d])``: a data-dependent admissible box;
- ``reference_posterior(x_obs [n, p], num, generator) -> Posterior``: exact posterior draws;
- ``summary_fn(x [B, n, p]) -> [B, k]``: the summaries the paper gives BSL/NPE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Distribution

from ..simulators import Simulator

__all__ = ["Model"]


class Model:
    r"""A built-in simulation model (see the module docstring for the attributes).

    Arguments:
        name: registry name (``get_model(name)``).
        parameter_names: ``d`` names of the internal parameter.
        prior: prior over the internal parameter, event shape ``[d]``.
        simulator: batched simulator ``theta [B, d] -> x [B, n, p]``.
        true_parameters: ``[d]`` internal parameter used to simulate the observed data.
        n_obs: the paper's number of observations $n$ (rows of ``x_obs``).
        obs_dim: the dimension $p$ of one observation.
        paper_settings: the paper's experimental settings, as a plain dict.
        reported_names: names of `to_reported()` outputs (default: ``parameter_names``).
    """

    #: exact likelihood score ``(theta [B, d], x [B, p] | [B, n, p]) -> [B, d]``, if known
    true_score: Callable[[Tensor, Tensor], Tensor] | None = None
    #: data-dependent admissible box ``x_obs [n, p] -> (low [d], high [d])``, if any
    support: Callable[[Tensor], tuple[Tensor, Tensor]] | None = None
    #: exact posterior sampler ``(x_obs, num, generator) -> Posterior``, if available
    reference_posterior: Callable[..., Any] | None = None
    #: summaries for BSL/NPE ``x [B, n, p] -> [B, k]``, if the paper uses any
    summary_fn: Callable[[Tensor], Tensor] | None = None

    def __init__(
        self,
        *,
        name: str,
        parameter_names: list[str],
        prior: Distribution,
        simulator: Simulator,
        true_parameters: Tensor,
        n_obs: int,
        obs_dim: int,
        paper_settings: dict[str, Any] | None = None,
        reported_names: list[str] | None = None,
    ):
        true_parameters = torch.as_tensor(true_parameters, dtype=torch.float64).reshape(-1)
        if len(parameter_names) != true_parameters.numel():
            raise ValueError(
                f"{len(parameter_names)} parameter names for {true_parameters.numel()} true values"
            )
        if tuple(prior.event_shape) != (len(parameter_names),):
            raise ValueError(
                f"prior event shape {tuple(prior.event_shape)} does not match "
                f"d={len(parameter_names)} parameters"
            )
        self.name = name
        self.parameter_names = list(parameter_names)
        self.reported_names = list(reported_names or parameter_names)
        self.prior = prior
        self.simulator = simulator
        self.true_parameters = true_parameters
        self.n_obs = int(n_obs)
        self.obs_dim = int(obs_dim)
        self.paper_settings = dict(paper_settings or {})

    @property
    def dim(self) -> int:
        """The parameter dimension $d$."""
        return len(self.parameter_names)

    def to_reported(self, theta: Tensor) -> Tensor:
        """Map internal parameters ``[..., d]`` to the reported ones (identity by default)."""
        return theta

    def observed(self, generator: torch.Generator | None = None) -> Tensor:
        r"""Draw the observed data ``x_obs [n_obs, p]`` at `true_parameters`."""
        return self.simulator(self.true_parameters[None], self.n_obs, generator)[0]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, d={self.dim}, n_obs={self.n_obs}, "
                f"obs_dim={self.obs_dim})")
