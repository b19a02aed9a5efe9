r"""The g-and-k suite model: four parameters, a likelihood with no closed form.

$X_i = Q(Z_i; A, B, g, k)$, $Z_i \sim \mathcal N(0, 1)$ i.i.d. (the quantile function
of `gandk`), prior $U([0, 10]^4)$, ``n = 200``, truth $(3, 1, 2, 0.5)$, the
standard benchmark of Allingham, King and Mengersen (2009, Bayesian estimation of quantile
distributions, Statistics and Computing) and Drovandi and Pettitt (2011). The simulator is
reparametrised (latent $Z$, transform $Q$, differentiable in the parameters). The
exact posterior is a long MCMC run on the numerically computed likelihood
(`gandk_mcmc()`, about 20 s per data set on one core, cached per data set);
the summaries are the octile-based robust location, scale, skewness and kurtosis.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.distributions import Uniform

from ...posterior import Posterior
from ...priors import independent
from ...simulators import Simulator
from ..base import Model
from .gandk import gk_quantile, octile_summaries
from .gandk_reference import GK_HIGH, GK_LOW, gandk_mcmc

__all__ = ["GAndK"]


def _latent(B: int, n: int, generator: torch.Generator | None) -> Tensor:
    return torch.randn(B, n, 1, generator=generator, dtype=torch.float64)


def _transform(theta: Tensor, z: Tensor) -> Tensor:
    return gk_quantile(z[..., 0], theta)[..., None]


class GAndK(Model):
    """The g-and-k distribution (A, B, g, k), uniform prior on [0, 10]^4 (d = 4, p = 1)."""

    description = "g-and-k quantile distribution, d = 4, no closed-form likelihood, U[0, 10]^4"

    def __init__(self, n_obs: int = 200, true_parameters=(3.0, 1.0, 2.0, 0.5), chains: int = 128,
                 min_ess: float = 20_000.0, seed: int = 0):
        box = Uniform(torch.tensor(GK_LOW, dtype=torch.float64),
                      torch.tensor(GK_HIGH, dtype=torch.float64))
        super().__init__(name="gandk", parameter_names=["A", "B", "g", "k"],
                         prior=independent([box] * 4),
                         simulator=Simulator(latent=_latent, transform=_transform, obs_dim=1),
                         true_parameters=true_parameters, n_obs=n_obs, obs_dim=1)
        self.mcmc_settings = {"chains": int(chains), "min_ess": float(min_ess), "seed": int(seed)}

    def mcmc(self, x_obs: Tensor, num: int = 0):
        """The reference MCMC run (`MCMCResult`), with at least ``num`` draws."""
        iterations = max(200, math.ceil(num / self.mcmc_settings["chains"]))
        return gandk_mcmc(x_obs, iterations=iterations, max_iterations=max(2000, iterations),
                          **self.mcmc_settings)

    def exact_moments(self, x_obs: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and SD ``[4]`` of the MCMC draws (Monte Carlo SE ~ SD / sqrt(ESS))."""
        draws = self.mcmc(x_obs).draws.reshape(-1, 4)
        return draws.mean(0), draws.std(0)

    def reference_posterior(self, x_obs: Tensor, num: int,
                            generator: torch.Generator | None = None) -> Posterior:
        """``num`` draws picked at random (without replacement) from the MCMC run's chains."""
        run = self.mcmc(x_obs, num)
        flat = run.draws.reshape(-1, 4)
        pick = torch.randperm(flat.shape[0], generator=generator)[:num]
        info = {"method": "mcmc", "rhat": run.rhat.tolist(), "ess": run.ess.tolist(),
                "seconds": run.seconds}
        return Posterior(flat[pick], self.parameter_names, info=info)

    def summary_fn(self, x: Tensor) -> Tensor:
        """Octile-based location, scale, skewness and kurtosis ``[B, 4]``."""
        return octile_summaries(x)
