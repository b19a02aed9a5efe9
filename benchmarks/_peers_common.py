r"""The sbi side of ``peers.py`` (``scorebayes bench peers``): the prior and the simulations as
sbi takes them, seeds, sbi's training record, and the guards every method runs under.

``sbi_prior(prior)``
    the suite's product prior in float32 as an sbi user writes it (see ``peers.py``).
``method_seed(model, method, rep)``, ``seed_everything(seed) -> torch.Generator``
    a seed per (model, method, rep); torch's and numpy's global RNGs seeded (sbi draws from them).
``simulate_data_sets(model, num, generator)``, ``simulate_single_rows(model, rows, generator)``
    ``theta [num, d]`` from the prior and a data set of size ``n`` each ``[num, n, p]``; or one
    observation each ``[rows, p]`` (in chunks of ``SINGLE_ROW_CHUNK``).
``epochs_trained(inference)``, ``as_posterior(draws, model, method)``, ``NoTracker``
    sbi's epochs; its draws as a scorebayes ``Posterior``; a tracker that writes no logs.
``MethodTimeout``, ``time_limit(seconds)``, ``limit_memory(gigabytes)``
    the ``--timeout`` and ``--max-memory-gb`` guards.
``error_text(err)``, ``unique_warnings(caught)``
    an exception, and the distinct warnings, as a row records them.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import traceback
import warnings
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Distribution, Independent

from scorebayes.models.base import Model
from scorebayes.posterior import Posterior
from scorebayes.priors import IndependentPrior

SINGLE_ROW_CHUNK = 50_000  # single observations simulated per simulator call


class NoTracker:
    """An sbi tracker that records nothing (sbi's default writes TensorBoard logs to ./sbi-logs)."""

    log_dir = None

    def log_metric(self, name: str, value: float, step: int | None = None) -> None:
        """Ignore a metric."""

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        """Ignore metrics."""

    def log_params(self, params: dict) -> None:
        """Ignore parameters."""

    def add_figure(self, name: str, figure: Any, step: int | None = None) -> None:
        """Ignore a figure."""

    def flush(self) -> None:
        """Nothing to flush."""


class MethodTimeout(BaseException):
    """A method (or an NPSE training or composition) ran past ``--timeout``; a BaseException, so
    that sbi's own ``except Exception`` fallbacks cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`MethodTimeout` in the block after ``seconds`` (``None``: no limit).

    sbi's rejection loops can run without end (e.g. ``auto_gauss``'s per-observation posteriors
    when most draws leave the prior's support); the alarm turns that into the method's error row.
    Not nestable (one SIGALRM timer).
    """
    if not seconds:
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise MethodTimeout(f"no result within {seconds:.0f} s (--timeout)")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def limit_memory(gigabytes: float | None) -> None:
    """Cap this process's address space, so a runaway method fails with a MemoryError (its
    error row) instead of exhausting the machine (``None``: no cap)."""
    if gigabytes:
        limit = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


# --- the prior and the simulations, as sbi takes them ------------------------------------------

def _float32_marginal(marginal: Distribution, shape: tuple[int, ...] = (1,)) -> Distribution:
    """A float32 copy of a univariate torch distribution with parameters of ``shape``."""
    params = {k: getattr(marginal, k).to(torch.float32).reshape(shape)
              for k in marginal.arg_constraints}
    return type(marginal)(**params)


def sbi_prior(prior: Distribution) -> Distribution:
    """The suite's product prior in float32 as sbi takes it (see the module docstring)."""
    from sbi.utils import MultipleIndependent, process_prior

    if not isinstance(prior, IndependentPrior):
        raise TypeError(f"expected a scorebayes IndependentPrior, got {type(prior).__name__}")
    marginals = prior.marginals
    families = {type(m) for m in marginals}
    if len(families) == 1:
        params = {k: torch.stack([getattr(m, k) for m in marginals]).to(torch.float32)
                  for k in marginals[0].arg_constraints}
        joint = Independent(type(marginals[0])(**params), 1)
    else:
        joint = MultipleIndependent([_float32_marginal(m) for m in marginals])
    return process_prior(joint)[0]


def method_seed(model: str, method: str, rep: int) -> int:
    """A seed of its own for each (model, method, rep), the same in every run."""
    return zlib.crc32(f"{model}/{method}/{rep}".encode()) % 2**31


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch's and numpy's global RNGs (sbi draws from them); a simulation generator."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    return torch.Generator().manual_seed(seed)


def simulate_data_sets(model: Model, num: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``num`` prior draws ``theta [num, d]`` and a data set of size ``n`` each ``[num, n, p]``."""
    theta = model.prior.sample((num,))
    return theta, model.simulator(theta, model.n_obs, generator)


def simulate_single_rows(model: Model, rows: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``rows`` prior draws ``theta [rows, d]`` and one observation each ``x [rows, p]``."""
    thetas, xs = [], []
    for start in range(0, rows, SINGLE_ROW_CHUNK):
        theta = model.prior.sample((min(SINGLE_ROW_CHUNK, rows - start),))
        thetas.append(theta)
        xs.append(model.simulator(theta, 1, generator)[:, 0])
    return torch.cat(thetas), torch.cat(xs)


def epochs_trained(inference: Any) -> int | None:
    """Epochs of sbi's last training (``None`` if it did not say)."""
    epochs = (getattr(inference, "_summary", {}) or {}).get("epochs_trained") or [None]
    return None if epochs[-1] is None else int(epochs[-1])


def as_posterior(draws: Tensor, model: Model, method: str) -> Posterior:
    """sbi's draws ``[S, d]`` as a scorebayes Posterior (float64, the model's names)."""
    return Posterior(draws.reshape(-1, model.dim).double(), model.parameter_names,
                     info={"method": method})


# --- what a row records ------------------------------------------------------------------------

def error_text(err: BaseException) -> str:
    """``Type: message`` of an exception, on one line, with where it was raised (for a timeout,
    where the alarm interrupted the method)."""
    frames = traceback.extract_tb(err.__traceback__) if err.__traceback__ else []
    if isinstance(err, MethodTimeout) and len(frames) > 1:
        frames = frames[:-1]  # the alarm handler itself
    frame = frames[-1] if frames else None
    where = f" ({frame.filename.split('site-packages/')[-1]}:{frame.lineno})" if frame else ""
    message = " ".join(str(err).split())
    return f"{type(err).__name__}: {message[:500]}{where}"


def unique_warnings(caught: list[warnings.WarningMessage], limit: int = 8) -> list[str]:
    """The distinct warning messages (first line, category), at most ``limit``."""
    seen: list[str] = []
    for w in caught:
        text = f"{w.category.__name__}: {' '.join(str(w.message).split())[:200]}"
        if text not in seen:
            seen.append(text)
    return seen[:limit]
