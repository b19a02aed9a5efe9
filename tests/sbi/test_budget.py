"""The simulation budget's plan (scorebayes.sbi.budget): every stage within num_simulations."""

import pytest

from scorebayes.sbi.budget import DEFAULT_PLAN, plan_budget


@pytest.mark.parametrize("total", [700, 1000, 3400, 10_000, 50_000])
@pytest.mark.parametrize("n", [50, 200, 1000])
@pytest.mark.parametrize("single", [True, False])
def test_the_plan_spends_at_most_the_budget_and_nearly_all_of_it(total, n, single):
    plan = plan_budget(total, n, single=single, localize=True, fixed={})
    costs = plan.costs()
    assert plan.planned() <= total + 1e-9
    assert plan.planned() >= 0.95 * total or plan.localization["iterations"] == 300  # a capped stage
    assert plan.reserve == (costs["reserve"] > 0)
    if plan.reserve:  # the reserve holds a second round and its check
        assert costs["reserve"] == pytest.approx(plan.round_cost() + plan.check)


def test_without_a_budget_the_default_plan_is_used_and_costed_in_data_sets_of_size_n():
    plan = plan_budget(None, 200, single=True, localize=True, fixed={})
    assert (plan.single_rows, plan.num_groups, plan.group_size) == (DEFAULT_PLAN["single_rows"], 500, 200)
    costs = plan.costs()
    assert costs["localization"] == 20 * 100  # replicates x iterations x m / n, m = n
    assert costs["table_S"] == 80_000 / 200 and costs["table_R"] == 500
    assert costs["reserve"] == 400 + 500 + 200


def test_explicit_sizes_are_kept_and_the_rest_scaled():
    plan = plan_budget(2000, 100, single=True, localize=True, fixed={"num_groups": 300, "replicates": 10})
    assert plan.num_groups == 300 and plan.localization["replicates"] == 10
    assert plan.planned() <= 2000 + 1e-9


def test_a_budget_too_small_for_the_reserve_is_planned_without_it():
    plan = plan_budget(600, 200, single=True, localize=True, fixed={})
    assert not plan.reserve and plan.costs()["reserve"] == 0 and plan.planned() <= 600


def test_a_budget_too_small_for_the_floors_is_refused_before_any_work():
    with pytest.raises(ValueError, match="num_simulations = 300 data sets of n = 200 is too small"):
        plan_budget(300, 200, single=True, localize=True, fixed={})
    with pytest.raises(ValueError, match="positive number"):
        plan_budget(-5, 200, single=True, localize=True, fixed={})
