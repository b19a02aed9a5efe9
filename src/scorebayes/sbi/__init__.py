r"""Score-based Langevin simulation-based inference, as a pipeline of parts.

The folder reads as the data flow:

- :mod:`~scorebayes.sbi.settings`: the stages' settings (localization, tables, networks, training,
  simulation);
- :mod:`~scorebayes.sbi.reference_tables`: tables drawn from a proposal, in ``u``;
- :mod:`~scorebayes.sbi.views`: what the score network sees of a data set (single observation,
  i.i.d. data set, whole data set, Markov blocks);
- :mod:`~scorebayes.sbi.debias`: the debiasing network and its local corrections;
- :mod:`~scorebayes.sbi.likelihood`: the learned likelihood score, the one object the samplers,
  checks and rounds consume;
- :mod:`~scorebayes.sbi.rounds`: the localized proposal, the first and later table rounds;
- :mod:`~scorebayes.sbi.sampling`: Langevin chains on the learned posterior score;
- :mod:`~scorebayes.sbi.estimator`: :class:`ScoreLangevin`, which composes them.

References:
    | Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from ..scores.training import TrainingSchedule
from .debias import DebiasedScore
from .estimator import MODES, ScoreLangevin
from .likelihood import DataSmoothing, LearnedLikelihoodScore
from .settings import Localization, Networks, Simulation, Tables, Training, group_options
from .views import DataView, IIDDataSet, MarkovBlocks, SingleObservation, WholeDataSet, WithFeatures

__all__ = ["ScoreLangevin", "LearnedLikelihoodScore", "DataSmoothing", "DebiasedScore", "TrainingSchedule",
           "MODES", "Localization", "Tables", "Networks", "Training", "Simulation", "group_options",
           "DataView", "SingleObservation", "IIDDataSet", "WholeDataSet", "MarkovBlocks", "WithFeatures"]
