r"""A suite of small i.i.d. simulation models with exact posteriors.

Each model is a `Model` with, besides the usual attributes
(``prior`` with event shape ``[d]``, a batched ``simulator`` ``theta [B, d] -> x [B, n, p]``,
``true_parameters``, ``n_obs``, ``obs_dim``, ``parameter_names``):

- ``exact_moments(x_obs [n, p]) -> (mean [d], sd [d])``: the exact posterior mean and SD,
  deterministic given ``x_obs``;
- ``reference_posterior(x_obs, num, generator) -> Posterior``: exact posterior draws;
- ``summary_fn(x [B, n, p]) -> [B, k]``: summaries for summary-based methods (e.g. NPE);
- ``description``: one line.

They check that a method's posterior is right (its mean within a fraction of a posterior SD
of the exact one, its SD within a few per cent), across skewed and heavy-tailed data, counts,
a likelihood with no closed form, positive and box-constrained parameters and broad uniform
priors.

======================  =================================================  ==  =====  ==  ==========
name                    model                                              d   n      p   reference
======================  =================================================  ==  =====  ==  ==========
``gaussian_mean``       Gaussian mean, unit variance, N(0, 3^2) prior      3   200    3   conjugate
``exponential_rate``    exponential rate, Gamma(2, 1) prior                1   100    1   conjugate
``poisson_rate``        Poisson rate, Gamma(2, 0.5) prior                  1   100    1   conjugate
``linear_regression5``  regression, 4 simulated covariates, N(0, 3^2 I)    5   1000   5   conjugate
``negative_binomial``   counts (mean, size), LogNormal / Gamma priors      2   300    1   quadrature
``student_t``           t_3 location-scale, Normal / LogNormal priors      2   100    1   quadrature
``lognormal``           log-normal data (mu, sigma), Normal / Gamma        2   500    1   quadrature
``kumaraswamy``         Kumaraswamy(a, b) on (0, 1), U([0.5, 20]^2)        2   50     1   quadrature
``gandk``               g-and-k quantile distribution, U([0, 10]^4)        4   200    1   MCMC
======================  =================================================  ==  =====  ==  ==========

These models are not in `scorebayes.models.MODELS`; build them with `SUITE` or
`suite_models()`. `check_posterior()` compares a method's posterior with a
model's exact moments (mean within 0.3 SD, SD within 25%).

Examples:
    >>> from scorebayes.models.suite import check_posterior, suite_models
    >>> import torch
    >>> (model,) = suite_models(["lognormal"])
    >>> x_obs = model.observed(torch.Generator().manual_seed(0))
    >>> post = model.reference_posterior(x_obs, 4000, torch.Generator().manual_seed(1))
    >>> check_posterior(model, x_obs, post).passed
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..base import Model
from .accuracy import PosteriorCheck, check_moments, check_posterior
from .bounded import Kumaraswamy
from .conjugate import LinearRegression5, SuiteExponentialRate, SuiteGaussianMean
from .counts import NegativeBinomial, PoissonRate
from .gandk_model import GAndK
from .heavy_tailed import StudentT
from .positive import LogNormalData

__all__ = [
    "SUITE",
    "GAndK",
    "Kumaraswamy",
    "LinearRegression5",
    "LogNormalData",
    "NegativeBinomial",
    "PoissonRate",
    "PosteriorCheck",
    "StudentT",
    "SuiteExponentialRate",
    "SuiteGaussianMean",
    "check_moments",
    "check_posterior",
    "suite_models",
]

SUITE: dict[str, Callable[[], Model]] = {
    "gaussian_mean": SuiteGaussianMean,
    "exponential_rate": SuiteExponentialRate,
    "poisson_rate": PoissonRate,
    "linear_regression5": LinearRegression5,
    "negative_binomial": NegativeBinomial,
    "student_t": StudentT,
    "lognormal": LogNormalData,
    "kumaraswamy": Kumaraswamy,
    "gandk": GAndK,
}


def suite_models(names: Iterable[str] | None = None) -> list[Model]:
    """Fresh instances of the suite's models, all of them or those ``names`` (in that order).

    Raises:
        ValueError: an unknown name, with the list of available ones.
    """
    names = list(SUITE) if names is None else list(names)
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        raise ValueError(f"unknown suite model(s) {unknown}; choose from {sorted(SUITE)}")
    return [SUITE[n]() for n in names]
