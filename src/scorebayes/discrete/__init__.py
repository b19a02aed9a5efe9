r"""DFD-Bayes: generalised Bayesian inference for discrete models with intractable normalising constants.

Parts (one concept per module):

- [`domains`][scorebayes.discrete.domains]: discrete domains and the neighbour maps $x^{j\pm}$;
- `models`: built-in models (Bernoulli, Poisson, CMP, Poisson mixture, Ising, Poisson and
  CMP graphical models) and [`UserModel`][scorebayes.discrete.models.base.UserModel] for any unnormalised log-pmf;
- [`dfd`][scorebayes.discrete.dfd]: the loss $D_n = n\,\mathrm{DFD}(p_\theta\|p_n)$ (with `ratios`);
- `ksd`, `pseudo`, `likelihood`: baselines (KSD-Bayes, pseudo-likelihood,
  standard Bayes with a truncated normalising constant);
- `minimisers`: row-separable saddle-free Newton / Adam minimisers with escape flags;
- [`calibrate`][scorebayes.discrete.calibrate]: bootstrap minimisers and the closed-form $\beta_*$ (plus Lyddon's);
- `posterior`: the generalised-posterior potential; [`bayes`][scorebayes.discrete.bayes]: the whole pipeline.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023)
      <https://arxiv.org/abs/2206.08420>
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
