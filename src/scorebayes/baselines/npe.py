r"""Neural posterior estimation with a masked autoregressive flow, through the ``sbi`` package.

A conditional density estimator $q_\phi(\theta \mid s)$ is fitted by maximum
likelihood on a reference table $(\theta_i, s_i = s(\mathbf X^{(i)}))$,
$\theta_i \sim p(\theta)$,

$$
\hat\phi = \arg\max_\phi \sum_i \log q_\phi(\theta_i \mid s_i),
$$

so that $q_{\hat\phi}(\cdot \mid s_{obs})$ approximates the posterior under the
sampling density $p$. With $p = \pi$ that is the posterior; with a localized
proposal $p = q$ the draws are reweighted by the self-normalised $\pi/q$
(zero outside the prior's support). Draws outside the prior's support
are rejected (as ``sbi``'s ``DirectPosterior`` does).

Paper settings (monotone regression, the defaults): summary $D^\top y$ (11-dim),
$N = 2 \times 10^5$ from $q$, MAF with 5 transforms of 2 hidden layers x 50
units, batch 200, learning rate $5 \times 10^{-4}$, 200 epochs, 10,000 draws.

``sbi`` draws from the global RNG; all its work runs inside
`torch.random.fork_rng()`, seeded from ``generator``, so the caller's state is
untouched and a seed reproduces the result.

References:
    - Masked Autoregressive Flow for Density Estimation (Papamakarios, Pavlakou, Murray, 2017)
      <https://arxiv.org/abs/1705.07057>
    - Fast epsilon-free inference of simulation models with Bayesian conditional density
      estimation (Papamakarios and Murray, 2016)
      <https://arxiv.org/abs/1605.06376>
    - sbi: A toolkit for simulation-based inference (Tejero-Cantero et al., 2020)
      <https://doi.org/10.21105/joss.02505>
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Distribution

from ..posterior import Posterior
from ..priors import ParameterSpace
from ._common import (as_observed, check_training_options, sample_in_support, seed_from,
                      training_pairs, weighted_draws)

__all__ = ["npe"]


class _NoTracker:
    """``sbi`` tracker that records nothing (its default writes ``./sbi-logs``)."""

    log_dir = None

    def log_metric(self, name: str, value: float, step: int | None = None) -> None:
        pass

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        pass

    def log_params(self, params: dict) -> None:
        pass

    def add_figure(self, name: str, figure: Any, step: int | None = None) -> None:
        pass

    def flush(self) -> None:
        pass


def npe(
    x_obs: Tensor,
    prior: Distribution,
    *,
    simulator: Any = None,
    num_simulations: int | None = None,
    table: Any = None,
    sampler: Any = None,
    summary: Callable[[Tensor], Tensor] | None = None,
    num_samples: int = 10_000,
    num_transforms: int = 5,
    hidden_features: int = 50,
    batch_size: int = 200,
    learning_rate: float = 5e-4,
    max_epochs: int = 200,
    stop_after_epochs: int = 20,
    validation_fraction: float = 0.1,
    unconstrained: bool = False,
    max_sampling_rounds: int = 100,
    weight_smoothing: str | None = "psis",
    names: Sequence[str] | None = None,
    block_size: int = 256,
    chunk_size: int = 4096,
    executor: Executor | None = None,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> Posterior:
    r"""NPE with ``sbi``'s MAF (``posterior_nn(model="maf")``), trained on prior or ``q`` draws.

    Arguments:
        x_obs: observed data ``[n, p]``.
        prior: $\pi$, a ``Distribution`` with event shape ``[d]``.
        simulator: batched ``(theta [B, d], n, generator) -> x [B, n, p]``; the table of
            ``num_simulations`` data sets is drawn here (only summaries are kept).
        num_simulations: $N$ (with ``simulator``).
        table: alternatively a stored table with ``theta [N, d]``, ``x [N, n, p]``.
        sampler: the distribution of the table's parameters (``None``: the prior).
        summary: ``x [B, n, p] -> [B, k]``; ``None`` flattens the data set (``k = n p``).
        num_samples: posterior draws returned.
        num_transforms, hidden_features: the MAF (each MADE has 2 hidden layers).
        batch_size, learning_rate, max_epochs, stop_after_epochs, validation_fraction:
            ``sbi`` training (Adam, early stopping on the validation loss).
        unconstrained: fit the flow to $u = T^{-1}(\theta)$ instead of $\theta$
            (no leakage outside bounded supports); the paper fits $\theta$.
        max_sampling_rounds: rounds of ``num_samples`` flow draws rejected to the prior's support
            before giving up (``sbi`` itself keeps drawing); raise it for posteriors at box faces.
        weight_smoothing: ``"psis"`` (default) Pareto-smooths the $\pi/q$ weights and
            reports $\hat k$ as ``info["pareto_k"]`` (> 0.7: unreliable); ``None`` is the
            paper's plain self-normalisation (`pareto_smooth()`).
        names: ``d`` parameter names.
        block_size, chunk_size, executor: how the table is simulated (see ``simulate_table``).
        generator: source of the run seed (table, network initialisation, training, draws).
        progress: progress bars (simulation and ``sbi`` training).

    Returns:
        [`Posterior`][scorebayes.posterior.Posterior] of ``num_samples`` draws, weighted by
        $\pi/q$ when trained on $q$; ``info`` has ``method``, ``simulations``,
        ``seconds``, ``epochs``, ``support_acceptance`` and ``ess``.
    """
    start = time.perf_counter()
    try:
        from sbi.inference import NPE
        from sbi.neural_nets import posterior_nn
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("npe() needs the sbi package: pip install sbi") from None
    x_obs = as_observed(x_obs)
    check_training_options(weight_smoothing, validation_fraction, learning_rate,
                           ("num_samples", num_samples), ("num_transforms", num_transforms),
                           ("hidden_features", hidden_features), ("batch_size", batch_size),
                           ("max_epochs", max_epochs), ("stop_after_epochs", stop_after_epochs))
    sampler, theta, s, s_obs, simulations = training_pairs(
        x_obs, prior, table=table, simulator=simulator, num_simulations=num_simulations,
        sampler=sampler, summary=summary, block_size=block_size, chunk_size=chunk_size,
        executor=executor, generator=generator, progress=progress)
    space = ParameterSpace(prior)
    seed = seed_from(generator)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        builder = posterior_nn(model="maf", num_transforms=num_transforms,
                               hidden_features=hidden_features)
        inference = NPE(prior=None, density_estimator=builder, show_progress_bars=progress,
                        tracker=_NoTracker())
        estimator = _train(inference, space.to_unconstrained(theta) if unconstrained else theta, s,
                           batch_size=batch_size, learning_rate=learning_rate,
                           validation_fraction=validation_fraction, stop_after_epochs=stop_after_epochs,
                           max_epochs=max_epochs)
        draws, accept_rate = _draw(estimator, s_obs, space, prior, unconstrained, num_samples,
                                   max_sampling_rounds)
    weights, weight_info = weighted_draws(draws, prior, sampler, weight_smoothing, accept_rate)
    info = {"method": "npe", "estimator": "maf", "simulations": simulations,
            "num_simulations": int(theta.shape[0]), "summary_dim": int(s.shape[1]),
            **_training_summary(inference), **weight_info, "seconds": time.perf_counter() - start}
    return Posterior(draws, names, weights=weights, info=info)


def _train(inference: Any, target: Tensor, s: Tensor, *, batch_size: int, learning_rate: float,
           validation_fraction: float, stop_after_epochs: int, max_epochs: int) -> Any:
    """Fit ``sbi``'s flow to ``(target [N, d], s [N, k])`` (Adam, early stopping); in eval mode."""
    inference.append_simulations(target.float(), s.float())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not yet fully converged.*")
        estimator = inference.train(
            training_batch_size=batch_size, learning_rate=learning_rate,
            validation_fraction=validation_fraction, stop_after_epochs=stop_after_epochs,
            max_num_epochs=max_epochs, show_train_summary=False)
    estimator.eval()
    return estimator


def _draw(estimator: Any, s_obs: Tensor, space: ParameterSpace, prior: Distribution, unconstrained: bool,
          num_samples: int, max_sampling_rounds: int) -> tuple[Tensor, float]:
    """``num_samples`` flow draws given ``s_obs``, rejected to the prior's support (theta, rate)."""
    condition = s_obs.float()[None]

    def draw(m: int) -> Tensor:
        with torch.no_grad():
            out = estimator.sample((m,), condition=condition).reshape(m, -1).double()
        return space.to_constrained(out) if unconstrained else out

    return sample_in_support(draw, prior, num_samples, max_rounds=max_sampling_rounds)


def _training_summary(inference: Any) -> dict[str, Any]:
    """``epochs`` and ``best_validation_loss`` of ``sbi``'s training (``None`` if not reported)."""
    summary_info = getattr(inference, "_summary", {}) or {}
    epochs = summary_info.get("epochs_trained", [None])
    best = summary_info.get("best_validation_loss", [None])
    return {"epochs": int(epochs[-1]) if epochs and epochs[-1] is not None else None,
            "best_validation_loss": float(best[-1]) if best and best[-1] is not None else None}
