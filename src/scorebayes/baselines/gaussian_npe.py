r"""Gaussian neural posterior estimation (Chatha et al., 2024), in plain torch.

An MLP maps the summaries $s$ to a Gaussian posterior over the (unconstrained)
parameter,

$$
q_\phi(u \mid s) = \mathcal N\big(u;\, m_\phi(s),\, L_\phi(s) L_\phi(s)^\top\big),
$$

where $L_\phi$ is lower triangular with an exponentiated diagonal, trained by the
Gaussian negative log-likelihood $-\frac1N\sum_i \log q_\phi(u_i \mid s_i)$.
Settings of their public code: MLP $d_s \to 32 \to 32 \to 32$
(ReLU), AdamW (lr $10^{-3}$, weight decay 0.01), full batch, 75/25 train/validation
split, early stopping with patience 20, at most 1,000 epochs; the paper's epidemic runs use
batches of 4,000 (setting 1) and 5,000 (setting 2). Chatha et al. fit
$\log\beta$; here $u = T^{-1}(\theta)$ (``unconstrained=True``), which is
$\log\beta$ for log-normal priors. Inputs and targets are standardised with the
training split's moments (undone on the output).

Trained on a localized proposal $q$, the draws are reweighted by the self-normalised
$\pi/q$.

References:
    - Neural posterior estimation for stochastic epidemic modeling (Chatha, Bu, Regier,
      Snitkin, Zelner, 2024). <https://github.com/epibayes/np-epid>
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5.3)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

import torch
from torch import Tensor, nn
from torch.distributions import Distribution, MultivariateNormal

from ..posterior import Posterior
from ..priors import ParameterSpace
from ..scores.layers import mlp
from ..scores.loop import LoopSchedule, train_loop
from ._common import (as_observed, importance_weights, kish_ess, pareto_smooth,
                      sample_in_support, seed_from, training_pairs)

__all__ = ["GaussianDensityNetwork", "gaussian_npe"]


class GaussianDensityNetwork(nn.Module):
    r"""MLP ``s [B, k] -> (mean [B, d], scale_tril [B, d, d])`` (exponentiated diagonal).

    Arguments:
        in_features: $k$.
        dim: $d$.
        hidden_features: width of the hidden layers.
        num_layers: number of hidden layers (ReLU).
    """

    def __init__(self, in_features: int, dim: int, hidden_features: int = 32, num_layers: int = 3):
        super().__init__()
        self.net = mlp([in_features, *[hidden_features] * num_layers, dim + dim * (dim + 1) // 2], nn.ReLU)
        self.dim = dim
        self.register_buffer("tril_index", torch.tril_indices(dim, dim), persistent=False)

    def forward(self, s: Tensor) -> tuple[Tensor, Tensor]:
        out = self.net(s)
        d = self.dim
        mean, entries = out[:, :d], out[:, d:]
        tril = out.new_zeros(out.shape[0], d, d)
        tril[:, self.tril_index[0], self.tril_index[1]] = entries
        diag = torch.diagonal(tril, dim1=1, dim2=2)
        tril = tril - torch.diag_embed(diag) + torch.diag_embed(diag.exp())
        return mean, tril

    def nll(self, s: Tensor, u: Tensor) -> Tensor:
        """Mean Gaussian negative log-likelihood of targets ``u [B, d]`` (0-d)."""
        mean, tril = self(s)
        return -MultivariateNormal(mean, scale_tril=tril).log_prob(u).mean()


def _check_settings(*, batch_size: int | None, validation_fraction: float, learning_rate: float,
                    **positive: int) -> None:
    """Refuse bad training settings before any simulation, naming the setting."""
    for label, value in positive.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer or None, got {batch_size!r}")
    if not 0 < validation_fraction < 1 or not learning_rate > 0:
        raise ValueError("validation_fraction must be in (0, 1) and learning_rate positive")


def gaussian_npe(
    x_obs: Tensor,
    prior: Distribution,
    *,
    simulator: Any = None,
    num_simulations: int | None = None,
    table: Any = None,
    sampler: Any = None,
    summary: Callable[[Tensor], Tensor] | None = None,
    num_samples: int = 10_000,
    hidden_features: int = 32,
    num_layers: int = 3,
    learning_rate: float = 1e-3,
    weight_decay: float = 0.01,
    batch_size: int | None = None,
    max_epochs: int = 1000,
    patience: int = 20,
    validation_fraction: float = 0.25,
    unconstrained: bool = True,
    weight_smoothing: str | None = "psis",
    names: Sequence[str] | None = None,
    block_size: int = 256,
    chunk_size: int = 4096,
    executor: Executor | None = None,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> Posterior:
    r"""Fit `GaussianDensityNetwork` by Gaussian NLL and draw from it at ``s(x_obs)``.

    Arguments:
        x_obs: observed data ``[n, p]`` (the epidemic: the rows of $S$, ``[T, J+2]``).
        prior: $\pi$, event shape ``[d]``.
        simulator, num_simulations, table, sampler, summary, block_size, chunk_size,
            executor: the training table, as in `scorebayes.baselines.npe()`
            (``summary=None`` flattens the data set, e.g. $\mathrm{vec}(S)$).
        num_samples: posterior draws returned.
        hidden_features, num_layers: the MLP.
        learning_rate, weight_decay: AdamW.
        batch_size: ``None`` for full-batch steps (one per epoch).
        max_epochs, patience: early stopping on the validation NLL; the best state is kept.
        validation_fraction: held-out share of the table.
        unconstrained: model $u = T^{-1}(\theta)$ (default) or $\theta$.
        weight_smoothing: ``"psis"`` (default) Pareto-smooths the $\pi/q$ weights and
            reports $\hat k$ as ``info["pareto_k"]`` (> 0.7: unreliable); ``None`` is the
            paper's plain self-normalisation (`pareto_smooth()`).
        names: ``d`` parameter names.
        generator: all randomness (table, split, initialisation, batches, draws).
        progress: progress bars.

    Returns:
        [`Posterior`][scorebayes.posterior.Posterior] of ``num_samples`` draws (weighted by
        $\pi/q$ when trained on $q$); ``info`` has ``method``,
        ``simulations``, ``seconds``, ``epochs``, ``best_validation_loss``, ``ess``.
    """
    start = time.perf_counter()
    x_obs = as_observed(x_obs)
    pareto_smooth(None, weight_smoothing)  # option check before any simulation
    _check_settings(num_samples=num_samples, hidden_features=hidden_features, num_layers=num_layers,
                    max_epochs=max_epochs, patience=patience, batch_size=batch_size,
                    validation_fraction=validation_fraction, learning_rate=learning_rate)
    sampler, theta, s, s_obs, simulations = training_pairs(
        x_obs, prior, table=table, simulator=simulator, num_simulations=num_simulations,
        sampler=sampler, summary=summary, block_size=block_size, chunk_size=chunk_size,
        executor=executor, generator=generator, progress=progress)
    num = theta.shape[0]
    num_val = max(1, int(round(validation_fraction * num)))
    if num - num_val < 2:
        raise ValueError(f"a table of {num} rows is too small to split for training")
    space = ParameterSpace(prior)
    target = space.to_unconstrained(theta) if unconstrained else theta
    g = torch.Generator().manual_seed(seed_from(generator))
    perm = torch.randperm(num, generator=g)
    train, val = perm[num_val:], perm[:num_val]
    s_mean, s_sd = s[train].mean(0), s[train].std(0).clamp_min(1e-8)
    u_mean, u_sd = target[train].mean(0), target[train].std(0).clamp_min(1e-8)
    s_std = ((s - s_mean) / s_sd).float()
    u_std = ((target - u_mean) / u_sd).float()

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=g)))
        net = GaussianDensityNetwork(s.shape[1], theta.shape[1], hidden_features, num_layers)
    fit = train_loop(net, lambda idx: net.nll(s_std[idx], u_std[idx]), train, validate=val,
                     schedule=LoopSchedule(epochs=max_epochs, batch_size=batch_size, lr=learning_rate,
                                           patience=patience),
                     optimiser=functools.partial(torch.optim.AdamW, weight_decay=weight_decay),
                     generator=g, keep_initial=False, checkpoint=False, progress=progress,
                     desc="Gaussian NPE")
    with torch.no_grad():
        mean, tril = net(((s_obs - s_mean) / s_sd).float()[None])
    mean, tril = mean[0].double(), tril[0].double()

    def draw(m: int) -> Tensor:
        z = torch.randn(m, theta.shape[1], generator=g, dtype=torch.float64)
        out = u_mean + u_sd * (mean + z @ tril.T)
        return space.to_constrained(out) if unconstrained else out

    draws, accept_rate = sample_in_support(draw, prior, num_samples)
    weights, pareto_k = pareto_smooth(importance_weights(draws, prior, sampler), weight_smoothing)
    cov_std = tril @ tril.T
    info = {
        "method": "npe",
        "estimator": "gaussian",
        "simulations": simulations,
        "num_simulations": int(num),
        "summary_dim": int(s.shape[1]),
        "epochs": fit.epochs,
        "best_epoch": fit.best_epoch,
        "best_validation_loss": fit.best,
        "posterior_mean_unconstrained" if unconstrained else "posterior_mean":
            (u_mean + u_sd * mean).tolist(),
        "posterior_sd_unconstrained" if unconstrained else "posterior_sd":
            (u_sd * cov_std.diagonal().sqrt()).tolist(),
        "support_acceptance": accept_rate,
        "weighted": weights is not None,
        "ess": kish_ess(weights, num_samples),
        "pareto_k": pareto_k,
        "seconds": time.perf_counter() - start,
    }
    return Posterior(draws, names, weights=weights, info=info)
