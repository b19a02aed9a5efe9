r"""Score matching of a target known through samples: the fits.

The losses are those of `scorebayes.scores.losses` (re-exported here). On (standardised) samples $z \sim p$, for a score model $s$:

- implicit (ISM, exact trace): $\mathbb E[\tfrac12\|s(z)\|^2 + \operatorname{tr}\nabla_z s(z)]$,
  the trace by ``d`` exact backward passes (cheap for small ``d``);
- sliced (SSM, variance-reduced): $\mathbb E_{z, v\sim\mathcal N(0,I)}[\tfrac12\|s(z)\|^2 + v^\top\nabla_z s(z)\,v]$;
- denoising (DSM): $\mathbb E\|s(z + \sigma\epsilon) + \epsilon/\sigma\|^2$, whose minimiser is the
  score of $p_\sigma = p * \mathcal N(0,\sigma^2 I)$;
- noise-conditional DSM: the same over levels $\sigma$ drawn uniformly from a list, weighted by
  $\sigma^2$, i.e. $\mathbb E\|\sigma s(\tilde z, \sigma) + \epsilon\|^2$.

[`fit_score()`][scorebayes.scoremh.score_matching.fit_score] / [`fit_noise_conditional_score()`][scorebayes.scoremh.score_matching.fit_noise_conditional_score] record the data's mean and standard
deviation in the returned model (``standardize=True``), so the model's ``forward`` returns the
score in the original coordinates.

References:
    - Estimation of non-normalized statistical models by score matching (Hyvarinen, 2005)
      <https://jmlr.org/papers/v6/hyvarinen05a.html>
    - Sliced Score Matching (Song et al., 2019), <https://arxiv.org/abs/1905.07088>
    - A Connection Between Score Matching and Denoising Autoencoders (Vincent, 2011)
    - Generative Modeling by Estimating Gradients of the Data Distribution (Song & Ermon, 2019)
      <https://arxiv.org/abs/1907.05600>
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ..scores.loop import LoopSchedule, train_loop
from ..scores.losses import dsm_loss, ism_loss, noise_conditional_dsm_loss, ssm_loss
from .score_models import NoiseConditionalScoreNet, ScoreNet

__all__ = [
    "ism_loss",
    "ssm_loss",
    "dsm_loss",
    "noise_conditional_dsm_loss",
    "fit_score",
    "fit_noise_conditional_score",
    "geometric_noise_levels",
    "SCORE_METHODS",
]

SCORE_METHODS = ("ism", "ssm", "dsm")


def geometric_noise_levels(sigma_max: float, sigma_min: float, num: int) -> Tensor:
    """``num`` levels decreasing geometrically from ``sigma_max`` to ``sigma_min`` ``[num]``."""
    return torch.exp(torch.linspace(math.log(sigma_max), math.log(sigma_min), num))


def _prepare(data: Tensor, standardize: bool, min_samples: int = 10) -> tuple[Tensor, Tensor | None, Tensor | None]:
    data = torch.as_tensor(data)
    if data.dim() != 2:
        raise ValueError(f"data must be [N, d], got shape {tuple(data.shape)}")
    if data.shape[0] < min_samples:
        raise ValueError(f"need at least {min_samples} samples to fit a score model, got {data.shape[0]}")
    if not torch.isfinite(data).all():
        raise ValueError("data contain non-finite values")
    if not standardize:
        return data.float(), None, None
    loc, scale = data.mean(0), data.std(0)
    if not torch.all(scale > 0):
        raise ValueError("a data column is constant: cannot standardise it")
    return ((data - loc) / scale).float(), loc.float(), scale.float()


def _train(model: torch.nn.Module, z: Tensor, loss_fn: Callable[[Tensor], Tensor], *, epochs: int,
           batch_size: int, lr: float, generator: torch.Generator | None, progress: bool,
           desc: str) -> list[float]:
    """Adam on shuffled minibatches of ``z [N, d]``, the learning rate decaying along a cosine to
    5% of ``lr``; no validation (the last state is kept). Returns the mean loss per epoch."""
    def cosine(optimiser: torch.optim.Optimizer, epochs: int) -> torch.optim.lr_scheduler.LRScheduler:
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=max(epochs, 1), eta_min=0.05 * lr)

    # no run-store checkpoints: these fits have never joined a checkpointing block's phases
    return train_loop(model, loss_fn, z, schedule=LoopSchedule(epochs=epochs, batch_size=batch_size, lr=lr),
                      scheduler=cosine, generator=generator, checkpoint=False, progress=progress,
                      desc=desc).losses


def fit_score(
    data: Tensor,
    *,
    method: str = "ism",
    hidden: int = 128,
    num_hidden: int = 2,
    epochs: int = 200,
    batch_size: int = 512,
    lr: float = 1e-3,
    noise_std: float = 0.05,
    standardize: bool = True,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> ScoreNet:
    r"""Fit a `ScoreNet` to samples ``data [N, d]`` by ISM, SSM or DSM.

    Arguments:
        data: samples of the target ``[N, d]``.
        method: ``"ism"`` (exact trace), ``"ssm"`` or ``"dsm"``.
        hidden, num_hidden: network width and depth.
        epochs: passes over the data; batch_size, lr: Adam settings (the learning rate decays
            along a cosine to 5% of ``lr``).
        noise_std: DSM noise $\sigma$ in standardised units.
        standardize: record and undo the data's mean and standard deviation.
        generator: random source (initialisation is drawn under a forked global RNG seeded from it).

    Returns:
        the trained model (``model.history`` holds the loss per epoch).
    """
    if method not in SCORE_METHODS:
        raise ValueError(f"unknown score-matching method {method!r}; choose one of {SCORE_METHODS}")
    z, loc, scale = _prepare(data, standardize)
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
        model = ScoreNet(z.shape[1], hidden, num_hidden, loc=loc, scale=scale)
    if method == "ism":
        def loss_fn(b: Tensor) -> Tensor:
            return ism_loss(model.score_standardized, b)
    elif method == "ssm":
        def loss_fn(b: Tensor) -> Tensor:
            return ssm_loss(model.score_standardized, b, generator=generator)
    else:
        def loss_fn(b: Tensor) -> Tensor:
            return dsm_loss(model.score_standardized, b, noise_std, generator=generator)
    model.history = _train(model, z, loss_fn, epochs=epochs, batch_size=batch_size, lr=lr,
                           generator=generator, progress=progress, desc=f"score ({method})")
    return model


def fit_noise_conditional_score(
    data: Tensor,
    sigmas: Sequence[float] | Tensor,
    *,
    hidden: int = 256,
    num_hidden: int = 3,
    epochs: int = 200,
    batch_size: int = 256,
    lr: float = 1e-3,
    standardize: bool = True,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> NoiseConditionalScoreNet:
    r"""Fit a `NoiseConditionalScoreNet` on ``data [N, d]`` by DSM over ``sigmas [L]``.

    ``sigmas`` are in standardised units when ``standardize=True``.
    """
    z, loc, scale = _prepare(data, standardize)
    sigmas = torch.as_tensor(sigmas, dtype=torch.float32)
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
        model = NoiseConditionalScoreNet(z.shape[1], hidden, num_hidden, loc=loc, scale=scale)

    def loss_fn(b: Tensor) -> Tensor:
        return noise_conditional_dsm_loss(model.score_standardized, b, sigmas, generator=generator)

    model.history = _train(model, z, loss_fn, epochs=epochs, batch_size=batch_size, lr=lr,
                           generator=generator, progress=progress, desc="score (NCSN)")
    return model
