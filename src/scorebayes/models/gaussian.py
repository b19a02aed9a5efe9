r"""Toy models with analytic posteriors and exact likelihood scores (for exactness tests).

- `GaussianMean`: $X_i \sim \mathcal N(\theta, \sigma^2 I_d)$, prior
  $\mathcal N(\mu_0, \tau_0^2 I_d)$; posterior $\mathcal N(m, v I_d)$ with
  $v = (\tau_0^{-2} + n\sigma^{-2})^{-1}$, $m = v(\mu_0\tau_0^{-2} + \sigma^{-2}\sum_i X_i)$;
  score $(X_i - \theta)/\sigma^2$.
- `ExponentialRate`: $X_i \sim \text{Exp}(\text{rate }\lambda)$, prior
  $\text{Gamma}(a, b)$; posterior $\text{Gamma}(a + n, b + \sum_i X_i)$; score
  $1/\lambda - X_i$.
- `LinearRegression`: rows $X_i = (x_i, y_i)$, $x_i \sim \mathcal N(0, 1)$,
  $y_i = \theta_0 + \theta_1 x_i + \sigma\varepsilon_i$, prior $\mathcal N(0, \tau_0^2 I_2)$;
  posterior $\mathcal N(\Sigma D^\top y/\sigma^2, \Sigma)$, $\Sigma = (I/\tau_0^2 + D^\top D/\sigma^2)^{-1}$;
  score $(y_i - D_i\theta) D_i / \sigma^2$ with $D_i = (1, x_i)$.

All simulators are reparametrised (latents independent of $\theta$, ``transform``
differentiable in $\theta$).

References:
    - Gelman et al., Bayesian Data Analysis, 3rd ed., 2013 (conjugate models), Ch. 2-3, 14.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import Distribution, Gamma, MultivariateNormal, Normal

from ..posterior import Posterior
from ..priors import independent
from ..priors import sample as sample_prior
from ..simulators import Simulator
from ._utils import uniform_open
from .base import Model

__all__ = ["GaussianMean", "ExponentialRate", "LinearRegression"]


def _as_dataset(x: Tensor) -> Tensor:
    """``[B, p] -> [B, 1, p]``; ``[B, n, p]`` unchanged."""
    return x.unsqueeze(1) if x.dim() == 2 else x


@dataclass(frozen=True)
class _GaussianMeanSim:
    dim: int
    sigma: float

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return torch.randn(B, n, self.dim, generator=generator, dtype=torch.float64)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        return theta[:, None, :] + self.sigma * z


class GaussianMean(Model):
    r"""Gaussian mean with known variance (conjugate normal prior), ``d = p = dim``."""

    def __init__(self, dim: int = 2, sigma: float = 1.0, prior_loc: float = 0.0,
                 prior_scale: float = 3.0, n_obs: int = 100, true_parameters=None):
        self.sigma, self.prior_loc = float(sigma), float(prior_loc)
        self.prior_scale = float(prior_scale)
        sim = _GaussianMeanSim(dim, self.sigma)
        prior = independent([Normal(torch.tensor(self.prior_loc, dtype=torch.float64),
                                    torch.tensor(self.prior_scale, dtype=torch.float64))] * dim)
        truth = torch.linspace(-1.0, 1.0, dim, dtype=torch.float64) if true_parameters is None \
            else true_parameters
        simulator = Simulator(latent=sim.latent, transform=sim.transform, obs_dim=dim)
        super().__init__(name="gaussian_mean", parameter_names=[f"mu{k}" for k in range(dim)],
                         prior=prior, simulator=simulator, true_parameters=truth, n_obs=n_obs,
                         obs_dim=dim)

    def true_score(self, theta: Tensor, x: Tensor) -> Tensor:
        """Likelihood score ``[B, d]`` for ``x [B, p]`` (one row) or ``[B, n, p]`` (summed)."""
        return ((_as_dataset(x) - theta[:, None, :]) / self.sigma**2).sum(1)

    def posterior_distribution(self, x_obs: Tensor) -> Distribution:
        """The exact posterior ``N(m, v I)`` given ``x_obs [n, p]``."""
        n = x_obs.shape[0]
        v = 1.0 / (1.0 / self.prior_scale**2 + n / self.sigma**2)
        m = v * (self.prior_loc / self.prior_scale**2 + x_obs.sum(0) / self.sigma**2)
        return MultivariateNormal(m, v * torch.eye(self.dim, dtype=torch.float64))

    def reference_posterior(self, x_obs: Tensor, num: int,
                            generator: torch.Generator | None = None) -> Posterior:
        """``num`` exact posterior draws (one chain)."""
        draws = sample_prior(self.posterior_distribution(x_obs), num, generator=generator)
        return Posterior(draws, self.parameter_names, info={"method": "exact"})


@dataclass(frozen=True)
class _ExponentialSim:
    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return uniform_open((B, n, 1), generator)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        return -torch.log(z) / theta[:, None, :]


class ExponentialRate(Model):
    r"""Exponential observations with a Gamma prior on the rate (``d = p = 1``)."""

    def __init__(self, concentration: float = 2.0, rate: float = 1.0, n_obs: int = 100,
                 true_parameters=(2.0,)):
        self.a, self.b = float(concentration), float(rate)
        sim = _ExponentialSim()
        prior = independent([Gamma(torch.tensor(self.a, dtype=torch.float64),
                                   torch.tensor(self.b, dtype=torch.float64))])
        super().__init__(name="exponential_rate", parameter_names=["rate"], prior=prior,
                         simulator=Simulator(latent=sim.latent, transform=sim.transform, obs_dim=1),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=1)

    def true_score(self, theta: Tensor, x: Tensor) -> Tensor:
        """Likelihood score ``[B, 1]`` for ``x [B, 1]`` or ``[B, n, 1]``."""
        x = _as_dataset(x)
        return x.shape[1] / theta - x.sum(1)

    def posterior_distribution(self, x_obs: Tensor) -> Distribution:
        """The exact posterior ``Gamma(a + n, b + sum x)`` as a ``[1]``-event distribution."""
        post = Gamma(torch.tensor(self.a + x_obs.shape[0], dtype=torch.float64),
                     self.b + x_obs.sum().to(torch.float64))
        return independent([post])

    def reference_posterior(self, x_obs: Tensor, num: int,
                            generator: torch.Generator | None = None) -> Posterior:
        draws = sample_prior(self.posterior_distribution(x_obs), num, generator=generator)
        return Posterior(draws, self.parameter_names, info={"method": "exact"})


@dataclass(frozen=True)
class _RegressionSim:
    sigma: float

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return torch.randn(B, n, 2, generator=generator, dtype=torch.float64)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        x = z[..., 0]
        y = theta[:, None, 0] + theta[:, None, 1] * x + self.sigma * z[..., 1]
        return torch.stack([x, y], dim=-1)


class LinearRegression(Model):
    r"""Simple linear regression with i.i.d. rows ``(x, y)`` and known noise (``d = p = 2``)."""

    def __init__(self, sigma: float = 0.5, prior_scale: float = 3.0, n_obs: int = 100,
                 true_parameters=(0.5, -1.0)):
        self.sigma, self.prior_scale = float(sigma), float(prior_scale)
        sim = _RegressionSim(self.sigma)
        scale = torch.tensor(self.prior_scale, dtype=torch.float64)
        prior = independent([Normal(torch.zeros((), dtype=torch.float64), scale)] * 2)
        super().__init__(name="linear_regression", parameter_names=["intercept", "slope"],
                         prior=prior,
                         simulator=Simulator(latent=sim.latent, transform=sim.transform, obs_dim=2),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=2)

    @staticmethod
    def design(x: Tensor) -> Tensor:
        """Design rows ``(1, x)``: ``[..., n] -> [..., n, 2]``."""
        return torch.stack([torch.ones_like(x), x], dim=-1)

    def true_score(self, theta: Tensor, x: Tensor) -> Tensor:
        """Likelihood score ``[B, 2]`` for rows ``x [B, 2]`` or ``[B, n, 2]``."""
        x = _as_dataset(x)
        D = self.design(x[..., 0])
        resid = x[..., 1] - (D * theta[:, None, :]).sum(-1)
        return (resid[..., None] * D).sum(1) / self.sigma**2

    def posterior_distribution(self, x_obs: Tensor) -> Distribution:
        """The exact Gaussian posterior given rows ``x_obs [n, 2]``."""
        D = self.design(x_obs[:, 0].to(torch.float64))
        precision = (torch.eye(2, dtype=torch.float64) / self.prior_scale**2
                     + D.T @ D / self.sigma**2)
        cov = torch.linalg.inv(precision)
        mean = cov @ (D.T @ x_obs[:, 1].to(torch.float64)) / self.sigma**2
        return MultivariateNormal(mean, covariance_matrix=0.5 * (cov + cov.T))

    def reference_posterior(self, x_obs: Tensor, num: int,
                            generator: torch.Generator | None = None) -> Posterior:
        draws = sample_prior(self.posterior_distribution(x_obs), num, generator=generator)
        return Posterior(draws, self.parameter_names, info={"method": "exact"})
