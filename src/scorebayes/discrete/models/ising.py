r"""The Ising model on an ``m x m`` grid with temperature $\theta > 0$, and a Metropolis sampler.

$$
\tilde p_\theta(x) = \exp\Big(\frac{c}{\theta}\sum_{\{i,j\}\in E} x_i x_j\Big),
$$

with $E$ the 4-neighbour edges of a free-boundary or periodic grid, spins coded as
$\{-1, 1\}$ (``coding="pm1"``) or $\{0, 1\}$ (``"01"``), and $c = 1$ (each edge
counted once, ``edge_count="single"``) or $c = 2$ (the paper's ordered double sum (11),
``"double"``). Flipping spin $j$ changes $T(x) = c\sum_E x_ix_j$ by
$-2c\,x_jS_j$ (pm1) or $c(1-2x_j)S_j$ (01), $S_j = \sum_{k\in\mathcal N_j} x_k$,
so $\log r_{j-} = \Delta_j/\theta$ and $\log r_{j+} = -\Delta_j/\theta$ (the
neighbour in both directions is the flip, cyclic convention).

The reference implementation simulates with ``pm1/single/periodic`` and infers with
``pm1/single/free``; `sample_ising()` uses whatever model it is given.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 4.2 and Appendix F.2
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Chi2, Distribution
from tqdm.auto import tqdm

from ..domains import Domain
from .base import ExponentialFamilyModel, RatioStatistics

__all__ = ["IsingModel", "sample_ising"]


class IsingModel(ExponentialFamilyModel):
    r"""Ising model on an ``side x side`` grid, parameter $\theta$ (temperature), ``d = side**2``.

    Arguments:
        side: grid side ``m`` (``d = m * m`` spins, row-major).
        coding: ``"pm1"`` (spins $\pm1$) or ``"01"``.
        edge_count: ``"single"`` or ``"double"`` (see the module docstring).
        boundary: ``"free"`` or ``"periodic"`` (torus; needs ``side >= 3``).
    """

    def __init__(self, side: int, *, coding: str = "pm1", edge_count: str = "single",
                 boundary: str = "free"):
        if coding not in ("pm1", "01") or edge_count not in ("single", "double") \
                or boundary not in ("free", "periodic"):
            raise ValueError("coding must be 'pm1'|'01', edge_count 'single'|'double', boundary 'free'|'periodic'")
        if side < 2 or (boundary == "periodic" and side < 3):
            raise ValueError("the grid side must be >= 2 (>= 3 for a periodic boundary)")
        self.side, self.coding, self.edge_count, self.boundary = side, coding, edge_count, boundary
        self.domain = Domain.binary(side * side, coding=coding)
        self.names = ["theta"]
        self.edges = self._edges()
        d = side * side
        # neighbour table [d, 4], padded with index d (a constant-zero spin)
        table = [[] for _ in range(d)]
        for i, j in self.edges.tolist():
            table[i].append(j)
            table[j].append(i)
        self.neighbour_table = torch.tensor([t + [d] * (4 - len(t)) for t in table])
        self.edge_factor = 1.0 if edge_count == "single" else 2.0

    def _edges(self) -> Tensor:
        m = self.side
        idx = torch.arange(m * m).reshape(m, m)
        if self.boundary == "free":
            right = torch.stack([idx[:, :-1].reshape(-1), idx[:, 1:].reshape(-1)], dim=-1)
            down = torch.stack([idx[:-1, :].reshape(-1), idx[1:, :].reshape(-1)], dim=-1)
        else:
            right = torch.stack([idx.reshape(-1), idx.roll(-1, dims=1).reshape(-1)], dim=-1)
            down = torch.stack([idx.reshape(-1), idx.roll(-1, dims=0).reshape(-1)], dim=-1)
        return torch.cat([right, down], dim=0)

    def neighbour_sums(self, x: Tensor) -> Tensor:
        r"""$S_j = \sum_{k\in\mathcal N_j} x_k$: ``[n, d] -> [n, d]``."""
        padded = torch.cat([x, torch.zeros_like(x[:, :1])], dim=1)
        return padded[:, self.neighbour_table].sum(-1)

    def flip_change(self, x: Tensor) -> Tensor:
        r"""$\Delta_j = T(\text{flip}_j x) - T(x)$ for every spin: ``[n, d] -> [n, d]``."""
        s = self.neighbour_sums(x)
        return self.edge_factor * (-2 * x * s if self.coding == "pm1" else (1 - 2 * x) * s)

    def natural_parameters(self, theta: Tensor) -> Tensor:
        return 1.0 / theta

    def sufficient_statistics(self, x: Tensor) -> Tensor:
        return self.edge_factor * (x[:, self.edges[:, 0]] * x[:, self.edges[:, 1]]).sum(-1, keepdim=True)

    def base_measure(self, x: Tensor) -> Tensor:
        return torch.zeros(x.shape[0], dtype=x.dtype)

    def ratio_statistics(self, x: Tensor) -> RatioStatistics:
        delta = self.flip_change(x)
        zero = torch.zeros_like(x)
        return RatioStatistics(delta[..., None], zero, -delta[..., None], zero,
                               torch.ones_like(x, dtype=torch.bool))

    def default_prior(self) -> Distribution:
        from ...priors import independent

        return independent([Chi2(torch.tensor(3.0, dtype=torch.float64))])


def sample_ising(model: IsingModel, theta: float, n: int, *, num_steps: int = 100_000,
                 generator: torch.Generator | None = None, progress: bool = False,
                 block: int = 10_000) -> Tensor:
    r"""``n`` independent single-site Metropolis chains for ``model`` at temperature ``theta``.

    Each chain starts from uniform random spins; each step picks a site uniformly and flips it
    with probability $\min(1, \exp(\Delta_j/\theta))$, $\Delta_j$ the change of
    $T$ (Appendix F.2.1 with the *current* spin). The final states are
    returned.

    Returns:
        ``x [n, d]`` float64 spins in the model's coding.
    """
    d = model.dim
    low = -1.0 if model.coding == "pm1" else 0.0
    x = torch.randint(0, 2, (n, d), generator=generator).to(torch.float64)
    x = x * (1 - low) + low
    padded = torch.cat([x, torch.zeros(n, 1, dtype=torch.float64)], dim=1)
    rows = torch.arange(n)
    table = model.neighbour_table
    scale = model.edge_factor / float(theta)
    done = 0
    bar = tqdm(total=num_steps, desc="ising", disable=not progress, leave=False)
    while done < num_steps:
        k = min(block, num_steps - done)
        sites = torch.randint(0, d, (k, n), generator=generator)
        logu = torch.rand(k, n, generator=generator, dtype=torch.float64).log()
        for t in range(k):
            j = sites[t]
            xj = padded[rows, j]
            s = padded[rows[:, None], table[j]].sum(-1)
            delta = -2 * xj * s if model.coding == "pm1" else (1 - 2 * xj) * s
            flip = logu[t] < scale * delta
            padded[rows, j] = torch.where(flip, -xj if model.coding == "pm1" else 1 - xj, xj)
        done += k
        bar.update(k)
    bar.close()
    return padded[:, :d].clone()
