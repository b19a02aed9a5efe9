"""scorebayes: score-based Bayesian inference when the likelihood cannot be evaluated.

Three methods share one set of parts (priors, simulators, samplers, the Posterior):

- Score-based Langevin SBI (`scorebayes.sbi`): learn the likelihood score from
  simulations and sample the posterior with Langevin chains.
- DFD-Bayes (`scorebayes.discrete`): generalised Bayes for discrete models with
  intractable normalising constants.
- Score-based Metropolis-Hastings (`scorebayes.scoremh`).

The main entry points: [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] (and [`mh_correct()`][scorebayes.samplers.sbi_mh.mh_correct] to MH-correct its chains),
[`dfd_bayes()`][scorebayes.discrete.bayes.dfd_bayes], [`score_mh()`][scorebayes.scoremh.pipeline.score_mh], the [`Posterior`][scorebayes.posterior.Posterior] they return, the priors helpers
and [`calibrate()`][scorebayes.sbi.checks.calibration.calibrate].
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
