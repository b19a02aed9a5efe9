"""Data-dependent supports (App. B.2): the weight-function and noise-smoothing paths recover
known scores for X ~ Uniform(0, theta), whose support depends on theta (theta >= max X)."""

import torch

from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_score_network

LOW, HIGH = 1.0, 4.0  # uniform table density for theta


def _table(num, m, seed):
    g = torch.Generator().manual_seed(seed)
    theta = LOW + (HIGH - LOW) * torch.rand(num, 1, generator=g)
    x = theta[:, None, :] * torch.rand(num, m, 1, generator=g)
    return theta, x


def box_weight(theta, x):
    """g = scaled distance to the admissible interval [max(LOW, max x), HIGH] (V.A7)."""
    lo = torch.clamp(x.amax(dim=(1, 2)), min=LOW)[:, None]
    return torch.minimum(theta - lo, HIGH - theta).clamp_min(0) / (HIGH - lo)


def test_weight_function_recovers_uniform_scale_score():
    """n-model with the weighted objective (eq. 19): sum_i s = -m / theta inside the support."""
    m = 10
    theta, x = _table(3000, m, seed=0)
    net = ScoreNet(1, 1, (32, 32), "elu")
    fit_score_network(net, theta, x, torch.zeros_like(theta), weight_fn=box_weight,
                      schedule=TrainingSchedule(epochs=150, batch_size=64, patience=40, lr=(3e-3, 1e-4)),
                      generator=torch.Generator().manual_seed(1))
    t_test, x_test = _table(400, m, seed=2)
    inside = (t_test[:, 0] > x_test.amax(dim=(1, 2)) + 0.3) & (t_test[:, 0] < HIGH - 0.3)
    with torch.no_grad():
        learned = net(t_test[:, None, :], x_test).sum(1)[inside, 0]
    true = -m / t_test[inside, 0]
    rel = float(((learned - true) ** 2).mean() / (true**2).mean())
    assert rel < 0.05, rel
    # without the weight function the same fit is badly wrong (the boundary term is ignored)
    naive = ScoreNet(1, 1, (32, 32), "elu")
    fit_score_network(naive, theta, x, torch.zeros_like(theta),
                      schedule=TrainingSchedule(epochs=150, batch_size=64, patience=40, lr=(3e-3, 1e-4)),
                      generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        bad = naive(t_test[:, None, :], x_test).sum(1)[inside, 0]
    assert float(((bad - true) ** 2).mean() / (true**2).mean()) > 4 * rel


def noisy_score(theta, x_tilde, sigma):
    """d/dtheta log p~(x~ | theta), p~ = (Phi(x~/s) - Phi((x~ - theta)/s)) / theta."""
    normal = torch.distributions.Normal(0.0, 1.0)
    mass = normal.cdf(x_tilde / sigma) - normal.cdf((x_tilde - theta) / sigma)
    return -1.0 / theta + normal.log_prob((x_tilde - theta) / sigma).exp() / sigma / mass


def test_noise_smoothing_recovers_the_noisy_score():
    """Single-observation ISM on X + N(0, s^2): the learned score matches the exact noisy score."""
    sigma = 0.25
    theta, x = _table(20000, 1, seed=3)
    g = torch.Generator().manual_seed(4)
    x_noisy = x + sigma * torch.randn(x.shape, generator=g)
    # the uniform table density is flat inside [LOW, HIGH] but not at its edges: use the logit
    # coordinate u with density of a logistic draw, as the pipeline does
    u = torch.logit((theta - LOW) / (HIGH - LOW))
    grad_log_p = -torch.tanh(u / 2)  # d/du log of the density of u = logit(U), U uniform
    net = ScoreNet(1, 1, (32, 32), "elu")
    fit_score_network(net, u, x_noisy, grad_log_p,
                      schedule=TrainingSchedule(epochs=60, batch_size=256, patience=20, lr=(3e-3, 1e-4)),
                      generator=torch.Generator().manual_seed(5))
    t_test, x_test = _table(2000, 1, seed=6)
    x_test = x_test + sigma * torch.randn(x_test.shape, generator=torch.Generator().manual_seed(7))
    u_test = torch.logit((t_test - LOW) / (HIGH - LOW))
    interior = (t_test[:, 0] > LOW + 0.3) & (t_test[:, 0] < HIGH - 0.3)
    with torch.no_grad():
        learned_u = net(u_test, x_test[:, 0])[interior, 0]
    jac = ((HIGH - LOW) * torch.sigmoid(u_test) * (1 - torch.sigmoid(u_test)))[interior, 0]
    true_u = noisy_score(t_test[interior, 0], x_test[interior, 0, 0], sigma) * jac
    rel = float(((learned_u - true_u) ** 2).mean() / (true_u**2).mean())
    assert rel < 0.1, rel
    # the noise matters: the noise-free score -1/theta is much further from the learned one
    plain_u = (-1.0 / t_test[interior, 0]) * jac
    assert float(((learned_u - plain_u) ** 2).mean() / (plain_u**2).mean()) > 2 * rel
