r"""Metropolis-Hastings proposal kernels with their log-densities and both gradients.

Every proposal $q(x' \mid x)$ exposes, for chains ``x [C, d]``:

- ``sample(x, score_x, *, generator) -> x' [C, d]``,
- ``log_prob(x_to, x_from, score_from) -> [C]``: $\log q(x_{to} \mid x_{from})$ up to
  an additive constant that cancels in the MH ratio (the constant may depend on the step
  size, never on the positions),
- ``grads(x_to, x_from) -> (d_from, d_to)``, each ``[C, d]``:
  $(\partial_{x_{from}} \log q(x_{to}\mid x_{from}),\ \partial_{x_{to}} \log q(x_{to}\mid x_{from}))$,
  the blocks needed by the score balance matching loss.

Kernels (step sizes may be floats or tensors ``[C, 1]`` broadcasting over chains):

- random walk (RW): $q(x'\mid x) = \mathcal N(x, \sigma^2 LL^\top)$ ($L = I$ by default),
- Langevin / MALA: $q(x'\mid x) = \mathcal N(x + h\,\tilde s(x), 2h I)$ with a score callable
  $\tilde s$; this is the paper's $\mathcal N(x + \tfrac{\varepsilon^2}{2}\tilde s(x), \varepsilon^2 I)$
  with $\varepsilon^2 = 2h$, so ULA and MALA with the same ``step_size`` ``h`` make the
  same proposal. $\partial_x \log q(x'\mid x) = (I + h J_{\tilde s}(x))^\top (x' - \mu(x)) / (2h)$
  with the score network's Jacobian, computed as a vector-Jacobian product,
- preconditioned Crank-Nicolson (pCN): $x' = \rho x + \beta \xi$, $\rho = \sqrt{1-\beta^2}$.

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025), Sec. 3 and Algorithm 1
      <https://arxiv.org/abs/2501.00467>
    - MCMC methods for functions: modifying old algorithms to make them faster (Cotter et al., 2013)
      <https://arxiv.org/abs/1202.0709>
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["RandomWalkProposal", "LangevinProposal", "PCNProposal", "ScoreFn"]

ScoreFn = Callable[[Tensor], Tensor]


def _sq_norm(v: Tensor) -> Tensor:
    return (v * v).sum(-1)


def _check_step(value: float | Tensor, name: str) -> float | Tensor:
    if isinstance(value, Tensor):
        if not torch.all(value > 0):
            raise ValueError(f"{name} must be positive")
        return value
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return float(value)


def _step_per_chain(step: float | Tensor) -> float | Tensor:
    """A step ``[C, 1]`` reduced to ``[C]`` for per-chain scalars (floats pass through)."""
    return step.reshape(-1) if isinstance(step, Tensor) else step


class RandomWalkProposal:
    r"""Gaussian random walk $q(x'\mid x) = \mathcal N(x, \sigma^2 LL^\top)$: $x' = x + \sigma L\xi$.

    Arguments:
        step_size: $\sigma$ (float or ``[C, 1]``).
        shape: optional lower-triangular $L$ ``[d, d]`` (e.g. the Cholesky factor of a
            posterior covariance estimate); ``None``: $L = I$.
    """

    symmetric = True
    needs_score = False

    def __init__(self, step_size: float | Tensor, shape: Tensor | None = None):
        self.step_size = _check_step(step_size, "step_size")
        self.shape = shape

    def _whiten(self, delta: Tensor) -> Tensor:
        r"""$L^{-1}\delta$ for rows ``delta [C, d]``."""
        if self.shape is None:
            return delta
        return torch.linalg.solve_triangular(self.shape, delta.T, upper=False).T

    def sample(self, x: Tensor, score_x: Tensor | None = None, *,
               generator: torch.Generator | None = None) -> Tensor:
        """Proposals ``[C, d]`` around ``x [C, d]``."""
        noise = torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        return x + self.step_size * (noise if self.shape is None else noise @ self.shape.T)

    def log_prob(self, x_to: Tensor, x_from: Tensor, score_from: Tensor | None = None) -> Tensor:
        r"""$-\|L^{-1}(x_{to} - x_{from})\|^2 / (2\sigma^2)$, ``[C]``."""
        return -_sq_norm(self._whiten(x_to - x_from)) / (2 * _step_per_chain(self.step_size) ** 2)

    def grads(self, x_to: Tensor, x_from: Tensor) -> tuple[Tensor, Tensor]:
        r"""``(d_from, d_to)`` = $(\Sigma^{-1}(x_{to}-x_{from})/\sigma^2, -\Sigma^{-1}(x_{to}-x_{from})/\sigma^2)$,
        $\Sigma = LL^\top$."""
        delta = x_to - x_from
        if self.shape is not None:
            delta = torch.cholesky_solve(delta.T, self.shape, upper=False).T
        g = delta / self.step_size**2
        return g, -g


class LangevinProposal:
    r"""Langevin (MALA/ULA) proposal $\mathcal N(x + h\,\tilde s(x), 2h I)$.

    Arguments:
        score: $\tilde s$, ``[C, d] -> [C, d]``, differentiable with torch autograd
            when [`grads()`][scorebayes.samplers.proposals.LangevinProposal.grads] is used (the MALA gradient needs its Jacobian).
        step_size: $h$ (float or ``[C, 1]``); $\varepsilon^2 = 2h$ in the paper's notation.
    """

    symmetric = False
    needs_score = True

    def __init__(self, score: ScoreFn, step_size: float | Tensor):
        self.score = score
        self.step_size = _check_step(step_size, "step_size")

    def mean(self, x: Tensor, score_x: Tensor | None = None) -> Tensor:
        r"""$\mu(x) = x + h\,\tilde s(x)$, ``[C, d]``."""
        if score_x is None:
            score_x = self.score(x)
        return x + self.step_size * score_x

    def sample(self, x: Tensor, score_x: Tensor | None = None, *,
               generator: torch.Generator | None = None) -> Tensor:
        r"""Proposals ``[C, d]`` (``score_x`` = $\tilde s(x)$ if already known)."""
        noise = torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        return self.mean(x, score_x) + (2 * self.step_size) ** 0.5 * noise

    def log_prob(self, x_to: Tensor, x_from: Tensor, score_from: Tensor | None = None) -> Tensor:
        r"""$-\|x_{to} - \mu(x_{from})\|^2 / (4h)$, ``[C]``."""
        return -_sq_norm(x_to - self.mean(x_from, score_from)) / (4 * _step_per_chain(self.step_size))

    def grads(self, x_to: Tensor, x_from: Tensor) -> tuple[Tensor, Tensor]:
        r"""``(d_from, d_to)``: $((I + hJ)^\top r,\ -r)$ with $r = (x_{to}-\mu(x_{from}))/(2h)$."""
        with torch.enable_grad():
            x_from = x_from.detach().requires_grad_(True)
            s = self.score(x_from)
            residual = (x_to.detach() - x_from.detach() - self.step_size * s.detach()) / (2 * self.step_size)
            (jt_r,) = torch.autograd.grad(s, x_from, grad_outputs=residual)
        d_from = residual + self.step_size * jt_r
        return d_from.detach(), -residual.detach()


class PCNProposal:
    r"""Preconditioned Crank-Nicolson $q(x'\mid x) = \mathcal N(\rho x, \beta^2 I)$, $\rho=\sqrt{1-\beta^2}$.

    Reversible with respect to $\mathcal N(0, I)$: $\log q(x\mid x') - \log q(x'\mid x)
    = \tfrac12(\|x'\|^2 - \|x\|^2)$, so the proposal part of the SBM residual is $(x, -x')$.
    Best used on standardised coordinates.

    Arguments:
        step_size: $\beta \in (0, 1)$ (float or ``[C, 1]``).
    """

    symmetric = False
    needs_score = False

    def __init__(self, step_size: float | Tensor):
        self.step_size = _check_step(step_size, "step_size")
        if not torch.all(torch.as_tensor(self.step_size) < 1):
            raise ValueError("pCN step_size beta must be in (0, 1)")
        self.rho = (1 - torch.as_tensor(self.step_size) ** 2).sqrt()
        if not isinstance(self.step_size, Tensor):
            self.rho = float(self.rho)

    def sample(self, x: Tensor, score_x: Tensor | None = None, *,
               generator: torch.Generator | None = None) -> Tensor:
        """Proposals ``[C, d]``."""
        noise = torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        return self.rho * x + self.step_size * noise

    def log_prob(self, x_to: Tensor, x_from: Tensor, score_from: Tensor | None = None) -> Tensor:
        r"""$-\|x_{to} - \rho x_{from}\|^2 / (2\beta^2)$, ``[C]``."""
        return -_sq_norm(x_to - self.rho * x_from) / (2 * _step_per_chain(self.step_size) ** 2)

    def grads(self, x_to: Tensor, x_from: Tensor) -> tuple[Tensor, Tensor]:
        r"""``(d_from, d_to)`` = $(\rho r, -r)$ with $r = (x_{to} - \rho x_{from})/\beta^2$."""
        r = (x_to - self.rho * x_from) / self.step_size**2
        return self.rho * r, -r
