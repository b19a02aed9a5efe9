r"""Automatic remedies for a fit that failed its check ([`scorebayes.sbi.checks.verdict`][scorebayes.sbi.checks.verdict]).

A failed check of the learned score (bias, scale) or of the table (draws beyond the table's
proposal, draws at the edge of the trained region) has one remedy within reach of the fit: a
second table round centred on the learned posterior, with a spread of twice its standard
deviation in ``u`` (widened by $1/r$ when the check found the posterior $r < 1$ times
too narrow), so that the table is dense where the posterior lives and covers its tails:

- single mode: [`move_tables()`][scorebayes.sbi.rounds.table_rounds.move_tables] (both tables redrawn, both networks
  retrained);
- modes n, full, markov: [`refine_proposal()`][scorebayes.sbi.rounds.table_rounds.refine_proposal] (a round added to the
  pooled table, the score network retrained on it).

The round costs as much as the first (the plan's ``reserve``, `scorebayes.sbi.budget`);
with a ``num_simulations`` budget it is only run if the budget still holds it. Checks of the chains (R-hat, effective
draws, start memory) only warn and have no automatic remedy.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

import torch

from ...posterior import Posterior
from ..checks.verdict import FitCheck
from ..fitted import FittedEstimator

__all__ = ["announce_check", "checked", "second_round"]


def announce_check(est: FittedEstimator, result: FitCheck) -> None:
    """The verdict as one line on stderr (with ``progress``), and a warning when it fails."""
    if est.progress:
        print(result.line(), file=sys.stderr)
    if result.verdict == "fail":
        warnings.warn(f"the fit failed its check: {result.line()}", stacklevel=5)


def checked(est: FittedEstimator, posterior: Posterior, resample: Callable[[], Posterior], *,
            remedy: bool) -> Posterior:
    """``posterior`` with its check; after a failed one (and ``remedy``), the second round's
    ``resample()`` with its own check, which names the remedy."""
    result = est.check(posterior, announce=not remedy)
    if not remedy:
        return posterior
    done = second_round(est, posterior, result)
    if done is None:
        posterior.info["check"] = result.to_dict()  # with the reason a remedy was not run
        announce_check(est, result)
        return posterior
    est.ledger_.note(f"{result.line()}: {done}")
    posterior = resample()
    announce_check(est, est.check(posterior, remedies=[done], announce=False))
    return posterior


def second_round(est: FittedEstimator, posterior: Posterior, check: FitCheck) -> str | None:
    """Run the second table round for a failed ``check`` of ``posterior``; returns what was done, or
    ``None`` (nothing to do, or no budget left; the reason is then added to ``check.reasons``)."""
    if check.verdict != "fail" or not check.advice:
        return None
    plan = est.plan_
    cost = plan.round_cost() + plan.check  # the round and the check after it
    spent = sum(est.simulations_.values())
    if plan.total is not None and spent + cost > plan.total + 1e-9:
        check.reasons.append(f"no second table round: it needs {cost:,.0f} data sets and "
                             f"{plan.total - spent:,.0f} of num_simulations are left")
        return None
    u = est.posterior_u(posterior)
    ratio = torch.tensor(check.details.get("sd_ratio") or [1.0] * u.shape[-1], dtype=torch.float64)
    inflation = 2 / ratio.nan_to_num(1.0).clamp(0.25, 1.0)  # 2 SDs, widened where too narrow
    before = sum(est.simulations_.values())
    with est.ledger_.stage("second round"):
        if est.view.single_observations:
            est.move_tables(u.mean(0), inflation * u.std(0).clamp_min(1e-12))
        else:
            est.refine_proposal(posterior, inflation=inflation)
    spent = sum(est.simulations_.values()) - before
    return f"a second table round around the posterior ({spent:,.0f} data sets)"
