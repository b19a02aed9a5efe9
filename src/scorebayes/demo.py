"""``scorebayes demo``: a small example end to end (the main job of ``make demo``).

A linear regression with i.i.d. rows ``(x_i, y_i)``, ``y = a + b x + N(0, 0.5^2)``,
``n = 100`` and normal priors: simulate the data, localize, learn the likelihood score
(single-observation score matching + curvature penalty + debiasing), calibrate it as a
summary on simulated data sets of the observed size (the default posterior for i.i.d. data), and
compare with the exact Gaussian posterior. Writes the standard outputs
(``summary.json``, ``samples.csv``, ``pairplot.png``, ``posterior.nc``) to ``out``.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from .apps import AppResult
from .apps.outputs import write_outputs
from .models import get_model
from .parallel import make_generator
from .sbi import ScoreLangevin
from .scores.training import TrainingSchedule

__all__ = ["run_demo"]


def run_demo(out: Path, *, seed: int = 0, progress: bool = True) -> dict:
    """Run the demo and write its outputs to ``out``; returns the summary dict."""
    # one thread: on an idle 2-core machine 2 threads save 5% (79 s against 83 s), but with
    # another job on the second core they made each epoch 20-50x slower
    torch.set_num_threads(1)
    model = get_model("linear_regression")
    x_obs = model.observed(make_generator(seed, "observed"))
    start = time.perf_counter()
    estimator = ScoreLangevin.from_options(
        model.prior, model.simulator, mode="single", seed=seed, progress=progress,
        parameter_names=model.parameter_names, table_size=40_000, num_groups=4000,
        localization={"replicates": 50, "iterations": 200},
        schedule=TrainingSchedule(epochs=150, penalty_epochs=20, patience=20, lr=(3e-3, 1e-4)),
        mean_schedule=TrainingSchedule(epochs=60, penalty_epochs=10, batch_size=32, patience=15),
        curvature_penalties=(0.0, 1e-3), mean_penalties=(0.0, 1e-3),
    )
    estimator.fit(x_obs)
    posterior = estimator.sample(2000)
    seconds = time.perf_counter() - start
    truth = model.true_parameters.tolist()
    summary = write_outputs(AppResult(posterior, {"simulations": posterior.info["simulations"]}, truth),
                            out, method="score-langevin", seed=seed, seconds=seconds)
    exact = model.posterior_distribution(x_obs)
    print(f"Linear regression y = a + b x + noise, n = {len(x_obs)}: score-based Langevin SBI "
          f"in {seconds:.0f} s, {posterior.info['simulations']:.0f} simulated data sets")
    print(posterior.format_summary(truth=truth))
    exact_sd = exact.variance.sqrt()
    print("exact posterior:  mean " + ", ".join(f"{v:.4g}" for v in exact.mean.tolist())
          + "   sd " + ", ".join(f"{v:.3g}" for v in exact_sd.tolist()))
    z = (posterior.mean() - exact.mean) / exact_sd
    print("error in exact posterior sds: " + ", ".join(f"{v:+.2f}" for v in z.tolist())
          + "   sd ratio: " + ", ".join(f"{v:.2f}" for v in (posterior.sd() / exact_sd).tolist()))
    print(f"outputs in {out}/ (summary.json, samples.csv, pairplot.png)")
    return summary
