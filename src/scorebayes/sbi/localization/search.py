r"""The two searches of [`scorebayes.sbi.localization.minimum_distance.localize()`][scorebayes.sbi.localization.minimum_distance.localize]: a projected Adam over all replicates at
once (reparametrised simulators) and a Nelder-Mead per replicate with common random numbers.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 3.1, App. B.1)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from scipy.optimize import minimize
from torch import Tensor
from tqdm.auto import tqdm

from ...parallel import check_picklable, make_generator, map_units
from ...simulators import SimulatorError, check_simulation
from .sliced_wasserstein import random_directions, sliced_wasserstein

__all__ = ["adam_search", "nelder_mead_replicate", "nelder_mead_search"]


def _repeat_rows(z: Any, k: int) -> Any:
    """Repeat every row ``k`` times (a tensor or a tuple/list of tensors, batch first)."""
    if k == 1:
        return z
    if isinstance(z, (tuple, list)):
        return type(z)(_repeat_rows(t, k) for t in z)
    return z.repeat_interleave(k, dim=0)


def adam_search(simulator, x_obs, space, u0, scale, m, iterations, num_directions,
          lr0, lr1, fixed_directions, seed, progress, restarts=1, bounds=None, on_error="raise"):
    """Joint Adam over the batch of replicates x restarts, projected onto ``bounds`` (``(low [d],
    high [d])`` in ``u``) if given; returns ``u_hat [B, d]``, history, loss (``inf`` for a dropped
    replicate).

    A non-finite loss raises with ``on_error = "raise"``; otherwise that replicate stops moving
    and its final loss is ``inf``."""
    num, p = u0.shape[0] // restarts, x_obs.shape[1]
    z = _repeat_rows(simulator.latent(num, m, make_generator(seed, "localize", "latent")), restarts)
    g_dir = make_generator(seed, "localize", "directions")

    def draw_directions(count: int) -> Tensor:
        return _repeat_rows(random_directions(count, p, batch=(num,), generator=g_dir), restarts)

    directions = draw_directions(num_directions)
    v = torch.zeros_like(u0, requires_grad=True)
    optimizer = torch.optim.Adam([v], lr=lr0)
    gamma = (lr1 / lr0) ** (1.0 / max(iterations - 1, 1))
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma)
    history = torch.empty(iterations, dtype=torch.float64)
    dropped = torch.zeros(len(u0), dtype=torch.bool)
    bar = tqdm(range(iterations), desc="localize", disable=not progress, leave=False)
    for it in bar:
        if it > 0 and not fixed_directions:
            directions = draw_directions(num_directions)
        theta = space.to_constrained(u0 + scale * v)
        x = simulator.smooth_transform(theta, z)
        if it == 0:
            if on_error == "raise":
                x = check_simulation(x, num * restarts, m, p)
            else:  # shape only: a non-finite replicate is dropped below
                check_simulation(torch.nan_to_num(x.detach()), num * restarts, m, p)
            if not x.requires_grad:
                raise ValueError(
                    "simulator.smooth_transform(theta, z) is not differentiable in theta "
                    "(no gradient reaches it); fix the transform or use method='nelder-mead'"
                )
        loss = sliced_wasserstein(x.to(torch.float64), x_obs, directions)
        bad = ~torch.isfinite(loss)
        if on_error != "raise":  # a replicate with a non-finite loss is dropped and stops moving
            dropped |= bad
            bad = torch.zeros_like(bad)
            loss = torch.where(dropped, torch.zeros((), dtype=loss.dtype), loss)
        if bad.any():
            b = int(bad.nonzero()[0])
            raise ValueError(
                f"non-finite sliced-Wasserstein loss at iteration {it} for {int(bad.sum())} "
                f"replicates (first: replicate {b}, theta={theta[b].tolist()}); check the "
                "simulator's transform on this parameter region"
            )
        optimizer.zero_grad()
        loss.sum().backward()
        if dropped.any():
            v.grad[dropped] = 0.0
        optimizer.step()
        if bounds is not None:  # projected step: back into the support box
            with torch.no_grad():
                v.copy_(((u0 + scale * v).clamp(*bounds) - u0) / scale)
        schedule.step()
        history[it] = loss.detach()[~dropped].mean() if not dropped.all() else math.inf
        if progress and it % 10 == 0:
            bar.set_postfix(loss=f"{float(history[it]):.4g}")
    u_hat, loss = (u0 + scale * v).detach(), loss.detach().masked_fill(dropped, math.inf)
    if restarts > 1:  # keep each replicate's best start, judged on common fixed directions
        with torch.no_grad():
            x = simulator.smooth_transform(space.to_constrained(u_hat), z)
            final = sliced_wasserstein(x.to(torch.float64), x_obs, draw_directions(4 * num_directions))
        final = final.masked_fill(dropped | ~torch.isfinite(final), math.inf)
        best = final.reshape(num, restarts).argmin(1) + restarts * torch.arange(num)
        u_hat, loss = u_hat[best], final[best]
    return u_hat, history, loss


def nelder_mead_replicate(unit: tuple) -> tuple[Tensor, float, np.ndarray]:
    """One derivative-free replicate (module level so that executors can pickle it)."""
    simulator, x_obs, space, u0, scale, m, num_directions, seed, b, budget, tolerance, on_error, retries = unit
    directions = random_directions(num_directions, x_obs.shape[1],
                                   generator=make_generator(seed, "localize", "directions", b))
    trace: list[float] = []
    faults = {"failed": 0, "nonfinite": 0, "retried": 0}

    def simulate(theta: Tensor) -> Tensor:
        """Common random numbers; with ``"retry"``, a raising call is tried again on other numbers."""
        tries = retries if on_error == "retry" else 1
        for t in range(tries):
            keys = ("crn", b) if t == 0 else ("crn", b, "retry", t)
            try:
                with torch.no_grad():
                    return simulator(theta, m, make_generator(seed, "localize", *keys))
            except SimulatorError:
                raise
            except Exception:  # noqa: BLE001 - user simulator code: the last try raises
                if t + 1 == tries:
                    raise
                faults["retried"] += 1

    def objective(v: np.ndarray) -> float:
        u = u0 + scale * torch.as_tensor(v, dtype=torch.float64)
        try:
            x = simulate(space.to_constrained(u[None]))
            value = float(sliced_wasserstein(x[0].to(torch.float64), x_obs, directions))
        except SimulatorError:  # non-finite or malformed data: a point to move away from
            faults["nonfinite"] += 1
            value = math.inf
        except Exception:  # noqa: BLE001 - "skip"/"retry": a failed simulation is a point to avoid
            if on_error == "raise":
                raise
            faults["failed"] += 1
            value = math.inf
        trace.append(value if math.isfinite(value) else math.inf)
        return trace[-1]

    d = u0.numel()
    simplex = np.vstack([np.zeros(d), 0.5 * np.eye(d)])
    result = minimize(objective, np.zeros(d), method="Nelder-Mead", options={
        "maxfev": budget, "xatol": tolerance, "fatol": math.inf,
        "initial_simplex": simplex, "adaptive": d > 2})
    u_hat = u0 + scale * torch.as_tensor(result.x, dtype=torch.float64)
    return u_hat, float(result.fun), np.asarray(trace), faults




def nelder_mead_search(simulator, x_obs, space, u0, scale, m, num_directions, seed, budget, tolerance,
                       executor, progress, on_error="raise", retries=1) -> tuple[Tensor, Tensor, Tensor, int, dict]:
    """Every replicate by Nelder-Mead from ``u0 [B, d]`` (through ``executor`` if given):
    ``(u_hat [B, d], mean best-so-far loss per evaluation, final losses [B], evaluations, faults)``.

    A simulation that raises stops the search with ``on_error = "raise"``; otherwise its point
    scores ``inf`` (after ``retries`` tries on other random numbers with ``"retry"``). ``faults``
    counts ``failed`` and ``nonfinite`` evaluations over all replicates; retries are evaluations."""
    if executor is not None:
        check_picklable(simulator, "simulator")
        check_picklable(space, "prior")
    units = [
        (simulator, x_obs, space, u0[b], scale, m, num_directions, seed, b, budget, tolerance, on_error,
         retries)
        for b in range(len(u0))
    ]
    results = map_units(nelder_mead_replicate, units, executor=executor,
                        progress=progress, desc="localize (Nelder-Mead)")
    u_hat = torch.stack([r[0] for r in results])
    loss = torch.tensor([r[1] for r in results], dtype=torch.float64)
    faults = {k: sum(r[3][k] for r in results) for k in ("failed", "nonfinite", "retried")}
    evaluations = sum(len(r[2]) for r in results) + faults.pop("retried")
    length = max(len(r[2]) for r in results)
    traces = [np.minimum.accumulate(np.pad(r[2], (0, length - len(r[2])), "edge"))
              for r in results]
    history = torch.as_tensor(np.mean(traces, axis=0))
    return u_hat, history, loss, evaluations, faults
