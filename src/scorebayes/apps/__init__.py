"""Application layer of the CLI: one module per method, each mapping a config onto the Python API.

Contract for a method module: a function

    run(config: dict, *, base_dir: Path, out_dir: Path, seed: int, progress: bool) -> AppResult

that validates *all* of its input first (raising `scorebayes.config.ConfigError` with
one clear line) and only then does expensive work. The CLI writes ``summary.json``,
``samples.csv``, ``pairplot.png`` (and ``posterior.nc``) from the returned result; a method
may write extra files of its own into ``out_dir``.
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

from ..posterior import Posterior

__all__ = ["AppResult", "METHODS", "get_runner"]


class AppResult(NamedTuple):
    posterior: Posterior
    extra: dict[str, Any]  # merged into summary.json (e.g. {"simulations": 123, "beta": 0.4})
    truth: list[float] | None = None  # drawn on the pair plot when known


# method name -> module implementing `run`
METHODS = {
    "score-langevin": "scorebayes.apps.langevin",
    "dfd-bayes": "scorebayes.apps.dfd",
    "score-mh": "scorebayes.apps.scoremh",
    "abc": "scorebayes.apps.baselines",
    "abc-pmc": "scorebayes.apps.baselines",
    "bsl": "scorebayes.apps.baselines",
    "npe": "scorebayes.apps.baselines",
}


def get_runner(method: str):
    from ..config import ConfigError

    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")
    try:
        module = importlib.import_module(METHODS[method])
    except ModuleNotFoundError as err:
        raise ConfigError(f"method {method!r} is not available in this build ({err})") from None
    return module.run
