r"""Simulators: the only access the library has to the likelihood.

A simulator draws ``n`` i.i.d. observations for each of ``B`` parameters,

$$
x_{b,i} \sim p_{\theta_b}, \qquad \texttt{simulate}(\theta\,[B,d], n, g) \to x\,[B,n,p],
$$

or, in reparametrised form, $x = \tau(\theta, z)$ with latents drawn by
``latent(B, n, g) -> z`` and a ``transform(theta [B, d], z) -> x [B, n, p]`` that is
differentiable in ``theta`` (needed by gradient-based localization).

[`Simulator`][scorebayes.simulators.Simulator] wraps either form; [`from_function()`][scorebayes.simulators.from_function] wraps a plain unbatched
``f(theta [d] numpy, n, rng numpy.random.Generator) -> x [n, p]``. Every output is
checked by [`check_simulation()`][scorebayes.simulators.check_simulation] (shape, dtype, finiteness) with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["Simulator", "SimulatorError", "from_function", "check_simulation", "as_simulator"]


class SimulatorError(ValueError):
    """A simulator returned something unusable (shape, dtype, non-finite values)."""


def check_simulation(x: Any, batch: int, n: int, obs_dim: int | None = None) -> Tensor:
    r"""Validate a simulator output and return it as a float tensor ``[B, n, p]``.

    A ``[B, n]`` output is read as ``p = 1``.

    Raises:
        SimulatorError: wrong type, shape or dtype, or non-finite values.
    """
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, Tensor):
        raise SimulatorError(f"simulator returned {type(x).__name__}, expected a tensor [B, n, p]")
    if x.dim() == 2:
        x = x.unsqueeze(-1)
    if x.dim() != 3 or x.shape[0] != batch or x.shape[1] != n:
        raise SimulatorError(
            f"simulator returned shape {tuple(x.shape)}, expected [B={batch}, n={n}, p]"
        )
    if obs_dim is not None and x.shape[2] != obs_dim:
        raise SimulatorError(f"simulator returned p={x.shape[2]} columns, expected p={obs_dim}")
    if x.dtype == torch.bool or not (x.is_floating_point() or x.dtype in _INT_DTYPES):
        raise SimulatorError(f"simulator returned dtype {x.dtype}, expected a real number type")
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    bad = ~torch.isfinite(x)
    if bad.any():
        rows = bad.flatten(1).any(1).nonzero().flatten()
        raise SimulatorError(
            f"simulator returned non-finite values for {len(rows)} of {batch} parameters "
            f"(first at batch index {int(rows[0])})"
        )
    return x


_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


class Simulator:
    r"""A batched simulator, in direct or reparametrised form.

    Arguments:
        simulate: ``simulate(theta [B, d], n, generator) -> x [B, n, p]``. Optional when
            ``latent`` and ``transform`` are given.
        latent: ``latent(B, n, generator) -> z`` (any tensor or tuple of tensors with
            leading dims ``[B, n]``).
        transform: ``transform(theta [B, d], z) -> x [B, n, p]``, differentiable in theta.
        smooth_transform: optional variant of ``transform`` used only during
            localization (e.g. with a sigmoid of large slope in place of hard 0/1 draws).
        obs_dim: ``p``, if known (checked on every output).
        validate: check every output (shape, dtype, finiteness).

    Examples:
        >>> def transform(theta, z):
        ...     return theta[:, None, :] + z
        >>> sim = Simulator(latent=lambda B, n, g: torch.randn(B, n, 2, generator=g),
        ...                 transform=transform)
        >>> sim(torch.zeros(4, 2), 10, torch.Generator().manual_seed(0)).shape
        torch.Size([4, 10, 2])
    """

    def __init__(
        self,
        simulate: Callable[[Tensor, int, torch.Generator | None], Tensor] | None = None,
        *,
        latent: Callable[[int, int, torch.Generator | None], Any] | None = None,
        transform: Callable[[Tensor, Any], Tensor] | None = None,
        smooth_transform: Callable[[Tensor, Any], Tensor] | None = None,
        obs_dim: int | None = None,
        validate: bool = True,
    ):
        if simulate is None and (latent is None or transform is None):
            raise TypeError("give `simulate`, or both `latent` and `transform`")
        if (latent is None) != (transform is None):
            raise TypeError("`latent` and `transform` go together")
        self._simulate = simulate
        self.latent = latent
        self.transform = transform
        self.smooth_transform = smooth_transform or transform
        self.obs_dim = obs_dim
        self.validate = validate

    @property
    def reparametrised(self) -> bool:
        """Whether ``latent``/``transform`` are available (gradient-based localization)."""
        return self.transform is not None

    def __call__(self, theta: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        """Draw ``x [B, n, p]`` for ``theta [B, d]``."""
        if theta.dim() != 2:
            raise ValueError(f"theta must be [B, d], got shape {tuple(theta.shape)}")
        with torch.no_grad():
            if self._simulate is not None:
                x = self._simulate(theta, n, generator)
            else:
                x = self.transform(theta, self.latent(theta.shape[0], n, generator))
        if self.validate:
            x = check_simulation(x, theta.shape[0], n, self.obs_dim)
        return x


class _UnbatchedFunction:
    """Picklable adapter: loops a per-parameter numpy function over the batch."""

    def __init__(self, function: Callable, output_dim: int | None):
        self.function = function
        self.output_dim = output_dim

    def __call__(self, theta: Tensor, n: int, generator: torch.Generator | None) -> Tensor:
        seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
        rng = np.random.default_rng(seed)
        rows = []
        for b in range(theta.shape[0]):
            x = np.asarray(self.function(theta[b].detach().cpu().numpy(), n, rng))
            if x.ndim == 1:
                x = x[:, None]
            if x.ndim != 2 or x.shape[0] != n:
                raise SimulatorError(
                    f"simulator returned shape {x.shape} for one parameter, expected [n={n}, p]"
                )
            rows.append(x)
        try:
            out = np.stack(rows)
        except ValueError:
            raise SimulatorError(
                "simulator returned different numbers of columns for different parameters"
            ) from None
        return torch.as_tensor(out, dtype=theta.dtype if theta.is_floating_point() else None)


def from_function(function: Callable, *, obs_dim: int | None = None) -> Simulator:
    r"""Wrap an unbatched simulator ``f(theta [d] ndarray, n, rng) -> x [n, p]``.

    ``rng`` is a ``numpy.random.Generator`` seeded from the torch generator, so the
    wrapped simulator is reproducible. The function must be picklable (defined at
    module level) to run in a process pool.
    """
    return Simulator(_UnbatchedFunction(function, obs_dim), obs_dim=obs_dim)


def as_simulator(obj: Any) -> Simulator:
    """Return ``obj`` if it is a [`Simulator`][scorebayes.simulators.Simulator], else wrap a batched callable."""
    if isinstance(obj, Simulator):
        return obj
    if callable(obj):
        return Simulator(obj)
    raise TypeError(f"expected a Simulator or a callable, got {type(obj).__name__}")
