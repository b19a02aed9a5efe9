"""The calibration stage of Langevin SBI: the learned score as a summary of whole data sets,
calibrated on data sets simulated at the observed size ([`scorebayes.sbi.calibrated.stage`][scorebayes.sbi.calibrated.stage])."""

from .posterior import calibrated_sample
from .stage import CalibrationReport, calibrated_posterior, score_summaries
from .synthetic_likelihood import GaussianSyntheticLikelihood, fit_synthetic_likelihood

__all__ = ["CalibrationReport", "GaussianSyntheticLikelihood", "calibrated_posterior", "calibrated_sample",
           "fit_synthetic_likelihood", "score_summaries"]
