r"""A skewed positive-data suite model: log-normal observations.

$$
X_i = \exp(\mu + \sigma Z_i), \qquad Z_i \sim \mathcal N(0, 1),
$$

with density
$\frac{1}{x \sigma \sqrt{2\pi}} \exp\big(-\frac{(\log x - \mu)^2}{2\sigma^2}\big)$
(right-skewed; with $\sigma = 0.8$ the skewness is about 3.7). Priors
$\mu \sim \mathcal N(0, 2^2)$, $\sigma \sim \mathrm{Gamma}(2, 2)$ (not conjugate),
``n = 500``, truth $(0.5, 0.8)$. The simulator is reparametrised (latent $Z$); the
likelihood depends on the data through $\sum \log x_i$ and $\sum (\log x_i)^2$; the
exact posterior is computed by 2-d quadrature (`quadrature`).

References:
    - Limpert, Stahel and Abbt, Log-normal distributions across the sciences: keys and clues,
    - BioScience, 2001.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import Gamma, Normal

from ...priors import independent
from ...simulators import Simulator
from .quadrature import QuadratureModel

__all__ = ["LogNormalData"]


@dataclass(frozen=True)
class _LogNormalSim:
    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return torch.randn(B, n, 1, generator=generator, dtype=torch.float64)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        return torch.exp(theta[:, None, 0:1] + theta[:, None, 1:2] * z)


class LogNormalData(QuadratureModel):
    """Log-normal data with log-scale mean ``mu`` and SD ``sigma`` (d = 2, p = 1), quadrature."""

    description = "log-normal data (mu, sigma), d = 2, skewed positive data, non-conjugate prior"

    def __init__(self, n_obs: int = 500, true_parameters=(0.5, 0.8)):
        f64 = torch.float64
        prior = independent([Normal(torch.tensor(0.0, dtype=f64), torch.tensor(2.0, dtype=f64)),
                             Gamma(torch.tensor(2.0, dtype=f64), torch.tensor(2.0, dtype=f64))])
        sim = _LogNormalSim()
        super().__init__(name="lognormal", parameter_names=["mu", "sigma"], prior=prior,
                         simulator=Simulator(latent=sim.latent, transform=sim.transform, obs_dim=1),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=1)

    def log_likelihood(self, theta: Tensor, x_obs: Tensor) -> Tensor:
        """``[B]`` from the sufficient statistics of ``log x``."""
        logx = torch.log(x_obs.reshape(-1).to(torch.float64))
        n, s1, s2 = logx.numel(), logx.sum(), (logx * logx).sum()
        mu, sigma = theta[:, 0], theta[:, 1]
        squares = s2 - 2 * mu * s1 + n * mu * mu
        return (-s1 - n * torch.log(sigma) - 0.5 * n * math.log(2 * math.pi)
                - 0.5 * squares / (sigma * sigma))

    def start(self, x_obs: Tensor) -> Tensor:
        """Mean and SD of ``log x``."""
        logx = torch.log(x_obs.reshape(-1).to(torch.float64))
        return torch.stack([logx.mean(), logx.std().clamp(min=1e-3)])

    def summary_fn(self, x: Tensor) -> Tensor:
        """The sufficient statistics: mean and SD of ``log x`` ``[B, 2]``."""
        logx = torch.log(x[..., 0])
        return torch.stack([logx.mean(1), logx.std(1)], dim=-1)
