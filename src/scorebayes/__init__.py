"""scorebayes: score-based Bayesian inference when the likelihood cannot be evaluated.

Three methods share one set of parts (priors, simulators, samplers, the Posterior):

- Score-based Langevin SBI (:mod:`scorebayes.sbi`): learn the likelihood score from
  simulations and sample the posterior with Langevin chains.
- DFD-Bayes (:mod:`scorebayes.discrete`): generalised Bayes for discrete models with
  intractable normalising constants.
- Score-based Metropolis-Hastings (:mod:`scorebayes.scoremh`).
"""

__version__ = "0.1.0"

from .posterior import Posterior
from .priors import ParameterSpace, independent, prior_from_spec
from .simulators import Simulator, from_function

__all__ = ["Posterior", "ParameterSpace", "Simulator", "from_function", "independent",
           "prior_from_spec", "__version__"]
