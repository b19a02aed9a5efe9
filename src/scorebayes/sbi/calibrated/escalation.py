r"""Escalation: a calibrated fit whose check fails grows its budget in steps.

A verdict of ``fail`` on a calibrated posterior (``scorebayes.sbi.checks.calibrated``) often has a cause that
more simulation removes: too few calibration data sets near the posterior (a noisy synthetic
likelihood, rounds that have not settled, too few held-back data sets to check), or a network
trained on too few rows near it (a summary that loses information). So, while the verdict is
``fail``, the fit takes these steps in order, each once, checking again after each:

1. ``calibration``: one more calibration round with twice the data sets per round (all earlier
   rounds' data sets are kept and pooled);
2. ``tables`` (single mode): a table round around the calibrated posterior with twice the table
   rows (and so twice the training steps), then the calibration continued with the new
   network (its earlier data sets re-summarised, one or two new rounds).

Caps. A step is started only if it fits both:

- ``num_simulations`` (when given): what was spent plus the step's cost (the doubled
  calibration round; the doubled tables and two calibration rounds);
- ``time_limit`` (seconds of the fit and its sampling; ``None``: none): the time spent plus
  the step's estimate, from the stages it repeats (twice the last calibration round; twice
  the last table round, or the first tables and networks, plus two calibration rounds).

Each step is one line of the progress output and one entry of the verdict's ``remedies``
("after: ..."), so the verdict says what was done; the steps and why they stopped are in
``info["calibration"]["escalation"]``.

A step whose simulations fail beyond ``max_failure_fraction`` (a `SimulatorError`) is recorded
with its error and ends the escalation with a warning; the posterior before it is kept.

A ``warn`` does not escalate. Each check after a step is one more chance for a check's noisy
finding to clear while the posterior stays where it was, so the steps answer only a failure,
and a step that still moved the posterior is itself a finding of the next check (the rounds
or the table round had not settled).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...simulators import SimulatorError
from ..fitted import FittedEstimator

__all__ = ["STEPS", "Escalation"]

#: the steps in the order they are taken
STEPS = ("calibration", "tables")
#: each step multiplies its sizes by this
GROWTH = 2


@dataclass
class Escalation:
    """The escalation of one calibrated fit: ``steps`` taken (``{"step", "after", "simulations",
    "seconds"}``: the verdict it answered, what it cost) and ``stopped``, why no further step was
    taken: the verdict did not fail (``"pass"``, ``"warn"``), every step was taken (``"steps
    taken"``), the next would pass a cap (``"num_simulations"``, ``"time_limit"``), or a step's
    simulations failed (``"simulator error"``; that step has an ``"error"``)."""

    started: float
    time_limit: float | None
    steps: list[dict[str, Any]] = field(default_factory=list)
    stopped: str | None = None

    @classmethod
    def for_fit(cls, est: FittedEstimator) -> Escalation:
        """Time counted from the start of ``est.fit`` (its ``fit_seconds_``) on."""
        return cls(time.perf_counter() - float(getattr(est, "fit_seconds_", 0.0)), est.tables.time_limit)

    def remedies(self) -> list[str]:
        """One phrase per step completed, for the verdict's "after: ..."."""
        return [_DESCRIPTION[s["step"]] for s in self.steps if "error" not in s]

    def next_step(self, est: FittedEstimator, verdict: str) -> str | None:
        """The next step for a fit whose check said ``verdict``, or ``None`` (and ``stopped`` set)."""
        if verdict != "fail":
            self.stopped = verdict
            return None
        taken = {s["step"] for s in self.steps}
        candidates = [s for s in STEPS if s not in taken and (s != "tables" or est.view.single_observations)]
        if not candidates:
            self.stopped = "steps taken"
            return None
        step = candidates[0]
        plan = est.plan_
        if plan.total is not None and sum(est.simulations_.values()) + _cost(plan, step) > plan.total:
            self.stopped = "num_simulations"
            return None
        if self.time_limit is not None and self.elapsed() + _seconds(est, step) > self.time_limit:
            self.stopped = "time_limit"
            return None
        return step

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def take(self, est: FittedEstimator, step: str, verdict: str, run: Callable[[], None]) -> bool:
        """Take ``step``: grow the plan's sizes, ``run()`` the stages it repeats, record it; whether
        it completed (``False``: its simulations failed, recorded, warned, the plan restored)."""
        est.ledger_.note(f"  check: {verdict}; escalation: {_DESCRIPTION[step]}")
        spent, start = sum(est.simulations_.values()), time.perf_counter()
        plan = est.plan_
        if step == "calibration":
            est.plan_ = dataclasses.replace(plan, calibration=GROWTH * plan.calibration)
        else:
            est.plan_ = dataclasses.replace(plan, single_rows=GROWTH * plan.single_rows,
                                            num_groups=GROWTH * plan.num_groups)
        record = {"step": step, "after": verdict}
        try:
            run()
        except SimulatorError as err:
            est.plan_ = plan
            record["error"] = str(err)
            self.stopped = "simulator error"
            warnings.warn(f"the escalation's {_DESCRIPTION[step]} failed, the posterior before it is kept: {err}",
                          stacklevel=3)
        record.update(simulations=sum(est.simulations_.values()) - spent, seconds=time.perf_counter() - start)
        self.steps.append(record)
        return "error" not in record

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "stopped": self.stopped, "time_limit": self.time_limit,
                "seconds": self.elapsed()}


_DESCRIPTION = {"calibration": "a calibration round with twice the data sets",
                "tables": "a table round with twice the rows"}


def _cost(plan: Any, step: str) -> float:
    """Data sets of size ``n`` that ``step`` spends (its doubled sizes)."""
    if step == "calibration":
        return float(GROWTH * plan.calibration)
    return GROWTH * plan.round_cost() + 2.0 * plan.calibration


def _seconds(est: FittedEstimator, step: str) -> float:
    """The time ``step`` is expected to take, from the ledger's records of the stages it repeats."""
    records = est.ledger_.records
    calibration = [r["seconds"] for r in records if r["stage"].startswith("calibration")]
    last_calibration = calibration[-1] if calibration else 0.0
    if step == "calibration":
        return GROWTH * last_calibration
    rounds = [r["seconds"] for r in records if r["stage"] == "table round"]
    if rounds:
        tables = rounds[-1]
    else:  # the first round's tables and networks
        tables = sum(r["seconds"] for r in records if r["stage"].startswith(("table_S", "table_R"))
                     or r["stage"] in ("score net", "mean net"))
    return GROWTH * tables + 2 * last_calibration if math.isfinite(tables) else math.inf
