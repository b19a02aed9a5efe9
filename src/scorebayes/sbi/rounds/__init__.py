r"""Rounds of a Langevin-SBI fit after the first: tables moved or refined around a posterior, the
trust-region iteration, and the remedies a failed check runs.

- [`table_rounds`][scorebayes.sbi.rounds.table_rounds]: the localized proposal, the first table round and
  the later ones (refine, move, local debiasing corrections);
- [`trust_region`][scorebayes.sbi.rounds.trust_region]: Laplace steps of a trust region in ``u``;
- `remedies`: what a failed check runs (a second round within the
  budget).
"""

from .remedies import announce_check, checked, second_round
from .table_rounds import (
    first_round,
    localized_proposal,
    move_tables,
    refine_debiasing,
    refine_proposal,
    refit_debiasing,
)
from .trust_region import LaplaceStep, laplace_step, trust_region_fit

__all__ = ["localized_proposal", "first_round", "refine_proposal", "move_tables", "refine_debiasing",
           "refit_debiasing", "LaplaceStep", "laplace_step", "trust_region_fit", "announce_check",
           "checked", "second_round"]
