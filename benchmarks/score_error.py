r"""How well the default fit learns one observation's score (``scorebayes bench score-error``).

For each suite model, one default fit (``ScoreLangevin(prior, simulator).fit(x_obs)``, rep 0)
and, at the exact posterior mean :math:`\hat u` (unconstrained coordinates; g-and-k: its
reference MCMC's mean), ``M`` fresh observations :math:`x_k \sim p(\cdot\mid\hat\theta)`.
The exact score :math:`s(\hat u; x_k)` is the autograd gradient in :math:`u` of the
per-observation log density: the model's :meth:`log_likelihood` (quadrature models) or
`LOG_DENSITY` below (conjugate models; g-and-k through ``gk_log_density``, whose autograd
gradient is the implicit-function one and agrees with central finite differences).
With :math:`e_k = \hat s(\hat u; x_k) - s(\hat u; x_k)` the learned (debiased,
single-observation) score minus the exact one and :math:`I_j = \mathrm{Var}\,s_j` the Fisher
information per coordinate, it reports per parameter :math:`j`:

- ``rel_rms``: :math:`\mathrm{sd}(e_j)/\sqrt{I_j}`. Summed over ``n`` observations the error's
  random part moves the posterior mean by about this many posterior SDs (a one-coordinate
  approximation: the posterior SD is about :math:`1/\sqrt{n I_j}`), whatever ``n``;
- ``bias_sd``: :math:`\sqrt n\,\bar e_j/\sqrt{I_j}`, the systematic part in posterior SDs (its
  Monte Carlo SD is ``rel_rms`` :math:`\sqrt{n/M}`);
- ``observed_sd``: the summed error on the observed data, :math:`\sum_i e_j(x_i)/\sqrt{n I_j}`.

The posterior mean can be within 0.3 posterior SD only if these are well below 0.3.
``--models`` defaults to the whole suite (``SUITE``).
``--raw-view`` fits with the networks seeing the data as before the normal-score view
(``normal_scores.HEAVY_TAIL = inf``: no column is transformed); each row records ``raw_view``.

    scorebayes bench score-error [--models student_t,lognormal] [--preset paper] [--draws 1000]
                                 [--raw-view]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import torch
from _suite_common import model_names, observed
from torch.distributions import Normal, Poisson

from scorebayes import ScoreLangevin
from scorebayes.models.suite import SUITE
from scorebayes.models.suite.gandk import gk_log_density
from scorebayes.scores import normal_scores

#: ``log p(x | theta)`` summed, ``theta [1, d]`` (constrained), ``x [1, p]``, for the suite models
#: without :meth:`log_likelihood`
LOG_DENSITY = {
    "gaussian_mean": lambda m, t, x: Normal(t, m.sigma).log_prob(x).sum(),
    "exponential_rate": lambda m, t, x: (t.log() - t * x).sum(),
    "poisson_rate": lambda m, t, x: Poisson(t).log_prob(x).sum(),
    # rows (x1..x4, y): N(0, 1) covariates (free of theta), y ~ N(design . theta, sigma^2)
    "linear_regression5": lambda m, t, x: (
        Normal(0.0, 1.0).log_prob(x[:, :4]).sum()
        + Normal((m.design(x[:, :4]) * t).sum(-1), m.sigma).log_prob(x[:, 4]).sum()),
    "gandk": lambda m, t, x: gk_log_density(x[:, :1], t)[0].sum(),
}


def log_density(name: str, model, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``log p(x | theta)`` summed over the rows of ``x``, differentiable in ``theta``."""
    if hasattr(model, "log_likelihood"):
        return model.log_likelihood(theta, x).sum()
    return LOG_DENSITY[name](model, theta, x)


def exact_scores(name: str, model, space, u: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``[M, d]``: :math:`\\nabla_u \\log p(x_k \\mid T(u))` for each row ``x [M, p]``."""
    rows = []
    for k in range(len(x)):
        leaf = u.clone().requires_grad_(True)
        log_p = log_density(name, model, space.to_constrained(leaf), x[k : k + 1])
        (grad,) = torch.autograd.grad(log_p, leaf)
        rows.append(grad[0])
    return torch.stack(rows)


def run_one(name: str, preset: str, draws: int, raw_view: bool) -> dict:
    model = SUITE[name]()
    x_obs = observed(model, 0)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ScoreLangevin(model.prior, model.simulator, seed=0, progress=False,
                            preset=preset).fit(x_obs)
    seconds = time.perf_counter() - start
    mean, _ = model.exact_moments(x_obs)
    theta = mean.to(torch.float64)[None]
    u = est.space.to_unconstrained(theta)
    x = model.simulator(theta, draws, torch.Generator().manual_seed(123))[0]
    exact = exact_scores(name, model, est.space, u, x)
    with torch.no_grad():
        learned = torch.stack([est.likelihood_(u, x[k : k + 1])[0] for k in range(draws)])
        learned_obs = est.likelihood_(u)[0]
    error, info, n = learned - exact, exact.var(0), model.n_obs
    exact_obs = exact_scores(name, model, est.space, u, x_obs).sum(0)
    observed_error = (learned_obs - exact_obs) / (n * info).sqrt()
    return {"model": name, "preset": preset, "raw_view": raw_view,
            "fit_seconds": round(seconds, 1),
            "parameters": model.parameter_names,
            "rel_rms": (error.std(0) / info.sqrt()).tolist(),
            "bias_sd": (math.sqrt(n) * error.mean(0) / info.sqrt()).tolist(),
            "bias_mc_sd": (error.std(0) / info.sqrt() * math.sqrt(n / draws)).tolist(),
            "observed_sd": observed_error.tolist()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(SUITE))
    parser.add_argument("--preset", default="default", choices=("default", "paper"))
    parser.add_argument("--draws", type=int, default=1000, help="fresh observations M")
    parser.add_argument("--raw-view", action="store_true",
                        help="networks see the raw data (no normal-score view of heavy tails)")
    args = parser.parse_args(argv)
    names = model_names(parser, args.models)
    if args.raw_view:  # read by normal_scores._heavy_tailed at fit time: no column is heavy-tailed
        normal_scores.HEAVY_TAIL = math.inf
    view = "raw" if args.raw_view else "normal scores"
    print("| model | preset | view | parameter | rel. RMS error | bias / SD (MC SD) "
          "| on the observed data / SD |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        row = run_one(name, args.preset, args.draws, args.raw_view)
        for j, p in enumerate(row["parameters"]):
            print(f"| {name} | {args.preset} | {view} | {p} | {row['rel_rms'][j]:.2f} "
                  f"| {row['bias_sd'][j]:+.2f} ({row['bias_mc_sd'][j]:.2f}) "
                  f"| {row['observed_sd'][j]:+.2f} |", flush=True)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
