"""Step-size adaptation driving an MH kernel: the random-walk scale and shape reach their targets."""

import torch

from scorebayes.samplers.base import run_chains
from scorebayes.samplers.rwmh import rwmh_kernel
from scorebayes.samplers.step_size import ScaleState, random_walk_adaptation

D64 = torch.float64


def test_random_walk_adaptation_reaches_the_target_rate_and_learns_the_shape():
    cov = torch.tensor([[1.0, 0.95], [0.95, 1.0]], dtype=D64) * 4
    prec = torch.linalg.inv(cov)

    def log_p(u):
        return -0.5 * ((u @ prec) * u).sum(-1)

    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(50, 2, generator=g, dtype=D64)
    build = lambda scale, chol: rwmh_kernel(log_p, scale, chol)  # noqa: E731
    log_scale = torch.full((50, 1), 0.01, dtype=D64).log()
    tuner = random_walk_adaptation(build, log_scale, target=0.35, window=200, shape_until=1600)
    _, state, warm = run_chains(None, build(log_scale.exp(), torch.eye(2, dtype=D64)).init(x0), 2000,
                                burn_in=2000, adaptation=tuner, generator=g)
    tuned: ScaleState = warm.adaptation
    shape = tuned.chol @ tuned.chol.T
    corr = shape[0, 1] / (shape[0, 0] * shape[1, 1]).sqrt()
    assert abs(float(corr) - 0.95) < 0.03  # the proposal has the target's shape
    rates = []
    run_chains(build(tuned.log_step.exp(), tuned.chol), state, 500, generator=g,
               on_step=lambda t, s, info: rates.append(info.is_accepted.double().mean()))
    assert abs(float(torch.stack(rates).mean()) - 0.35) < 0.05
    assert float(tuned.log_step.exp().mean()) > 0.1  # grown from the tiny initial scale
