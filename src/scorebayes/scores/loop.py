r"""The minibatch training loop of every network in the library.

For epochs $e = 1, \dots, E$ the loop draws the epoch's minibatches $B_{e,1},
B_{e,2}, \dots$ (by default a random permutation of the training rows, split into chunks of
``batch_size``), takes one optimiser step on the loss $\hat L(\phi; B_{e,k})$ of each,
steps the learning-rate schedule once, and evaluates the validation loss
$V_e = V(\phi_e)$. Epoch $e$ improves on the best epoch so far when

$$
V_e < V^\star - \tau\,|V^\star|, \qquad V^\star = \min_{e' < e} V_{e'}
$$

(always, while $V^\star$ is not finite); training stops after ``patience`` epochs in a
row without improvement, and the state of the best epoch is restored.

Inside a [`checkpointing()`][scorebayes.scores.training.checkpointing] block every call of `train_loop()` is one *phase*, named
``<prefix>/phase<k>`` in the order the phases start. After each epoch the phase saves the
network, the optimiser, the learning-rate schedule, the state of ``generator`` and the
early-stopping state to the run store; a later call in a block of the same prefix loads the
checkpoint and continues from the next epoch, so an interrupted fit ends with bit-identical
weights.

References:
    - Early Stopping - But When? (Prechelt, 1998)
      <https://doi.org/10.1007/3-540-49430-8_3>
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

__all__ = ["LoopSchedule", "LoopResult", "train_loop", "shuffled_minibatches", "checkpointing"]

Optimiser = Callable[..., torch.optim.Optimizer]
Scheduler = Callable[[torch.optim.Optimizer, int], Any]


@dataclass(frozen=True)
class LoopSchedule:
    r"""How long and how fast `train_loop()` trains.

    Arguments:
        epochs: the most epochs to run (``0``: no step, the starting state is returned).
        batch_size: rows per minibatch; ``None``: one minibatch of all rows per epoch.
        lr: learning rate, or ``(initial, final)``: exponential decay from ``initial`` to
            ``final`` over ``epochs`` (one factor per epoch).
        patience: stop after this many epochs in a row without improvement of the validation
            loss; ``None``: run every epoch.
        tolerance: the relative improvement $\tau$ an epoch needs to count as better.
    """

    epochs: int
    batch_size: int | None = None
    lr: float | tuple[float, float] = 1e-3
    patience: int | None = None
    tolerance: float = 0.0

    def __post_init__(self):
        if isinstance(self.lr, list):  # e.g. from a configuration file
            object.__setattr__(self, "lr", tuple(self.lr))

        def count(value: Any, low: int) -> bool:
            return isinstance(value, int) and not isinstance(value, bool) and value >= low

        if not count(self.epochs, 0):
            raise ValueError(f"epochs must be an integer >= 0, got {self.epochs!r}")
        if self.batch_size is not None and not count(self.batch_size, 1):
            raise ValueError(f"batch_size must be a positive integer or None, got {self.batch_size!r}")
        if self.patience is not None and not count(self.patience, 1):
            raise ValueError(f"patience must be a positive integer or None, got {self.patience!r}")
        rates = self.lr if isinstance(self.lr, tuple) else (self.lr,)
        if len(rates) not in (1, 2) or not all(isinstance(r, (int, float)) and math.isfinite(r) and r > 0
                                               for r in rates):
            raise ValueError(f"lr must be a positive learning rate or a pair (initial, final) of them, "
                             f"got {self.lr!r}")
        if not (math.isfinite(self.tolerance) and self.tolerance >= 0):
            raise ValueError(f"tolerance must be a finite number >= 0, got {self.tolerance!r}")


class LoopResult(NamedTuple):
    """What `train_loop()` did: ``best`` validation loss (``nan`` without validation), the
    ``best_epoch`` (1-based; 0: the starting state), the ``epochs`` run, the validation loss
    per epoch (``history``) and the mean training loss per epoch (``losses``)."""

    best: float
    best_epoch: int
    epochs: int
    history: list[float]
    losses: list[float]


class _Checkpoints:
    """Names successive training phases ``<prefix>/phase<k>`` inside a run store."""

    def __init__(self, store: Any, prefix: str):
        self.store, self.prefix, self.count = store, prefix, 0

    def next_name(self) -> str:
        self.count += 1
        return f"{self.prefix}/phase{self.count - 1:03d}"


_CHECKPOINTS: contextvars.ContextVar[_Checkpoints | None] = contextvars.ContextVar(
    "scorebayes_checkpoints", default=None)


@contextlib.contextmanager
def checkpointing(store: Any, prefix: str) -> Iterator[None]:
    """Inside this block every training phase saves a checkpoint after each epoch (network,
    optimiser and learning-rate state, the ``generator`` state, early-stopping state) to
    ``store`` (a [`RunStore`][scorebayes.store.RunStore]) and resumes from it when one exists,
    so that an interrupted fit continues to bit-identical weights. ``store=None``: no-op."""
    token = _CHECKPOINTS.set(_Checkpoints(store, prefix) if store is not None else None)
    try:
        yield
    finally:
        _CHECKPOINTS.reset(token)


def shuffled_minibatches(rows: Tensor, batch_size: int | None,
                         generator: torch.Generator | None) -> list[Tensor]:
    """``rows [N, ...]`` in a random order (one ``torch.randperm`` from ``generator``), split into
    minibatches of ``batch_size`` rows (the last one shorter; ``None``: one of all rows)."""
    perm = torch.randperm(len(rows), generator=generator)
    return [rows[chunk] for chunk in perm.split(batch_size or max(1, len(rows)))]


def _parts(loss: Tensor | Iterable[Tensor]) -> Iterable[Tensor]:
    """A loss, or the additive parts of one (each part's graph is freed by its own backward)."""
    return (loss,) if isinstance(loss, Tensor) else loss


def _validation_loss(validate: Tensor | Callable[[], float], module: nn.Module,
                     loss: Callable[[Any], Tensor | Iterable[Tensor]]) -> float:
    if not isinstance(validate, Tensor):
        return float(validate())
    module.eval()
    with torch.enable_grad():  # losses that differentiate in their inputs (score matching)
        return sum(float(part.detach()) for part in _parts(loss(validate)))


def _scheduler(schedule: LoopSchedule, optimiser: torch.optim.Optimizer,
               scheduler: Scheduler | None) -> Any:
    if isinstance(schedule.lr, tuple):
        if scheduler is not None:
            raise ValueError("give either lr=(initial, final) or a scheduler, not both")
        gamma = (schedule.lr[1] / schedule.lr[0]) ** (1.0 / max(1, schedule.epochs))
        return torch.optim.lr_scheduler.ExponentialLR(optimiser, gamma)
    return scheduler(optimiser, schedule.epochs) if scheduler is not None else None


def _run_epoch(module: nn.Module, opt: torch.optim.Optimizer,
               loss: Callable[[Any], Tensor | Iterable[Tensor]], batches: list[Any]) -> float:
    """One optimiser step per minibatch; returns the mean training loss over the minibatches."""
    module.train()
    total = 0.0
    for batch in batches:
        opt.zero_grad(set_to_none=True)
        value = 0.0
        for part in _parts(loss(batch)):
            if not torch.isfinite(part):
                raise FloatingPointError("non-finite training loss: lower the learning rate or check "
                                         "the training data for extreme values")
            part.backward()
            value += float(part.detach())
        opt.step()
        total += value
    return total / max(1, len(batches))


def _restore(state: dict[str, Any], module: nn.Module, opt: torch.optim.Optimizer, sched: Any,
             generator: torch.Generator | None) -> None:
    """Load a checkpoint's network, optimiser, learning-rate schedule and generator states."""
    module.load_state_dict(state["net"])
    opt.load_state_dict(state["optimiser"])
    if sched is not None:
        sched.load_state_dict(state["scheduler"])
    if generator is not None:
        generator.set_state(state["generator"])


def train_loop(
    module: nn.Module,
    loss: Callable[[Any], Tensor | Iterable[Tensor]],
    data: Tensor | Callable[[int], Iterable[Any]],
    *,
    schedule: LoopSchedule,
    validate: Tensor | Callable[[], float] | None = None,
    optimiser: Optimiser = torch.optim.Adam,
    scheduler: Scheduler | None = None,
    generator: torch.Generator | None = None,
    keep_initial: bool = True,
    checkpoint: bool = True,
    progress: bool = False,
    bar: tqdm | None = None,
    desc: str = "training",
) -> LoopResult:
    r"""Train ``module`` by minibatch steps with early stopping; leaves the best state in it.

    Arguments:
        module: the network; its ``parameters()`` are optimised, its ``state_dict()`` is what the
            best state and the checkpoints keep.
        loss: ``loss(batch) -> Tensor`` (0-d), or an iterable of the loss's additive parts, each
            backpropagated before the next is built (the gradients add up). A non-finite loss
            raises `FloatingPointError`.
        data: the training rows ``[N, ...]`` (data, or row indices into a table), shuffled by
            `shuffled_minibatches()` each epoch; or ``data(epoch) -> minibatches``, for
            losses that draw their own batches.
        schedule: epochs, batch size, learning rate, patience and tolerance.
        validate: the validation loss of the current state, ``validate() -> float``; or validation
            rows, whose loss is ``loss(rows)`` in ``eval`` mode; ``None``: no validation, no early
            stopping, the last state is kept.
        optimiser: ``optimiser(parameters, lr=lr) -> Optimizer`` (e.g. ``torch.optim.AdamW`` with
            its weight decay bound by `functools.partial()`).
        scheduler: ``scheduler(optimiser, epochs)``, stepped once per epoch, for a constant
            ``schedule.lr`` (a pair brings its own exponential decay).
        generator: every draw of the default minibatches; its state is checkpointed.
        keep_initial: the starting state is a candidate for the best state (its validation loss
            is computed first); ``False``: the best state is one trained here.
        checkpoint: take part in an active [`checkpointing()`][scorebayes.scores.training.checkpointing] block (one phase).
        progress, desc: show a progress bar of the epochs, labelled ``desc``.
        bar: an open bar to advance by one per epoch instead (several phases on one bar).

    Returns:
        `LoopResult`.
    """
    if schedule.patience is not None and validate is None:
        raise ValueError("early stopping (patience) needs a validation loss: give validate")
    epochs = schedule.epochs
    lr = schedule.lr[0] if isinstance(schedule.lr, tuple) else schedule.lr
    opt = optimiser(module.parameters(), lr=lr)
    sched = _scheduler(schedule, opt, scheduler)
    own_bar = tqdm(total=epochs, desc=desc, disable=not progress, leave=False) if bar is None else None
    shown = bar if bar is not None else own_bar
    hook = _CHECKPOINTS.get() if checkpoint else None
    name = hook.next_name() if hook is not None else None
    state = hook.store.load_checkpoint(name) if hook is not None else None
    history: list[float] = []
    losses: list[float] = []
    if state is not None:  # resume this phase after its last completed epoch
        _restore(state, module, opt, sched, generator)
        best, best_state = float(state["best"]), state["best_state"]
        best_epoch = int(state.get("best_epoch", 0))
        since, done, first = int(state["since"]), int(state["done"]), int(state["epoch"]) + 1
        history[:] = [float(v) for v in state["history"]]
        losses[:] = [float(v) for v in state.get("losses", [])]
        shown.update(done)
        if state["finished"]:
            first = epochs
    else:
        best = math.nan
        if validate is not None:
            best = _validation_loss(validate, module, loss) if keep_initial else math.inf
        best_state = copy.deepcopy(module.state_dict()) if validate is not None else None
        best_epoch, since, done, first = 0, 0, 0, 0
    try:
        for epoch in range(first, epochs):
            batches = shuffled_minibatches(data, schedule.batch_size, generator) \
                if isinstance(data, Tensor) else list(data(epoch))
            losses.append(_run_epoch(module, opt, loss, batches))
            if sched is not None:
                sched.step()
            done += 1
            last = losses[-1]
            if validate is not None:
                last = _validation_loss(validate, module, loss)
                history.append(last)
                if not math.isfinite(best) or last < best - schedule.tolerance * abs(best):
                    best, best_state, best_epoch, since = last, copy.deepcopy(module.state_dict()), done, 0
                else:
                    since += 1
            shown.update(1)
            shown.set_postfix({"val" if validate is not None else "loss": f"{last:.4g}"})
            stop = schedule.patience is not None and since >= schedule.patience
            if hook is not None:  # after every epoch: weights, optimiser, schedule and RNG state
                hook.store.save_checkpoint(name, {
                    "net": module.state_dict(), "optimiser": opt.state_dict(),
                    "scheduler": sched.state_dict() if sched is not None else {},
                    "generator": generator.get_state() if generator is not None else torch.zeros(0),
                    "best": best, "best_state": best_state, "best_epoch": best_epoch, "since": since,
                    "done": done, "epoch": epoch, "history": list(history), "losses": list(losses),
                    "finished": stop or epoch == epochs - 1,
                    "epochs": epochs, "last": last})  # for `scorebayes status`; resuming ignores them
            if stop:
                break
        if best_state is not None:
            module.load_state_dict(best_state)
        if done < epochs:
            shown.update(epochs - done)
    finally:
        if own_bar is not None:
            own_bar.close()
    module.eval()
    return LoopResult(best, best_epoch, done, history, losses)
