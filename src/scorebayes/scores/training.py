r"""Training loops for the score network and the debiasing mean-regression network.

The protocol of App. B.3-B.4 (Algorithms 2-3): split the tables 50/50 into training and
validation parts; train without penalty (warm start, early stopping on the validation
loss); then, for each candidate penalty weight $\lambda$, continue from the warm
start with the penalty and keep the $\lambda$ with the smallest validation
*score-matching* loss (for $h_\psi$: validation *regression* loss). A single fixed
$\lambda$ (the paper's values) is a one-element grid.

Learning rates decay exponentially from ``lr[0]`` to ``lr[1]`` over a phase (V.A10).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from ..table_store import as_training_tensor
from .loop import LoopSchedule, checkpointing, shuffled_minibatches, train_loop
from .losses import (
    curvature_penalty,
    evaluate_score,
    implicit_score_matching,
    jacobian,
    mean_regression_loss,
    weight_and_diagonal_gradient,
    weighted_score_matching,
)

# checkpointing is defined in .loop and exported here too, where callers have imported it from
__all__ = ["TrainingSchedule", "FitReport", "fit_score_network", "fit_mean_network", "split_indices",
           "checkpointing"]


@dataclass
class TrainingSchedule:
    r"""Optimisation settings of one network.

    Arguments:
        epochs: maximum epochs of the warm-start phase (no penalty).
        penalty_epochs: epochs with the penalty, per candidate lambda.
        batch_size: rows (parameters) per step of the main table.
        lr: (initial, final) learning rate of Adam, exponential decay over each phase.
        patience: early stopping after this many epochs without validation improvement.
        validation_fraction: share of the tables held out (the paper's 50%).
        chunk_observations: a minibatch of n-model rows (``m`` observations each) is evaluated in
            chunks of at most this many observations, their gradients accumulated: the same
            gradient with far less memory traffic (the M/G/1 n-model's paper batch, 500 rows x
            500 observations, trains 3-4x faster per row on a CPU).
            ``None``: the whole minibatch at once (for GPUs).
        penalty_groups: groups of a separate curvature table $\mathcal D^R$ per step of
            a penalty phase, drawn at random (with replacement) from its training part. ``None``:
            every group once per epoch, spread over the epoch's steps. Set it when
            $\mathcal D^R$ is large: a step then costs about ``penalty_groups x m_R`` rows'
            Jacobians on top of the ``batch_size`` rows of score matching (the monotone
            regression's paper table, $10^5 \times 10^3$, takes about an hour per epoch on
            one CPU core with ``None``, minutes with 1).
    """

    epochs: int = 300
    penalty_epochs: int = 60
    batch_size: int = 256
    lr: tuple[float, float] = (1e-3, 1e-5)
    patience: int = 40
    validation_fraction: float = 0.5
    chunk_observations: int | None = 8_192
    penalty_groups: int | None = None

    def __post_init__(self):
        if self.chunk_observations is not None and self.chunk_observations < 1:
            raise ValueError(f"chunk_observations must be a positive integer or None, got "
                             f"{self.chunk_observations}")
        if self.penalty_groups is not None and (isinstance(self.penalty_groups, bool)
                                                or int(self.penalty_groups) != self.penalty_groups
                                                or self.penalty_groups < 1):
            raise ValueError(f"penalty_groups must be a positive integer or None, got "
                             f"{self.penalty_groups!r}")


@dataclass
class FitReport:
    penalty: float
    validation_loss: float
    candidates: dict[float, float] = field(default_factory=dict)  # lambda -> validation loss
    history: list[float] = field(default_factory=list)  # validation loss per warm-start epoch
    epochs: int = 0


def split_indices(num: int, fraction: float, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """Random (train, validation) index split; validation gets ``round(num*fraction)`` (>= 1)."""
    perm = torch.randperm(num, generator=generator)
    n_val = min(num - 1, max(1, round(num * fraction))) if num > 1 else 0
    return perm[n_val:], perm[:n_val]


def _train_phase(net: nn.Module, step_loss: Callable[[Tensor, int], Tensor | Iterable[Tensor]], num_rows: int,
                 validate: Callable[[], float], *, epochs: int, schedule: TrainingSchedule,
                 generator: torch.Generator | None, bar: tqdm | None,
                 history: list[float] | None = None, keep_initial: bool = True) -> tuple[float, int]:
    """One phase of `train_loop()`: Adam with exponential decay and
    early stopping; leaves the best weights in ``net``.

    ``step_loss(batch, step)`` gets the minibatch's positions ``batch`` among the ``num_rows``
    training units and its index ``step`` in the epoch. ``keep_initial=False`` (penalty phases):
    the starting weights are not a candidate, so the result is the best state *trained with*
    the penalty.
    """
    rows = torch.arange(num_rows)

    def minibatches(epoch: int) -> list[tuple[int, Tensor]]:
        return list(enumerate(shuffled_minibatches(rows, schedule.batch_size, generator)))

    result = train_loop(net, lambda batch: step_loss(batch[1], batch[0]), minibatches,
                        schedule=LoopSchedule(epochs=epochs, batch_size=schedule.batch_size, lr=schedule.lr,
                                              patience=schedule.patience, tolerance=1e-7),
                        validate=validate, generator=generator, keep_initial=keep_initial, bar=bar)
    if history is not None:
        history[:] = result.history
    return result.best, result.epochs


def fit_score_network(
    net: nn.Module,
    theta: Tensor,
    x: Tensor,
    grad_log_p: Tensor,
    *,
    schedule: TrainingSchedule,
    penalties: Sequence[float] = (0.0,),
    curvature_theta: Tensor | None = None,
    curvature_x: Tensor | None = None,
    weight_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
    pairs: Tensor | None = None,
    generator: torch.Generator | None = None,
    progress: bool = False,
    desc: str = "score net",
) -> FitReport:
    r"""Train $s_\phi$ by (weighted) implicit score matching plus a curvature penalty.

    Arguments:
        net: ``net(theta [*, d], x [*, p]) -> [*, d]``; its standardisation is fitted here.
        theta: table parameters in the space the score lives in, ``[N, d]``.
        x: observations per parameter ``[N, m, p]`` (``m = 1`` single-model, ``m = n`` n-model).
        grad_log_p: $\nabla\log p_{\text{train}}(\theta)$ of the table's sampling density, ``[N, d]``.
        penalties: candidate curvature weights $\lambda$; ``0`` means no penalty phase.
        curvature_theta, curvature_x: the grouped table $D^R$ (``[N_R, d]``, ``[N_R, m_R, p]``)
            for the penalty; default: the main table itself (n-model, eq. 23).
        weight_fn: $g(\theta, X)$ for data-dependent supports (eq. 19), ``[B, d]``.
        pairs: ``[P, 2]`` row indices of antithetic pairs (see
            `scorebayes.sbi.antithetic.antithetic_pairs()`); each pair is kept together in the
            validation split and in every minibatch, so that the variance the pair cancels is
            cancelled in every step. Rows outside ``pairs`` are not used.

    The score-matching term of a row is divided by ``m`` (the $1/n$ of eq. 23).
    ``x`` and ``curvature_x`` may be tables memory-mapped from a run directory
    (`scorebayes.table_store`): minibatches then read their rows from disk, and the
    result is bit-identical to the same table in memory.
    Returns a `FitReport` (chosen lambda, validation losses).
    """
    device = next(net.parameters()).device
    dtype = next(net.parameters()).dtype
    theta, grad_log_p = theta.to(device, dtype), grad_log_p.to(device, dtype)
    x = as_training_tensor(x, device, dtype)  # a memory-mapped table stays mapped
    if curvature_theta is None:
        curvature_theta, curvature_x = theta, x
    curvature_theta = curvature_theta.to(device, dtype)
    curvature_x = as_training_tensor(curvature_x, device, dtype)
    m = x.shape[1]
    net.fit_standardisation(theta, x)
    if pairs is None:
        tr, va = split_indices(len(theta), schedule.validation_fraction, generator)
        unit = None
    else:  # split and batch whole pairs: unit k of ``tr`` stands for rows pairs[tr[k]]
        unit = pairs.to(device)
        tr, va = split_indices(len(unit), schedule.validation_fraction, generator)
        va_rows = unit[va].reshape(-1)
    same_table = curvature_theta is theta
    ctr, cva = (tr, va) if same_table else split_indices(len(curvature_theta), schedule.validation_fraction, generator)

    def sm_rows(idx: Tensor, create_graph: bool) -> tuple[Tensor, Tensor, Tensor]:
        ev = evaluate_score(net, theta[idx], x[idx], create_graph=create_graph)
        if weight_fn is None:
            rows = implicit_score_matching(ev.total, ev.jacobian, grad_log_p[idx])
        else:
            g, dg = weight_and_diagonal_gradient(weight_fn, theta[idx], x[idx])
            rows = weighted_score_matching(ev.total, ev.jacobian, grad_log_p[idx], g, dg)
        return rows / m, ev.per_observation, ev.jacobian

    # rows per chunk of a minibatch (TrainingSchedule.chunk_observations); m = 1 tables: one chunk
    chunk_rows = (len(theta) if schedule.chunk_observations is None
                  else max(1, schedule.chunk_observations // max(1, m)))

    def validate() -> float:
        net.eval()
        total, count = 0.0, 0
        with torch.enable_grad():
            for idx in (va if unit is None else va_rows).split(max(1, min(schedule.batch_size, chunk_rows))):
                rows, _, _ = sm_rows(idx, create_graph=False)
                total += float(rows.detach().sum())
                count += len(idx)
        return total / max(1, count)

    penalty = [0.0]  # current penalty weight, set by _warm_start_then_penalise

    def step_loss(batch: Tensor, step: int) -> Iterator[Tensor]:
        """The minibatch loss mean_b [l_b + lambda pen_b] in additive parts, one per chunk of rows."""
        idx = tr[batch] if unit is None else unit[tr[batch]].reshape(-1)
        for part in idx.split(chunk_rows):
            rows, per_obs, jac = sm_rows(part, create_graph=True)
            loss = rows.sum()
            if penalty[0] > 0 and same_table:
                loss = loss + penalty[0] * curvature_penalty(per_obs, jac).sum()
            yield loss / len(idx)
        if penalty[0] > 0 and not same_table:
            if schedule.penalty_groups is None:  # every group once per epoch
                start = (step * groups_per_step) % max(1, len(ctr))
                gidx = ctr[start : start + groups_per_step]
            else:  # a fixed number of random groups per step (the generator is checkpointed)
                gidx = ctr[torch.randint(len(ctr), (schedule.penalty_groups,), generator=generator)]
            ev = evaluate_score(net, curvature_theta[gidx], curvature_x[gidx])
            yield penalty[0] * curvature_penalty(ev.per_observation, ev.jacobian).mean()

    batch_units = schedule.batch_size if unit is None else max(1, schedule.batch_size // 2)
    n_steps = math.ceil(len(tr) / batch_units)
    groups_per_step = max(1, math.ceil(len(ctr) / n_steps)) if not same_table else 1
    unit_schedule = schedule if unit is None else dataclasses.replace(schedule, batch_size=batch_units)
    return _warm_start_then_penalise(net, step_loss, len(tr), validate, schedule=unit_schedule,
                                     penalties=penalties, penalty=penalty, generator=generator,
                                     progress=progress, desc=desc)


def fit_mean_network(
    net: nn.Module,
    theta: Tensor,
    targets: Tensor,
    *,
    schedule: TrainingSchedule,
    penalties: Sequence[float] = (0.0,),
    alternative: str = "debias",
    split: tuple[Tensor, Tensor] | None = None,
    generator: torch.Generator | None = None,
    progress: bool = False,
    desc: str = "mean net",
) -> FitReport:
    r"""Train the debiasing regression $h_\psi(\theta) \approx \bar s$ (eq. 25).

    Arguments:
        net: ``net(theta [*, d]) -> [*, d]``.
        theta: group parameters ``[N_R, d]``; targets: $\bar s_l$ ``[N_R, d]`` (frozen score means).
        penalties: candidate $\lambda_2$; selection by validation regression loss.
        alternative: ``"debias"`` (Algorithm 3) or ``"a1"`` (App. B.5 alternative 1).
        split: explicit (train, validation) row indices (default: a random split of
            ``schedule.validation_fraction``); cross-fitting swaps the two.
    """
    device = next(net.parameters()).device
    dtype = next(net.parameters()).dtype
    theta, targets = theta.to(device, dtype), targets.to(device, dtype)
    net.fit_standardisation(theta, targets)
    tr, va = split if split is not None else split_indices(len(theta), schedule.validation_fraction, generator)
    penalty = [0.0]  # current penalty weight, set by _warm_start_then_penalise

    def validate() -> float:
        net.eval()
        with torch.no_grad():
            return float(((net(theta[va]) - targets[va]) ** 2).sum(-1).mean())

    def step_loss(batch: Tensor, step: int) -> Tensor:
        idx = tr[batch]
        if penalty[0] == 0:
            return ((net(theta[idx]) - targets[idx]) ** 2).sum(-1).mean()
        leaf = theta[idx].detach().requires_grad_(True)
        h = net(leaf)
        reg, pen = mean_regression_loss(h, jacobian(h, leaf), targets[idx], penalty[0], alternative)
        return (reg + penalty[0] * pen).mean()

    return _warm_start_then_penalise(net, step_loss, len(tr), validate, schedule=schedule,
                                     penalties=penalties, penalty=penalty, generator=generator,
                                     progress=progress, desc=desc)


def _warm_start_then_penalise(net: nn.Module, step_loss: Callable[[Tensor, int], Tensor | Iterable[Tensor]],
                              num_rows: int,
                              validate: Callable[[], float], *, schedule: TrainingSchedule,
                              penalties: Sequence[float], penalty: list[float],
                              generator: torch.Generator | None, progress: bool, desc: str) -> FitReport:
    """Warm start without penalty, then one penalised phase per candidate; keep the best.

    ``penalty`` is a one-element list read by ``step_loss``. The warm start is a candidate
    only if 0 is in ``penalties`` (a fixed penalty is always applied).
    """
    total_epochs = schedule.epochs + schedule.penalty_epochs * sum(1 for p in penalties if p > 0)
    bar = tqdm(total=total_epochs, desc=desc, disable=not progress, leave=False)
    report = FitReport(penalty=0.0, validation_loss=math.inf)
    try:
        penalty[0] = 0.0
        warm_loss, report.epochs = _train_phase(net, step_loss, num_rows, validate, epochs=schedule.epochs,
                                                schedule=schedule, generator=generator, bar=bar,
                                                history=report.history)
        warm_state = copy.deepcopy(net.state_dict())
        report.candidates[0.0] = warm_loss
        best_state, best_loss, best_penalty = warm_state, warm_loss, 0.0
        if 0.0 not in penalties:
            best_loss = math.inf
        for lam in penalties:
            if lam <= 0:
                continue
            net.load_state_dict(warm_state)
            penalty[0] = float(lam)
            loss, _ = _train_phase(net, step_loss, num_rows, validate, epochs=schedule.penalty_epochs,
                                   schedule=schedule, generator=generator, bar=bar, keep_initial=False)
            report.candidates[float(lam)] = loss
            if loss < best_loss:
                best_state, best_loss, best_penalty = copy.deepcopy(net.state_dict()), loss, float(lam)
        net.load_state_dict(best_state)
    finally:
        bar.close()
        penalty[0] = 0.0
    report.penalty, report.validation_loss = best_penalty, best_loss
    net.eval()
    return report
