"""Plots: pair plots of posterior draws (matplotlib, Agg backend, no screen needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["pairplot", "pyplot"]


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (unless one is already chosen)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def pairplot(posterior: Any, path: str | Path | None = None, *,
             truth: Sequence[float] | None = None, max_points: int = 2000,
             max_dims: int = 12) -> Any:
    """Pair plot of a [`Posterior`][scorebayes.posterior.Posterior].

    Diagonal: weighted histograms; lower triangle: scatter of up to ``max_points``
    draws; the truth (if given) as red lines. At most ``max_dims`` parameters shown.
    Returns the figure (and saves it to ``path`` if given).
    """
    plt = pyplot()
    draws = posterior.draws.numpy()
    weights = posterior.flat_weights()
    d = min(draws.shape[1], max_dims)
    rng = np.random.default_rng(0)
    take = rng.choice(len(draws), size=min(max_points, len(draws)), replace=False, p=weights)
    size = 1.6 * d + 1
    fig, axes = plt.subplots(d, d, figsize=(size, size), squeeze=False)
    for i in range(d):
        for j in range(d):
            ax = axes[i, j]
            if j > i:
                ax.axis("off")
                continue
            if i == j:
                ax.hist(draws[:, i], bins=40, weights=weights, color="C0", alpha=0.8)
                if truth is not None:
                    ax.axvline(truth[i], color="C3", lw=1)
                ax.set_yticks([])
            else:
                ax.scatter(draws[take, j], draws[take, i], s=2, alpha=0.3, color="C0")
                if truth is not None:
                    ax.axvline(truth[j], color="C3", lw=0.8)
                    ax.axhline(truth[i], color="C3", lw=0.8)
            if i == d - 1:
                ax.set_xlabel(posterior.names[j], fontsize=8)
            if j == 0 and i > 0:
                ax.set_ylabel(posterior.names[i], fontsize=8)
            ax.tick_params(labelsize=6)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return fig
