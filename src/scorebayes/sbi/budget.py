r"""The simulation budget: ``num_simulations`` split over the stages of a fit.

The unit is one data set of the observed size $n$ (the papers' unit): a single-observation
row of $\mathcal D^S$ costs $1/n$, a group of $m_R$ observations of
$\mathcal D^R$ costs $m_R/n$, the localization's $B\times\text{iterations}$
simulated data sets of size $m$ cost $m/n$ each.

The default plan (sizes not given explicitly):

=================  ==========================================================================
stage              default
=================  ==========================================================================
localization       20 replicates x 100 iterations (Nelder-Mead: at most 100 evaluations each)
``table_S``        80,000 single observations (single mode; 400 data sets at n = 200)
``table_R``        500 groups of $m_R = \min(1000, \max(100, n))$ observations (single mode)
``table_N``        1,000 data sets (modes n, full, markov)
calibration        up to 4 rounds of 1,000 data sets ([`scorebayes.sbi.calibrated`][scorebayes.sbi.calibrated])
check              200 data sets at the posterior mean ([`scorebayes.sbi.checks.verdict`][scorebayes.sbi.checks.verdict]),
                   without calibration
reserve            one more table round (and its check, without calibration), spent only if
                   the check (or, with calibration, the calibrated posterior) asks for it
=================  ==========================================================================

The single mode's table is large because its rows are cheap ($1/n$ of a data set each) and the
calibrated posterior's accuracy is set by the learned single-observation score: the calibration
removes what an affine map of the summary absorbs, but an error $e(x)$ of the score that varies
with the observation moves the posterior by $\sum_i e(x_i) / \sqrt{n I}$ posterior SDs on the
observed data: typically of the order of the score's relative RMS error, more when a few
extreme observations fall where the table had few rows.

A given ``num_simulations`` $B$ is the whole cost: the plan's sizes are scaled by a common
factor so that they sum to $B$ (sizes given explicitly stay as given; a stage never
shrinks below a floor). A budget too small to hold the reserve is planned without it; one too
small for the floors is refused before any work.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

__all__ = ["DEFAULT_PLAN", "MAX_ROUNDS", "BudgetPlan", "Ledger", "plan_budget", "plan_fit"]

#: the default plan's sizes, and each scalable size's floor
DEFAULT_PLAN = {"replicates": 20, "iterations": 100, "single_rows": 80_000, "num_groups": 500,
                "num_data_sets": 1_000, "check": 200, "calibration": 1_000}
FLOORS = {"iterations": 20, "single_rows": 1_000, "num_groups": 50, "num_data_sets": 50, "check": 50,
          "calibration": 200}
#: calibration rounds the plan holds (`scorebayes.sbi.calibrated.stage`)
MAX_ROUNDS = 4
#: sizes whose stage runs again in a second round (the tables and the check after them)
TABLES = ("single_rows", "num_groups", "num_data_sets", "check")
#: sizes beyond which more buys nothing (localization iterations, the check's data sets)
CEILINGS = {"iterations": 300, "check": 200}


@dataclass(frozen=True)
class BudgetPlan:
    r"""The sizes of every stage and their cost in data sets of size $n$.

    Attributes:
        n: the observed data set size. single: single mode ($\mathcal D^S$, $\mathcal D^R$).
        localization: ``localize`` options of the plan (``replicates``, ``iterations``,
            ``max_evaluations``, ``m``), or ``None`` without localization.
        single_rows, num_groups, group_size: $N_S$, $N_R$, $m_R$ (single mode).
        num_data_sets: $N$ (other modes).
        check: data sets simulated by the fit's check (without calibration).
        calibration: data sets per calibration round (0: no calibration; the plan holds
            ``MAX_ROUNDS`` of them).
        total: the budget (``None``: the plan's own sum).
        reserve: whether the budget holds a second table round (a budget too small for it is
            planned without it, and a failed check then has no automatic remedy).
    """

    n: int
    single: bool
    localization: dict | None
    single_rows: int
    num_groups: int
    group_size: int
    num_data_sets: int
    check: int
    total: float | None
    reserve: bool = True
    calibration: int = 0

    def round_cost(self) -> float:
        """One table round (the first, or a second one), in data sets of size ``n``."""
        if self.single:
            return (self.single_rows + self.num_groups * self.group_size) / self.n
        return float(self.num_data_sets)

    def costs(self) -> dict[str, float]:
        """Stage -> data sets of size ``n``; ``reserve`` is one more table round and its check."""
        out: dict[str, float] = {}
        if self.localization is not None:
            loc = self.localization
            out["localization"] = loc["replicates"] * loc["iterations"] * loc["m"] / self.n
        tables = ({"table_S": self.single_rows / self.n, "table_R": self.num_groups * self.group_size / self.n}
                  if self.single else {"table_N": float(self.num_data_sets)})
        out.update(tables)
        check = 0.0 if self.calibration else float(self.check)
        if self.calibration:
            out["calibration"] = float(self.calibration * MAX_ROUNDS)
        else:
            out["check"] = check
        out["reserve"] = self.round_cost() + check if self.reserve else 0.0
        return out

    def planned(self) -> float:
        return sum(self.costs().values())

    def describe(self) -> str:
        """One line: the budget and each stage's share."""
        c = self.costs()
        parts = []
        if "localization" in c:
            parts.append(f"localization {c['localization']:,.0f}")
        if self.single:
            parts.append(f"D^S {c['table_S']:,.0f} ({self.single_rows:,} rows)")
            parts.append(f"D^R {c['table_R']:,.0f} ({self.num_groups:,} groups of {self.group_size:,})")
        else:
            parts.append(f"D^N {c['table_N']:,.0f}")
        if self.calibration:
            parts.append(f"calibration up to {MAX_ROUNDS} x {self.calibration:,}")
        else:
            parts.append(f"check {c['check']:,.0f}")
        parts.append(f"reserve {c['reserve']:,.0f} (a second table round if needed)" if self.reserve
                     else "no reserve for a second table round")
        total = self.total if self.total is not None else self.planned()
        return f"budget {total:,.0f} data sets of n = {self.n:,}: " + ", ".join(parts)


def plan_budget(total: float | None, n: int, *, single: bool, localize: bool, fixed: dict,
                calibrate: bool = False) -> BudgetPlan:
    r"""The stages' sizes for a budget ``total`` (``None``: the default plan) and data size ``n``.

    Arguments:
        total: ``num_simulations``, data sets of size ``n``, or ``None``.
        n: the observed data set size.
        single: single mode (tables $\mathcal D^S$, $\mathcal D^R$) or not ($N$).
        localize: whether the fit localizes.
        calibrate: whether the fit calibrates (up to ``MAX_ROUNDS`` rounds of ``calibration``
            data sets, instead of the check).
        fixed: sizes given explicitly, kept as given: any of ``replicates``, ``iterations``,
            ``m``, ``restarts``, ``single_rows``, ``num_groups``, ``group_size``, ``num_data_sets``,
            ``calibration``.

    Raises:
        ValueError: a budget smaller than the fixed sizes plus the floors of the rest.
    """
    if total is not None and (isinstance(total, bool) or not total > 0 or not math.isfinite(total)):
        raise ValueError(f"num_simulations must be a positive number of data sets, got {total!r}")
    sizes = {**DEFAULT_PLAN, **{k: v for k, v in fixed.items() if v is not None}}
    group_size = int(sizes.get("group_size") or min(1000, max(100, n)))
    m = int(sizes.get("m") or n)
    replicates = int(sizes["replicates"]) * int(sizes.get("restarts") or 1)
    stages = ["iterations"] if localize else []
    stages += ["single_rows", "num_groups"] if single else ["num_data_sets"]
    stages.append("calibration" if calibrate else "check")
    # cost of one unit of each size, in data sets of size n (a table stage and the check also
    # reserve their second round; the calibration holds all its rounds)
    unit = {"iterations": replicates * m / n, "single_rows": 2 / n, "num_groups": 2 * group_size / n,
            "num_data_sets": 2.0, "check": 2.0, "calibration": float(MAX_ROUNDS)}
    scalable = [s for s in stages if fixed.get(s) is None]
    reserve = True
    if total is not None:
        def need() -> float:  # the floors (and the fixed sizes) at the current units
            return sum(unit[s] * (FLOORS[s] if s in scalable else sizes[s]) for s in stages)

        if reserve and need() > total:  # planned without the second round
            reserve = False
            unit = {s: u / 2 if s in TABLES else u for s, u in unit.items()}
        if need() > total:
            raise ValueError(f"num_simulations = {total:,.0f} data sets of n = {n} is too small: these "
                             f"settings need at least {need():,.0f}")
        fixed_cost = sum(unit[s] * sizes[s] for s in stages if s not in scalable)
        if scalable:
            sizes = {**sizes, **_scaled({s: sizes[s] for s in scalable}, unit, total - fixed_cost)}
    loc = None
    if localize:
        loc = {"replicates": int(sizes["replicates"]), "iterations": int(sizes["iterations"]), "m": m,
               "max_evaluations": int(sizes["iterations"])}
        if fixed.get("restarts"):
            loc["restarts"] = int(fixed["restarts"])
    return BudgetPlan(n=n, single=single, localization=loc, single_rows=int(sizes["single_rows"]),
                      num_groups=int(sizes["num_groups"]), group_size=group_size,
                      num_data_sets=int(sizes["num_data_sets"]), check=int(sizes["check"]), total=total,
                      reserve=reserve, calibration=int(sizes["calibration"]) if calibrate else 0)


def _scaled(sizes: dict[str, float], unit: dict[str, float], budget: float) -> dict[str, int]:
    """``sizes`` times one common factor, each clamped to its floor and ceiling, costing ``budget``."""
    bounded: dict[str, float] = {}  # sizes at a floor or a ceiling
    factor = 1.0
    while len(bounded) < len(sizes):  # each pass bounds at least one more size, or stops
        free = [s for s in sizes if s not in bounded]
        left = budget - sum(unit[s] * v for s, v in bounded.items())
        factor = left / sum(unit[s] * sizes[s] for s in free)
        clamped = {s: min(max(sizes[s] * factor, FLOORS[s]), CEILINGS.get(s, math.inf)) for s in free}
        newly = {s: v for s, v in clamped.items() if v != sizes[s] * factor}
        if not newly:
            break
        bounded.update(newly)
    return {s: math.floor(bounded.get(s, sizes[s] * factor)) for s in sizes}


def plan_fit(tables: Any, localization: Any, n: int, *, single: bool, calibrate: bool = False) -> BudgetPlan:
    """The stages' sizes of a fit to data of size ``n``: `plan_budget()` with the sizes the
    ``tables`` and ``localization`` settings fix ([`scorebayes.sbi.settings`][scorebayes.sbi.settings])."""
    fixed = {k: localization.options.get(k) for k in ("replicates", "iterations", "m", "restarts")}
    fixed.update(num_groups=tables.num_groups, group_size=tables.group_size,
                 **{("single_rows" if single else "num_data_sets"): tables.table_size})
    fixed["calibration"] = tables.calibration_size
    return plan_budget(tables.num_simulations, n, single=single, localize=localization.enabled, fixed=fixed,
                       calibrate=calibrate)


class Ledger:
    """What each stage of a fit spent: ``records`` of ``{"stage", "simulations", "seconds",
    "failed", "nonfinite"}``, one line each on stderr with ``progress``. The simulations are read
    from the estimator's running count (``simulations_``, data sets of size ``n`` by stage), the
    dropped simulations from the running fault counts ``faults`` (``"failed"``, ``"nonfinite"``).
    ``dropped`` sums them by stage name, each in the innermost stage that dropped them (a stage
    run inside another, such as a table inside a second round, is not counted twice)."""

    def __init__(self, simulations: dict[str, float], progress: bool, faults: dict[str, float] | None = None):
        self.simulations, self.progress = simulations, progress
        self.faults = faults if faults is not None else {}
        self.records: list[dict] = []
        self.dropped: dict[str, dict[str, int]] = {}
        self._nested: list[list[int]] = []  # per open stage: what its inner stages dropped

    def _dropped_so_far(self) -> list[int]:
        return [int(self.faults.get("failed", 0)), int(self.faults.get("nonfinite", 0))]

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start, spent, before = time.perf_counter(), sum(self.simulations.values()), self._dropped_so_far()
        self._nested.append([0, 0])
        try:
            yield
        finally:  # a stage that raised is recorded too: what it spent and dropped is spent
            self._record(name, start, spent, before, self._nested.pop())

    def _record(self, name: str, start: float, spent: float, before: list[int], inner: list[int]) -> None:
        total = [now - then for now, then in zip(self._dropped_so_far(), before, strict=True)]
        if self._nested:
            self._nested[-1] = [a + b for a, b in zip(self._nested[-1], total, strict=True)]
        failed, nonfinite = (t - i for t, i in zip(total, inner, strict=True))
        record = {"stage": name, "simulations": sum(self.simulations.values()) - spent,
                  "seconds": time.perf_counter() - start, "failed": failed, "nonfinite": nonfinite}
        self.records.append(record)
        if failed or nonfinite:
            kept = self.dropped.setdefault(name, {"failed": 0, "nonfinite": 0})
            kept["failed"] += failed
            kept["nonfinite"] += nonfinite
        if self.progress:
            dropped = f"   dropped {failed:,} failed, {nonfinite:,} non-finite" if failed or nonfinite else ""
            tqdm.write(f"  {name:<22} {record['simulations']:>10,.0f} data sets {record['seconds']:>8.1f} s"
                       f"{dropped}", file=sys.stderr)

    def note(self, text: str) -> None:
        if self.progress:
            tqdm.write(text, file=sys.stderr)
