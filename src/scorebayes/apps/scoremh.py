"""CLI method ``score-mh``: MH-corrected samples of a target known only through samples.

Config:

```toml
method = "score-mh"
[data]
observed = "samples.csv"     # [N, d] samples of the target; the header names the columns
[options]                    # keyword arguments of scorebayes.scoremh.pipeline.score_mh
proposal = "mala"            # rw | mala | pcn | ula
acceptance = "learned"       # learned | taylor | quadrature
score_model = "ism"          # ism | ssm | dsm
```

Writes (besides the CLI's standard files) ``samples_vs_data.png``: the draws over the data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import ConfigError, check_keys, check_options, load_array
from ..parallel import make_generator
from ..posterior import Posterior
from ..scoremh.pipeline import ACCEPTANCES, PROPOSALS, score_mh
from ..scoremh.score_matching import SCORE_METHODS
from . import AppResult

__all__ = ["run", "MIN_SAMPLES"]

MIN_SAMPLES = 20
_CHOICES = {"proposal": PROPOSALS, "acceptance": ACCEPTANCES, "score_model": SCORE_METHODS,
            "init": ("normal", "data"), "learned_form": ("direct", "ratio")}
_POSITIVE_INT = ("chains", "steps", "keep", "score_hidden", "score_epochs", "acceptance_hidden",
                 "acceptance_epochs")


def _check_options(options: dict[str, Any]) -> None:
    check_options(options, score_mh, exclude=("data", "generator", "progress"))
    for key, allowed in _CHOICES.items():
        if key in options and options[key] not in allowed:
            raise ConfigError(f"[options] {key} = {options[key]!r} is not one of {list(allowed)}")
    for key in _POSITIVE_INT:
        if key in options and (not isinstance(options[key], int) or isinstance(options[key], bool)
                               or options[key] < 1):
            raise ConfigError(f"[options] {key} must be a positive integer, got {options[key]!r}")
    for key in ("step_size", "lam"):
        value = options.get(key)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)
                                  or not np.isfinite(value) or value < 0 or (key == "step_size" and value == 0)):
            raise ConfigError(f"[options] {key} must be a {'positive' if key == 'step_size' else 'non-negative'}"
                              f" number, got {value!r}")
    if options.get("proposal") == "pcn" and options.get("step_size") is not None and options["step_size"] >= 1:
        raise ConfigError("[options] step_size for pcn is beta and must be in (0, 1)")
    if options.get("keep", 100) > options.get("steps", 500):
        raise ConfigError(f"[options] keep ({options.get('keep', 100)}) must not exceed steps "
                          f"({options.get('steps', 500)})")


def _scatter(draws: np.ndarray, data: np.ndarray, names: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = data.shape[1]
    rng = np.random.default_rng(0)
    a = data[rng.choice(len(data), size=min(3000, len(data)), replace=False)]
    b = draws[rng.choice(len(draws), size=min(3000, len(draws)), replace=False)]
    if d == 1:
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.hist(a[:, 0], bins=50, density=True, alpha=0.5, label="data")
        ax.hist(b[:, 0], bins=50, density=True, alpha=0.5, label="score-MH")
        ax.set_xlabel(names[0])
        ax.legend()
    else:
        fig, axes = plt.subplots(d - 1, d - 1, figsize=(3 * (d - 1) + 1, 3 * (d - 1) + 1), squeeze=False)
        for i in range(1, d):
            for j in range(d - 1):
                ax = axes[i - 1, j]
                if j >= i:
                    ax.axis("off")
                    continue
                ax.scatter(a[:, j], a[:, i], s=1, color="0.6", label="data")
                ax.scatter(b[:, j], b[:, i], s=1, color="C3", alpha=0.5, label="score-MH")
                ax.set_xlabel(names[j])
                ax.set_ylabel(names[i])
        axes[0, 0].legend(markerscale=5, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(config: dict[str, Any], *, base_dir: Path, out_dir: Path, seed: int, progress: bool) -> AppResult:
    """Validate the config, fit the score and acceptance models, run the chains."""
    check_keys(config, {"method", "seed", "name", "data", "options"}, "a score-mh config")
    data_table = config.get("data")
    if not isinstance(data_table, dict) or "observed" not in data_table:
        raise ConfigError("score-mh needs [data] observed = \"samples.csv\" (samples of the target)")
    check_keys(data_table, {"observed"}, "[data]")
    options = dict(config.get("options", {}))
    _check_options(options)
    data, header = load_array(data_table["observed"], base_dir, what="[data] observed")
    if data.shape[0] < MIN_SAMPLES:
        raise ConfigError(f"[data] observed has {data.shape[0]} samples; score-mh needs at least {MIN_SAMPLES}")
    if np.any(data.std(0) == 0):
        raise ConfigError("[data] observed has a constant column; the target must vary in every coordinate")
    names = header if header is not None else [f"x{k}" for k in range(data.shape[1])]
    if len(names) != data.shape[1]:
        raise ConfigError(f"[data] header has {len(names)} names for {data.shape[1]} columns")
    generator = make_generator(seed, "score-mh")
    draws, info = score_mh(torch.as_tensor(data), generator=generator, progress=progress, **options)
    flat = draws.reshape(-1, data.shape[1]).numpy()
    if not np.all(np.isfinite(flat)):
        raise ValueError("score-mh produced non-finite draws: lower step_size or train the score longer")
    out_dir.mkdir(parents=True, exist_ok=True)
    _scatter(flat, data, names, out_dir / "samples_vs_data.png")
    extra = {"acceptance_rate": round(info["acceptance_rate"], 4), "samples": int(data.shape[0]),
             "options": options}
    posterior = Posterior(draws, names, info={"method": "score-mh", **extra})
    return AppResult(posterior, extra)
