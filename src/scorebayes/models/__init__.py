r"""Built-in models of the experiments, and toy models with exact posteriors.

`get_model()` returns a fresh `Model` by name (the CLI's
``simulator = "builtin:NAME"``):

=================  ==========================================================  =====  ======
name               model                                                       d      n
=================  ==========================================================  =====  ======
``mg1``            M/G/1 queue, 5 inter-departure times per observation        3      500
``monotone``       Bernstein monotone regression (M = 10), exact Gibbs truth   11     1000
``epidemic5``      SI epidemic, 5 floors (summary matrix S, 52 x 7)            7      52
``epidemic10``     SI epidemic, 10 floors (52 x 12)                            12     52
``betabinomial``   Bin(100, theta) with a Beta(5, 5) prior                     1      1
``gaussian_mean``  Gaussian mean, conjugate normal prior                       2      100
``exponential_rate``  exponential rate, conjugate Gamma prior                  1      100
``linear_regression``  linear regression with (x, y) rows, normal prior        2      100
=================  ==========================================================  =====  ======
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._utils import smooth_indicator
from .base import Model
from .betabinomial import BetaBinomial
from .epidemic import Epidemic
from .gaussian import ExponentialRate, GaussianMean, LinearRegression
from .mg1 import MG1
from .monotone import Monotone

__all__ = ["get_model", "MODELS", "Model", "MG1", "Monotone", "Epidemic", "BetaBinomial",
           "GaussianMean", "ExponentialRate", "LinearRegression", "smooth_indicator"]

MODELS: dict[str, Callable[..., Model]] = {
    "mg1": MG1,
    "monotone": Monotone,
    "epidemic5": lambda **kw: Epidemic(floors=5, **kw),
    "epidemic10": lambda **kw: Epidemic(floors=10, **kw),
    "betabinomial": BetaBinomial,
    "gaussian_mean": GaussianMean,
    "exponential_rate": ExponentialRate,
    "linear_regression": LinearRegression,
}


def get_model(name: str, **options: Any) -> Model:
    """Build the built-in model ``name`` (keyword ``options`` go to its constructor).

    Raises:
        ValueError: unknown name, with the list of available models.
    """
    key = name.removeprefix("builtin:").strip().lower()
    if key not in MODELS:
        raise ValueError(f"unknown built-in model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[key](**options)
