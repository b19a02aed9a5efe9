r"""How well the default fit learns one observation's score (``scorebayes bench score-error``).

For each suite model with a per-observation density (:meth:`log_likelihood`), one default fit
(``ScoreLangevin(prior, simulator).fit(x_obs)``, rep 0) and, at the exact posterior mean
:math:`\hat u` (unconstrained coordinates), ``M`` fresh observations :math:`x_k \sim p(\cdot\mid\hat\theta)`.
With :math:`e_k = \hat s(\hat u; x_k) - s(\hat u; x_k)` the learned (debiased, single-observation)
score minus the exact one and :math:`I_j = \mathrm{Var}\,s_j` the Fisher information per
coordinate, it reports per parameter :math:`j`:

- ``rel_rms``: :math:`\mathrm{sd}(e_j)/\sqrt{I_j}`. Summed over ``n`` observations the error's
  random part moves the posterior mean by about this many posterior SDs (a one-coordinate
  approximation: the posterior SD is about :math:`1/\sqrt{n I_j}`), whatever ``n``;
- ``bias_sd``: :math:`\sqrt n\,\bar e_j/\sqrt{I_j}`, the systematic part in posterior SDs (its
  Monte Carlo SD is ``rel_rms`` :math:`\sqrt{n/M}`);
- ``observed_sd``: the summed error on the observed data, :math:`\sum_i e_j(x_i)/\sqrt{n I_j}`.

The posterior mean can be within 0.3 posterior SD only if these are well below 0.3.

    scorebayes bench score-error [--models student_t,lognormal] [--preset paper] [--draws 1000]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import torch
from _suite_common import model_names, observed

from scorebayes import ScoreLangevin
from scorebayes.models.suite import SUITE

#: the suite models whose per-observation log-density is available (quadrature models)
WITH_DENSITY = ("student_t", "lognormal", "kumaraswamy", "negative_binomial")


def exact_scores(model, space, u: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``[M, d]``: :math:`\\nabla_u \\log p(x_k \\mid T(u))` for each row ``x [M, p]``."""
    rows = []
    for k in range(len(x)):
        leaf = u.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(model.log_likelihood(space.to_constrained(leaf), x[k : k + 1]).sum(), leaf)
        rows.append(grad[0])
    return torch.stack(rows)


def run_one(name: str, preset: str, draws: int) -> dict:
    model = SUITE[name]()
    x_obs = observed(model, 0)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ScoreLangevin(model.prior, model.simulator, seed=0, progress=False, preset=preset).fit(x_obs)
    seconds = time.perf_counter() - start
    mean, _ = model.exact_moments(x_obs)
    theta = mean.to(torch.float64)[None]
    u = est.space.to_unconstrained(theta)
    x = model.simulator(theta, draws, torch.Generator().manual_seed(123))[0]
    exact = exact_scores(model, est.space, u, x)
    with torch.no_grad():
        learned = torch.stack([est.likelihood_(u, x[k : k + 1])[0] for k in range(draws)])
        learned_obs = est.likelihood_(u)[0]
    error, info, n = learned - exact, exact.var(0), model.n_obs
    observed_error = (learned_obs - exact_scores(model, est.space, u, x_obs).sum(0)) / (n * info).sqrt()
    return {"model": name, "preset": preset, "fit_seconds": round(seconds, 1),
            "parameters": model.parameter_names,
            "rel_rms": (error.std(0) / info.sqrt()).tolist(),
            "bias_sd": (math.sqrt(n) * error.mean(0) / info.sqrt()).tolist(),
            "bias_mc_sd": (error.std(0) / info.sqrt() * math.sqrt(n / draws)).tolist(),
            "observed_sd": observed_error.tolist()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(WITH_DENSITY))
    parser.add_argument("--preset", default="default", choices=("default", "paper"))
    parser.add_argument("--draws", type=int, default=1000, help="fresh observations M")
    args = parser.parse_args(argv)
    names = model_names(parser, args.models)
    missing = sorted(set(names) - set(WITH_DENSITY))
    if missing:
        parser.error(f"no per-observation density for {missing}; choose from {list(WITH_DENSITY)}")
    print("| model | preset | parameter | rel. RMS error | bias / SD (MC SD) | on the observed data / SD |")
    print("|---|---|---|---|---|---|")
    for name in names:
        row = run_one(name, args.preset, args.draws)
        for j, p in enumerate(row["parameters"]):
            print(f"| {name} | {args.preset} | {p} | {row['rel_rms'][j]:.2f} | {row['bias_sd'][j]:+.2f} "
                  f"({row['bias_mc_sd'][j]:.2f}) | {row['observed_sd'][j]:+.2f} |", flush=True)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
