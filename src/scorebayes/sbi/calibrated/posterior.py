r"""The calibrated posterior as [`ScoreLangevin.sample()`][scorebayes.sbi.estimator.ScoreLangevin.sample] returns it:
the calibration stage, a table round that follows it, its verdict, the run's bookkeeping and
the run store.

A learned score is accurate where its table put its rows. A table drawn from a broad
localized proposal spends them far from the posterior, and then the summary loses
information. After the first calibration, when the table's proposal is more than
``RECENTRE_WIDTH`` calibrated posterior SDs wide in some parameter, or its centre lies more
than one of its SDs from the calibrated mean, the single mode's tables are redrawn from
$\mathcal N(\bar u, (10\,\mathrm{sd})^2)$ around the calibrated posterior (no wider than before in any parameter,
[`move_tables()`][scorebayes.sbi.rounds.table_rounds.move_tables]), the networks retrained, and the
calibration continued with the sharper summary. The centre comes from the calibrated
posterior, which the score's bias cannot move; a table re-centred on the summed-score
posterior follows that bias instead.

A summary that is not efficient gives a calibrated posterior that is honest but too wide. A
narrower table makes the network's summary sharper. So a table round also follows when the
score summary missed information that generic data statistics carry
([`scorebayes.sbi.calibrated.statistics`][scorebayes.sbi.calibrated.statistics]) or the calibration
rounds had not settled. A table round that still moved the mean by more than 0.3 SDs or shrank
an SD below 0.8 of the previous one is followed by another (at most ``MAX_TABLE_ROUNDS``), one
that did not ends them; the verdict warns when the last one still did. A verdict of ``fail``
then starts the escalation of
[`scorebayes.sbi.calibrated.escalation`][scorebayes.sbi.calibrated.escalation] (more calibration
data sets, larger tables), within ``num_simulations`` and ``time_limit``.
"""

from __future__ import annotations

import torch

from ...posterior import Posterior
from ..budget import MAX_ROUNDS
from ..checks.calibrated import check_calibrated
from ..fitted import FittedEstimator
from ..rounds.remedies import announce_check
from ..sample_store import load_samples, samples_name, save_samples
from .escalation import Escalation
from .stage import CalibrationReport, calibrated_posterior, proposal_moments
from .summed import summed_score_comparison

__all__ = ["calibrated_sample"]

#: a table round's proposal SD, in calibrated posterior SDs
TABLE_WIDTH = 10.0
#: a table wider than this many calibrated posterior SDs is re-centred
RECENTRE_WIDTH = 12.0
#: table rounds at most (each one retrains the networks)
MAX_TABLE_ROUNDS = 3


def calibrated_sample(est: FittedEstimator, num_samples: int, *, seed: int, check: bool) -> Posterior:
    """``num_samples`` draws of the calibrated posterior of ``est``, with its check in
    ``info["check"]`` (``check``) and the calibration's report in ``info["calibration"]``;
    kept in and resumed from ``est.store``."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 2:
        raise ValueError(f"num_samples must be an integer >= 2, got {num_samples!r}")
    likelihood = est.likelihood_
    saved_as = None
    if est.store is not None:
        saved_as = samples_name({"num_samples": num_samples, "seed": seed, "posterior": "calibrated",
                                 "calibration": est.plan_.calibration}, likelihood)
        stored = load_samples(est.store, saved_as, 1)
        if stored is not None:
            if check and "check" in stored.info:
                est.ledger_.note(f"check: {stored.info['check']['verdict']} (stored)")
            return stored
    names = est.parameter_names or [f"theta{k}" for k in range(est.space.dim)]
    posterior, report = calibrated_posterior(est, num_samples, seed=seed, names=names, rounds=MAX_ROUNDS - 1)
    while _table_round(est, report):
        posterior, report = _recalibrate(est, num_samples, seed, names, report)
    escalation = Escalation.for_fit(est)
    result = check_calibrated(report, posterior, est.posterior_u(posterior)) if check else None
    while result is not None and (step := escalation.next_step(est, result.verdict)) is not None:
        def run(step=step) -> None:
            nonlocal posterior, report
            if step == "tables":
                _move_tables(est, report)
                posterior, report = _recalibrate(est, num_samples, seed, names, report, rounds=2)
            else:
                posterior, report = calibrated_posterior(est, num_samples, seed=seed, names=names, report=report,
                                                         rounds=1)
        if not escalation.take(est, step, result.verdict, run):
            break  # its simulations failed: the posterior before it stands
        result = check_calibrated(report, posterior, est.posterior_u(posterior), remedies=escalation.remedies())
    draws_u = est.posterior_u(posterior)
    flat = draws_u.reshape(-1, est.space.dim)
    report.summed_score = summed_score_comparison(est, flat.mean(0), flat.std(0))
    if report.summed_score is not None:
        est.ledger_.note(f"  the summed-score posterior (Laplace) lies {report.summed_score['distance_sd']:.2f} "
                         "calibrated SDs away")
    est.calibration_ = report
    posterior.info.update({"method": "score-langevin", "mode": est.mode,
                           "calibration": {**report.to_dict(), "escalation": escalation.to_dict()},
                           "simulations": sum(est.simulations_.values()),
                           "simulations_by_stage": dict(est.simulations_),
                           "dropped_by_stage": {k: dict(v) for k, v in est.ledger_.dropped.items()}})
    if check:
        result = check_calibrated(report, posterior, draws_u, remedies=escalation.remedies())
        posterior.info["check"] = result.to_dict()
        announce_check(est, result)
    if saved_as is not None:
        save_samples(est.store, saved_as, posterior)
    return posterior


def _recalibrate(est: FittedEstimator, num_samples: int, seed: int, names: list[str], report: CalibrationReport,
                 rounds: int | None = None) -> tuple[Posterior, CalibrationReport]:
    """The calibration continued after a table round (new networks), with how it sharpened the posterior."""
    before = report.last_estimate()
    rounds = max(2, MAX_ROUNDS - len(report.rounds)) if rounds is None else rounds
    posterior, report = calibrated_posterior(est, num_samples, seed=seed, names=names, report=report, rounds=rounds)
    report.record_sharpening(before)
    return posterior, report


def _table_round(est: FittedEstimator, report: CalibrationReport) -> bool:
    """Redraw the tables around the calibrated posterior when the first calibration asks for it
    (tables too broad or off centre, a score summary the data statistics improved on, rounds not
    settled) or the last table round still sharpened the posterior (module docstring), up to
    ``MAX_TABLE_ROUNDS`` and within the budget; whether it was done."""
    if not est.view.single_observations or report.table_rounds >= MAX_TABLE_ROUNDS:
        return False
    table_mean, table_sd = proposal_moments(est)
    mean, sd = report.last_estimate()
    if report.sharpening:  # after a table round, another only if that one still sharpened
        wanted = report.still_sharpening()
    else:  # tables too broad or off centre, a score summary the statistics improved on, not settled
        too_wide = bool((table_sd > RECENTRE_WIDTH * sd).any())
        off_centre = bool(((mean - table_mean).abs() > table_sd).any())
        wanted = too_wide or off_centre or report.score_inefficient() or not report.converged
    if not wanted:
        return False
    plan = est.plan_
    if plan.total is not None and sum(est.simulations_.values()) + plan.round_cost() + plan.calibration > plan.total:
        return False
    _move_tables(est, report)
    return True


def _move_tables(est: FittedEstimator, report: CalibrationReport) -> None:
    """Redraw the tables around the calibrated posterior, ``TABLE_WIDTH`` of its SDs wide (no wider
    than the last tables), and retrain the networks."""
    _, table_sd = proposal_moments(est)
    mean, sd = report.last_estimate()
    est.ledger_.note(f"  a table round around the calibrated posterior ({TABLE_WIDTH:.0f} of its SDs wide)")
    with est.ledger_.stage("table round"):
        est.move_tables(mean, torch.minimum(TABLE_WIDTH * sd, table_sd))
    report.table_rounds += 1
