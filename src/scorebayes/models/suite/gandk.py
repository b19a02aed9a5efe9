r"""The g-and-k distribution: a quantile function with no closed-form density.

With $\theta = (A, B, g, k)$, $B > 0$, $k \ge 0$ and $c = 0.8$,

$$
Q(z; \theta) = A + B\,\Big(1 + c \tanh\frac{g z}{2}\Big)\, z\, (1 + z^2)^k,
\qquad X = Q(Z; \theta),\ Z \sim \mathcal N(0, 1),
$$

is the quantile function at level $\Phi(z)$. The density has no closed form; it is

$$
f(x; \theta) = \frac{\varphi(z)}{Q'(z; \theta)}, \qquad Q(z; \theta) = x,
$$

with $Q'(z) = B (1 + z^2)^{k-1} \big[(1 + c t)(1 + (2k+1) z^2)
+ \tfrac{c g}{2} (1 - t^2)\, z (1 + z^2)\big]$, $t = \tanh(g z / 2)$, and $z(x)$
found numerically (`gk_inverse()`: vectorised Newton steps on
$\operatorname{asinh}((Q - A)/B)$, safeguarded by bisection). `gk_log_density()` is
differentiable in $\theta$ through one final Newton step (whose derivative at the root is
the implicit-function derivative $-\partial_\theta Q / Q'$).

The suite's model (`GAndK`) has a uniform prior on $[0, 10]^4$, ``n = 200`` and the
truth $(3, 1, 2, 0.5)$; its exact posterior comes from long MCMC on this numerical
likelihood (`scorebayes.models.suite.gandk_reference`).

References:
    - Rayner and MacGillivray, Numerical maximum likelihood estimation for the g-and-k and
      generalized g-and-h distributions, Statistics and Computing, 2002.
    - Prangle, gk: An R package for the g-and-k and generalised g-and-h distributions, 2017
      (<https://arxiv.org/abs/1706.06889>).
    - Drovandi and Pettitt, Likelihood-free Bayesian estimation of multivariate quantile
      distributions, Computational Statistics & Data Analysis, 2011 (octile summaries).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "C_SKEW",
    "Z_LIMIT",
    "gk_cdf",
    "gk_inverse",
    "gk_log_density",
    "gk_log_qprime",
    "gk_quantile",
    "octile_summaries",
    "sample_quantiles",
]

#: the overall asymmetry constant :math:`c` (0.8 by convention)
C_SKEW = 0.8
#: :math:`z` is searched in :math:`[-L, L]`; data beyond :math:`Q(\pm L)` get :math:`z = \pm L`
Z_LIMIT = 40.0


def _split(theta: Tensor, like: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``theta [B, 4]`` into four ``[B, 1, ...]`` columns broadcasting against ``like [B, n]``."""
    shape = (theta.shape[0],) + (1,) * (like.dim() - 1)
    return tuple(theta[:, j].reshape(shape) for j in range(4))  # type: ignore[return-value]


def gk_quantile(z: Tensor, theta: Tensor) -> Tensor:
    r"""$Q(z; \theta)$ for ``z [B, ...]`` and ``theta [B, 4]`` (differentiable in both)."""
    A, B, g, k = _split(theta, z)
    return A + B * (1 + C_SKEW * torch.tanh(0.5 * g * z)) * z * torch.exp(k * torch.log1p(z * z))


def gk_log_qprime(z: Tensor, theta: Tensor) -> Tensor:
    r"""$\log Q'(z; \theta)$ for ``z [B, ...]``, ``theta [B, 4]`` ($B > 0, k \ge 0$)."""
    _, B, g, k = _split(theta, z)
    t = torch.tanh(0.5 * g * z)
    z2 = z * z
    inner = ((1 + C_SKEW * t) * (1 + (2 * k + 1) * z2)
             + 0.5 * C_SKEW * g * (1 - t * t) * z * (1 + z2))
    return torch.log(B) + (k - 1) * torch.log1p(z2) + torch.log(inner)


def _h(z: Tensor, g: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
    r"""$h(z) = \operatorname{asinh}((Q(z) - A)/B)$ and $h'(z)$ (increasing in z)."""
    z2 = z * z
    power = torch.exp(k * torch.log1p(z2))
    t = torch.tanh(0.5 * g * z)
    u = (1 + C_SKEW * t) * z * power
    inner = ((1 + C_SKEW * t) * (1 + (2 * k + 1) * z2)
             + 0.5 * C_SKEW * g * (1 - t * t) * z * (1 + z2))
    return torch.asinh(u), power * inner / ((1 + z2) * torch.sqrt(1 + u * u))


@torch.no_grad()
def gk_inverse(x: Tensor, theta: Tensor, z0: Tensor | None = None, *, tol: float = 1e-12,
               max_iter: int = 200) -> Tensor:
    r"""Solve $Q(z; \theta_b) = x_{b,i}$ for ``z [B, n]`` (``x [B, n]``, ``theta [B, 4]``).

    Newton steps on $h(z) = \operatorname{asinh}((Q(z) - A)/B)$, which is increasing and
    close to linear in $z$ near 0 and in $\log|z|$ in the tails, safeguarded as in
    Numerical Recipes' ``rtsafe``: a step that leaves the current bracket $[lo, hi]$
    ($h(lo) \le h(x) \le h(hi)$), or that does not halve the previous one, is replaced by
    bisection. An entry stops once its Newton step is below ``tol`` times $1 + |z|$; the
    entries still running are compacted whenever they fall below half of those iterated.

    Arguments:
        x: data ``[B, n]``.
        theta: parameters ``[B, 4]`` with $B > 0$ and $k \ge 0$.
        z0: optional warm start ``[B, n]`` (e.g. the roots at a nearby parameter).

    Returns:
        ``z [B, n]`` in $[-L, L]$ (`Z_LIMIT`).
    """
    x = torch.as_tensor(x, dtype=torch.float64)
    theta = torch.as_tensor(theta, dtype=torch.float64)
    A, B, g, k = (c.expand_as(x).reshape(-1) for c in _split(theta, x))
    target = torch.asinh((x.reshape(-1) - A) / B)
    out = torch.zeros_like(target) if z0 is None else z0.reshape(-1).clamp(-Z_LIMIT, Z_LIMIT)
    out = out.clone()
    idx = torch.arange(out.numel())
    z, lo, hi = out, torch.full_like(out, -Z_LIMIT), torch.full_like(out, Z_LIMIT)
    last = hi - lo  # the step before the last (rtsafe's test for slow progress)
    finished = torch.zeros_like(out, dtype=torch.bool)
    for _ in range(max_iter):
        h, dh = _h(z, g, k)
        r = h - target
        lo = torch.where(r <= 0, z, lo)
        hi = torch.where(r >= 0, z, hi)
        newton = z - r / dh
        scale = tol * (1 + z.abs())
        finished = finished | ((newton - z).abs() <= scale) | (hi - lo <= scale)
        slow = (2 * r).abs() > (last * dh).abs()
        bad = ~((newton > lo) & (newton < hi)) | ~torch.isfinite(newton) | slow
        new = torch.where(bad, 0.5 * (lo + hi), newton)
        new = torch.where(finished, torch.where(torch.isfinite(newton), newton, z), new)
        last = (new - z).abs()
        z = new
        running = ~finished
        left = int(running.sum())
        if left == 0:
            break
        if left < 0.5 * z.numel():
            out[idx] = z
            idx, z, lo, hi, last, g, k, target = (
                t[running] for t in (idx, z, lo, hi, last, g, k, target))
            finished = finished[running]
    out[idx] = z
    return out.reshape(x.shape)


def gk_log_density(x: Tensor, theta: Tensor, z0: Tensor | None = None) -> tuple[Tensor, Tensor]:
    r"""Log density $\log f(x_{b,i}; \theta_b)$ ``[B, n]`` and the roots ``z [B, n]``.

    Differentiable in ``theta``: the root is refined by one Newton step on $Q(z) - x$ with
    gradients on, whose derivative is $-\partial_\theta Q / Q'$ (the implicit derivative).
    Data outside $Q([-L, L])$ get the density at $z = \pm L$ (negligible).
    """
    z = gk_inverse(x, theta, z0)
    if theta.requires_grad:
        q = gk_quantile(z, theta)
        refined = z - (q - x) / torch.exp(gk_log_qprime(z, theta))
        z = torch.where(z.abs() < Z_LIMIT, refined, z)  # a clamped root is not a root
    log_f = -0.5 * z * z - 0.5 * math.log(2 * math.pi) - gk_log_qprime(z, theta)
    return log_f, z.detach()


def gk_cdf(x: Tensor, theta: Tensor) -> Tensor:
    r"""Distribution function $F(x; \theta) = \Phi(z(x))$, ``x [B, n]``, ``theta [B, 4]``."""
    z = gk_inverse(x, theta)
    return torch.special.ndtr(z)


def sample_quantiles(x: Tensor, q: Tensor) -> Tensor:
    r"""Sample quantiles ``[B, m]`` of the rows of ``x [B, n]`` at levels ``q [m]``.

    Linear interpolation between order statistics (``torch.quantile``'s default), by sorting,
    so that any batch size works (``torch.quantile`` refuses inputs over $2^{24}$ entries).
    """
    s = torch.sort(x, dim=1).values
    pos = q.to(x.dtype) * (x.shape[1] - 1)
    lo = pos.floor().long().clamp(max=x.shape[1] - 1)
    hi = (lo + 1).clamp(max=x.shape[1] - 1)
    return s[:, lo] + (pos - lo.to(x.dtype)) * (s[:, hi] - s[:, lo])


def octile_summaries(x: Tensor) -> Tensor:
    r"""Robust summaries ``[B, 4]`` of samples ``x [B, n, 1]`` from the octiles $E_1..E_7$.

    Location $E_4$, scale $E_6 - E_2$, skewness (Bowley)
    $(E_6 + E_2 - 2E_4)/(E_6 - E_2)$ and kurtosis (Moors)
    $(E_7 - E_5 + E_3 - E_1)/(E_6 - E_2)$ (Drovandi and Pettitt, 2011).
    """
    q = torch.arange(1, 8, dtype=x.dtype, device=x.device) / 8
    e = sample_quantiles(x[..., 0], q).T  # [7, B]
    scale = e[5] - e[1]
    return torch.stack([e[3], scale, (e[5] + e[1] - 2 * e[3]) / scale,
                        (e[6] - e[4] + e[2] - e[0]) / scale], dim=-1)
