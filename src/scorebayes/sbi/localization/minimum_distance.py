r"""Localization by sliced-Wasserstein minimum distance (Sec. 3.1, eq. 5/17, App. B.1).

For replicates $b = 1..B$, draw latents $\mathbf Z^{(b)}_m$ once (common random
numbers) and solve

$$
\hat\theta^{(b)} = \arg\min_\theta\ \widehat{SW}_1\big(\tau(\theta, \mathbf Z^{(b)}_m),
\mathbf X^*_n\big), \qquad
\widehat{SW}_1(A, B) = \frac1L \sum_{l=1}^L W_1(\omega_l^\top A, \omega_l^\top B),
$$

with $\omega_l$ uniform on the unit sphere $\mathbb S^{p-1}$ (normalised
Gaussians; each replicate has its own ``[L, p]`` set, so replicates stay independent),
redrawn at every iteration unless ``fixed_directions``. In one dimension
$W_1(a, b) = \int_0^1 |F_a^{-1}(t) - F_b^{-1}(t)|\,dt$, which for $m = n$ is
$\frac1n\sum_i |a_{(i)} - b_{(i)}|$ (sort, then mean absolute difference).

The $B$ problems are solved jointly as one batch ``[B, d]`` by Adam in the
unconstrained space $u = T^{-1}(\theta)$ ([`ParameterSpace`][scorebayes.priors.ParameterSpace]),
with the learning rate decayed exponentially from ``lr[0]`` to ``lr[1]``; gradients flow
through ``simulator.smooth_transform`` (the smooth indicator $1/(1+e^{-500 t})$ replaces
hard 0/1 draws there). Replicates do not interact: the summed loss gives each its own
gradient and Adam is coordinate-wise. Steps are taken in units of the prior's spread in
$u$ (``step_scale="prior"``: $u = u_0 + s\,v$, Adam on $v$, $s$ the
robust sd of prior draws of $u$), so ``lr`` is relative to the prior's width; pass
``step_scale=1.0`` for plain Adam on $u$.

The proposal is $q_u = \mathcal N(\hat\mu, \operatorname{diag}\hat s^2)$ with the mean and
the (diagonal) standard deviation of $\hat u^{(b)}$, as a
`GaussianProposal`. Theorem 2: $\|\hat\theta - \theta^*\| =
O_p(n^{-1/2} + m^{-1/2})$. Cost: $B \times \text{iterations} \times m/n$
datasets of size $n$ (a pilot call with 2 data sets of size $m$ that validates
shapes is not counted).

Simulators without ``latent``/``transform`` use a derivative-free fallback: replicate
$b$ re-seeds its own generator ``make_generator(seed, "localize", "crn", b)`` at every
evaluation (common random numbers), uses ``num_directions`` fixed directions, and runs
Nelder-Mead (scipy; adaptive for $d > 2$) in the same scaled coordinates, stopping
when the simplex is smaller than ``tolerance`` or after ``max_evaluations``. Every
evaluation is one simulated dataset of size ``m`` and is counted.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 3.1, Theorem 2, App. B.1)
    - On parameter estimation with the Wasserstein distance (Bernton, Jacob, Gerber,
      Robert, 2019) | <https://doi.org/10.1093/imaiai/iaz003>
    - Statistical and topological properties of sliced probability divergences (Nadjahi
      et al., 2020) | <https://arxiv.org/abs/2003.05783>
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Distribution

from ...parallel import make_generator
from ...priors import ParameterSpace
from ...priors import sample as sample_prior
from ...proposal import GaussianProposal
from ...simulators import Simulator, SimulatorError, as_simulator, check_simulation
from ...table_blocks import FAULT_MODES, pilot_simulation
from .search import adam_search, nelder_mead_search
from .sliced_wasserstein import random_directions, sliced_wasserstein

__all__ = ["Localization", "localize", "random_directions", "sliced_wasserstein"]


@dataclass(frozen=True)
class Localization:
    r"""Result of [`localize()`][scorebayes.sbi.localization.minimum_distance.localize].

    Attributes:
        theta_hat: $\hat\theta^{(b)}$, ``[B, d]`` (constrained space).
        u_hat: $\hat u^{(b)} = T^{-1}(\hat\theta^{(b)})$, ``[B, d]``.
        proposal: $q$ as a ``GaussianProposal`` (mean and sd of ``u_hat``).
        simulations: cost in datasets of size ``n`` ($B\times\text{iterations}\times m/n$).
        seconds: wall-clock time.
        history: ``[iterations]`` mean loss over replicates per Adam step; for Nelder-Mead
            the mean best-so-far loss per evaluation ``[max evaluations]``.
        loss: ``[B]`` final loss of each replicate (spot stuck replicates).
        method: ``"adam"`` or ``"nelder-mead"``.
        failed, nonfinite: simulations that raised or returned non-finite values (with
            ``on_simulator_error`` ``"skip"`` or ``"retry"``; non-finite ones are skipped in
            every mode), and ``dropped`` replicates whose final loss is not finite (left out of
            $q$).
    """

    theta_hat: Tensor
    u_hat: Tensor
    proposal: GaussianProposal
    simulations: float
    seconds: float
    history: Tensor
    loss: Tensor
    method: str
    failed: int = 0
    nonfinite: int = 0
    dropped: int = 0


def localize(
    simulator: Simulator, x_obs: Tensor, prior: Distribution, *, replicates: int = 100,
    iterations: int = 500, restarts: int = 1, num_directions: int = 100,
    lr: float | tuple[float, float] = (1e-1, 1e-3), m: int | None = None, fixed_directions: bool = False,
    seed: int = 0, progress: bool = False, init: str | Tensor = "prior", method: str = "auto",
    step_scale: str | float | Tensor | None = "prior", min_sd: float = 1e-6,
    max_evaluations: int | None = None, tolerance: float = 1e-4, executor: Executor | None = None,
    support: tuple[Tensor, Tensor] | None = None, on_simulator_error: str = "raise", retries: int = 3,
) -> Localization:
    r"""Localize $\theta^*$ by sliced-Wasserstein minimum distance (module docstring).

    Arguments:
        simulator: a [`Simulator`][scorebayes.simulators.Simulator]; with ``latent``/``transform``
            (reparametrised) Adam is used, otherwise Nelder-Mead with common random numbers.
        x_obs: observed data $\mathbf X^*_n$, ``[n, p]`` (``[n]`` is read as ``p = 1``).
        prior: ``Distribution`` with event shape ``[d]``; defines $u = T^{-1}(\theta)$.
        replicates: $B$. iterations: Adam steps. num_directions: $L$.
        restarts: Adam starts per replicate (prior draws), sharing the replicate's latents
            and directions; the start with the smallest final $\widehat{SW}_1$ (on
            ``4 L`` common directions) is kept. The minimum-distance estimator is the global
            minimiser, and on ridged objectives (M/G/1: $\theta_1$ against the service
            width) single starts stall far from it. Costs ``restarts`` times more.
        lr: Adam learning rate, constant or ``(start, end)`` with exponential decay.
        m: simulated dataset size (default ``n``).
        fixed_directions: draw the directions once instead of at every iteration.
        seed: run seed (latents, directions, initial values).
        init: ``"prior"`` (one prior draw per replicate), ``"median"`` (every replicate starts at
            the prior's coordinate-wise median, the setting of Theorem 2: no replicate stalls far
            out where the loss is flat, but where the loss has several basins all fall into the
            median's, as on the M/G/1 queue; use ``"prior"`` with ``restarts`` there) or theta
            ``[d]`` / ``[B, d]``.
        method: ``"auto"``, ``"adam"`` or ``"nelder-mead"``.
        step_scale: ``"prior"``, a float or a ``[d]`` tensor: unit of the steps in ``u``.
        min_sd: floor of the proposal's sd in ``u``.
        max_evaluations: Nelder-Mead budget per replicate (default ``200 d``).
        tolerance: Nelder-Mead stops when the simplex is this small (in ``step_scale`` units).
        executor: runs Nelder-Mead replicates in parallel (Adam is one vectorised batch).
        support: ``(low [d], high [d])``, a box of $\theta$ the estimate must lie in, e.g.
            a data-dependent support (`scorebayes.models.mg1.MG1.support()`: $\theta_1
            \le \min x$); Adam is projected onto it (starts clamped, every step clamped in
            ``u``), so the replicates cannot settle where the observed data are impossible.
            Beyond the paper; on the M/G/1 queue the unconstrained estimates spread along the
            $\theta_1$/width ridge, most of them above $\min x$. Needs an
            elementwise prior space and ``method="adam"``.
        on_simulator_error, retries: fault handling, as for the tables
            ([`scorebayes.tables.simulate_table()`][scorebayes.tables.simulate_table]): with ``"raise"`` a simulator error stops
            the search; with ``"skip"`` a failed simulation scores ``inf`` (Nelder-Mead moves
            away from it) and a replicate whose loss is not finite is left out of $q$;
            ``"retry"`` first tries ``retries`` times on other random numbers. The pilot call is
            tried ``retries`` times unless ``"raise"``.

    Returns:
        [`Localization`][scorebayes.sbi.localization.minimum_distance.Localization].

    Raises:
        ValueError: bad observed data, dimension mismatch with the simulator, a simulator
            without gradients for Adam, or non-finite losses during the optimisation.

    Examples:
        >>> from scorebayes.priors import independent
        >>> sim = Simulator(latent=lambda B, n, g: torch.randn(B, n, 1, generator=g,
        ...                                                    dtype=torch.float64),
        ...                 transform=lambda theta, z: theta[:, None, :] + z)
        >>> prior = independent([torch.distributions.Normal(0.0, 5.0)])
        >>> g = torch.Generator().manual_seed(0)
        >>> x_obs = 3.0 + torch.randn(200, 1, generator=g, dtype=torch.float64)
        >>> loc = localize(sim, x_obs, prior, replicates=10, iterations=200, num_directions=1)
        >>> abs(float(loc.theta_hat.mean()) - 3.0) < 0.3, loc.simulations
        (True, 2000.0)
    """
    start = time.perf_counter()
    simulator = as_simulator(simulator)
    space = ParameterSpace(prior)
    x_obs = _check_observed(x_obs)
    n, p = x_obs.shape
    m = n if m is None else int(m)
    if min(replicates, iterations, num_directions, m, restarts) < 1:
        raise ValueError("replicates, iterations, num_directions, m and restarts must be positive")
    if on_simulator_error not in FAULT_MODES:
        raise ValueError(f"on_simulator_error must be one of {FAULT_MODES}, got {on_simulator_error!r}")
    method = _checked_method(method, simulator, restarts, init)
    bounds = None if support is None else _support_bounds(support, space, method)
    _pilot(simulator, prior, space.dim, p, m, seed, method == "adam", on_simulator_error, retries)
    u0 = _initial_u(init, prior, space, replicates * restarts, seed, bounds)
    scale = _step_scale(step_scale, prior, space, seed)
    faults = {"failed": 0, "nonfinite": 0}
    if method == "adam":
        lr0, lr1 = _checked_lr(lr)
        u_hat, history, loss = adam_search(
            simulator, x_obs, space, u0, scale, m, iterations, num_directions,
            lr0, lr1, fixed_directions, seed, progress, restarts, bounds, on_simulator_error,
        )
        evaluations = replicates * restarts * (iterations + (restarts > 1))
    else:
        u_hat, history, loss, evaluations, faults = nelder_mead_search(
            simulator, x_obs, space, u0[:replicates], scale, m, num_directions, seed,
            max_evaluations or 200 * space.dim, tolerance, executor, progress, on_simulator_error, retries)
    proposal, kept = _replicates_proposal(space, u_hat, loss, min_sd, on_simulator_error != "raise")
    return Localization(
        theta_hat=space.to_constrained(u_hat),
        u_hat=u_hat,
        proposal=proposal,
        simulations=evaluations * m / n,
        seconds=time.perf_counter() - start,
        history=history,
        loss=loss,
        method=method,
        failed=int(faults["failed"]),
        nonfinite=int(faults["nonfinite"]),
        dropped=int((~kept).sum()),
    )


def _replicates_proposal(space: ParameterSpace, u_hat: Tensor, loss: Tensor, min_sd: float,
                         drop_failed: bool) -> tuple[GaussianProposal, Tensor]:
    """$q$: the replicates' mean and SD in ``u`` (SDs floored at ``min_sd``), and which of
    ``u_hat [B, d]`` it used, ``[B]`` bool: all, or with ``drop_failed`` those with a finite loss
    (at least two of them, or all if ``B = 1``)."""
    kept = torch.isfinite(loss) if drop_failed else torch.ones(len(loss), dtype=torch.bool)
    if int(kept.sum()) < min(2, len(loss)):
        raise SimulatorError(f"localization: {int((~kept).sum())} of {len(loss)} replicates ended with a "
                             "non-finite loss (their simulations failed); fix the simulator or restrict "
                             "the prior to where it works")
    u_kept = u_hat[kept]
    sd = u_kept.std(0) if len(u_kept) > 1 else torch.zeros(space.dim, dtype=torch.float64)
    return GaussianProposal(space, u_kept.mean(0), sd.nan_to_num(0.0).clamp_min(min_sd)), kept


def _checked_method(method: str, simulator: Simulator, restarts: int, init: Any) -> str:
    """The search method (``"auto"`` resolved), checked against the simulator and the restarts."""
    if method == "auto":
        method = "adam" if simulator.reparametrised else "nelder-mead"
    if method not in ("adam", "nelder-mead"):
        raise ValueError(f"method must be 'auto', 'adam' or 'nelder-mead', got {method!r}")
    if method == "adam" and not simulator.reparametrised:
        raise ValueError("method='adam' needs a simulator with latent and transform")
    if restarts > 1 and (method != "adam" or not (isinstance(init, str) and init == "prior")):
        raise ValueError("restarts > 1 needs method='adam' and init='prior'")
    return method


def _checked_lr(lr: float | tuple[float, float]) -> tuple[float, float]:
    """Adam's ``(start, end)`` learning rate from a number or a pair, both positive."""
    lr0, lr1 = (float(lr), float(lr)) if np.isscalar(lr) else map(float, lr)
    if not (lr0 > 0 and lr1 > 0):
        raise ValueError(f"lr must be positive (a number or (start, end)), got {lr!r}")
    return lr0, lr1


def _check_observed(x_obs) -> Tensor:
    x = torch.as_tensor(np.asarray(x_obs) if not isinstance(x_obs, Tensor) else x_obs)
    if x.dim() == 1:
        x = x[:, None]
    if x.dim() != 2 or x.shape[0] < 1:
        raise ValueError(f"x_obs must be [n, p] (one row per observation), got {tuple(x.shape)}")
    x = x.detach().to(torch.float64)
    if not torch.isfinite(x).all():
        raise ValueError(f"x_obs has {int((~torch.isfinite(x)).sum())} non-finite values")
    return x


def _pilot(simulator: Simulator, prior, d: int, p: int, m: int, seed: int, smooth: bool,
           on_error: str, retries: int) -> None:
    """Two prior draws, ``m`` observations each (the size the optimisation simulates, as some
    simulators only produce one length, e.g. a time series): fail early with a clear message.
    Unless ``on_error = "raise"``, a pilot that raises is tried again (``retries`` tries) and
    non-finite values pass (only the shape is read)."""
    g = make_generator(seed, "localize", "pilot")
    theta = sample_prior(prior, 2, generator=g).to(torch.float64)
    try:
        if smooth:
            x = simulator.smooth_transform(theta, simulator.latent(2, m, g))
            x = check_simulation(x if on_error == "raise" else torch.nan_to_num(x.detach()), 2, m)
        else:
            x = pilot_simulation(simulator, theta, m, lambda t: g if t == 0 else make_generator(
                seed, "localize", "pilot", t), on_error=on_error, tries=retries)
            x = check_simulation(x, 2, m)
    except Exception as err:
        raise ValueError(
            f"the simulator failed on a pilot call with theta [2, d={d}] drawn from the "
            f"prior and {m} observations ({type(err).__name__}: {err}); check that the "
            "prior's dimension matches the simulator's parameters"
        ) from err
    if x.shape[2] != p:
        raise ValueError(f"x_obs has p={p} columns but the simulator returns p={x.shape[2]}")


def _support_bounds(support, space: ParameterSpace, method: str) -> tuple[Tensor, Tensor]:
    """The support box ``(low [d], high [d])`` of theta as a box in ``u`` (validated)."""
    if method != "adam":
        raise ValueError("support needs method='adam' (projected gradient steps)")
    if not space.is_elementwise():
        raise ValueError("support needs a prior whose coordinates map one by one (an elementwise "
                         "space), so that a box of theta is a box of u")
    try:
        low, high = (torch.as_tensor(b, dtype=torch.float64).reshape(-1) for b in support)
    except (TypeError, ValueError) as err:
        raise ValueError(f"support must be (low [d], high [d]), got {support!r}") from err
    if low.numel() != space.dim or high.numel() != space.dim:
        raise ValueError(f"support must be (low [{space.dim}], high [{space.dim}]), got "
                         f"[{low.numel()}] and [{high.numel()}]")
    if torch.isnan(low).any() or torch.isnan(high).any() or not (low < high).all():
        raise ValueError(f"support must have low < high in every coordinate, got {low.tolist()} "
                         f"and {high.tolist()}")
    # bounds at or beyond the prior's edges map to -inf/+inf (no constraint there)
    lo_u, hi_u = space.to_unconstrained(low[None])[0], space.to_unconstrained(high[None])[0]
    lo_u = torch.where(torch.isnan(lo_u) | (lo_u == math.inf), -math.inf, lo_u)
    hi_u = torch.where(torch.isnan(hi_u) | (hi_u == -math.inf), math.inf, hi_u)
    if not (lo_u < hi_u).all():
        raise ValueError(f"support {low.tolist()} .. {high.tolist()} does not meet the prior's support")
    return lo_u, hi_u


def _initial_u(init, prior, space: ParameterSpace, num: int, seed: int, bounds=None) -> Tensor:
    """The replicates' starts ``u0 [num, d]`` from ``init``, clamped into ``bounds`` (in ``u``) if given."""
    u = _unbounded_initial_u(init, prior, space, num, seed)
    return u if bounds is None else u.clamp(*bounds)


def _unbounded_initial_u(init, prior, space: ParameterSpace, num: int, seed: int) -> Tensor:
    if isinstance(init, str):
        if init not in ("prior", "median"):
            raise ValueError(f"init must be 'prior', 'median' or a tensor of parameters, got {init!r}")
        if init == "median":  # the coordinate-wise median of 4,096 prior draws, for every replicate
            draws = sample_prior(prior, 4_096, generator=make_generator(seed, "localize", "init"))
            u = space.to_unconstrained(draws.to(torch.float64))
            return u.median(0).values.expand(num, space.dim).clone()
        theta = sample_prior(prior, num, generator=make_generator(seed, "localize", "init"))
    else:
        theta = torch.as_tensor(init, dtype=torch.float64).reshape(-1, space.dim)
        theta = theta.expand(num, space.dim) if theta.shape[0] == 1 else theta
        if theta.shape[0] != num:
            raise ValueError(f"init must be theta [d] or [B={num}, d], got {tuple(theta.shape)}")
    u = space.to_unconstrained(theta.to(torch.float64))
    if not torch.isfinite(u).all():
        raise ValueError("initial parameters lie on the boundary of the prior's support")
    return u.clone()


def _step_scale(step_scale, prior, space: ParameterSpace, seed: int) -> Tensor:
    """Unit of the optimisation steps in ``u``: robust sd (IQR / 1.349) of prior draws."""
    if step_scale is None:
        return torch.ones(space.dim, dtype=torch.float64)
    if isinstance(step_scale, str):
        if step_scale != "prior":
            raise ValueError(
                f"step_scale must be 'prior', a number or a tensor, got {step_scale!r}"
            )
        theta = sample_prior(prior, 2000, generator=make_generator(seed, "localize", "scale"))
        u = space.to_unconstrained(theta.to(torch.float64))
        q = torch.stack([torch.quantile(u[torch.isfinite(u[:, k]), k], torch.tensor(
            [0.25, 0.75], dtype=torch.float64)) for k in range(space.dim)])
        scale = (q[:, 1] - q[:, 0]) / 1.349
        return torch.where(torch.isfinite(scale) & (scale > 0), scale, torch.ones_like(scale))
    scale = torch.as_tensor(step_scale, dtype=torch.float64).expand(space.dim).clone()
    if not (torch.isfinite(scale).all() and (scale > 0).all()):
        raise ValueError("step_scale must be positive and finite")
    return scale
