r"""The parts of one ABC-PMC round (`abc_pmc()`): proposal, simulations, ranking.

- `StudentProposal`, the multivariate Student $t_\nu$ proposal $q_r$ in the
  prior's unconstrained coordinates ``u``, and `log_prior_over_mixture()`, the log of
  $\pi_u / \bar q$ with $\bar q$ the deterministic mixture of all rounds;
- `simulate_round()`, a round's simulations in blocks of ``block_size`` rows (block
  $b$ of round $r$ with the generator ``make_generator(seed, "abc_pmc", r, b)``),
  their summaries checked and saved as they arrive and reused from a run store;
- `nearest()` (the ``k`` rows nearest the observed summary in a metric) and
  `regression_adjust()` (Beaumont, Zhang & Balding's weighted local-linear adjustment).

References:
    - Adaptive approximate Bayesian computation (Beaumont, Cornuet, Marin, Robert 2009),
      Biometrika 96(4).
    - Approximate Bayesian computation in population genetics (Beaumont, Zhang, Balding 2002),
      Genetics 162(4).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..parallel import make_generator, map_units
from ..priors import ParameterSpace

__all__ = ["StudentProposal", "PMCSettings", "SummaryTask", "simulate_round", "delete_round_blocks",
           "log_prior_over_mixture", "nearest", "checked_summaries", "regression_adjust"]


class StudentProposal:
    r"""Multivariate Student $t_\nu$ in ``u`` fitted to weighted draws ``[N, d]``: located at
    their weighted mean, scale matrix ``inflation`` times their weighted covariance. Heavier-tailed
    than a Gaussian prior in ``u``, so $\pi_u/q$ stays bounded in the tails."""

    def __init__(self, draws: Tensor, weights: Tensor, *, df: int = 4, inflation: float = 2.0):
        w = weights / weights.sum()
        self.loc = (w[:, None] * draws).sum(0)
        centred = draws - self.loc
        cov = (w[:, None] * centred).T @ centred
        d = draws.shape[1]
        jitter = 1e-9 * float(cov.diagonal().mean().clamp_min(1e-12)) * torch.eye(d, dtype=draws.dtype)
        self.tril = torch.linalg.cholesky(inflation * cov + jitter)
        self.df = int(df)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> StudentProposal:
        """The proposal saved by `state()` (a checkpoint)."""
        proposal = cls.__new__(cls)
        proposal.loc, proposal.tril, proposal.df = state["loc"], state["tril"], int(state["df"])
        return proposal

    def state(self) -> dict[str, Any]:
        return {"loc": self.loc, "tril": self.tril, "df": self.df}

    def sample(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        d = len(self.loc)
        z = torch.randn(num, d, generator=generator, dtype=self.loc.dtype)
        chi2 = torch.randn(num, self.df, generator=generator, dtype=self.loc.dtype).pow(2).sum(1)
        return self.loc + (z @ self.tril.T) / (chi2[:, None] / self.df).sqrt()

    def log_prob(self, u: Tensor) -> Tensor:
        d, nu = len(self.loc), self.df
        delta2 = torch.linalg.solve_triangular(self.tril, (u - self.loc).T, upper=False).pow(2).sum(0)
        return (math.lgamma((nu + d) / 2) - math.lgamma(nu / 2) - d / 2 * math.log(nu * math.pi)
                - self.tril.diagonal().log().sum() - (nu + d) / 2 * torch.log1p(delta2 / nu))


class SummaryTask:
    """Simulate one block of given parameters and return its summaries (picklable, for executors)."""

    def __init__(self, simulator: Any, summary: Callable[[Tensor], Tensor], n: int, seed: int):
        self.simulator, self.summary, self.n, self.seed = simulator, summary, n, seed

    def __call__(self, unit: tuple[int, int, Tensor]) -> Tensor:
        r, block, theta = unit
        x = self.simulator(theta, self.n, make_generator(self.seed, "abc_pmc", r, block))
        return torch.as_tensor(self.summary(x))


@dataclass(frozen=True)
class PMCSettings:
    """The checked settings of one ABC-PMC run (see `abc_pmc()`)."""

    space: ParameterSpace
    t_obs: Tensor
    seed: int
    task: SummaryTask
    rounds: int
    simulations_per_round: int
    k: int
    adjust: bool
    metric: str
    sampler: Any
    store: Any
    block_size: int
    executor: Executor | None
    progress: bool


def nearest(t: Tensor, t_obs: Tensor, precision: Tensor, k: int) -> tuple[Tensor, Tensor, float]:
    """The ``k`` rows of ``t [N, s]`` nearest ``t_obs`` -> (indices [k], kernel weights [k], eps)."""
    diff = t - t_obs
    rho = ((diff @ precision) * diff).sum(-1)
    rho_k, idx = torch.topk(rho, k + 1, largest=False)
    eps = float(rho_k[-1])
    kernel = (1 - rho_k[:-1] / eps) if eps > 0 else torch.ones(k, dtype=t.dtype)
    return idx[:-1], kernel, eps


def checked_summaries(t: Any, rows: int, size: int, where: str) -> Tensor:
    """``t`` as float64 ``[rows, size]`` (``size`` 0: any), or a ValueError naming ``where``."""
    if not isinstance(t, Tensor) or t.dim() != 2 or t.shape[0] != rows:
        raise ValueError(f"summary must map x [B, n, p] to t [B, s]; on {where} it returned "
                         f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}")
    if size and t.shape[1] != size:
        raise ValueError(f"summary returned {t.shape[1]} statistics on {where}, {size} on the observed data")
    return t.to(torch.float64)


def _block_name(r: int, b: int, part: str) -> str:
    return f"abc_pmc/blocks/round{r:03d}_block{b:06d}_{part}"


def _load_block(store: Any, r: int, b: int, theta: Tensor) -> Tensor | None:
    """Block ``b`` of round ``r``'s saved summaries, if saved for these parameters ``theta``
    (equal up to rounding: a resumed round redraws them from reloaded arrays), else None."""
    if store is None or not all(store.has_array(_block_name(r, b, part)) for part in ("theta", "t")):
        return None
    saved_theta = torch.from_numpy(store.load_array(_block_name(r, b, "theta"), mmap=False))
    if saved_theta.shape != theta.shape or not torch.allclose(saved_theta, theta, rtol=1e-10, atol=0):
        return None  # another round's draws (a run given other settings is refused before this)
    return torch.from_numpy(store.load_array(_block_name(r, b, "t"), mmap=False))


def simulate_round(run: PMCSettings, u: Tensor, r: int) -> tuple[Tensor, int]:
    """Round ``r``'s summaries ``t [N, s]`` of the parameters ``u [N, d]`` (unconstrained) and the
    number of rows read from ``run.store``; non-finite summaries are set to ``inf`` (never kept)."""
    blocks = run.space.to_constrained(u).split(run.block_size)
    parts = [_load_block(run.store, r, b, block) for b, block in enumerate(blocks)]
    reused = sum(len(block) for block, part in zip(blocks, parts) if part is not None)
    todo = [b for b, part in enumerate(parts) if part is None]
    size = len(run.t_obs)

    def collect(i: int, t: Tensor) -> None:  # checked and saved as it arrives
        b = todo[i]
        parts[b] = checked_summaries(t, len(blocks[b]), size, f"round {r}'s simulations (block {b})")
        if run.store is not None:
            run.store.save_array(_block_name(r, b, "theta"), blocks[b])
            run.store.save_array(_block_name(r, b, "t"), parts[b])

    map_units(run.task, [(r, b, blocks[b]) for b in todo], executor=run.executor, on_result=collect,
              progress=run.progress and len(todo) > 1, desc=f"round {r}'s blocks")
    t = torch.cat(parts)
    bad = ~torch.isfinite(t).all(1)
    if bad.all():
        raise ValueError(f"every summary of round {r} is non-finite")
    t[bad] = math.inf  # never among the nearest
    return t, reused


def delete_round_blocks(run: PMCSettings, r: int) -> None:
    """Delete round ``r``'s saved blocks (once the round is checkpointed in the pool)."""
    for b in range(math.ceil(run.simulations_per_round / run.block_size)):
        for part in ("theta", "t"):
            run.store.delete_array(_block_name(r, b, part))


def log_prior_over_mixture(run: PMCSettings, proposals: list[StudentProposal], u: Tensor) -> Tensor:
    r"""$\log\pi_u(u) - \log\bar q(u)$, $\bar q$ the deterministic mixture of round 0's
    proposal (the prior or ``run.sampler``) and ``proposals``."""
    space, sampler = run.space, run.sampler
    log_pi = space.log_prob_unconstrained(u)
    log_q = torch.stack([log_pi if sampler is None else sampler.log_prob_unconstrained(u).to(torch.float64)]
                        + [p.log_prob(u) for p in proposals])
    return log_pi - (torch.logsumexp(log_q, 0) - math.log(len(log_q)))


def regression_adjust(u: Tensor, t: Tensor, t_obs: Tensor, w: Tensor) -> Tensor:
    r"""Weighted local-linear adjustment $u_i - \hat B^\top (t_i - t^*)$ of kept rows ``u [k, d]``."""
    diff = t - t_obs
    design = torch.cat([torch.ones(len(u), 1, dtype=torch.float64), diff], 1) * w[:, None].sqrt()
    beta = torch.linalg.lstsq(design, u * w[:, None].sqrt()).solution
    return u - diff @ beta[1:]
