"""Robust bootstrap minimisation: runaway and non-finite replicates are frozen, flagged and excluded."""

import math
import warnings

import pytest
import torch
from scipy import optimize

from scorebayes.discrete.calibrate import (
    CONVERGED, ESCAPED, NON_FINITE, CalibrationError, CalibrationWarning, beta_star, bootstrap_weights,
    calibrate_beta, minimise,
)
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
