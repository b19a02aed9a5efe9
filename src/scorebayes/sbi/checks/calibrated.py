r"""The verdict on a calibrated posterior ([`scorebayes.sbi.calibrated`][scorebayes.sbi.calibrated]).

The calibration data sets have known parameters, so the posterior can be checked without the
exact one: on the held-back data sets, the standardised errors $z$ of the local
simulation-based calibration ([`held_out_coverage()`][scorebayes.sbi.calibrated.coverage.held_out_coverage])
have mean 0 and SD 1 when the synthetic likelihood describes the summary. With $H$ data sets:

- **bias**: $|\bar z_j|$ beyond 0.3 (warn) or 0.5 (fail) posterior SDs, by more than 2 or 3
  standard errors $1/\sqrt H$;
- **scale**: the posterior's SD is $1/\mathrm{sd}(z_j)$ times the right one; beyond 25% (warn)
  or 40% (fail), by 2 or 3 standard errors $1/\sqrt{2H}$ of its log;
- **fit**: the observed summary's standardised distance from the synthetic likelihood's mean at
  the posterior mean, against the 99.9% quantile of $\chi^2_d$ (beyond: the model does not
  simulate data like the observed ones near the posterior, warn);
- **rounds**: the last round's estimate still moved more than 0.3 (warn) or 1 (fail) SDs;
- **information**: the eigenvalues of the learned score's slope against its spread
  ([`information_ratio()`][scorebayes.sbi.calibrated.stage.information_ratio]) beyond a factor 1.5
  (warn) or 3 (fail) from 1. The exact score has ratio 1 (the information identity); a learned
  one far from it is unlikely to be an efficient summary, and the calibrated posterior then
  tends to be wider than the exact one and off-centre by about as much.
- **sharpening**: the last table round (a network trained closer to the posterior, a sharper
  summary) still moved the mean more than 0.3 SDs or narrowed an SD below 0.8 of the previous
  one (warn): the summary may not be efficient yet;
- **proposal**: draws beyond 3 SDs of the last round's proposal (the synthetic likelihood
  extrapolates there);
- **chains**: R-hat and effective draws, as in [`check_fit()`][scorebayes.sbi.checks.verdict.check_fit].

The other checks say whether the posterior is right *given the summary*. A summary that loses
information gives a calibrated posterior that is honest but wider than the exact one, which
only the information check sees, and only where the loss shows in the identity.

References:
    - Validating Bayesian Inference Algorithms with Simulation-Based Calibration
      (Talts, Betancourt, Simpson, Vehtari, Gelman, 2018)
"""

from __future__ import annotations

import math
from typing import Any

from scipy.stats import chi2
from torch import Tensor

from ...posterior import Posterior
from .verdict import BIAS_LIMITS, SCALE_LIMITS, TABLE_LIMITS, VERDICTS, Findings, FitCheck, chain_findings, grade

__all__ = ["check_calibrated"]

#: (warn, fail) limits on how far the last round's estimate moved, in posterior SDs
MOVE_LIMITS = (0.3, 1.0)
#: (warn, fail) limits on |log| of the information ratios
INFORMATION_LIMITS = (math.log(1.5), math.log(3.0))
MIN_HELD_OUT = 20


def check_calibrated(report: Any, posterior: Posterior, u_draws: Tensor, *,
                     remedies: list[str] | None = None) -> FitCheck:
    """The verdict (module docstring) from a [`CalibrationReport`][scorebayes.sbi.calibrated.stage.CalibrationReport]
    and the calibrated ``posterior`` (its draws in ``u``: ``u_draws [S, d]``)."""
    found = Findings()
    names = posterior.names
    coverage = report.coverage
    held = int(coverage.get("num_data_sets", 0))
    details: dict[str, Any] = {"held_out": held, "coverage_90": coverage.get("coverage_90"),
                               "observed_distance": report.observed_distance, "rounds": len(report.rounds)}
    advice = "more simulations (num_simulations), or a larger calibration_size"
    if held < MIN_HELD_OUT:
        found.add(1, f"only {held} held-back data sets could be checked")
    else:
        z_mean, z_sd = coverage["z_mean"], coverage["z_sd"]
        details["bias_sd"] = list(z_mean)
        details["sd_ratio"] = [1 / s if s > 0 else math.inf for s in z_sd]
        se_bias, se_log = 1 / math.sqrt(held), 1 / math.sqrt(2 * held)
        for j, name in enumerate(names):
            b, s = float(z_mean[j]), float(z_sd[j])
            found.add(grade(abs(b) - BIAS_LIMITS[0] - 2 * se_bias, abs(b) - BIAS_LIMITS[1] - 3 * se_bias),
                      f"on held-back data sets the posterior of {name} is off by {b:+.2f} SDs", advice)
            log_r = abs(math.log(s)) if s > 0 and math.isfinite(s) else math.inf
            found.add(grade(log_r - SCALE_LIMITS[0] - 2 * se_log, log_r - SCALE_LIMITS[1] - 3 * se_log),
                      f"on held-back data sets the posterior SD of {name} looks {1 / s:.2f} times the "
                      "right one", advice)
    d = u_draws.shape[-1]
    limit = float(chi2.ppf(0.999, d))
    if report.observed_distance > limit:
        found.add(1, f"the observed data's summary lies {math.sqrt(report.observed_distance):.1f} "
                     "standard units from what the model simulates near the posterior (misspecified?)")
    moved = report.rounds[-1]["moved"] if len(report.rounds) > 1 else math.inf
    details["moved"] = moved
    found.add(grade(moved - MOVE_LIMITS[0], moved - MOVE_LIMITS[1]),
              f"the calibration rounds had not settled: the last one moved the estimate {moved:.2f} SDs",
              advice)
    low, high = report.information_ratio
    details["information_ratio"] = [low, high]
    worst = max(abs(math.log(low)), abs(math.log(high))) if low > 0 and high > 0 else math.inf
    found.add(grade(worst - INFORMATION_LIMITS[0], worst - INFORMATION_LIMITS[1]),
              f"the learned score's slope and spread disagree (information ratios {low:.2f}-{high:.2f}, "
              "1 for the exact score): the summary may lose information, and the posterior be too wide "
              "and off-centre", "more simulations (num_simulations), or preset='paper'")
    # reported, not graded: the summary with the statistics may be efficient (statistics that are
    # sufficient, as a regression's cross-products) or not, and a large gain does not say which
    details["projection_gain"] = report.projection_gain[-1] if report.projection_gain else None
    # reported, not graded: how far the paper's summed-score posterior (Laplace) lies from this one
    summed = report.summed_score
    details["summed_score_distance"] = None if summed is None else summed["distance_sd"]
    details["table_rounds"] = report.table_rounds
    if report.still_sharpening():
        last = report.sharpening[-1]
        found.add(1, f"the last of {report.table_rounds} table rounds still moved the posterior "
                     f"{last['moved']:.2f} SDs and narrowed it to {last['sd_ratio']:.2f} of its SD: the "
                     "summary may not be efficient yet, and the posterior too wide and off-centre", advice)
    center, sd = report.proposal
    outside = float((((u_draws - center) / sd).abs() > 3).any(-1).double().mean())
    details["table_outside"] = outside
    found.add(grade(outside - TABLE_LIMITS[0], outside - TABLE_LIMITS[1]),
              f"{outside:.1%} of the draws lie beyond 3 SDs of the last calibration round's proposal", advice)
    chain_findings(found, posterior, details)
    return FitCheck(VERDICTS[found.level], found.reasons, found.advice, list(remedies or []), details)
