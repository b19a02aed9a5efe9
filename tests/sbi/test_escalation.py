"""Escalation of a calibrated fit whose check did not pass: the steps, their order, the caps
(num_simulations, time_limit) and the accounting, on a real fit and on the step logic alone."""

import warnings

import pytest
import torch
from torch.distributions import Normal

from scorebayes.priors import independent
from scorebayes.sbi.budget import Ledger, plan_budget
from scorebayes.sbi.calibrated.escalation import Escalation, _cost

PRIOR_SD, N = 3.0, 50


class _Fit:
    """What the step logic reads of a fitted estimator: the plan, the spending, the ledger, the mode."""

    def __init__(self, total=None, spent=0.0, single=True, stage_seconds=None):
        self.plan_ = plan_budget(total, N, single=single, localize=False, fixed={"calibration": 300},
                                 calibrate=True)
        self.simulations_ = {"tables": float(spent)}
        self.ledger_ = Ledger(self.simulations_, False)
        for stage, seconds in (stage_seconds or {}).items():
            self.ledger_.records.append({"stage": stage, "seconds": seconds})
        self.view = type("View", (), {"single_observations": single})()


def test_the_steps_answer_a_failure_in_order_each_once():
    fit = _Fit()
    escalation = Escalation(started=0.0, time_limit=None)
    for verdict in ("pass", "warn"):
        assert escalation.next_step(fit, verdict) is None and escalation.stopped == verdict
    assert escalation.next_step(fit, "fail") == "calibration"
    escalation.steps.append({"step": "calibration"})
    assert escalation.next_step(fit, "fail") == "tables"
    escalation.steps.append({"step": "tables"})
    assert escalation.next_step(fit, "fail") is None and escalation.stopped == "steps taken"
    assert escalation.remedies() == ["a calibration round with twice the data sets", "a table round with twice the rows"]


def test_whole_data_set_modes_have_no_table_step():
    fit, escalation = _Fit(single=False), Escalation(started=0.0, time_limit=None)
    escalation.steps.append({"step": "calibration"})
    assert escalation.next_step(fit, "fail") is None and escalation.stopped == "steps taken"


def test_a_step_is_not_started_beyond_num_simulations():
    plan = _Fit(total=5000).plan_
    need = _cost(plan, "calibration")
    assert need == 2 * plan.calibration
    fits = _Fit(total=5000, spent=5000 - need), _Fit(total=5000, spent=5000 - need + 1)
    assert Escalation(started=0.0, time_limit=None).next_step(fits[0], "fail") == "calibration"
    stopped = Escalation(started=0.0, time_limit=None)
    assert stopped.next_step(fits[1], "fail") is None and stopped.stopped == "num_simulations"


def test_a_step_is_not_started_when_its_estimate_passes_the_time_limit():
    import time

    fit = _Fit(stage_seconds={"calibration 1": 4.0, "calibration 2": 5.0})  # a doubled round: ~10 s
    now = time.perf_counter()
    assert Escalation(started=now, time_limit=15.0).next_step(fit, "fail") == "calibration"
    late = Escalation(started=now - 6.0, time_limit=15.0)  # 6 s spent, 10 s expected
    assert late.next_step(fit, "fail") is None and late.stopped == "time_limit"


def _normal_simulator(theta, n, g):
    return theta[:, None, :] + torch.randn(len(theta), n, 1, generator=g, dtype=theta.dtype)


def _fit(simulator=_normal_simulator, **options):
    from scorebayes.sbi import ScoreLangevin, TrainingSchedule

    prior = independent([Normal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(PRIOR_SD, dtype=torch.float64))])
    x_obs = 0.8 + torch.randn(N, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    est = ScoreLangevin.from_options(prior, simulator, localize=False, table_size=2000, num_groups=100,
                                     group_size=50, schedule=TrainingSchedule(epochs=10, penalty_epochs=0, patience=10),
                                     mean_schedule=TrainingSchedule(epochs=10, penalty_epochs=0, batch_size=32),
                                     curvature_penalties=(0.0,), mean_penalties=(0.0,), progress=False, seed=0,
                                     **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior = est.fit(x_obs).sample(1000)
    return est, posterior, x_obs


@pytest.mark.parametrize("time_limit", [300.0, 0.0])
def test_a_failed_check_escalates_the_calibration_within_the_caps(monkeypatch, time_limit):
    """The fit's first check is made to fail (the real check's findings, verdict ``fail``); the
    first step then runs one calibration round of twice the data sets (2 x 60), counted in the
    simulations within num_simulations, named in the verdict's remedies, and checked again by
    the real check. A time limit of 0 starts no step."""
    calls = _failing_first_check(monkeypatch)
    budget = 3_000
    _, posterior, _ = _fit(calibration_size=60, num_simulations=budget, time_limit=time_limit)
    escalation = posterior.info["calibration"]["escalation"]
    check = posterior.info["check"]
    spent = posterior.info["simulations_by_stage"]
    assert posterior.info["simulations"] <= budget
    assert posterior.info["simulations"] == pytest.approx(sum(spent.values()))
    if time_limit == 0.0:
        assert escalation["steps"] == [] and escalation["stopped"] == "time_limit" and check["remedies"] == []
        return
    first = escalation["steps"][0]
    assert first["step"] == "calibration" and first["after"] == "fail"
    assert first["simulations"] == 120  # one round of twice the data sets (none failed)
    assert check["remedies"][0] == "a calibration round with twice the data sets"
    rounds = posterior.info["calibration"]["rounds"]
    doubled = [r["data_sets"] == 120 for r in rounds]  # the rounds after the step are of 120
    first_doubled = doubled.index(True)
    assert all(doubled[first_doubled:]) and not any(doubled[:first_doubled])
    assert spent["calibration"] == 60 * first_doubled + 120 * (len(rounds) - first_doubled)
    if len(escalation["steps"]) == 2:  # the re-check failed too: tables of twice the rows
        assert escalation["steps"][1]["step"] == "tables" and escalation["steps"][1]["after"] == "fail"
        last = max(int(k[7:] or 0) for k in spent if k.startswith("table_S"))
        assert spent[f"table_S{last}"] == 2 * spent["table_S"] and spent[f"table_R{last}"] == 2 * spent["table_R"]
    assert len(calls) >= 2  # checked again after the step


def _failing_first_check(monkeypatch):
    """The fit's first calibrated check says ``fail`` (its real findings kept); later ones are real."""
    from scorebayes.sbi.calibrated import posterior as calibrated_module
    from scorebayes.sbi.checks.verdict import FitCheck

    real, calls = calibrated_module.check_calibrated, []

    def first_fails(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(result.verdict)
        return FitCheck("fail", result.reasons, result.advice, result.remedies, result.details) if len(calls) == 1 else result

    monkeypatch.setattr(calibrated_module, "check_calibrated", first_fails)
    return calls


def test_an_escalation_step_whose_simulations_fail_keeps_the_posterior_before_it(monkeypatch):
    """The simulator returns NaN for every data set of the doubled calibration round (120 at a
    time), more than max_failure_fraction: the step is recorded with its error and a warning,
    the escalation stops, and the fit returns the posterior it had (nothing lost)."""
    _failing_first_check(monkeypatch)

    def breaks_on_the_doubled_round(theta, n, g):
        x = _normal_simulator(theta, n, g)
        return x.fill_(float("nan")) if len(theta) == 120 else x

    est, posterior, _ = _fit(breaks_on_the_doubled_round, calibration_size=60, num_simulations=3_000)
    escalation = posterior.info["calibration"]["escalation"]
    assert escalation["stopped"] == "simulator error" and len(escalation["steps"]) == 1
    step = escalation["steps"][0]
    assert step["step"] == "calibration" and "max_failure_fraction" in step["error"]
    assert posterior.info["check"]["remedies"] == []
    assert all(r["data_sets"] == 60 for r in posterior.info["calibration"]["rounds"])  # none of the failed round
    assert est.plan_.calibration == 60  # the plan as it was
    assert posterior.draws.shape[0] == 1000 and torch.isfinite(posterior.draws).all()


def test_a_stage_that_raises_is_recorded_with_what_it_spent_and_dropped():
    """A failed escalation step's simulations were spent: the ledger records its stage even
    though it raised, so the dropped counts by stage add up to the run's."""
    simulations, faults = {}, {"failed": 0, "nonfinite": 0}
    ledger = Ledger(simulations, False, faults=faults)
    with pytest.raises(RuntimeError), ledger.stage("calibration 3"):
        simulations["calibration"] = 120.0
        faults["nonfinite"] += 120
        raise RuntimeError("too many non-finite data sets")
    assert ledger.records[-1]["stage"] == "calibration 3" and ledger.records[-1]["simulations"] == 120
    assert ledger.dropped["calibration 3"] == {"failed": 0, "nonfinite": 120}
