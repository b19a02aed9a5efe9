r"""The result of every inference method: posterior draws with their chain structure.

A [`Posterior`][scorebayes.posterior.Posterior] holds ``samples [C, S, d]`` (``C`` chains of ``S`` draws, in the
original, constrained parameter space), parameter names, optional self-normalised
importance ``weights [C, S]`` (ABC or NPE draws reweighted by $\pi/q$), and a
free-form ``info`` dict (method, seconds, simulation counts, ...).

It reports summaries (mean, sd, equal-tailed 95% interval, R-hat, bulk ESS),
converts to ArviZ, writes CSV, draws a pair plot and saves/loads itself as ``.npz``
with JSON metadata (no pickled objects).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .diagnostics import ess, rhat

__all__ = ["Posterior", "finite_or_none", "weighted_quantile"]


def weighted_quantile(values: np.ndarray, weights: np.ndarray | None, q: float) -> float:
    """Quantile ``q`` of 1-D ``values`` under normalised ``weights`` (``None``: equal)."""
    values = np.asarray(values, dtype=float)
    if weights is None:
        return float(np.quantile(values, q))
    weights = np.asarray(weights, dtype=float)
    values, weights = values[weights > 0], weights[weights > 0]  # zero weight: not in the sample
    order = np.argsort(values)
    v, w = values[order], weights[order]
    cdf = np.cumsum(w) / w.sum()
    # midpoint interpolation of the weighted empirical CDF
    mid = cdf - 0.5 * w / w.sum()
    return float(np.interp(q, mid, v))


class Posterior:
    r"""Posterior draws ``[C, S, d]`` with names, optional weights and run information.

    Arguments:
        samples: ``[C, S, d]`` chains x draws x parameters, or ``[S, d]`` (one chain).
        names: ``d`` parameter names (default ``theta0 .. theta{d-1}``).
        weights: optional non-negative importance weights ``[C, S]`` (or ``[S]``).
        info: metadata that must be JSON-serialisable (method, seconds, ...).
    """

    def __init__(
        self,
        samples: Tensor | np.ndarray,
        names: Sequence[str] | None = None,
        *,
        weights: Tensor | np.ndarray | None = None,
        info: dict[str, Any] | None = None,
    ):
        samples = torch.as_tensor(np.asarray(samples) if not isinstance(samples, Tensor) else samples)
        samples = samples.detach().to("cpu", torch.float64)
        if samples.dim() == 2:
            samples = samples.unsqueeze(0)
        if samples.dim() != 3:
            raise ValueError(f"samples must be [C, S, d] or [S, d], got {tuple(samples.shape)}")
        self.samples = samples
        d = samples.shape[-1]
        self.names = list(names) if names is not None else [f"theta{k}" for k in range(d)]
        if len(self.names) != d:
            raise ValueError(f"{len(self.names)} names for {d} parameters")
        if weights is not None:
            weights = torch.as_tensor(np.asarray(weights)).to(torch.float64).reshape(samples.shape[:2])
            if (weights < 0).any() or not torch.isfinite(weights).all() or weights.sum() <= 0:
                raise ValueError("weights must be finite, non-negative and not all zero")
            weights = weights / weights.sum()
        self.weights = weights
        self.info = dict(info or {})

    # ----------------------------------------------------------------- access
    @property
    def num_chains(self) -> int:
        return self.samples.shape[0]

    @property
    def num_draws(self) -> int:
        return self.samples.shape[1]

    @property
    def dim(self) -> int:
        return self.samples.shape[2]

    @property
    def draws(self) -> Tensor:
        """All draws flattened over chains, ``[C*S, d]``."""
        return self.samples.reshape(-1, self.dim)

    def flat_weights(self) -> np.ndarray | None:
        """The draws' weights flattened over chains, ``[S]``, or ``None`` when unweighted."""
        return None if self.weights is None else self.weights.reshape(-1).numpy()

    def mean(self) -> Tensor:
        """Posterior mean ``[d]`` (weighted if weights are present)."""
        if self.weights is None:
            return self.draws.mean(0)
        return (self.weights.reshape(-1, 1) * self.draws).sum(0)

    def sd(self) -> Tensor:
        """Posterior standard deviation ``[d]``."""
        if self.weights is None:
            return self.draws.std(0)
        w = self.weights.reshape(-1, 1)
        return ((w * (self.draws - self.mean()) ** 2).sum(0)).sqrt()

    def quantile(self, q: float) -> Tensor:
        """Marginal quantile ``q`` of each parameter, ``[d]``."""
        w = self.flat_weights()
        x = self.draws.numpy()
        return torch.tensor([weighted_quantile(x[:, k], w, q) for k in range(self.dim)])

    def effective_sample_size(self) -> float | None:
        """Kish ESS of the importance weights (``None`` without weights)."""
        if self.weights is None:
            return None
        return float(1.0 / (self.weights**2).sum())

    def resample(self, num: int, *, generator: torch.Generator | None = None) -> Tensor:
        """Draw ``num`` rows ``[num, d]`` (multinomial by weight, uniform without)."""
        probs = (
            self.weights.reshape(-1)
            if self.weights is not None
            else torch.full((self.draws.shape[0],), 1.0 / self.draws.shape[0], dtype=torch.float64)
        )
        idx = torch.multinomial(probs, num, replacement=True, generator=generator)
        return self.draws[idx]

    # --------------------------------------------------------------- summary
    def summary(self) -> list[dict[str, Any]]:
        r"""Per parameter: name, mean, sd, q2.5, q97.5, rhat, ess (``None`` when undefined).

        R-hat and ESS are computed from the chain structure; they are ``None`` for
        weighted draws and when chains are too short (R-hat needs >= 4 draws per chain
        and >= 2 chains).
        """
        mean, sd = self.mean(), self.sd()
        lo, hi = self.quantile(0.025), self.quantile(0.975)
        rows = []
        for k, name in enumerate(self.names):
            chains = self.samples[:, :, k].numpy()
            r = e = None
            if self.weights is None:
                if self.num_chains >= 2 and self.num_draws >= 4:
                    r = rhat(chains)
                e = ess(chains)
            rows.append(
                {
                    "name": name,
                    "mean": float(mean[k]),
                    "sd": float(sd[k]),
                    "q2.5": float(lo[k]),
                    "q97.5": float(hi[k]),
                    "rhat": finite_or_none(r),
                    "ess": finite_or_none(e),
                }
            )
        return rows

    def format_summary(self, truth: Sequence[float] | None = None) -> str:
        """A plain-text table of [`summary()`][scorebayes.posterior.Posterior.summary], with a truth column if given."""
        head = f"{'parameter':>12} {'mean':>10} {'sd':>9} {'q2.5':>10} {'q97.5':>10} {'rhat':>6} {'ess':>8}"
        if truth is not None:
            head += f" {'truth':>10}"
        lines = [head]
        for k, row in enumerate(self.summary()):
            r = "-" if row["rhat"] is None else f"{row['rhat']:.3f}"
            e = "-" if row["ess"] is None else f"{row['ess']:.0f}"
            line = (
                f"{row['name']:>12} {row['mean']:>10.4g} {row['sd']:>9.3g} "
                f"{row['q2.5']:>10.4g} {row['q97.5']:>10.4g} {r:>6} {e:>8}"
            )
            if truth is not None:
                line += f" {float(truth[k]):>10.4g}"
            lines.append(line)
        return "\n".join(lines)

    # ------------------------------------------------------------ conversion
    def to_arviz(self) -> Any:
        """An ``arviz.InferenceData`` with a ``posterior`` group (needs ArviZ)."""
        try:
            import arviz as az
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("to_arviz() needs ArviZ: pip install arviz") from None
        import warnings

        data = {name: self.samples[:, :, k].numpy() for k, name in enumerate(self.names)}
        with warnings.catch_warnings():  # many short chains are normal for Langevin output
            warnings.filterwarnings("ignore", message="More chains")
            return az.from_dict(posterior=data)

    def to_csv(self, path: str | Path) -> None:
        """Write ``samples.csv``: parameter columns, then ``chain``, ``draw`` (and ``weight``)."""
        c, s, d = self.samples.shape
        chain = np.repeat(np.arange(c), s)
        draw = np.tile(np.arange(s), c)
        cols = [self.draws.numpy(), chain[:, None], draw[:, None]]
        header = list(self.names) + ["chain", "draw"]
        fmt = ["%.10g"] * d + ["%d", "%d"]
        if self.weights is not None:
            cols.append(self.weights.reshape(-1, 1).numpy())
            header.append("weight")
            fmt.append("%.10g")
        np.savetxt(path, np.hstack(cols), delimiter=",", header=",".join(header), comments="", fmt=fmt)

    def save(self, path: str | Path) -> None:
        """Save to ``.npz`` (arrays) with JSON metadata; no pickled objects."""
        meta = json.dumps({"names": self.names, "info": self.info})
        arrays = {"samples": self.samples.numpy(), "meta": np.array(meta)}
        if self.weights is not None:
            arrays["weights"] = self.weights.numpy()
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> Posterior:
        """Load a posterior written by [`save()`][scorebayes.posterior.Posterior.save] (``allow_pickle=False``)."""
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            weights = data["weights"] if "weights" in data.files else None
            return cls(data["samples"], meta["names"], weights=weights, info=meta["info"])

    def pairplot(self, path: str | Path | None = None, *, truth: Sequence[float] | None = None,
                 max_points: int = 2000) -> Any:
        """Pair plot (histograms on the diagonal, scatter below); saved if ``path``."""
        from .plots import pairplot

        return pairplot(self, path, truth=truth, max_points=max_points)

    def __repr__(self) -> str:
        w = ", weighted" if self.weights is not None else ""
        return f"Posterior(chains={self.num_chains}, draws={self.num_draws}, dim={self.dim}{w})"


def finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)
