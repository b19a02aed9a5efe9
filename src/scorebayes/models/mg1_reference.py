r"""Reference score of the noise-smoothed M/G/1 likelihood, by sequential Monte Carlo.

The single-model of Sec. 5.1 learns the score of the *smoothed* model (App. B.2, solution 2)

$$
\tilde x = T(\phi; U, w) + \varepsilon, \qquad \varepsilon \sim \mathcal N(0, \sigma_\varepsilon^2 I_p),
$$

with $\phi = (\theta_1, \theta_2 - \theta_1, \theta_3)$, service times
$\theta_1 + (\theta_2 - \theta_1) U_k$, $U_k \sim U(0,1)$, and inter-arrival times
$w_k \sim \mathrm{Exp}(\theta_3)$ (see `scorebayes.models.mg1`). Its per-observation
score has no closed form; Fisher's identity gives it as a posterior expectation over the latents,

$$
\nabla_\phi \log \tilde p(\tilde x \mid \phi) = \mathbb E\Big[\sum_{k=1}^p
\frac{\tilde x_k - T_k}{\sigma_\varepsilon^2}\,\nabla_{(\theta_1, \theta_2-\theta_1)} T_k
+ \Big(\frac1{\theta_3} - w_k\Big) e_3 \;\Big|\; \tilde x\Big],
$$

($U$ has a $\phi$-free density, so $\theta_1$ and the width enter through
$T$; $\theta_3$ enters through the density of $w$, which keeps that component's
variance low). The expectation is computed by a bootstrap particle filter over the $p$
customers (Lindley recursion), each particle carrying its gradient sum along its ancestry;
the filter's normalising constants give $\log \tilde p(\tilde x \mid \phi)$.

This is a diagnostic truth for the learned single-model score:
its variance at $\phi^*$ is the Fisher information of the smoothed model, i.e. the
posterior widths the single-model can reach at best.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5.1, App. B.2, C.1)
    - Poyiadjis, Doucet & Singh, Particle approximations of the score and observed information
      matrix in state space models, Biometrika 2011 (Fisher's identity in a particle filter).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["SmoothedScore", "smoothed_score"]


class SmoothedScore(NamedTuple):
    score: Tensor  # [n, 3] per-observation score in phi = (theta1, theta2 - theta1, theta3)
    log_likelihood: Tensor  # [n] particle estimate of log p~(x~_i | phi) (unbiased in p~, not in log)


def smoothed_score(phi: Tensor, x_tilde: Tensor, *, noise_sd: float = 0.25, particles: int = 4000,
                   generator: torch.Generator | None = None, max_elements: int = 2**22) -> SmoothedScore:
    r"""Particle estimate of $\nabla_\phi \log \tilde p(\tilde x_i \mid \phi)$ for each observation.

    Arguments:
        phi: internal parameter $(\theta_1, \theta_2 - \theta_1, \theta_3)$, ``[3]``, or one
            per observation, ``[n, 3]`` (e.g. a reference table's rows).
        x_tilde: smoothed observations ``[n, p]`` (``p`` customers each).
        noise_sd: $\sigma_\varepsilon$ of the smoothing noise.
        particles: particles per observation (the estimate's Monte Carlo SD falls like
            ``1/sqrt(particles)``; at $\phi^*$, 64,000 give about a fifth of the score's SD).
        generator: random numbers of the filter.
        max_elements: observations are filtered in chunks of at most this many particles.

    Returns:
        `SmoothedScore` with ``score [n, 3]`` and ``log_likelihood [n]`` (float64).
    """
    phi = torch.as_tensor(phi, dtype=torch.float64)
    x_tilde = torch.as_tensor(x_tilde, dtype=torch.float64)
    if x_tilde.ndim != 2 or x_tilde.shape[0] < 1:
        raise ValueError(f"x_tilde must be [n, p], got {tuple(x_tilde.shape)}")
    if phi.shape not in ((3,), (len(x_tilde), 3)):
        raise ValueError(f"phi must be [3] = (theta1, theta2 - theta1, theta3) or [n, 3] with n = "
                         f"{len(x_tilde)}, got {tuple(phi.shape)}")
    phi = phi.expand(len(x_tilde), 3)
    if not bool((phi[:, 1] > 0).all() and (phi[:, 2] > 0).all()):
        raise ValueError("the service width and the arrival rate must be positive")
    if not noise_sd > 0 or particles < 2:
        raise ValueError(f"need noise_sd > 0 and particles >= 2, got {noise_sd}, {particles}")
    chunk = max(1, max_elements // particles)
    parts = [_filter(phi[a:a + chunk], x_tilde[a:a + chunk], noise_sd, particles, generator)
             for a in range(0, len(x_tilde), chunk)]
    return SmoothedScore(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))


def _filter(phi: Tensor, xt: Tensor, sd: float, M: int, g: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """Bootstrap filter over the customers of ``xt [n, p]`` at ``phi [n, 3]``; resamples after every customer."""
    n, p = xt.shape
    theta1, width, rate = (phi[:, k, None] for k in range(3))  # [n, 1] each
    f64 = torch.float64
    departure = torch.zeros(n, M, dtype=f64)  # D_{k-1}
    arrival = torch.zeros(n, M, dtype=f64)  # A_k
    d_departure = torch.zeros(n, M, 2, dtype=f64)  # dD/d(theta1, width) at fixed U, w
    grad = torch.zeros(n, M, 3, dtype=f64)  # Fisher-identity sum along each particle's path
    log_lik = torch.zeros(n, dtype=f64)
    log_norm = math.log(sd * math.sqrt(2 * math.pi))
    for k in range(p):
        U = torch.rand(n, M, generator=g, dtype=f64)
        w = -torch.log1p(-torch.rand(n, M, generator=g, dtype=f64)) / rate
        arrival = arrival + w
        idle = arrival > departure
        gap = torch.where(idle, arrival - departure, torch.zeros_like(arrival))
        T = theta1 + width * U + gap  # inter-departure time x_k
        # dT/d(theta1, width): the service term, minus dD_{k-1} when the server waited (A_k fixed)
        d_T = torch.stack([torch.ones_like(U), U], dim=-1) - idle[..., None] * d_departure
        resid = (xt[:, k, None] - T) / sd
        grad = grad + torch.cat([(resid / sd)[..., None] * d_T, (1.0 / rate - w)[..., None]], dim=-1)
        log_w = -0.5 * resid**2 - log_norm
        log_lik = log_lik + torch.logsumexp(log_w, 1) - math.log(M)
        idx = torch.multinomial(torch.softmax(log_w, 1), M, replacement=True, generator=g)
        departure = (departure + T).gather(1, idx)
        arrival = arrival.gather(1, idx)
        d_departure = (d_departure + d_T).gather(1, idx[..., None].expand(-1, -1, 2))
        grad = grad.gather(1, idx[..., None].expand(-1, -1, 3))
    return grad.mean(1), log_lik
