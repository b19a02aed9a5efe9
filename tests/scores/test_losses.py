"""Unit tests of the score-matching losses against known scores (METHODS.md I.3, I.6)."""

import math

import torch
from torch import nn

from scorebayes.scores.losses import (
    curvature_penalty,
    evaluate_score,
    implicit_score_matching,
    weighted_score_matching,
    weight_and_diagonal_gradient,
)
from scorebayes.scores.networks import MeanNet, ScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_mean_network, fit_score_network


class LinearScore(nn.Module):
    """s(theta, x) = A (x - theta) + B theta + c: a family containing the true score (A=I, B=0, c=0)."""

    def __init__(self, A, B, c):
        super().__init__()
        self.A, self.B, self.c = A, B, c

    def forward(self, theta, x):
        theta, x = torch.broadcast_tensors(theta, x)
        return (x - theta) @ self.A.T + theta @ self.B.T + self.c


def _gaussian_table(num, m, d=2, prior_sd=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    theta = prior_sd * torch.randn(num, d, generator=g, dtype=torch.float64)
    x = theta[:, None, :] + torch.randn(num, m, d, generator=g, dtype=torch.float64)
    grad_log_prior = -theta / prior_sd**2
    return theta, x, grad_log_prior


def test_implicit_loss_equals_fisher_divergence_up_to_a_constant():
    """ISM(phi) - 1/2 E||s_phi - s*||^2 is the same constant -1/2 E||s*||^2 for every phi (Theorem 1)."""
    theta, x, grad = _gaussian_table(200_000, 1)
    true_score = (x - theta[:, None, :]).sum(1)
    g = torch.Generator().manual_seed(1)
    offsets = []
    for k in range(4):
        A = torch.eye(2, dtype=torch.float64) + (0.5 * torch.randn(2, 2, generator=g, dtype=torch.float64) if k else 0)
        B = 0.3 * torch.randn(2, 2, generator=g, dtype=torch.float64) if k else torch.zeros(2, 2, dtype=torch.float64)
        c = 0.5 * torch.randn(2, generator=g, dtype=torch.float64) if k else torch.zeros(2, dtype=torch.float64)
        ev = evaluate_score(LinearScore(A, B, c), theta, x, create_graph=False)
        ism = implicit_score_matching(ev.total, ev.jacobian, grad)
        explicit = 0.5 * ((ev.total - true_score) ** 2).sum(-1)
        diff = (ism - explicit).detach()
        offsets.append((float(diff.mean()), float(diff.std() / math.sqrt(len(diff)))))
    expected = -0.5 * float((true_score**2).sum(-1).mean())  # -1/2 E||s*||^2 = -1 for d = 2
    for mean, se in offsets:
        assert abs(mean - expected) < 5 * se + 1e-9, (mean, expected, se)
    # and the loss really distinguishes the true score from the others
    assert abs(expected + 1.0) < 0.02


def test_weighted_loss_equals_weighted_fisher_divergence_up_to_a_constant():
    """Eq. 19 with a smooth weight g(theta) vanishing nowhere harmful: same constant for every phi."""
    theta, x, grad = _gaussian_table(200_000, 1, seed=3)
    true_score = (x - theta[:, None, :]).sum(1)

    def weight(t, xx):
        return 1.0 / (1.0 + t**2)

    g, dg = weight_and_diagonal_gradient(weight, theta, x)
    gen = torch.Generator().manual_seed(2)
    diffs = []
    for k in range(3):
        A = torch.eye(2, dtype=torch.float64) + (0.4 * torch.randn(2, 2, generator=gen, dtype=torch.float64) if k else 0)
        c = 0.3 * torch.randn(2, generator=gen, dtype=torch.float64) if k else torch.zeros(2, dtype=torch.float64)
        ev = evaluate_score(LinearScore(A, torch.zeros(2, 2, dtype=torch.float64), c), theta, x, create_graph=False)
        loss = weighted_score_matching(ev.total, ev.jacobian, grad, g, dg)
        explicit = 0.5 * (((ev.total - true_score) ** 2) * g).sum(-1)
        d = (loss - explicit).detach()
        diffs.append((float(d.mean()), float(d.std() / math.sqrt(len(d)))))
    base = diffs[0][0]
    for mean, se in diffs[1:]:
        assert abs(mean - base) < 5 * (se + diffs[0][1])


def test_curvature_penalty_vanishes_for_the_true_score_only():
    theta, x, _ = _gaussian_table(4, 100_000, seed=4)
    true = LinearScore(torch.eye(2, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    ev = evaluate_score(true, theta, x, create_graph=False)
    pen_true = curvature_penalty(ev.per_observation, ev.jacobian)
    # MC error of the 2x2 average of s s^T - I with m = 1e5: entries ~ sqrt(2/m) -> penalty ~ 4 * 2/m
    assert (pen_true < 50 * 4 * 2 / 100_000).all()
    wrong = LinearScore(2 * torch.eye(2, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    ev = evaluate_score(wrong, theta, x, create_graph=False)
    pen_wrong = curvature_penalty(ev.per_observation, ev.jacobian)
    # E[4 (x-t)(x-t)^T - 2 I] = 2 I -> ||.||_F^2 = 8
    assert torch.allclose(pen_wrong, torch.full_like(pen_wrong, 8.0), rtol=0.05)


def test_debiasing_reduces_full_data_error():
    """A score with a theta-dependent mean bias: s = s* + b(theta). Fitting h on D^R group means
    and using sum_i (s - h) must cut the n-observation error (the n(n-1)||E s||^2 term)."""
    torch.manual_seed(0)
    bias = lambda t: 0.3 * torch.sin(t) + 0.1  # noqa: E731

    class Biased(nn.Module):
        def forward(self, theta, x):
            theta, x = torch.broadcast_tensors(theta, x)
            return (x - theta) + bias(theta)

    net = Biased()
    theta_r, x_r, _ = _gaussian_table(400, 1000, d=2, seed=5)
    s_bar = net(theta_r[:, None, :], x_r).mean(1).float()
    h = MeanNet(2, (32, 32))
    fit_mean_network(h, theta_r.float(), s_bar, schedule=TrainingSchedule(epochs=300, batch_size=32, patience=50, lr=(3e-3, 1e-4)),
                     generator=torch.Generator().manual_seed(0))
    n = 100
    theta, x, _ = _gaussian_table(200, n, d=2, seed=6)
    true_total = (x - theta[:, None, :]).sum(1)
    raw = net(theta[:, None, :], x).sum(1)
    with torch.no_grad():
        debiased = raw - n * h(theta.float()).double()
    err_raw = ((raw - true_total) ** 2).sum(-1).mean()
    err_debiased = ((debiased - true_total) ** 2).sum(-1).mean()
    # residual ~ n^2 E||h - b||^2, limited by the noise of the group means (2/m per row): ~ 20 here
    assert err_debiased < 0.1 * err_raw, (float(err_raw), float(err_debiased))


def test_score_net_learns_gaussian_score_and_sum_matches_forward():
    theta, x, grad = _gaussian_table(4000, 1, seed=7)
    net = ScoreNet(2, 2, (32, 32))
    fit_score_network(net, theta.float(), x.float(), grad.float(),
                      schedule=TrainingSchedule(epochs=40, batch_size=128, patience=40, lr=(3e-3, 1e-4)),
                      generator=torch.Generator().manual_seed(0))
    test_theta, test_x, _ = _gaussian_table(500, 1, prior_sd=1.0, seed=8)
    with torch.no_grad():
        pred = net(test_theta.float(), test_x[:, 0].float())
    true = (test_x[:, 0] - test_theta).float()
    rel = ((pred - true) ** 2).sum(-1).mean() / (true**2).sum(-1).mean()
    assert rel < 0.05, float(rel)
    # the chain-batched drift equals the plain per-observation sum
    chains = torch.randn(7, 2)
    data = torch.randn(30, 2)
    with torch.no_grad():
        fast = net.sum_over_observations(chains, data, max_elements=200)
        slow = net(chains[:, None, :], data[None]).sum(1)
    assert torch.allclose(fast, slow, atol=1e-4)
