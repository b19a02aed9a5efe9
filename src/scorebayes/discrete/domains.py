r"""Discrete domains and the neighbour maps $x^{j-}$, $x^{j+}$.

A domain is a product $\mathcal X = S_1\times\dots\times S_d$ of integer lattices
$S_j = \{a_j, a_j + h_j, a_j + 2h_j, \dots\} \cap [a_j, b_j]$ (spacing $h_j$,
default 1; the $\pm1$ spins of an Ising model use $h_j = 2$). Each coordinate is
one of four kinds (Standing Assumption 1 and Definition 1 of the paper):

- ``"unbounded"`` ($a=-\infty$, $b=\infty$): $s^\pm = s \pm h$;
- ``"bounded"`` (both finite), **cyclic convention**: $a^- = b$, $b^+ = a$
  (for a binary coordinate both neighbours are the flip);
- ``"lower"`` (only a minimum), **star convention**: $a^- = \star$ with
  $p(\star) = 0$, so $p(x^{j-})/p(x) = 0$ at $x_j = a$;
- ``"upper"`` (only a maximum), handled as ``"lower"`` after reversing the order:
  $x^{j-} = x + h$ ($\star$ at $x_j = b$) and $x^{j+} = x - h$.

The maps are mutual inverses, $(x^{j-})^{j+} = x$ (Lemma 1).

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Section 2.1
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["Domain", "Neighbours"]


class Neighbours(NamedTuple):
    r"""The neighbours of ``m`` points ``x [m, d]`` along every coordinate.

    Attributes:
        minus: $x^{j-}$ as ``[d, m, d]`` (``minus[j]`` changes coordinate ``j``); a star
            neighbour is replaced by ``x`` itself (a safe point to evaluate a model at).
        plus: $x^{j+}$ as ``[d, m, d]`` (never a star).
        valid: ``[m, d]`` bool, ``False`` where $x^{j-} = \star$.
    """

    minus: Tensor
    plus: Tensor
    valid: Tensor


def _parse_bound(value: float | int | str, where: str) -> float:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("inf", "+inf", "infinity"):
            return math.inf
        if text in ("-inf", "-infinity"):
            return -math.inf
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{where}: bound {value!r} is not a number, 'inf' or '-inf'") from None
    value = float(value)
    if math.isnan(value) or (math.isfinite(value) and value != round(value)):
        raise ValueError(f"{where}: bound {value!r} must be an integer, 'inf' or '-inf'")
    return value


class Domain:
    r"""A product of integer lattices with the paper's neighbour conventions.

    Arguments:
        bounds: ``d`` pairs ``(low, high)``; ``float('inf')``, ``"inf"`` and ``"-inf"`` allowed.
        spacing: lattice spacing $h_j$ (an int for all coordinates, or ``d`` ints).

    Examples:
        >>> dom = Domain([[0, "inf"]])
        >>> dom.kinds
        ['lower']
        >>> nb = dom.neighbours(torch.tensor([[0.], [3.]]))
        >>> nb.valid.tolist(), nb.plus[0, :, 0].tolist()
        ([[False], [True]], [1.0, 4.0])
    """

    def __init__(self, bounds: Sequence[Sequence[float | int | str]], spacing: int | Sequence[int] = 1):
        bounds = [list(b) for b in bounds]
        if not bounds:
            raise ValueError("a domain needs at least one coordinate")
        for j, b in enumerate(bounds):
            if len(b) != 2:
                raise ValueError(f"domain coordinate {j}: expected [low, high], got {b}")
        self.low = torch.tensor([_parse_bound(b[0], f"domain coordinate {j}") for j, b in enumerate(bounds)],
                                dtype=torch.float64)
        self.high = torch.tensor([_parse_bound(b[1], f"domain coordinate {j}") for j, b in enumerate(bounds)],
                                 dtype=torch.float64)
        d = len(bounds)
        spacing = [spacing] * d if isinstance(spacing, int) else list(spacing)
        if len(spacing) != d or any(int(h) != h or h < 1 for h in spacing):
            raise ValueError(f"spacing must be a positive integer or {d} of them, got {spacing}")
        self.spacing = torch.tensor(spacing, dtype=torch.float64)
        if bool((self.low >= self.high).any()):
            j = int(torch.nonzero(self.low >= self.high)[0])
            raise ValueError(f"domain coordinate {j}: low {self.low[j]} must be below high {self.high[j]}")
        finite = torch.isfinite(self.low) & torch.isfinite(self.high)
        if bool((finite & ((self.high - self.low) % self.spacing != 0)).any()):
            raise ValueError("each finite range high - low must be a multiple of the spacing")
        self.kinds = [
            ("bounded" if lo > -math.inf and hi < math.inf else
             "lower" if lo > -math.inf else "upper" if hi < math.inf else "unbounded")
            for lo, hi in zip(self.low.tolist(), self.high.tolist(), strict=True)
        ]
        # direction of the "minus" step in the original order (+h for reversed coordinates)
        upper = torch.tensor([k == "upper" for k in self.kinds])
        self._step = torch.where(upper, -self.spacing, self.spacing)
        self._cyclic = finite
        self._star = torch.tensor([k in ("lower", "upper") for k in self.kinds])
        # the boundary value at which x^{j-} is a star (low, or high for reversed coordinates)
        self._star_at = torch.where(upper, self.high, self.low)

    @classmethod
    def counts(cls, d: int = 1) -> Domain:
        r"""$\mathbb N_0^d$ (star convention at 0)."""
        return cls([[0, math.inf]] * d)

    @classmethod
    def binary(cls, d: int = 1, *, coding: str = "01") -> Domain:
        r"""$\{0,1\}^d$ (``coding="01"``) or $\{-1,1\}^d$ (``"pm1"``), cyclic."""
        if coding == "01":
            return cls([[0, 1]] * d)
        if coding == "pm1":
            return cls([[-1, 1]] * d, spacing=2)
        raise ValueError(f"coding must be '01' or 'pm1', got {coding!r}")

    @property
    def dim(self) -> int:
        return self.low.numel()

    def __len__(self) -> int:
        return self.dim

    def __repr__(self) -> str:
        pairs = ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in zip(self.low.tolist(), self.high.tolist(), strict=True))
        return f"Domain([{pairs}])"

    def check(self, x: Tensor, what: str = "data") -> None:
        r"""Raise ``ValueError`` (one line) unless ``x [n, d]`` is integer-valued and inside the domain."""
        if x.dim() != 2 or x.shape[1] != self.dim:
            raise ValueError(f"{what} must have shape [n, {self.dim}] for this {self.dim}-dimensional domain, "
                             f"got {tuple(x.shape)}")
        if x.shape[0] == 0:
            raise ValueError(f"{what} is empty")
        xf = x.to(torch.float64)
        if not bool(torch.isfinite(xf).all()):
            raise ValueError(f"{what} contains non-finite values")
        bad = xf != torch.round(xf)
        if bool(bad.any()):
            i, j = torch.nonzero(bad)[0].tolist()
            raise ValueError(f"{what} must be integers: value {xf[i, j].item()} at row {i}, column {j}")
        outside = (xf < self.low) | (xf > self.high)
        base = torch.where(torch.isfinite(self.low), self.low, torch.where(torch.isfinite(self.high), self.high, 0.0))
        outside |= (xf - base) % self.spacing != 0
        if bool(outside.any()):
            i, j = torch.nonzero(outside)[0].tolist()
            step = "" if self.spacing[j] == 1 else f" with spacing {int(self.spacing[j])}"
            raise ValueError(f"{what}: value {xf[i, j].item():g} at row {i}, column {j} is outside the domain "
                             f"[{self.low[j].item():g}, {self.high[j].item():g}]{step}")

    def minus(self, x: Tensor) -> tuple[Tensor, Tensor]:
        r"""Coordinate-wise $x^{j-}_j$ and validity, both ``[m, d]`` (element ``[i, j]``
        is the new value of coordinate ``j`` of $x_i^{j-}$; a star is returned as ``x``)."""
        low, high, step = (t.to(x.dtype) for t in (self.low, self.high, self._step))
        out = x - step
        cyclic = self._cyclic & torch.ones_like(x, dtype=torch.bool)
        out = torch.where(cyclic & (x == low), high.expand_as(x), out)
        valid = ~(self._star & (x == self._star_at.to(x.dtype)))
        out = torch.where(valid, out, x)
        return out, valid

    def plus(self, x: Tensor) -> Tensor:
        r"""Coordinate-wise $x^{j+}_j$, ``[m, d]`` (never a star for points in the domain)."""
        low, high, step = (t.to(x.dtype) for t in (self.low, self.high, self._step))
        out = x + step
        return torch.where(self._cyclic & (x == high), low.expand_as(x), out)

    def neighbours(self, x: Tensor) -> Neighbours:
        r"""All neighbours of ``x [m, d]``: see [`Neighbours`][scorebayes.discrete.domains.Neighbours] (``[d, m, d]`` each)."""
        m, d = x.shape
        new_minus, valid = self.minus(x)
        new_plus = self.plus(x)
        eye = torch.eye(d, dtype=torch.bool)[:, None, :]  # [d, 1, d]: coordinate j of copy j
        minus = torch.where(eye, new_minus.T[:, :, None], x[None])
        plus = torch.where(eye, new_plus.T[:, :, None], x[None])
        return Neighbours(minus, plus, valid)
