r"""A box-constrained suite model with a broad uniform prior: Kumaraswamy data on (0, 1).

The Kumaraswamy distribution (a Beta-like law on $(0, 1)$ with a closed-form quantile) has

$$
f(x \mid a, b) = a b\, x^{a-1} (1 - x^a)^{b-1}, \qquad
X = \big(1 - V^{1/b}\big)^{1/a}, \quad V \sim U(0, 1),
$$

so, unlike Beta data, the simulator is reparametrised (latent $V$, a transform
differentiable in $(a, b)$). Prior $U([0.5, 20]^2)$, ``n = 50``, truth
$(2, 5)$. The exact posterior (truncated to the box) is computed by 2-d quadrature
(`quadrature`).

References:
    - Kumaraswamy, A generalized probability density function for double-bounded random
      processes, Journal of Hydrology, 1980.
    - Jones, Kumaraswamy's distribution: A beta-type distribution with some tractability
      advantages, Statistical Methodology, 2009.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import Uniform

from ...priors import independent
from ...simulators import Simulator
from .quadrature import QuadratureModel

__all__ = ["Kumaraswamy", "kumaraswamy_log_density"]

#: ``V`` is drawn in :math:`[2^{-54}, 1 - 2^{-54}]`: never exactly 0 or 1
_OFFSET = 2.0**-54


def kumaraswamy_log_density(x: Tensor, a: Tensor, b: Tensor) -> Tensor:
    r"""Elementwise $\log f(x \mid a, b)$ (broadcasting), stable for $x^a$ near 1."""
    logx = torch.log(x)
    log1m_xa = torch.log(-torch.expm1(a * logx))  # log(1 - x^a)
    return torch.log(a) + torch.log(b) + (a - 1) * logx + (b - 1) * log1m_xa


@dataclass(frozen=True)
class _KumaraswamySim:
    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return torch.rand(B, n, 1, generator=generator, dtype=torch.float64) + _OFFSET

    def transform(self, theta: Tensor, v: Tensor) -> Tensor:
        a, b = theta[:, None, 0:1], theta[:, None, 1:2]
        return torch.exp(torch.log(-torch.expm1(torch.log(v) / b)) / a)


class Kumaraswamy(QuadratureModel):
    """Kumaraswamy(a, b) data, uniform prior on [0.5, 20]^2 (d = 2, p = 1), 2-d quadrature."""

    description = "Kumaraswamy (Beta-like) data on (0, 1), d = 2, broad uniform box prior"

    def __init__(self, n_obs: int = 50, true_parameters=(2.0, 5.0), low: float = 0.5,
                 high: float = 20.0):
        f64 = torch.float64
        box = Uniform(torch.tensor(low, dtype=f64), torch.tensor(high, dtype=f64))
        sim = _KumaraswamySim()
        super().__init__(name="kumaraswamy", parameter_names=["a", "b"],
                         prior=independent([box, box]),
                         simulator=Simulator(latent=sim.latent, transform=sim.transform, obs_dim=1),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=1)
        self.low, self.high = float(low), float(high)

    def log_likelihood(self, theta: Tensor, x_obs: Tensor) -> Tensor:
        """``[B]`` sum of log densities."""
        x = x_obs.reshape(1, -1).to(torch.float64)
        return kumaraswamy_log_density(x, theta[:, 0:1], theta[:, 1:2]).sum(1)

    def start(self, x_obs: Tensor) -> Tensor:
        """The centre of the box (the grid search finds the mode from there)."""
        return torch.full((2,), 0.5 * (self.low + self.high), dtype=torch.float64)

    def summary_fn(self, x: Tensor) -> Tensor:
        """Means of ``log x`` and ``log(1 - x)``, mean and SD of ``x`` ``[B, 4]``."""
        x = x[..., 0]
        return torch.stack([torch.log(x).mean(1), torch.log1p(-x).mean(1), x.mean(1), x.std(1)],
                           dim=-1)
