"""The shared training loop: early stopping, best-state restore, patience, resume, schedule checks."""

import math

import pytest
import torch
from torch import nn

from scorebayes.scores.loop import LoopSchedule, checkpointing, shuffled_minibatches, train_loop
from scorebayes.scores.networks import ScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_score_network
from scorebayes.store import RunStore

F64 = torch.float64


class _Scalar(nn.Module):
    def __init__(self, value: float = 0.0):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([value], dtype=F64))


def _overshoot(patience, tolerance=0.0, epochs=30):
    """SGD pulls w from 0 towards 5 (training loss (w - 5)^2); the validation loss (w - 1)^2 is
    smallest after the first epoch (w = 1) and rises afterwards."""
    module = _Scalar()
    seen = []

    def validate():
        seen.append(module.w.item())
        return float((module.w - 1.0) ** 2)

    result = train_loop(module, lambda batch: ((module.w - 5.0) ** 2).sum(), torch.zeros(1, 1),
                        schedule=LoopSchedule(epochs=epochs, lr=0.1, patience=patience, tolerance=tolerance),
                        validate=validate, optimiser=torch.optim.SGD)
    return module, result, seen


def test_early_stopping_restores_the_best_state():
    module, result, seen = _overshoot(patience=3)
    assert result.best_epoch == 1 and result.best == pytest.approx(0.0, abs=1e-20)
    assert result.history[1] < result.history[2] < result.history[3]  # the validation loss rises
    assert float(module.w) == seen[1]  # the weights of epoch 1 (seen[0] is the starting state)
    assert seen[-1] > 2.0  # and the loop did move past them


@pytest.mark.parametrize("patience", [1, 2, 5])
def test_patience_is_honoured(patience):
    _, result, _ = _overshoot(patience=patience)
    assert result.epochs == result.best_epoch + patience == 1 + patience
    assert len(result.history) == len(result.losses) == result.epochs


def test_an_improvement_below_the_tolerance_does_not_count():
    # from w = 0 the first step to w = 1 lowers the validation loss from 1 to 0: relative 1.0
    _, result, _ = _overshoot(patience=2, tolerance=1.5)
    assert result.best_epoch == 0 and result.epochs == 2


def test_without_validation_every_epoch_runs_and_the_last_state_is_kept():
    module = _Scalar()
    result = train_loop(module, lambda batch: ((module.w - 5.0) ** 2).sum(), torch.zeros(1, 1),
                        schedule=LoopSchedule(epochs=4, lr=0.1), optimiser=torch.optim.SGD)
    assert result.epochs == 4 and math.isnan(result.best) and result.history == []
    assert result.losses == pytest.approx([25.0, 16.0, 10.24, 6.5536])
    assert float(module.w) == pytest.approx(5.0 - 5.0 * 0.8**4)


def test_default_minibatches_are_one_randperm_per_epoch_from_the_generator():
    rows = torch.arange(10, 20)
    module = _Scalar()
    seen = []

    def loss(batch):
        seen.append(batch.tolist())
        return (module.w**2).sum()

    train_loop(module, loss, rows, schedule=LoopSchedule(epochs=3, batch_size=4),
               generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    expected = [rows[c].tolist() for _ in range(3) for c in torch.randperm(10, generator=g).split(4)]
    assert seen == expected
    assert [len(b) for b in shuffled_minibatches(rows, None, g)] == [10]


class _Interrupted(Exception):
    pass


class _KilledStore(RunStore):
    """A run store whose process dies right after its ``kill_after``-th checkpoint."""

    kill_after = None

    def save_checkpoint(self, name, state):
        path = super().save_checkpoint(name, state)
        self.saves = getattr(self, "saves", 0) + 1
        if self.kill_after is not None and self.saves >= self.kill_after:
            raise _Interrupted
        return path


def _regression_fit(store):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=g, dtype=F64)
    y = x @ torch.tensor([1.0, -2.0, 0.5], dtype=F64) + 0.3 * torch.randn(64, generator=g, dtype=F64)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).double()

    calls = [0]

    def loss(idx):
        calls[0] += 1
        return ((net(x[idx])[:, 0] - y[idx]) ** 2).mean()

    generator = torch.Generator().manual_seed(1)
    with checkpointing(store, "fit"):
        result = train_loop(net, loss, torch.arange(48), validate=torch.arange(48, 64), generator=generator,
                            schedule=LoopSchedule(epochs=12, batch_size=8, lr=(3e-2, 1e-3), patience=50))
    return net, result, generator, calls[0]


def test_a_resumed_fit_ends_where_an_uninterrupted_one_does(tmp_path):
    whole, whole_result, whole_gen, whole_calls = _regression_fit(None)
    killed = _KilledStore(tmp_path / "run")
    killed.kill_after = 5
    with pytest.raises(_Interrupted):
        _regression_fit(killed)
    resumed, resumed_result, resumed_gen, resumed_calls = _regression_fit(RunStore(tmp_path / "run"))
    assert resumed_result == whole_result
    assert torch.equal(resumed_gen.get_state(), whole_gen.get_state())
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    # the resumed run continued after the 5 checkpointed epochs: 7 epochs of 6 steps and a validation
    assert whole_calls == 1 + 12 * 7 and resumed_calls == 7 * 7


def _score_fit(store):
    g = torch.Generator().manual_seed(0)
    theta = 2.0 * torch.randn(40, 2, generator=g, dtype=F64)
    x = theta[:, None, :] + torch.randn(40, 4, 2, generator=g, dtype=F64)
    torch.manual_seed(0)
    net = ScoreNet(2, 2, (8,), "tanh").double()
    with checkpointing(store, "train"):
        report = fit_score_network(net, theta, x, -theta / 4.0, penalties=(0.0, 0.5),
                                   schedule=TrainingSchedule(epochs=5, penalty_epochs=3, batch_size=8,
                                                             patience=10, lr=(1e-2, 1e-3)),
                                   generator=torch.Generator().manual_seed(1))
    return net, report


@pytest.mark.parametrize("kill_after", [2, 6])  # in the warm start; in the penalty phase
def test_an_interrupted_score_fit_resumes_to_the_same_network(tmp_path, kill_after):
    whole, whole_report = _score_fit(None)
    killed = _KilledStore(tmp_path / "run")
    killed.kill_after = kill_after
    with pytest.raises(_Interrupted):
        _score_fit(killed)
    store = _KilledStore(tmp_path / "run")
    resumed, resumed_report = _score_fit(store)
    assert resumed_report == whole_report
    assert store.saves == 5 + 3 - kill_after  # only the epochs after the last checkpoint were run
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kwargs, message", [
    (dict(epochs=-1), "epochs must be an integer >= 0"),
    (dict(epochs=2.5), "epochs must be an integer >= 0"),
    (dict(epochs=3, batch_size=0), "batch_size must be a positive integer or None"),
    (dict(epochs=3, patience=0), "patience must be a positive integer or None"),
    (dict(epochs=3, lr=0.0), "lr must be a positive learning rate"),
    (dict(epochs=3, lr=(1e-3, -1e-5)), "lr must be a positive learning rate"),
    (dict(epochs=3, lr=math.nan), "lr must be a positive learning rate"),
    (dict(epochs=3, tolerance=-0.1), "tolerance must be a finite number >= 0"),
])
def test_a_bad_schedule_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LoopSchedule(**kwargs)


def test_inconsistent_loop_arguments_are_refused():
    module = _Scalar()

    def loss(batch):
        return (module.w**2).sum()

    with pytest.raises(ValueError, match="patience.*needs a validation loss"):
        train_loop(module, loss, torch.zeros(1, 1), schedule=LoopSchedule(epochs=2, patience=1))
    with pytest.raises(ValueError, match="either lr=.*or a scheduler"):
        train_loop(module, loss, torch.zeros(1, 1), schedule=LoopSchedule(epochs=2, lr=(1e-2, 1e-3)),
                   scheduler=lambda opt, epochs: torch.optim.lr_scheduler.StepLR(opt, 1))


def test_a_non_finite_training_loss_raises():
    module = _Scalar()
    with pytest.raises(FloatingPointError, match="non-finite training loss"):
        train_loop(module, lambda batch: (module.w * math.inf).sum(), torch.zeros(1, 1),
                   schedule=LoopSchedule(epochs=1))
