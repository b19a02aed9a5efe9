import functools
import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest
import torch

from scorebayes.sbi import LearnedLikelihoodScore

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

torch.set_num_threads(1)


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(0)


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark("monotone.py", "name")`` imports a benchmark script as a module."""
    def load(filename: str, module_name: str):
        if str(BENCHMARKS) not in sys.path:
            sys.path.insert(0, str(BENCHMARKS))  # the scripts import their shared helpers
        spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / filename)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


class KnownLikelihoodScore(LearnedLikelihoodScore):
    """A fitted likelihood score whose values come from a known ``score(u, x, compiled)``, on the
    trained ``region``; a test swaps the function with ``est.likelihood_.score = ...``."""

    def __init__(self, fitted: LearnedLikelihoodScore, score, region):
        super().__init__(fitted.space, fitted.view, fitted.score_net, fitted.mean_net, fitted.x_obs,
                         training_region=region, support_fn=fitted.support_fn, smoothing=fitted.smoothing,
                         device=fitted.device)
        self.score = score

    def __call__(self, u, x_obs=None, *, compiled=False):
        return self.score(u, x_obs, compiled)


@pytest.fixture
def known_score_estimator():
    r"""``make(precision [2, 2], m [2])``: a fitted 2-parameter ``ScoreLangevin`` (prior N(0, 3^2 I))
    whose likelihood score is replaced by the known :math:`-P(u - m)` and whose trained region is
    [-50, 50]^2, so the sampler can be checked against an exact Gaussian posterior."""
    from torch.distributions import Normal

    from scorebayes.priors import independent
    from scorebayes.sbi import ScoreLangevin
    from scorebayes.scores.training import TrainingSchedule

    def make(precision: torch.Tensor, m: torch.Tensor) -> ScoreLangevin:
        prior = independent([Normal(torch.tensor(0.0, dtype=torch.float64), 3.0)] * 2)

        def simulate(th, n, g):
            return th[:, None, :] + torch.randn(len(th), n, 2, generator=g, dtype=th.dtype)

        est = ScoreLangevin.from_options(prior, simulate, mode="n", localize=False, table_size=16, progress=False, calibrate=False,
                            schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=8))
        est.fit(torch.zeros(3, 2))
        region = (torch.full((2,), -50.0, dtype=torch.float64), torch.full((2,), 50.0, dtype=torch.float64))
        est.likelihood_ = KnownLikelihoodScore(est.likelihood_, lambda u, x=None, compiled=False: -(u - m) @ precision,
                                               region)
        # the known score stands in for a fit, so the fit's check means nothing here (it warns, and
        # its remedy, a second table round, would retrain the network and lose the known score)
        est.sample = functools.partial(est.sample, check=False)
        return est
    return make


@pytest.fixture
def langevin_spy(monkeypatch):
    """Records the ``init``, keyword arguments and steps run (``total_steps``) of the last call of
    ``sbi.run_langevin`` or ``sbi.run_langevin_to_ess`` (its ``rule`` too)."""
    import scorebayes.sbi.sampling as sbi_module

    seen = {}

    def spying(real):
        def spy(lik, prior_score, init, *rule, **kwargs):
            seen.clear()
            seen.update(kwargs, init=init.clone(), rule=rule[0] if rule else None)
            draws, info = real(lik, prior_score, init, *rule, **kwargs)
            seen["total_steps"] = info.total_steps
            return draws, info
        return spy

    monkeypatch.setattr(sbi_module, "run_langevin", spying(sbi_module.run_langevin))
    monkeypatch.setattr(sbi_module, "run_langevin_to_ess", spying(sbi_module.run_langevin_to_ess))
    return seen
