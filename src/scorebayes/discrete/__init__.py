r"""DFD-Bayes: generalised Bayesian inference for discrete models with intractable normalising constants.

Parts (one concept per module):

- :mod:`.domains`: discrete domains and the neighbour maps :math:`x^{j\pm}`;
- :mod:`.models`: built-in models (Bernoulli, Poisson, CMP, Poisson mixture, Ising, Poisson and
  CMP graphical models) and :class:`~.models.UserModel` for any unnormalised log-pmf;
- :mod:`.dfd`: the loss :math:`D_n = n\,\mathrm{DFD}(p_\theta\|p_n)` (with :mod:`.ratios`);
- :mod:`.ksd`, :mod:`.pseudo`, :mod:`.likelihood`: baselines (KSD-Bayes, pseudo-likelihood,
  standard Bayes with a truncated normalising constant);
- :mod:`.minimisers`: row-separable saddle-free Newton / Adam minimisers with escape flags;
- :mod:`.calibrate`: bootstrap minimisers and the closed-form :math:`\beta_*` (plus Lyddon's);
- :mod:`.posterior`: the generalised-posterior potential; :mod:`.bayes`: the whole pipeline.

References:
    | Generalised Bayesian Inference for Discrete Intractable Likelihood
    | (Matsubara, Knoblauch, Briol and Oates, 2023)
    | https://arxiv.org/abs/2206.08420
"""

from .bayes import dfd_bayes, generalised_bayes
from .calibrate import (
    Calibration,
    CalibrationError,
    CalibrationWarning,
    beta_star,
    bootstrap_minimisers,
    bootstrap_weights,
    calibrate_beta,
    lyddon_beta,
)
from .dfd import DFDLoss
from .domains import Domain, Neighbours
from .ksd import KSDLoss, sigmoid_weight
from .likelihood import TruncatedLikelihoodLoss
from .minimisers import minimise
from .models import *  # noqa: F403
from .models import __all__ as _models_all
from .posterior import GeneralisedPosterior
from .pseudo import PseudoLikelihoodLoss
from .ratios import RatioLoss, prepare_data

__all__ = [
    "Domain", "Neighbours", "DFDLoss", "RatioLoss", "prepare_data", "KSDLoss", "sigmoid_weight",
    "PseudoLikelihoodLoss", "TruncatedLikelihoodLoss", "GeneralisedPosterior",
    "minimise", "bootstrap_weights", "bootstrap_minimisers", "beta_star", "lyddon_beta", "calibrate_beta",
    "Calibration", "CalibrationError", "CalibrationWarning", "generalised_bayes", "dfd_bayes", *_models_all,
]
