"""Robust bootstrap minimisation: runaway and non-finite replicates are frozen, flagged and excluded."""

import math
import re
import warnings

import pytest
import torch
from scipy import optimize

from scorebayes.discrete.calibrate import (
    CalibrationError, CalibrationWarning, beta_star, bootstrap_weights, calibrate_beta,
)
from scorebayes.discrete.minimisers import CONVERGED, ESCAPED, NON_FINITE, minimise
from scorebayes.parallel import derive_seed
from scorebayes.priors import ParameterSpace

D64 = torch.float64
C = 2.0  # strength of the unbounded term


class BarrierLoss:
    r"""A loss with the CMP's defect: :math:`D(\theta) = \sum_{i\le m} w_i(\theta-y_i)^2/2 - C w_z e^\theta`.

    Unbounded below as :math:`\theta\to\infty`; a local minimum exists iff
    :math:`h(\theta) = n_w(\theta-\bar y_w) - C w_z e^\theta` has a root (``n_w``, ``ybar_w``: weight and
    weighted mean of the quadratic rows), i.e. iff :math:`\log(n_w/(C w_z)) \ge \bar y_w + 1`;
    resamples that draw the last row ``z`` 3-4 times lose it.
    """

    has_closed_form = False

    def __init__(self, y, weights=None):
        self.y, self.weights = y, weights
        self.row_counts = torch.ones(y.numel() + 1, dtype=D64)
        self.n = y.numel() + 1

    def reweighted(self, weights):
        return BarrierLoss(self.y, weights)

    def __call__(self, theta):
        w = self.weights if self.weights is not None else self.row_counts.expand(theta.shape[0], -1)
        return 0.5 * (w[:, :-1] * (theta[:, :1] - self.y) ** 2).sum(-1) - C * w[:, -1] * torch.exp(theta[:, 0])


Y = torch.randn(20, generator=torch.Generator().manual_seed(0), dtype=D64)
PRIOR = torch.distributions.Independent(torch.distributions.Normal(torch.zeros(1, dtype=D64),
                                                                   torch.full((1,), 3.0, dtype=D64)), 1)


def local_minimiser(weights):
    """The basin's minimiser (smaller root of h) or None when the loss has no local minimum."""
    n_w, w_z = float(weights[:-1].sum()), float(weights[-1])
    ybar = float((weights[:-1] * Y).sum()) / n_w
    if w_z == 0:
        return ybar
    top = math.log(n_w / (C * w_z))  # argmax of h
    if top < ybar + 1:
        return None
    return optimize.brentq(lambda t: n_w * (t - ybar) - C * w_z * math.exp(t), ybar - 10, top, xtol=1e-14)


def test_newton_flags_runaway_replicates_and_leaves_the_others_unchanged():
    loss = BarrierLoss(Y)
    space = ParameterSpace(PRIOR)
    theta_full = minimise(loss, torch.zeros(1, 1, dtype=D64), space)
    weights = bootstrap_weights(loss.row_counts, range(40), 2)
    truth = [local_minimiser(w) for w in weights]
    runaway = [b for b, t in enumerate(truth) if t is None]
    assert len(runaway) == 2  # this seed: two resamples without a local minimum
    theta, status = minimise(loss.reweighted(weights), theta_full.expand(40, 1), space, max_step=1.0,
                             max_distance=5.0, return_status=True)
    assert torch.nonzero(status == ESCAPED).flatten().tolist() == runaway
    kept = [b for b in range(40) if b not in runaway]
    assert bool((status[kept] == CONVERGED).all())
    assert torch.allclose(theta[kept, 0], torch.tensor([truth[b] for b in kept], dtype=D64), rtol=0, atol=1e-8)
    # the same rows alone, without the trust region or the escape bound (the unmodified Newton)
    plain = minimise(loss.reweighted(weights[kept]), theta_full.expand(len(kept), 1), space)
    assert torch.allclose(theta[kept], plain, rtol=0, atol=1e-8)
    assert float((theta[runaway] - theta_full).abs().min()) > 5.0  # frozen just past the bound


def test_a_non_finite_row_is_frozen_not_fatal():
    def objective(theta):  # the gradient is NaN (0 * inf) at theta = 0, the start of row 0 only
        return ((theta - 2.0) ** 2).sum(-1) + 0 * theta[:, 0].abs().sqrt()

    space = ParameterSpace(PRIOR)
    start = torch.tensor([[0.0], [1.0], [-1.0]], dtype=D64)
    with pytest.raises(FloatingPointError, match=r"rows \[0\]"):
        minimise(objective, start, space)
    theta, status = minimise(objective, start, space, return_status=True)
    assert status.tolist() == [NON_FINITE, CONVERGED, CONVERGED]
    assert theta[0, 0] == 0 and torch.allclose(theta[1:], torch.full((2, 1), 2.0, dtype=D64), atol=1e-12)


def test_calibrate_beta_excludes_escaped_replicates():
    loss = BarrierLoss(Y)
    seed = 1
    weights = bootstrap_weights(loss.row_counts, range(40), derive_seed(seed, "bootstrap"))
    runaway = tuple(b for b, w in enumerate(weights) if local_minimiser(w) is None)
    assert len(runaway) == 2
    with pytest.warns(CalibrationWarning, match="2 of 40"):
        cal = calibrate_beta(loss, PRIOR, num_bootstrap=40, seed=seed, theta_init=torch.zeros(1))
    assert cal.escaped == runaway and cal.non_finite == () and cal.not_converged == ()
    kept = [b for b in range(40) if b not in runaway]
    beta, num, den = beta_star(loss, PRIOR, cal.bootstrap[kept])
    assert (cal.beta, cal.numerator, cal.denominator) == (beta, num, den) and 0.3 < beta < 2
    with pytest.raises(CalibrationError, match="2 of 40 bootstrap replicates left the basin"):
        calibrate_beta(loss, PRIOR, num_bootstrap=40, seed=seed, theta_init=torch.zeros(1), max_flagged=0.02)
    with pytest.raises(ValueError, match="max_distance"):
        calibrate_beta(loss, PRIOR, num_bootstrap=40, max_distance=0.0)
    with warnings.catch_warnings():  # a seed without runaways: no warning, all kept
        warnings.simplefilter("error")
        cal = calibrate_beta(loss, PRIOR, num_bootstrap=40, seed=0, theta_init=torch.zeros(1))
    assert cal.escaped == () and cal.bootstrap.shape == (40, 1)


def test_a_runaway_full_data_minimisation_warns_then_fails_clearly():
    loss = BarrierLoss(Y)  # from theta = 5 (past the barrier, h(5) < 0) Newton runs to infinity
    with pytest.warns(CalibrationWarning, match="full-data minimisation did not converge"), \
            pytest.raises(CalibrationError, match="40 of 40 bootstrap replicates left the basin"):
        calibrate_beta(loss, PRIOR, num_bootstrap=40, seed=0, theta_init=torch.full((1,), 5.0))


def _bayes(**options):
    """generalised_bayes on the barrier stub: seed 3 calibrates from a prior draw in the basin and its
    B = 20 resamples hold exactly one without a local minimum (replicate 13); a short MCMC from the minimiser."""
    from scorebayes.discrete import generalised_bayes

    return generalised_bayes(BarrierLoss(Y), PRIOR, num_bootstrap=20, seed=3, init_from="minimiser",
                             num_chains=2, num_samples=20, burn_in=20, thin=1, **options)


def test_generalised_bayes_passes_the_robust_options_to_the_calibration():
    cal_seed = derive_seed(3, "calibrate")
    weights = bootstrap_weights(BarrierLoss(Y).row_counts, range(20), derive_seed(cal_seed, "bootstrap"))
    assert [b for b, w in enumerate(weights) if local_minimiser(w) is None] == [13]
    with pytest.warns(CalibrationWarning, match="1 of 20"):  # default max_flagged = 0.1
        post = _bayes()
    cal = post.info["calibration"]
    boot, full = torch.tensor(cal["bootstrap"], dtype=D64), torch.tensor(cal["minimiser"], dtype=D64)
    assert cal["escaped"] == [13] and 20 < float((boot[13] - full).abs().max()) <= 21  # default max_step = 1
    with pytest.warns(CalibrationWarning, match="1 of 20"):
        post = _bayes(max_distance=5.0, max_step=0.25)
    boot = torch.tensor(post.info["calibration"]["bootstrap"], dtype=D64)
    assert post.info["calibration"]["escaped"] == [13] and 5 < float((boot[13] - full).abs().max()) <= 5.25
    with pytest.raises(CalibrationError, match="1 of 20 bootstrap replicates left the basin"):
        _bayes(max_flagged=0.0)


class _Untouchable(BarrierLoss):
    def __call__(self, theta):
        raise AssertionError("the loss was evaluated")


@pytest.mark.parametrize("option, value, message", [
    ("max_flagged", 1.5, "max_flagged must be a fraction in [0, 1)"),
    ("max_flagged", -0.1, "max_flagged must be a fraction in [0, 1)"),
    ("max_flagged", math.nan, "max_flagged must be a fraction in [0, 1)"),
    ("max_distance", -1.0, "max_distance must be positive"),
    ("max_distance", math.nan, "max_distance must be positive"),
    ("max_step", 0.0, "max_step must be positive"),
    ("max_step", "1", "max_step must be positive"),
])
@pytest.mark.parametrize("beta", [None, 1.0])
def test_generalised_bayes_rejects_bad_robust_options_before_any_work(option, value, message, beta):
    from scorebayes.discrete import generalised_bayes

    with pytest.raises(ValueError, match=re.escape(message)):
        generalised_bayes(_Untouchable(Y), PRIOR, beta=beta, num_chains=2, **{option: value})
