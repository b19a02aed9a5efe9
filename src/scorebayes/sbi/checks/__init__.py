r"""Checks of a fitted Langevin-SBI estimator: the fit's verdict and the simulation-based checks
it draws on.

- [`verdict`][scorebayes.sbi.checks.verdict]: [`check_fit()`][scorebayes.sbi.checks.verdict.check_fit], the verdict (pass, warn, fail) every
  fit ends with;
- [`score_mean`][scorebayes.sbi.checks.score_mean]: the score-mean test at a parameter;
- [`calibration`][scorebayes.sbi.checks.calibration]: simulation-based calibration of the whole pipeline;
- `simulated`: the data sets they simulate, through the tables' fault
  handling.
"""

from .calibration import Calibration, calibrate
from .score_mean import ScoreMeanTest, score_mean_test
from .verdict import VERDICTS, FitCheck, check_fit

__all__ = ["VERDICTS", "FitCheck", "check_fit", "Calibration", "calibrate", "ScoreMeanTest",
           "score_mean_test"]
