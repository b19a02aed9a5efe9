r"""Suite models of counts: a negative binomial (quadrature) and a Poisson rate (conjugate).

- `NegativeBinomial`: overdispersed counts with mean $\mu$ and size $r$,

  $$
  p(x \mid \mu, r) = \frac{\Gamma(x + r)}{\Gamma(r)\, x!}
  \Big(\frac{r}{r + \mu}\Big)^r \Big(\frac{\mu}{r + \mu}\Big)^x, \qquad x = 0, 1, \dots,
  $$

  (variance $\mu + \mu^2/r$), priors $\mu \sim \mathrm{LogNormal}(1.5, 1)$,
  $r \sim \mathrm{Gamma}(2, 1)$, ``n = 300``, truth $(5, 2)$; the exact posterior by
  2-d quadrature (`quadrature`), the likelihood summed over the distinct counts.
- `PoissonRate`: $X_i \sim \mathrm{Poisson}(\lambda)$, prior
  $\mathrm{Gamma}(2, 0.5)$, ``n = 100``, truth 3; posterior
  $\mathrm{Gamma}(2 + \sum_i X_i, 0.5 + n)$.

Counts cannot be reparametrised (the draws are not differentiable in the parameter), so both
simulators are plain batched callables. The negative binomial is drawn by numpy's sampler
(seeded from the torch generator); the Poisson by ``torch.poisson``.

References:
    - Hilbe, Negative Binomial Regression, 2nd ed., 2011 (the mean-size parametrisation).
    - Gelman et al., Bayesian Data Analysis, 3rd ed., 2013, Sec. 2.6 (Poisson-gamma).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Gamma, LogNormal

from ...posterior import Posterior
from ...priors import independent
from ...priors import sample as sample_prior
from ...simulators import Simulator
from ..base import Model
from .quadrature import QuadratureModel

__all__ = ["NegativeBinomial", "PoissonRate", "nb_log_pmf"]


def _f64(v: float) -> Tensor:
    return torch.tensor(v, dtype=torch.float64)


def nb_log_pmf(x: Tensor, mu: Tensor, r: Tensor) -> Tensor:
    r"""$\log p(x \mid \mu, r)$ elementwise (broadcasting; ``x`` non-negative integers)."""
    return (torch.lgamma(x + r) - torch.lgamma(r) - torch.lgamma(x + 1)
            + r * (torch.log(r) - torch.log(r + mu)) + x * (torch.log(mu) - torch.log(r + mu)))


def _simulate_nb(theta: Tensor, n: int, generator: torch.Generator | None) -> Tensor:
    seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    rng = np.random.default_rng(seed)
    mu, r = theta[:, 0:1].double().numpy(), theta[:, 1:2].double().numpy()
    x = rng.negative_binomial(r, r / (r + mu), size=(theta.shape[0], n))
    return torch.from_numpy(x.astype(np.float64))[..., None]


class NegativeBinomial(QuadratureModel):
    """Negative-binomial counts, mean ``mu`` and size ``r`` (d = 2, p = 1), 2-d quadrature."""

    description = "negative binomial counts (mean, size), d = 2, lognormal/gamma priors"

    def __init__(self, n_obs: int = 300, true_parameters=(5.0, 2.0)):
        prior = independent([LogNormal(_f64(1.5), _f64(1.0)), Gamma(_f64(2.0), _f64(1.0))])
        super().__init__(name="negative_binomial", parameter_names=["mu", "r"], prior=prior,
                         simulator=Simulator(_simulate_nb, obs_dim=1),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=1)

    def log_likelihood(self, theta: Tensor, x_obs: Tensor) -> Tensor:
        """``[B]``: the sum over distinct counts ``u`` of ``count(u) * log p(u | theta)``."""
        values, counts = torch.unique(x_obs.reshape(-1).to(torch.float64), return_counts=True)
        lp = nb_log_pmf(values[None], theta[:, 0:1], theta[:, 1:2])
        return (lp * counts.to(torch.float64)).sum(1)

    def start(self, x_obs: Tensor) -> Tensor:
        """Moment estimate: mean and ``mean^2 / (var - mean)`` (clamped to be positive)."""
        m, v = x_obs.mean(), x_obs.var()
        size = (m * m / (v - m).clamp(min=0.05 * m)).clamp(0.1, 100)
        return torch.stack([m.clamp(min=0.1), size])

    def summary_fn(self, x: Tensor) -> Tensor:
        """Mean, SD and fraction of zeros ``[B, 3]``."""
        return torch.stack([x[..., 0].mean(1), x[..., 0].std(1), (x[..., 0] == 0).double().mean(1)],
                           dim=-1)


def _simulate_poisson(theta: Tensor, n: int, generator: torch.Generator | None) -> Tensor:
    rate = theta[:, None, :].double().expand(theta.shape[0], n, 1).contiguous()
    return torch.poisson(rate, generator=generator)


class PoissonRate(Model):
    """Poisson counts with a conjugate Gamma(2, 0.5) prior on the rate (d = p = 1)."""

    description = "Poisson rate, d = 1, discrete counts, conjugate Gamma(2, 0.5) prior"

    def __init__(self, concentration: float = 2.0, rate: float = 0.5, n_obs: int = 100,
                 true_parameters=(3.0,)):
        self.a, self.b = float(concentration), float(rate)
        super().__init__(name="poisson_rate", parameter_names=["rate"],
                         prior=independent([Gamma(_f64(self.a), _f64(self.b))]),
                         simulator=Simulator(_simulate_poisson, obs_dim=1),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=1)

    def posterior_distribution(self, x_obs: Tensor) -> Gamma:
        r"""$\mathrm{Gamma}(a + \sum x, b + n)$."""
        return Gamma(_f64(self.a) + x_obs.to(torch.float64).sum(), _f64(self.b + x_obs.shape[0]))

    def exact_moments(self, x_obs: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and SD ``[1]``."""
        post = self.posterior_distribution(x_obs)
        return post.mean.reshape(1), post.variance.sqrt().reshape(1)

    def reference_posterior(self, x_obs: Tensor, num: int,
                            generator: torch.Generator | None = None) -> Posterior:
        """``num`` exact posterior draws."""
        draws = sample_prior(independent([self.posterior_distribution(x_obs)]), num,
                             generator=generator)
        return Posterior(draws, self.parameter_names, info={"method": "exact"})

    def summary_fn(self, x: Tensor) -> Tensor:
        """The sufficient statistic: the sample mean ``[B, 1]``."""
        return x.mean(1)
