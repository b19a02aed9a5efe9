r"""Exact likelihood of the M/G/1 queue (no noise smoothing), by sequential importance sampling.

With departure times $D_k = x_1 + \dots + x_k$ known ($D_0 = 0$), the service time of
customer $k$ is $u_k = D_k - \max(a_k, D_{k-1})$, with $a_k$ its arrival time.
$u_k \in [\theta_1, \theta_2]$ holds exactly when $x_k \ge \theta_1$ and

$$
a_k \in I_k = [L_k, R_k], \qquad R_k = D_k - \theta_1, \qquad
L_k = \begin{cases} D_k - \theta_2 & x_k > \theta_2 \\ -\infty & x_k \le \theta_2 \end{cases}
$$

(customer $k$ either arrived while $k-1$ was served, so $u_k = x_k$, or arrived
later). Given the arrivals, $u \mapsto x$ is a shift, so one observation's density is

$$
p(x \mid \theta) = (\theta_2 - \theta_1)^{-p}\,
\mathbb P\big(a_k \in I_k,\ k = 1..p\big)\,\mathbf 1\{\min_k x_k \ge \theta_1\},
$$

with $a$ a Poisson process of rate $\theta_3$ ($a_k = a_{k-1} + w_k$,
$w_k \sim \mathrm{Exp}(\theta_3)$, $a_0 = 0$). The probability is computed by sequential
importance sampling with the locally optimal proposal: $w_k$ is drawn from
$\mathrm{Exp}(\theta_3)$ truncated to $[l, h] = [\max(L_k - a_{k-1}, 0), R_k - a_{k-1}]$,
and the particle's weight is multiplied by
$\mathbb P(w_k \in [l, h]) = e^{-\theta_3 l} - e^{-\theta_3 h}$. The estimate of
$p(x \mid \theta)$ is unbiased (exact for $p = 1$); its log is summed over the
$n$ i.i.d. observations.

This is the truth the n-model targets (its weight function handles the support
$\theta_1 \le \min x$ exactly); importance sampling turns it into reference
posteriors.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5.1, App. C.1)
    - Shestopaloff & Neal, On Bayesian inference for the M/G/1 queue with efficient MCMC
      sampling, 2014 (the same interval constraints on the arrivals, used there in MCMC).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..posterior import Posterior
from .mg1 import PRIOR_BOX

#: degrees of freedom of the importance proposal (a multivariate t)
T_DEGREES = 5

__all__ = ["log_likelihood", "log_likelihood_per_observation", "reference_posterior"]


def log_likelihood_per_observation(phi: Tensor, x: Tensor, *, particles: int = 256,
                                   generator: torch.Generator | None = None,
                                   uniforms: Tensor | None = None) -> Tensor:
    r"""Estimates of $\log p(x_i \mid \phi)$ for every parameter and observation.

    Args:
        phi: ``[B, 3]`` internal parameters $(\theta_1, \theta_2 - \theta_1, \theta_3)$.
        x: ``[n, p]`` inter-departure times (each row a queue that starts empty).
        particles: importance-sampling draws per observation (the estimate's relative variance
            falls as ``1 / particles``).
        generator: for the draws.
        uniforms: optional ``[p, n, particles]`` uniforms in ``[0, 1)`` used for every parameter
            (common random numbers): the estimate is then a deterministic, continuous function of
            ``phi``, which an optimiser can search. ``particles`` is then ``uniforms.shape[-1]``.

    Returns:
        ``[B, n]`` float64, ``-inf`` where the density is 0 (``theta1 > min_k x_ik``, a width or
        rate that is not positive).
    """
    if uniforms is not None:
        particles = uniforms.shape[-1]
        if uniforms.shape != (x.shape[-1], x.shape[0], particles):
            raise ValueError(f"uniforms must be [p, n, particles] = [{x.shape[-1]}, {x.shape[0]}, M], "
                             f"got {tuple(uniforms.shape)}")
    phi, x = _check(phi, x, particles)
    theta1, width, rate = (phi[:, k, None, None] for k in range(3))  # [B, 1, 1]
    B, (n, p) = phi.shape[0], x.shape
    D = torch.cumsum(x, dim=-1)[None, :, :, None]  # [1, n, p, 1]
    xs = x[None, :, :, None]
    arrival = torch.zeros(B, n, particles, dtype=torch.float64)
    log_w = torch.zeros(B, n, particles, dtype=torch.float64)
    minus_inf = torch.tensor(-math.inf, dtype=torch.float64)
    for k in range(p):
        upper = D[:, :, k] - theta1  # R_k [B, n, 1]
        lower = torch.where(xs[:, :, k] > theta1 + width, D[:, :, k] - theta1 - width, minus_inf)
        low = torch.clamp(lower - arrival, min=0.0)  # l >= 0: arrivals are ordered
        gap = upper - arrival - low  # h - l
        ok = gap > 0
        mass = -torch.expm1(-rate * torch.where(ok, gap, torch.ones_like(gap)))  # 1 - e^{-rate (h-l)}
        log_w = log_w + torch.where(ok, -rate * low + torch.log(mass), minus_inf)
        u = (torch.rand(B, n, particles, dtype=torch.float64, generator=generator) if uniforms is None
             else uniforms[k].expand(B, n, particles))
        step = low - torch.log1p(-u * mass) / rate
        arrival = arrival + torch.where(ok, step, torch.zeros_like(step))
    log_p = torch.logsumexp(log_w, dim=-1) - math.log(particles) - p * torch.log(width[:, :, 0])
    valid = (x[None].amin(dim=-1) >= theta1[:, :, 0]) & (width[:, :, 0] > 0) & (rate[:, :, 0] > 0)
    return torch.where(valid, log_p, minus_inf)


def log_likelihood(phi: Tensor, x: Tensor, *, particles: int = 256, generator: torch.Generator | None = None,
                   batch: int = 8, uniforms: Tensor | None = None) -> Tensor:
    r"""Estimate of $\sum_i \log p(x_i \mid \phi)$, ``[B]``, computed ``batch`` parameters at
    a time (memory ``batch * n * particles`` doubles per tensor). See
    `log_likelihood_per_observation()`."""
    phi, x = _check(phi, x, particles)
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    return torch.cat([log_likelihood_per_observation(chunk, x, particles=particles, generator=generator,
                                                     uniforms=uniforms).sum(-1)
                      for chunk in phi.split(batch)])


def reference_posterior(x: Tensor, *, draws: int = 10_000, rounds: int = 3, particles: int = 256,
                        seed: int = 0, box=PRIOR_BOX, progress: bool = False) -> Posterior:
    r"""The exact posterior of $\theta$ given M/G/1 data ``x [n, p]`` under the uniform prior
    ``box`` on $\phi$, by adaptive importance sampling with the likelihood estimate above.

    Coordinates $\psi = (\log(m - \theta_1), \log(\theta_2 - \theta_1), \log \theta_3)$,
    $m = \min x$, make the support $\theta_1 \le m$ (the posterior's mode sits on it)
    an unbounded direction; the target is $\log p(x \mid \phi) + \sum_k \psi_k$ (the
    Jacobian) inside the box.

    1. Locate: a grid over the box (widths 0.5-9.5, rates 0.025-0.475, three distances to ``m``),
       then Nelder-Mead, both on the estimate with common random numbers (a deterministic,
       continuous function of $\psi$).
    2. Proposal: a multivariate t (5 degrees of freedom) at the mode, covariance
       $1.5^2 H^{-1}$ from finite differences of the same function (steps of 0.02, then half
       the SDs those imply).
    3. ``rounds`` of ``draws`` importance draws with fresh likelihood estimates (unbiased in the
       likelihood, so self-normalised importance sampling stays consistent); after each round the
       t is refitted to the weighted draws (covariance inflated by $1.2^2$). The last round is
       returned as weighted draws of $\theta = (\theta_1, \theta_2, \theta_3)$;
       ``info["ess"]`` has each round's effective sample size (Kish). Every random number comes
       from ``seed``, none from torch's global generator.

    Cost: ``(rounds * draws + about 700)`` likelihood estimates of ``n * p * particles`` particle
    steps each (about 25-40 ms for n = 500, p = 5, 256 particles on one core: 3-4 min a round of
    4,000 draws).
    """
    from scipy.optimize import minimize
    from tqdm.auto import tqdm
    import pyro.distributions as pd

    x = torch.as_tensor(x, dtype=torch.float64)
    _check(torch.zeros(1, 3), x, particles)
    if draws < 100 or rounds < 1:
        raise ValueError(f"need draws >= 100 and rounds >= 1, got draws={draws}, rounds={rounds}")
    (lo1, hi1), (lo2, hi2), (lo3, hi3) = box
    m = min(float(x.min()), hi1)
    g = torch.Generator().manual_seed(seed)

    def to_phi(psi: Tensor) -> Tensor:
        return torch.stack([m - psi[:, 0].exp(), psi[:, 1].exp(), psi[:, 2].exp()], dim=-1)

    def log_target(psi: Tensor, uniforms=None, generator=None) -> Tensor:
        phi = to_phi(psi)
        inside = ((phi[:, 0] >= lo1) & (phi[:, 1] >= lo2) & (phi[:, 1] <= hi2)
                  & (phi[:, 2] >= lo3) & (phi[:, 2] <= hi3))
        value = torch.full((len(psi),), -math.inf, dtype=torch.float64)
        if inside.any():
            value[inside] = (log_likelihood(phi[inside], x, particles=particles, generator=generator,
                                            uniforms=uniforms, batch=4) + psi[inside].sum(-1))
        return value

    crn = torch.rand(x.shape[1], x.shape[0], 64, dtype=torch.float64, generator=g)
    grid = torch.cartesian_prod(torch.log(torch.tensor([0.003, 0.03, 0.3]) * max(m, 1e-3)),
                                torch.log(lo2 + (hi2 - lo2) * (torch.arange(10) + 0.5) / 10),
                                torch.log(lo3 + (hi3 - lo3) * (torch.arange(10) + 0.5) / 10)).double()
    start = grid[log_target(grid, uniforms=crn).argmax()]

    def objective(v):
        return -float(log_target(torch.as_tensor(v, dtype=torch.float64)[None], uniforms=crn)[0])

    mode = torch.as_tensor(minimize(objective, start.numpy(), method="Nelder-Mead",
                                    options={"xatol": 1e-4, "fatol": 1e-3, "maxiter": 600}).x)

    def hessian(step: Tensor) -> Tensor:
        """Central finite differences of the common-random-numbers target at the mode."""
        eye = torch.diag(step)
        f0 = -objective(mode)
        out = torch.zeros(3, 3, dtype=torch.float64)
        for i in range(3):
            fp, fm = log_target(torch.stack([mode + 2 * eye[i], mode - 2 * eye[i]]), uniforms=crn).tolist()
            out[i, i] = (fp + fm - 2 * f0) / (4 * step[i] ** 2)
            for j in range(i + 1, 3):
                pts = torch.stack([mode + eye[i] + eye[j], mode + eye[i] - eye[j], mode - eye[i] + eye[j],
                                   mode - eye[i] - eye[j]])
                fpp, fpm, fmp, fmm = log_target(pts, uniforms=crn).tolist()
                out[i, j] = out[j, i] = (fpp - fpm - fmp + fmm) / (4 * step[i] * step[j])
        return _positive_definite(-out, floor=1e-3)  # a saddle direction gets a wide (not infinite) spread

    # steps of 0.02 in psi, then half the SDs that implies (some are 0.002: theta2 is pinned by jumps)
    step = torch.full((3,), 0.02, dtype=torch.float64)
    cov = hessian(step)
    cov = hessian(torch.minimum(step, 0.5 * torch.linalg.inv(cov).diagonal().sqrt()))
    loc, cov = mode, 1.5 ** 2 * torch.linalg.inv(cov)
    ess = []
    for _ in tqdm(range(rounds), desc="mg1 exact posterior", disable=not progress):
        scale_tril = torch.linalg.cholesky(cov)
        proposal = pd.MultivariateStudentT(torch.tensor(float(T_DEGREES), dtype=torch.float64), loc, scale_tril)
        psi = _student_t_draws(loc, scale_tril, draws, g)
        log_w = log_target(psi, generator=g) - proposal.log_prob(psi)
        if not torch.isfinite(log_w).any():
            raise RuntimeError("every importance draw fell outside the support; the located mode "
                               f"{to_phi(mode[None])[0].tolist()} (phi) is not in the posterior's bulk")
        w = torch.softmax(log_w, dim=0)
        ess.append(float(1.0 / (w ** 2).sum()))
        loc = (w[:, None] * psi).sum(0)
        centred = psi - loc
        cov = 1.2 ** 2 * _positive_definite((w[:, None, None] * centred[:, :, None] * centred[:, None, :]).sum(0))
    phi = to_phi(psi)
    theta = torch.stack([phi[:, 0], phi[:, 0] + phi[:, 1], phi[:, 2]], dim=-1)
    return Posterior(theta, ["theta1", "theta2", "theta3"], weights=w.numpy(),
                     info={"ess": ess, "mode_psi": mode.tolist(), "min_x": m, "particles": particles})


def _student_t_draws(loc: Tensor, scale_tril: Tensor, num: int, generator: torch.Generator) -> Tensor:
    r"""``num`` draws ``[num, d]`` of the multivariate t with ``T_DEGREES`` (an integer) degrees of
    freedom, $\mathrm{loc} + L z \sqrt{\nu / \chi^2_\nu}$ with $z \sim N(0, I)$ and
    $\chi^2_\nu$ a sum of $\nu$ squared normals, all from ``generator``: the same
    ``seed`` gives the same posterior whatever the global random state (``Distribution.sample``
    draws from the global one)."""
    z = torch.randn(num, len(loc), dtype=torch.float64, generator=generator)
    chi2 = torch.randn(num, T_DEGREES, dtype=torch.float64, generator=generator).pow(2).sum(-1)
    return loc + (z @ scale_tril.T) * (T_DEGREES / chi2).sqrt()[:, None]


def _positive_definite(matrix: Tensor, floor: float = 1e-8) -> Tensor:
    """Symmetric ``matrix`` with its eigenvalues raised to at least ``floor`` times the largest."""
    values, vectors = torch.linalg.eigh(0.5 * (matrix + matrix.T))
    values = values.clamp(min=floor * values.abs().max().clamp(min=1e-300))
    return vectors @ torch.diag(values) @ vectors.T


def _check(phi: Tensor, x: Tensor, particles: int) -> tuple[Tensor, Tensor]:
    phi = torch.as_tensor(phi, dtype=torch.float64)
    x = torch.as_tensor(x, dtype=torch.float64)
    if phi.dim() != 2 or phi.shape[-1] != 3:
        raise ValueError(f"phi must be [B, 3] (theta1, theta2 - theta1, theta3), got shape {tuple(phi.shape)}")
    if x.dim() != 2 or x.shape[-1] < 1:
        raise ValueError(f"x must be [n, p] inter-departure times, got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all() or (x < 0).any():
        raise ValueError("x must be finite and non-negative (inter-departure times)")
    if particles < 1:
        raise ValueError(f"particles must be >= 1, got {particles}")
    return phi, x
