r"""Baselines of the Langevin SBI paper, each returning a [`Posterior`][scorebayes.posterior.Posterior].

- `abc_w1()`: rejection ABC with the exact 1-Wasserstein distance between data sets;
- `abc_pmc()`: ABC by population Monte Carlo on summaries, importance-weighted and
  regression-adjusted (a reference posterior without a score model);
- `bsl()`: Bayesian synthetic likelihood inside random-walk Metropolis-Hastings;
- `npe()`: neural posterior estimation with a masked autoregressive flow (``sbi``);
- `gaussian_npe()`: the Gaussian NPE of Chatha et al. (epidemic example).

Each can draw its parameters from the prior or from a localized proposal $q$
(``sampler=``); draws from $q$ are reweighted by the self-normalised $\pi/q$.
``info["simulations"]`` counts simulated data sets of the observed size.
"""

from ._common import importance_weights
from .abc import abc_w1, wasserstein1
from .abc_pmc import abc_pmc
from .bsl import bsl, gaussian_synthetic_loglik, mean_sd_summary
from .gaussian_npe import GaussianDensityNetwork, gaussian_npe
from .npe import npe

__all__ = [
    "abc_w1",
    "abc_pmc",
    "wasserstein1",
    "bsl",
    "mean_sd_summary",
    "gaussian_synthetic_loglik",
    "npe",
    "gaussian_npe",
    "GaussianDensityNetwork",
    "importance_weights",
]
