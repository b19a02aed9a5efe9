r"""Suite models with conjugate priors: the exact posterior in closed form.

- `SuiteGaussianMean`: $X_i \sim \mathcal N(\theta, I_3)$, prior
  $\mathcal N(0, 3^2 I_3)$, ``n = 200``; posterior $\mathcal N(m, v I_3)$ with
  $v = (1/9 + n)^{-1}$, $m = v \sum_i X_i$.
- `SuiteExponentialRate`: $X_i \sim \mathrm{Exp}(\lambda)$ (skewed data, a positive
  parameter), prior $\mathrm{Gamma}(2, 1)$, ``n = 100``; posterior
  $\mathrm{Gamma}(2 + n, 1 + \sum_i X_i)$.
- `LinearRegression5`: rows $(x_i, y_i)$ with covariates
  $x_i \sim \mathcal N(0, I_4)$ simulated as part of the data (``p = 5``),
  $y_i = \beta_0 + x_i^\top \beta_{1:4} + \sigma \varepsilon_i$, $\sigma = 1$ known,
  prior $\mathcal N(0, 3^2 I_5)$, ``n = 1000``; posterior
  $\mathcal N(\Sigma D^\top y / \sigma^2, \Sigma)$,
  $\Sigma = (I/3^2 + D^\top D/\sigma^2)^{-1}$, $D_i = (1, x_i^\top)$.

As in `LinearRegression`, the regression posterior is the one
conditional on the observed covariates: their density does not involve $\beta$, so it
is also the exact posterior given the whole rows, but a method that learns from simulated rows
must learn that the covariates carry no information.

References:
    - Gelman, Carlin, Stern, Dunson, Vehtari and Rubin, Bayesian Data Analysis, 3rd ed., 2013
      (conjugate models, Ch. 2-3 and 14).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import Distribution, MultivariateNormal, Normal

from ...posterior import Posterior
from ...priors import independent
from ...priors import sample as sample_prior
from ...simulators import Simulator
from ..base import Model
from ..gaussian import ExponentialRate, GaussianMean

__all__ = ["LinearRegression5", "SuiteExponentialRate", "SuiteGaussianMean"]


def _moments(dist: Distribution) -> tuple[Tensor, Tensor]:
    return dist.mean.reshape(-1).clone(), dist.variance.reshape(-1).sqrt()


class SuiteGaussianMean(GaussianMean):
    """3-d Gaussian mean, sigma = 1, N(0, 3^2) prior per coordinate, n = 200 (conjugate)."""

    description = "Gaussian mean, d = 3, known unit variance, conjugate N(0, 3^2) prior"

    def __init__(self):
        super().__init__(dim=3, sigma=1.0, prior_loc=0.0, prior_scale=3.0, n_obs=200,
                         true_parameters=torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64))

    def exact_moments(self, x_obs: Tensor) -> tuple[Tensor, Tensor]:
        r"""Posterior mean ``m`` and SD $\sqrt v$ ``[3]``."""
        return _moments(self.posterior_distribution(x_obs))

    def summary_fn(self, x: Tensor) -> Tensor:
        """The sufficient statistic: the sample mean ``[B, 3]``."""
        return x.mean(1)


class SuiteExponentialRate(ExponentialRate):
    """Exponential rate, d = 1, Gamma(2, 1) prior, n = 100, truth 2 (conjugate)."""

    description = "exponential rate, d = 1, skewed data, conjugate Gamma(2, 1) prior"

    def __init__(self):
        super().__init__(concentration=2.0, rate=1.0, n_obs=100, true_parameters=(2.0,))

    def exact_moments(self, x_obs: Tensor) -> tuple[Tensor, Tensor]:
        r"""Posterior mean $(a + n)/(b + \sum x)$ and SD $\sqrt{a + n}/(b + \sum x)$."""
        return _moments(self.posterior_distribution(x_obs).marginals[0])

    def summary_fn(self, x: Tensor) -> Tensor:
        """The sufficient statistic: the sample mean ``[B, 1]``."""
        return x.mean(1)


@dataclass(frozen=True)
class _Regression5Sim:
    sigma: float

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return torch.randn(B, n, 5, generator=generator, dtype=torch.float64)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        x = z[..., :4]
        y = theta[:, None, 0] + (x * theta[:, None, 1:]).sum(-1) + self.sigma * z[..., 4]
        return torch.cat([x, y[..., None]], dim=-1)


class LinearRegression5(Model):
    r"""Linear regression, intercept + 4 slopes, rows ``(x1..x4, y)`` (``d = p = 5``)."""

    description = "linear regression, d = 5, covariates simulated in the rows, conjugate prior"

    def __init__(self, sigma: float = 1.0, prior_scale: float = 3.0, n_obs: int = 1000,
                 true_parameters=(0.5, 1.0, -0.5, 0.25, 2.0)):
        self.sigma, self.prior_scale = float(sigma), float(prior_scale)
        sim = _Regression5Sim(self.sigma)
        scale = torch.tensor(self.prior_scale, dtype=torch.float64)
        prior = independent([Normal(torch.zeros((), dtype=torch.float64), scale)] * 5)
        super().__init__(name="linear_regression5",
                         parameter_names=["intercept", "beta1", "beta2", "beta3", "beta4"],
                         prior=prior,
                         simulator=Simulator(latent=sim.latent, transform=sim.transform, obs_dim=5),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=5)

    @staticmethod
    def design(x: Tensor) -> Tensor:
        """Design rows ``(1, x1..x4)``: ``[..., n, 4] -> [..., n, 5]``."""
        return torch.cat([torch.ones_like(x[..., :1]), x], dim=-1)

    def posterior_distribution(self, x_obs: Tensor) -> MultivariateNormal:
        """The exact Gaussian posterior given rows ``x_obs [n, 5]``."""
        x_obs = x_obs.to(torch.float64)
        D = self.design(x_obs[:, :4])
        precision = (torch.eye(5, dtype=torch.float64) / self.prior_scale**2
                     + D.T @ D / self.sigma**2)
        cov = torch.linalg.inv(precision)
        mean = cov @ (D.T @ x_obs[:, 4]) / self.sigma**2
        return MultivariateNormal(mean, covariance_matrix=0.5 * (cov + cov.T))

    def exact_moments(self, x_obs: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and marginal SDs ``[5]``."""
        return _moments(self.posterior_distribution(x_obs))

    def reference_posterior(self, x_obs: Tensor, num: int,
                            generator: torch.Generator | None = None) -> Posterior:
        """``num`` exact posterior draws."""
        draws = sample_prior(self.posterior_distribution(x_obs), num, generator=generator)
        return Posterior(draws, self.parameter_names, info={"method": "exact"})

    def summary_fn(self, x: Tensor) -> Tensor:
        r"""Least-squares coefficients ``[B, 5]`` (sufficient with $D^\top D$, which is
        close to $n I$ for these covariates)."""
        D = self.design(x[..., :4])
        return torch.linalg.lstsq(D, x[..., 4:]).solution[..., 0]
