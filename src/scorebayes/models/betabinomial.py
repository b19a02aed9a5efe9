r"""Beta-Binomial illustration of App. B.1 (Fig. 6).

$$
X \mid \theta \sim \text{Bin}(m, \theta), \quad m = 100, \qquad \theta \sim \text{Beta}(5, 5),
$$

with the exact likelihood score of one observation

$$
s^*(\theta, x) = \frac{x}{\theta} - \frac{m - x}{1 - \theta}
$$

and, for ``n`` observations, the conjugate posterior
$\text{Beta}(5 + \sum_i x_i,\; 5 + nm - \sum_i x_i)$.

The reparametrised simulator draws $m$ uniforms $Z_{ij}$ per observation and
returns $\sum_j \mathbb 1(Z_{ij} \le \theta)$; its ``smooth_transform`` uses the
smooth indicator $\sigma(500(\theta - Z_{ij}))$.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (App. B.1)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import Beta, Distribution

from ..posterior import Posterior
from ..priors import independent
from ..priors import sample as sample_prior
from ..simulators import Simulator
from ._utils import smooth_indicator
from .base import Model

__all__ = ["BetaBinomial"]


@dataclass(frozen=True)
class _BinomialSim:
    trials: int

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        return torch.rand(B, n, self.trials, generator=generator, dtype=torch.float64)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        """``theta [B, 1], z [B, n, m] -> x [B, n, 1]`` (counts as floats)."""
        return (z <= theta[:, None, :]).to(theta.dtype).sum(-1, keepdim=True)

    def smooth_transform(self, theta: Tensor, z: Tensor) -> Tensor:
        return smooth_indicator(theta[:, None, :] - z).sum(-1, keepdim=True)


class BetaBinomial(Model):
    r"""``X ~ Bin(trials, theta)``, ``theta ~ Beta(a, b)`` (``d = p = 1``).

    Arguments:
        trials: the binomial size $m$ (100).
        concentration1, concentration0: the Beta prior $(a, b) = (5, 5)$.
        n_obs: number of observations (App. B.1 uses a single $X$).
        true_parameters: $\theta^*$ (varied in Fig. 6; default 0.5).
    """

    def __init__(self, trials: int = 100, concentration1: float = 5.0,
                 concentration0: float = 5.0, n_obs: int = 1, true_parameters=(0.5,)):
        if trials < 1:
            raise ValueError(f"trials must be >= 1, got {trials}")
        self.trials, self.a, self.b = int(trials), float(concentration1), float(concentration0)
        sim = _BinomialSim(self.trials)
        prior = independent([Beta(torch.tensor(self.a, dtype=torch.float64),
                                  torch.tensor(self.b, dtype=torch.float64))])
        super().__init__(
            name="betabinomial", parameter_names=["theta"], prior=prior,
            simulator=Simulator(latent=sim.latent, transform=sim.transform,
                                smooth_transform=sim.smooth_transform, obs_dim=1),
            true_parameters=true_parameters, n_obs=n_obs, obs_dim=1,
            paper_settings={"trials": 100, "prior": (5.0, 5.0), "n_obs": 1,
                            "error": "E_{theta~pi(.|X), X~p(.|theta*)} |s_phi - s*|^2"},
        )

    def true_score(self, theta: Tensor, x: Tensor) -> Tensor:
        """Likelihood score ``[B, 1]`` for counts ``x [B, 1]`` or ``[B, n, 1]`` (summed)."""
        x = x.unsqueeze(1) if x.dim() == 2 else x
        return (x / theta[:, None, :] - (self.trials - x) / (1.0 - theta[:, None, :])).sum(1)

    def posterior_distribution(self, x_obs: Tensor) -> Distribution:
        """The conjugate posterior ``Beta(a + sum x, b + n m - sum x)``, event shape ``[1]``."""
        s = x_obs.to(torch.float64).sum()
        n = x_obs.shape[0]
        return independent([Beta(self.a + s, self.b + n * self.trials - s)])

    def reference_posterior(self, x_obs: Tensor, num: int,
                            generator: torch.Generator | None = None) -> Posterior:
        """``num`` exact posterior draws (one chain)."""
        draws = sample_prior(self.posterior_distribution(x_obs), num, generator=generator)
        return Posterior(draws, self.parameter_names, info={"method": "exact"})
