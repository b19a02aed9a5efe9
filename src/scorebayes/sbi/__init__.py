r"""Score-based Langevin simulation-based inference, as a pipeline of parts.

The folder reads as the data flow, a module per stage and a sub-package where a stage has several:

- [`settings`][scorebayes.sbi.settings]: the stages' settings (localization, tables, networks, training,
  simulation), and `budget`: how ``num_simulations`` is shared among them;
- `observed`: the observed data, checked against a pilot simulation;
- `localization`: stage 1, the minimum-distance proposal $q$;
- [`reference_tables`][scorebayes.sbi.reference_tables]: stage 2, tables drawn from a proposal, in ``u``
  (`antithetic`: mirrored pairs), and every other simulation of a fit, all
  through one fault handling;
- [`views`][scorebayes.sbi.views]: what the score network sees of a data set (single observation,
  i.i.d. data set, whole data set, Markov blocks);
- [`debias`][scorebayes.sbi.debias]: the debiasing network and its local corrections;
- [`likelihood`][scorebayes.sbi.likelihood]: stage 3's result, the learned likelihood score, the one object
  the samplers, checks and rounds consume;
- [`sampling`][scorebayes.sbi.sampling]: stage 4, Langevin chains on the learned posterior score
  (`sample_store`: samples kept in a run store);
- `rounds`: the first table round and later ones, the trust region, and the
  remedies of a failed check;
- `checks`: the fit's verdict and the simulation-based checks;
- `fitted`: the estimator as the stages see it (a structural type);
- [`estimator`][scorebayes.sbi.estimator]: [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin], which composes them.

A new stage is a module here (or a sub-package, if it needs several) that takes the estimator as a
`FittedEstimator`, simulates through
``estimator.source_`` ([`TableSource`][scorebayes.sbi.reference_tables.TableSource]), records its cost in
a ``estimator.ledger_.stage(...)``, and is called from [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] or a round.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
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
