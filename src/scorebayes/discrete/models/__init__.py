"""Built-in discrete models for DFD-Bayes (see each module for formulas and references)."""

from .base import DiscreteModel, ExponentialFamilyModel, RatioStatistics, UserModel
from .graphical import CMPGraphicalModel, PoissonGraphicalModel, sample_graphical
from .ising import IsingModel, sample_ising
from .simple import (
    BernoulliModel,
    CMPModel,
    PoissonMixtureModel,
    PoissonModel,
    cmp_log_normaliser,
    poisson_with_outliers,
    sample_cmp,
    sample_poisson_mixture,
)

__all__ = [
    "DiscreteModel", "ExponentialFamilyModel", "RatioStatistics", "UserModel",
    "BernoulliModel", "PoissonModel", "CMPModel", "PoissonMixtureModel", "IsingModel",
    "PoissonGraphicalModel", "CMPGraphicalModel",
    "sample_cmp", "cmp_log_normaliser", "sample_poisson_mixture", "poisson_with_outliers",
    "sample_ising", "sample_graphical",
]
