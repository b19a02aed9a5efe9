r"""Reference tables for the Langevin-SBI estimator, in the unconstrained parameters ``u``.

A table is ``num`` parameters drawn from a proposal (the localized $q$, the prior, or a
later round's proposal) with ``n_obs`` simulated observations each:
$\mathcal D^S$ (``n_obs = 1``), $\mathcal D^R$ (``n_obs = m_R``) or whole data sets
(``n_obs = n``). [`TableSource`][scorebayes.sbi.reference_tables.TableSource] draws them through
[`scorebayes.tables.simulate_table()`][scorebayes.tables.simulate_table] (seeded blocks, an executor, a resumable run store,
fault handling), maps the parameters to ``u``, drops rows whose ``u`` is not finite, smooths the
data if asked, and counts the cost and the faults.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..parallel import make_generator
from ..priors import ParameterSpace
from ..simulators import Simulator
from ..table_blocks import pilot_simulation, simulate_data_sets, simulate_unchecked
from ..tables import check_faults, simulate_table
from .antithetic import AntitheticProposal, CommonRandomPairs
from .likelihood import DataSmoothing
from .settings import Simulation

__all__ = ["TableSource", "draws_in_u", "to_unconstrained"]


def to_unconstrained(space: ParameterSpace, theta: Tensor) -> tuple[Tensor, Tensor]:
    """``theta [N, d]`` -> ``(u [N, d] float64, finite [N] bool)``."""
    u = space.to_unconstrained(theta.to(torch.float64))
    return u, torch.isfinite(u).all(1)


def draws_in_u(space: ParameterSpace, posterior: Any) -> Tensor:
    """A posterior's finite draws in ``u``, ``[S, d]`` (checks the dimension and count)."""
    draws = torch.as_tensor(posterior.draws, dtype=torch.float64).reshape(-1, posterior.draws.shape[-1])
    if draws.shape[-1] != space.dim or len(draws) < 2:
        raise ValueError(f"posterior must hold at least 2 draws of dimension {space.dim}, "
                         f"got {tuple(posterior.draws.shape)}")
    u, keep = to_unconstrained(space, draws)
    return u[keep]


class TableSource:
    """Draws the estimator's tables and every other simulation of a fit, all with one fault
    handling; ``faults`` adds up failed, non-finite and resumed simulations.

    Arguments:
        simulator: the model's [`Simulator`][scorebayes.simulators.Simulator].
        space: the prior's parameter space.
        simulation: executor, block size and fault handling.
        smoothing: data smoothing applied to every table (keyed by the table's tag), or ``None``.
        seed, progress, store: the run seed, progress bars and the run store of resumable blocks.
        n_data: the observed data set's size (the unit a table's cost is counted in).
    """

    def __init__(self, simulator: Simulator, space: ParameterSpace, simulation: Simulation, *,
                 smoothing: DataSmoothing | None, seed: int, progress: bool, store: Any, n_data: int):
        self.simulator, self.space, self.simulation = simulator, space, simulation
        self.smoothing, self.seed, self.progress, self.store = smoothing, seed, progress, store
        self.n_data = n_data
        self.faults: dict[str, float] = {"failed": 0, "nonfinite": 0, "resumed": 0.0}

    def draw(self, sampler: Any, num: int, n_obs: int, tag: str, *,
             paired: bool = False) -> tuple[Tensor, Tensor, float]:
        """``num`` rows from ``sampler`` with ``n_obs`` observations each.

        ``paired``: mirrored parameter pairs sharing their random numbers (`scorebayes.sbi.antithetic`).

        Returns:
            ``(u [N', d], x [N', n_obs, p], cost)``: the rows with finite ``u`` and the cost in
            simulated data sets of the observed size.
        """
        simulator = self.simulator
        if paired:
            sampler = AntitheticProposal(sampler)
            simulator = Simulator(CommonRandomPairs(self.simulator), validate=False)
        s = self.simulation
        table = simulate_table(simulator, sampler, num, n_obs, seed=self.seed, tag=tag,
                               block_size=s.block_size, n_data=self.n_data, executor=s.executor,
                               progress=self.progress, store=self.store,
                               on_simulator_error=s.on_simulator_error,
                               max_failure_fraction=s.max_failure_fraction, retries=s.retries)
        for key, value in (("failed", table.failed), ("nonfinite", table.nonfinite),
                           ("resumed", table.resumed)):
            self.faults[key] += value
        u, keep = to_unconstrained(self.space, table.theta)
        x = table.x if self.smoothing is None else self.smoothing(table.x, tag)
        # all rows kept: no copy (a memory-mapped table stays mapped)
        return u[keep], (x if bool(keep.all()) else x[keep]), float(table.simulations)

    def simulate(self, theta: Tensor, n_obs: int, generator: torch.Generator, what: str, *,
                 drop_nonfinite: bool = False) -> tuple[Tensor, Tensor]:
        """One data set at each row of ``theta [M, d]``, with the tables' fault handling
        (``on_simulator_error``): failed and non-finite simulations are dropped, counted in
        ``faults``, and warned about (raised above ``max_failure_fraction``, as for a table).
        ``what`` names the stage in the messages. No smoothing is applied. ``drop_nonfinite``:
        non-finite data sets are dropped (and counted) under ``"raise"`` too, for stages that draw
        parameters far out, where a simulator may overflow without a fault.

        Returns:
            ``(keep [M] bool, x [M', n_obs, p])``: which rows were simulated, and their data sets.
        """
        s = self.simulation
        if drop_nonfinite and s.on_simulator_error == "raise":
            x, good = simulate_unchecked(self.simulator, theta, n_obs, generator)
            failed, nonfinite = 0, int((~good).sum())
        else:
            x, good, failed, nonfinite = simulate_data_sets(self.simulator, theta, n_obs, generator,
                                                            on_error=s.on_simulator_error, retries=s.retries)
        self.faults["failed"] += failed
        self.faults["nonfinite"] += nonfinite
        check_faults(failed, nonfinite, len(theta), what, s.max_failure_fraction, bool(good.any()),
                     stacklevel=4)
        return good, (x if bool(good.all()) else x[good])

    def pilot(self, theta: Tensor, n_obs: int) -> Tensor:
        """A pilot data set at each row of ``theta [B, d]`` whose shape is read, not its values:
        ``x [B, n_obs, p]`` (tried again on a failure unless ``on_simulator_error = "raise"``)."""
        s = self.simulation
        return pilot_simulation(self.simulator, theta, n_obs, lambda t: make_generator(self.seed, "pilot", *([t] if t else [])),
                                on_error=s.on_simulator_error, tries=s.retries)
