"""End-to-end exactness of score-based Langevin SBI against analytic posteriors (issue 2).

Single-model (Algorithm 3: curvature penalty + debiasing) and n-model (Algorithm 2) on
conjugate models: a 2-d Gaussian mean, a positive rate with a Gamma prior (exercises the
log bijection) and a linear regression with iid (x, y) rows. Criterion: posterior mean within
0.3 posterior sd and sd within 25% of the truth, per coordinate.
"""

import pytest

from scorebayes.models import get_model
from scorebayes.parallel import make_generator
from scorebayes.sbi import ScoreLangevin
from scorebayes.scores.training import TrainingSchedule

SINGLE = dict(mode="single", table_size=6000, num_groups=1000, group_size=100,
              schedule=TrainingSchedule(epochs=40, penalty_epochs=10, patience=10),
              curvature_penalties=(0.0, 1e-3), mean_penalties=(0.0, 1e-3))
N_MODEL = dict(mode="n", table_size=400,
               schedule=TrainingSchedule(epochs=60, penalty_epochs=10, batch_size=16, patience=15),
               curvature_penalties=(0.0, 1e-2))

CASES = {
    "gaussian_mean-single": ("gaussian_mean", 100, {**SINGLE, "mean_schedule": TrainingSchedule(
        epochs=80, penalty_epochs=10, batch_size=16, patience=20)}),
    "exponential_rate-single": ("exponential_rate", 40, {**SINGLE, "mean_schedule": TrainingSchedule(
        epochs=60, penalty_epochs=10, batch_size=32, patience=15)}),
    "gaussian_mean-n": ("gaussian_mean", 40, N_MODEL),
    "exponential_rate-n": ("exponential_rate", 40, N_MODEL),
    # the slope's score is a product of data and parameter: a harder function to learn,
    # so larger tables (seeds 3, 4, 5 checked: |z| <= 0.23, sd ratio <= 1.13)
    "linear_regression-single": ("linear_regression", 100, {
        **SINGLE, "table_size": 40_000, "num_groups": 4000,
        "schedule": TrainingSchedule(epochs=150, penalty_epochs=20, patience=20, lr=(3e-3, 1e-4)),
        "mean_schedule": TrainingSchedule(epochs=60, penalty_epochs=10, batch_size=32, patience=15)}),
    "linear_regression-n": ("linear_regression", 40, {
        **N_MODEL, "table_size": 2000,
        "schedule": TrainingSchedule(epochs=300, penalty_epochs=20, batch_size=16, patience=40,
                                     lr=(3e-3, 1e-4))}),
}


def check_against_exact(name, n, settings):
    model = get_model(name)
    model.n_obs = n
    x_obs = model.observed(make_generator(11, name))
    estimator = ScoreLangevin.from_options(model.prior, model.simulator, seed=3, progress=False,
                              localization={"replicates": 30, "iterations": 150}, **settings)
    posterior = estimator.fit(x_obs).sample(2000)
    exact = model.posterior_distribution(x_obs)
    mean, sd = exact.mean.reshape(-1), exact.variance.sqrt().reshape(-1)
    z = (posterior.mean() - mean) / sd
    ratio = posterior.sd() / sd
    assert (z.abs() < 0.3).all(), f"{name}: mean error {z.tolist()} posterior sds"
    assert ((ratio - 1).abs() < 0.25).all(), f"{name}: sd ratio {ratio.tolist()}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_posterior_matches_analytic(case):
    check_against_exact(*CASES[case])

