"""scorebayes: score-based Bayesian inference when the likelihood cannot be evaluated.

Three methods share one set of parts (priors, simulators, samplers, the Posterior):

- Score-based Langevin SBI (:mod:`scorebayes.sbi`): learn the likelihood score from
  simulations and sample the posterior with Langevin chains.
- DFD-Bayes (:mod:`scorebayes.discrete`): generalised Bayes for discrete models with
  intractable normalising constants.
- Score-based Metropolis-Hastings (:mod:`scorebayes.scoremh`).

The main entry points: :class:`ScoreLangevin` (and :func:`mh_correct` to MH-correct its chains),
:func:`dfd_bayes`, :func:`score_mh`, the :class:`Posterior` they return, the priors helpers
and :func:`calibrate`.
"""

__version__ = "0.1.0"

import os

# OpenMP threads that spin while they wait make a run that shares its cores with another job
# about 10x slower; passive waiting keeps it near its fair share (read when torch loads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .sbi.checks.calibration import calibrate, score_mean_test
from .discrete.bayes import dfd_bayes, generalised_bayes
from .posterior import Posterior
from .priors import ParameterSpace, independent, prior_from_spec
from .samplers.sbi_mh import mh_correct
from .sbi import LearnedLikelihoodScore, ScoreLangevin
from .scoremh.pipeline import score_mh
from .simulators import Simulator, from_function

__all__ = ["ScoreLangevin", "LearnedLikelihoodScore", "mh_correct", "dfd_bayes", "generalised_bayes",
           "score_mh", "Posterior", "calibrate", "score_mean_test", "ParameterSpace", "Simulator",
           "from_function", "independent", "prior_from_spec", "__version__"]
