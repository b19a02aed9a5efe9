"""A run's outputs in its directory: ``summary.json``, ``samples.csv``, ``pairplot.png`` and, with
ArviZ installed, ``posterior.nc``."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["write_outputs"]


def write_outputs(result, out_dir: Path, *, method: str, seed: int, seconds: float) -> dict:
    """Write summary.json, samples.csv, pairplot.png (and posterior.nc if ArviZ is present)."""
    posterior = result.posterior
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = {
        "method": method,
        "seed": seed,
        "seconds": round(seconds, 3),
        "simulations": result.extra.get("simulations"),
        "parameters": posterior.summary(),
    }
    for key, value in result.extra.items():
        if key not in summary:
            summary[key] = value
    with open(out_dir / "summary.json", "w") as fh:
        json.dump(summary, fh, indent=2)
    posterior.to_csv(out_dir / "samples.csv")
    posterior.pairplot(out_dir / "pairplot.png", truth=result.truth)
    try:
        import arviz  # noqa: F401
    except ImportError:
        pass
    else:
        posterior.to_arviz().to_netcdf(str(out_dir / "posterior.nc"))
    return summary
