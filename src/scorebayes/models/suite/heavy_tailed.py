r"""A heavy-tailed suite model: Student-t location-scale data with 3 degrees of freedom.

$$
X_i = \ell + s\, \frac{Z_0}{\sqrt{(Z_1^2 + Z_2^2 + Z_3^2)/3}}, \qquad
Z_j \sim \mathcal N(0, 1),
$$

i.e. $X_i \sim t_3(\ell, s)$ with density
$\frac{\Gamma(2)}{\Gamma(3/2)\sqrt{3\pi}\, s}\big(1 + \frac{(x - \ell)^2}{3 s^2}\big)^{-2}$
(finite variance, infinite kurtosis). Priors $\ell \sim \mathcal N(0, 5^2)$,
$s \sim \mathrm{LogNormal}(0, 1)$, ``n = 100``, truth $(1, 2)$. The simulator is
reparametrised: the latents are the four normals, the transform is the display above. The
exact posterior is computed by 2-d quadrature (`quadrature`).

References:
    - Lange, Little and Taylor, Robust statistical modeling using the t distribution, JASA, 1989.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import LogNormal, Normal

from ...priors import independent
from ...simulators import Simulator
from .gandk import sample_quantiles
from .quadrature import QuadratureModel

__all__ = ["StudentT", "student_log_density"]


def student_log_density(x: Tensor, loc: Tensor, scale: Tensor, df: float) -> Tensor:
    r"""Elementwise $\log t_\nu(x; \ell, s)$ (broadcasting)."""
    const = math.lgamma(0.5 * (df + 1)) - math.lgamma(0.5 * df) - 0.5 * math.log(df * math.pi)
    y = (x - loc) / scale
    return const - torch.log(scale) - 0.5 * (df + 1) * torch.log1p(y * y / df)


@dataclass(frozen=True)
class _StudentSim:
    df: int

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return torch.randn(B, n, 1 + self.df, generator=generator, dtype=torch.float64)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        t = z[..., :1] / torch.sqrt((z[..., 1:] ** 2).mean(-1, keepdim=True))
        return theta[:, None, 0:1] + theta[:, None, 1:2] * t


class StudentT(QuadratureModel):
    """Student-t (df = 3) location and scale, d = 2, p = 1, 2-d quadrature."""

    description = "Student-t (df = 3) location-scale, d = 2, heavy-tailed data"

    def __init__(self, df: int = 3, n_obs: int = 100, true_parameters=(1.0, 2.0)):
        self.df = int(df)
        sim = _StudentSim(self.df)
        f64 = torch.float64
        prior = independent([Normal(torch.tensor(0.0, dtype=f64), torch.tensor(5.0, dtype=f64)),
                             LogNormal(torch.tensor(0.0, dtype=f64), torch.tensor(1.0, dtype=f64))])
        super().__init__(name="student_t", parameter_names=["loc", "scale"], prior=prior,
                         simulator=Simulator(latent=sim.latent, transform=sim.transform, obs_dim=1),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=1)

    def log_likelihood(self, theta: Tensor, x_obs: Tensor) -> Tensor:
        """``[B]`` sum of t log densities."""
        x = x_obs.reshape(1, -1).to(torch.float64)
        return student_log_density(x, theta[:, 0:1], theta[:, 1:2], self.df).sum(1)

    def start(self, x_obs: Tensor) -> Tensor:
        """Median and interquartile range over 1.53 (the t_3 quartiles are +-0.765)."""
        q = torch.quantile(x_obs.reshape(-1).to(torch.float64),
                           torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
        return torch.stack([q[1], ((q[2] - q[0]) / 1.53).clamp(min=1e-3)])

    def summary_fn(self, x: Tensor) -> Tensor:
        """The seven octiles ``[B, 7]`` (robust to the heavy tails)."""
        return sample_quantiles(x[..., 0], torch.arange(1, 8, dtype=x.dtype) / 8)
