r"""Parts shared by the baselines: observed-data checks, streamed reference tables, pi/q weights.

Streaming. ABC keeps only a distance per simulated data set and NPE only a summary, so
the paper's largest tables ($N = 10^6$ data sets of $1000 \times 2$ for the
monotone regression, 16 GB) never need to be held in memory: `simulate_reduced()`
draws the table block by block exactly as [`scorebayes.tables.simulate_table()`][scorebayes.tables.simulate_table] does
(same seeds, so the same rows) and applies a ``reducer(x [B, n, p]) -> [B, ...]`` to
each block, in-process or in the workers of an executor.

Importance weights. When the table parameters come from a proposal $q$ instead of
the prior $\pi$, the baselines' draws are reweighted by the self-normalised

$$
w_i \propto \frac{\pi(\theta_i)}{q(\theta_i)}\,\mathbb 1\{\theta_i \in
\operatorname{supp}\pi\}, \qquad \mathrm{ESS} = \Big(\sum_i w_i^2\Big)^{-1}
$$

(Kish's effective sample size).
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Distribution

from ..parallel import check_picklable, map_units
from ..proposal import PriorSampler
from ..simulators import as_simulator
from ..tables import simulate_block

__all__ = [
    "as_observed",
    "check_integers",
    "check_training_options",
    "weighted_draws",
    "seed_from",
    "importance_weights",
    "pareto_smooth",
    "kish_ess",
    "uses_prior",
    "simulate_reduced",
    "reduce_table",
    "check_source",
    "Features",
    "training_pairs",
    "sample_in_support",
]


def seed_from(generator: torch.Generator | None) -> int:
    """An integer run seed drawn from ``generator`` (for per-block derived seeds)."""
    return int(torch.randint(0, 2**62, (1,), generator=generator).item())


def check_integers(*checks: tuple[str, Any, int], positive: bool = False) -> None:
    """Refuse the first ``(label, value, low)`` whose value is not an integer ``>= low`` (bools
    are refused): "must be an integer >= low", or "must be a positive integer" if ``positive``."""
    for label, value, low in checks:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            what = "a positive integer" if positive else f"an integer >= {low}"
            raise ValueError(f"{label} must be {what}, got {value!r}")


def as_observed(x_obs: Any) -> Tensor:
    """Validate the observed data set and return it as float64 ``[n, p]`` (``[n]`` -> p = 1)."""
    x = torch.as_tensor(x_obs)
    if x.dim() == 1:
        x = x[:, None]
    if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x_obs must be one data set [n, p], got shape {tuple(x.shape)}")
    x = x.to(torch.float64)
    if not torch.isfinite(x).all():
        raise ValueError("x_obs contains non-finite values")
    return x


def uses_prior(sampler: Any, prior: Distribution) -> bool:
    """Whether ``sampler`` draws from ``prior`` itself (no reweighting needed)."""
    return sampler is None or sampler is prior or (
        isinstance(sampler, PriorSampler) and sampler.prior is prior
    )


def _in_support(prior: Distribution, theta: Tensor) -> Tensor:
    """``[N]`` bool: whether each row of ``theta [N, d]`` lies in the prior's support."""
    try:
        ok = prior.support.check(theta)
    except Exception:  # noqa: BLE001 - a Distribution without a usable support
        return torch.isfinite(prior.log_prob(theta))
    if ok.dim() == theta.dim():  # an event_dim = 0 constraint checked per coordinate
        ok = ok.all(-1)
    return ok


def importance_weights(theta: Tensor, prior: Distribution, sampler: Any) -> Tensor | None:
    r"""Self-normalised $w_i \propto \pi(\theta_i)/q(\theta_i)$ for ``theta [N, d]``.

    Returns ``None`` when ``sampler`` is the prior itself. Rows outside the prior's
    support get weight 0.

    Raises:
        ValueError: if no row has a positive weight.
    """
    if uses_prior(sampler, prior):
        return None
    theta = theta.to(torch.float64)
    inside = _in_support(prior, theta)
    log_w = torch.full((theta.shape[0],), -math.inf, dtype=torch.float64)
    if inside.any():
        t = theta[inside]
        log_w[inside] = (prior.log_prob(t).to(torch.float64)
                         - sampler.log_prob(t).to(torch.float64))
    log_w = torch.where(torch.isnan(log_w), torch.full_like(log_w, -math.inf), log_w)
    if not torch.isfinite(log_w).any():
        raise ValueError(
            "all importance weights pi/q are zero: no kept parameter lies in the prior's support"
        )
    return torch.softmax(log_w, 0)


def pareto_smooth(weights: Tensor | None, smoothing: str | None = "psis") -> tuple[Tensor | None, float | None]:
    r"""Pareto-smoothed importance weights and their $\hat k$ diagnostic.

    PSIS replaces the largest raw weights by expected order statistics of a generalised Pareto
    fit to the tail (``arviz.psislw``), which bounds the variance that a few huge
    $\pi/q$ ratios cause in the tails of $q$. $\hat k > 0.7$ means that the
    weighted estimates are unreliable even after smoothing (report it, do not hide it).
    ``smoothing=None`` returns the weights unchanged (the paper's plain self-normalisation).

    Arguments:
        weights: self-normalised weights ``[N]`` (``None``: unweighted, returned as is).

    References:
        - Pareto smoothed importance sampling (Vehtari, Simpson, Gelman, Yao, Gabry, JMLR 2024)
    """
    if smoothing not in (None, "psis"):
        raise ValueError(f"weight smoothing must be None or 'psis', got {smoothing!r}")
    if weights is None or smoothing is None:
        return weights, None
    import arviz  # only needed here

    positive = weights > 0
    if int(positive.sum()) < 5:  # too few weights to fit a tail
        return weights, math.inf
    log_w, k_hat = arviz.psislw(weights[positive].log().numpy())
    smoothed = torch.zeros_like(weights)
    smoothed[positive] = torch.softmax(torch.as_tensor(log_w, dtype=weights.dtype), 0)
    return smoothed, float(k_hat)


def resume_checkpoint(store: Any, folder: str, what: str, recipe: dict, checkpoint: str) -> dict | None:
    """The last ``<folder>/<checkpoint>`` checkpoint of ``store`` saved under this ``recipe``
    (``None``: nothing saved, or no store). The first call records the recipe; a later one with
    other settings is refused, naming them, since its checkpoint would not fit them."""
    if store is None:
        return None
    old = store.load_json(f"{folder}/recipe")
    if old is not None and old != recipe:
        changed = sorted(key for key in set(old) | set(recipe) if old.get(key) != recipe.get(key))
        raise ValueError(f"{store.path} holds {what} with other settings ({', '.join(changed)}); "
                         "re-run with --fresh (fresh=True) to start over")
    if old is None:
        store.save_json(f"{folder}/recipe", recipe)
    return store.load_checkpoint(f"{folder}/{checkpoint}")


def check_training_options(weight_smoothing: str | None, validation_fraction: float, learning_rate: float,
                           *counts: tuple[str, Any]) -> None:
    """The option checks of an NPE before any simulation: the weight smoothing, the ``(label,
    value)`` counts (positive integers), the validation fraction and the learning rate."""
    pareto_smooth(None, weight_smoothing)
    check_integers(*((label, value, 1) for label, value in counts), positive=True)
    if not 0 < validation_fraction < 1 or not learning_rate > 0:
        raise ValueError("validation_fraction must be in (0, 1) and learning_rate positive")


def weighted_draws(draws: Tensor, prior: Distribution, sampler: Any, smoothing: str | None,
                   support_acceptance: float) -> tuple[Tensor | None, dict[str, Any]]:
    r"""The (smoothed) $\pi/q$ weights of posterior ``draws [M, d]`` and their ``info``:
    ``support_acceptance``, ``weighted``, ``ess`` (Kish) and ``pareto_k``."""
    weights, pareto_k = pareto_smooth(importance_weights(draws, prior, sampler), smoothing)
    return weights, {"support_acceptance": support_acceptance, "weighted": weights is not None,
                     "ess": kish_ess(weights, len(draws)), "pareto_k": pareto_k}


def kish_ess(weights: Tensor | None, num: int) -> float:
    r"""Kish's effective sample size $1/\sum w_i^2$ (``num`` when unweighted)."""
    return float(num) if weights is None else float(1.0 / (weights**2).sum())


class _ReduceTask:
    """Simulate the given blocks and reduce each (picklable, for executors)."""

    def __init__(self, simulator: Any, sampler: Any, num: int, n_obs: int, reducer: Any,
                 seed: int, tag: str, block_size: int):
        self.simulator, self.sampler, self.reducer = simulator, sampler, reducer
        self.num, self.n_obs, self.seed, self.tag = num, n_obs, seed, tag
        self.block_size = block_size

    def __call__(self, blocks: list[int]) -> tuple[Tensor, Tensor]:
        thetas, values = [], []
        for k in blocks:
            rows = min(self.block_size, self.num - k * self.block_size)
            theta, x = simulate_block(self.simulator, self.sampler, rows, self.n_obs,
                                      self.seed, self.tag, k)
            thetas.append(theta)
            values.append(torch.as_tensor(self.reducer(x)))
        return torch.cat(thetas), torch.cat(values)


def simulate_reduced(
    simulator: Any,
    sampler: Any,
    num: int,
    n_obs: int,
    reducer: Any,
    *,
    seed: int,
    tag: str = "S",
    block_size: int = 256,
    chunk_size: int = 4096,
    executor: Executor | None = None,
    progress: bool = False,
    desc: str = "simulate",
) -> tuple[Tensor, Tensor]:
    r"""Draw a reference table block by block and keep only ``reducer(x)``.

    The rows are those of ``simulate_table(simulator, sampler, num, n_obs, seed=seed,
    tag=tag, block_size=block_size)`` (same per-block generators).

    Arguments:
        reducer: ``x [B, n_obs, p] -> [B, ...]`` (picklable with a process executor).
        chunk_size: rows per task (rounded up to whole blocks; does not change the result).

    Returns:
        ``theta [num, d]`` float64 and ``reducer`` outputs ``[num, ...]``.
    """
    check_integers(("block_size", block_size, 1), ("chunk_size", chunk_size, 1), positive=True)
    simulator = as_simulator(simulator)
    num_blocks = math.ceil(num / block_size)
    per_task = max(1, math.ceil(chunk_size / block_size))
    task = _ReduceTask(simulator, sampler, num, n_obs, reducer, seed, tag, block_size)
    if executor is not None:
        check_picklable(task, "simulator, sampler or summary")
    units = [list(range(s, min(s + per_task, num_blocks))) for s in range(0, num_blocks, per_task)]
    results = map_units(task, units, executor=executor, progress=progress, desc=desc)
    return torch.cat([r[0] for r in results]), torch.cat([r[1] for r in results])


def reduce_table(x: Tensor, reducer: Any, *, chunk_size: int = 4096,
                 executor: Executor | None = None, progress: bool = False,
                 desc: str = "reduce") -> Tensor:
    """Apply ``reducer`` to a stored table ``x [N, n, p]`` in chunks of rows."""
    if executor is not None:
        check_picklable(reducer, "reducer")
    chunks = [x[s:s + chunk_size] for s in range(0, x.shape[0], chunk_size)]
    return torch.cat([torch.as_tensor(r) for r in
                      map_units(reducer, chunks, executor=executor, progress=progress, desc=desc)])


def check_source(prior: Distribution, table: Any, simulator: Any, num_simulations: Any,
                 sampler: Any) -> Any:
    """Check the table-or-simulator arguments of a baseline; return the sampler (default prior).

    Exactly one of ``table`` (with ``.theta [N, d]`` and ``.x [N, n, p]``) or
    ``simulator`` with ``num_simulations`` must be given.
    """
    if not isinstance(prior, Distribution):
        raise TypeError(f"prior must be a torch Distribution, got {type(prior).__name__}")
    if (table is None) == (simulator is None):
        raise ValueError("give either a reference `table` or a `simulator` with `num_simulations`")
    if table is not None:
        if num_simulations is not None:
            raise ValueError("`num_simulations` is only used with a simulator, not with a table")
        theta, x = getattr(table, "theta", None), getattr(table, "x", None)
        if not isinstance(theta, Tensor) or not isinstance(x, Tensor):
            raise TypeError("table must have tensors .theta [N, d] and .x [N, n, p] "
                            "(a scorebayes.tables.ReferenceTable)")
        if theta.dim() != 2 or x.dim() != 3 or theta.shape[0] != x.shape[0]:
            raise ValueError(f"table has theta {tuple(theta.shape)} and x {tuple(x.shape)}; "
                             "expected [N, d] and [N, n, p]")
    else:
        if (isinstance(num_simulations, bool) or not isinstance(num_simulations, int)
                or num_simulations < 1):
            raise ValueError(f"num_simulations must be a positive integer, got {num_simulations!r}")
    if sampler is None:
        sampler = PriorSampler(prior)
    elif not (callable(getattr(sampler, "sample", None))
              and callable(getattr(sampler, "log_prob", None))):
        raise TypeError("sampler must have .sample(num, generator) and .log_prob(theta) "
                        "(PriorSampler or GaussianProposal)")
    return sampler


class Features:
    """Picklable reducer ``x [B, n, p] -> [B, k]``: ``summary(x)``, or ``x`` flattened."""

    def __init__(self, summary: Any = None):
        self.summary = summary

    def __call__(self, x: Tensor) -> Tensor:
        if self.summary is None:
            return x.reshape(x.shape[0], -1)
        s = torch.as_tensor(self.summary(x))
        if s.dim() != 2 or s.shape[0] != x.shape[0]:
            raise ValueError(f"summary(x [B, n, p]) must return [B, k], got {tuple(s.shape)} "
                             f"for B={x.shape[0]}")
        return s


def training_pairs(x_obs: Tensor, prior: Distribution, *, table: Any, simulator: Any,
                   num_simulations: Any, sampler: Any, summary: Any, block_size: int,
                   chunk_size: int, executor: Executor | None, generator: torch.Generator | None,
                   progress: bool) -> tuple[Any, Tensor, Tensor, Tensor, float]:
    """Validate and draw the training set of an NPE: ``(sampler, theta [N, d], s [N, k],
    s_obs [k], simulations)``, with ``s = summary(x)`` computed block by block."""
    sampler = check_source(prior, table, simulator, num_simulations, sampler)
    features = Features(summary)
    s_obs = features(x_obs[None]).to(torch.float64)
    if not torch.isfinite(s_obs).all():
        raise ValueError("summary of x_obs is not finite")
    if table is not None:
        if table.x.shape[1:] != x_obs.shape:
            raise ValueError(f"table data sets are {tuple(table.x.shape[1:])}, x_obs is "
                             f"{tuple(x_obs.shape)}")
        theta = table.theta.to(torch.float64)
        s = reduce_table(table.x, features, chunk_size=chunk_size, executor=executor,
                         progress=progress, desc="summaries")
        simulations = float(getattr(table, "simulations", len(theta)))
    else:
        theta, s = simulate_reduced(simulator, sampler, num_simulations, x_obs.shape[0],
                                    features, seed=seed_from(generator), tag="npe",
                                    block_size=block_size, chunk_size=chunk_size,
                                    executor=executor, progress=progress, desc="NPE simulations")
        simulations = float(num_simulations)
    s = s.to(torch.float64)
    if s.shape[1:] != s_obs.shape[1:]:
        raise ValueError(f"summaries of simulations have shape {tuple(s.shape[1:])}, of x_obs "
                         f"{tuple(s_obs.shape[1:])}")
    finite = torch.isfinite(s).all(1)
    if not finite.all():
        raise ValueError(f"{int((~finite).sum())} simulated summaries are not finite")
    return sampler, theta, s, s_obs[0], simulations


def sample_in_support(draw: Any, prior: Distribution, num: int,
                      max_rounds: int = 100) -> tuple[Tensor, float]:
    """Rejection to the prior's support: ``draw(m) -> theta [m, d]`` until ``num`` rows lie inside.

    Returns ``(theta [num, d], acceptance rate)``; raises if almost nothing lands inside.
    """
    kept, total, inside_total = [], 0, 0
    for _ in range(max_rounds):
        theta = draw(num).to(torch.float64)
        ok = _in_support(prior, theta) & torch.isfinite(theta).all(1)
        kept.append(theta[ok])
        total += num
        inside_total += int(ok.sum())
        if inside_total >= num:
            return torch.cat(kept)[:num], inside_total / total
    raise ValueError(f"only {inside_total} of {total} posterior draws fell inside the prior's "
                     "support; the estimator leaks out of it (try unconstrained=True)")
