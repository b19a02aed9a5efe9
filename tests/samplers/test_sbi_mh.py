"""MH-corrected Langevin on an SBI posterior with a known score (scorebayes.samplers.sbi_mh).

Gaussian model: prior N(0, 3^2 I_2), x_i ~ N(theta, I_2), n = 10, so the posterior is
N(n xbar / (n + 1/9), 1 / (n + 1/9) I). The fake estimator carries the exact likelihood score,
bypassing training. At kappa = h lambda_max = 1, ULA's stationary variance is 1/(lambda (1 - kappa/2))
= twice the posterior's (sd x 1.41); MALA with the path-integral acceptance is exact.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal

from scorebayes.sbi import DataSmoothing
from scorebayes.posterior import Posterior
from scorebayes.priors import ParameterSpace, independent
from scorebayes.proposal import GaussianProposal
from scorebayes.samplers.sbi_mh import mh_correct, posterior_score

N_OBS, PRIOR_SD = 10, 3.0


class KnownScoreEstimator:
    """The attributes sbi_mh uses, with the exact likelihood score."""

    def __init__(self, x_obs: torch.Tensor):
        self.prior = independent([Normal(0.0, PRIOR_SD), Normal(0.0, PRIOR_SD)])
        self.space = ParameterSpace(self.prior)
        self.x_obs_ = x_obs
        self.proposal_ = GaussianProposal(self.space, x_obs.mean(0) + 0.3, torch.full((2,), 0.8))
        self.training_region_ = (torch.full((2,), -20.0, dtype=torch.float64),
                                 torch.full((2,), 20.0, dtype=torch.float64))
        self.parameter_names = ["a", "b"]
        self.seed = 3

    def likelihood_score(self, u: torch.Tensor) -> torch.Tensor:
        return (self.x_obs_.sum(0) - len(self.x_obs_) * u).to(torch.float64)


@pytest.fixture(scope="module")
def setting():
    x = 1.0 + torch.randn(N_OBS, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    precision = N_OBS + 1 / PRIOR_SD**2
    return KnownScoreEstimator(x), x.sum(0) / precision, 1 / math.sqrt(precision)


def _moments(posterior):
    draws = posterior.draws.reshape(-1, 2)
    return draws.mean(0), draws.std(0)


def test_posterior_score_is_exact(setting):
    est, mean, sd = setting
    u = torch.randn(5, 2, dtype=torch.float64)
    assert torch.allclose(posterior_score(est)(u), -(u - mean) / sd**2, atol=1e-8)


def test_quadrature_mh_removes_ula_bias_at_large_step(setting):
    est, mean, sd = setting
    kw = dict(num_samples=8000, chains=200, step_size_factor=1.0, burn_in=200, thin=2)
    ula = mh_correct(est, acceptance="none", **kw)
    mh = mh_correct(est, acceptance="quadrature", num_nodes=2, **kw)
    m_ula, s_ula = _moments(ula)
    m_mh, s_mh = _moments(mh)
    # exact chains: 8000 correlated draws, ESS >~ 2000 -> relative SE of the sd <~ 1.6%
    assert torch.all((s_mh / sd - 1).abs() < 0.06), s_mh / sd
    assert torch.all((m_mh - mean).abs() < 5 * sd / math.sqrt(2000)), m_mh - mean
    # ULA: sd inflated by 1/sqrt(1 - kappa/2) = 1.41
    assert torch.all(s_ula / sd > 1.3), s_ula / sd
    assert ula.info["acceptance_rate"] == 1.0
    assert 0.5 < mh.info["acceptance_rate"] < 1.0
    assert mh.samples.shape == (200, 40, 2) and mh.names == ["a", "b"]


def test_learned_acceptance_reduces_bias(setting):
    est, mean, sd = setting
    mh = mh_correct(est, acceptance="learned", num_samples=4000, chains=200, step_size_factor=1.0,
                    burn_in=200, thin=2, acceptance_epochs=300, pilot_steps=60)
    _, s_mh = _moments(mh)
    assert torch.all((s_mh / sd - 1).abs() < 0.15), s_mh / sd
    assert 0.3 < mh.info["acceptance_rate"] < 1.0


class NoisyCopiesEstimator(KnownScoreEstimator):
    """Noise smoothing with 3 fixed copies of the data: copy c shifts the second coordinate of
    every observation by (c - 1), so copy c's posterior is N(mean + (0, (c - 1) n / (n + 1/9)), sd^2 I);
    the chain box cuts the first coordinate at the posterior mean."""

    noise_sd, noise_draws = 0.5, 3

    def __init__(self, x_obs: torch.Tensor, cut: float):
        super().__init__(x_obs)
        self.cut = cut

    def noisy_copies(self) -> list[torch.Tensor]:
        return [self.x_obs_ + torch.tensor([0.0, c - 1.0], dtype=torch.float64) for c in range(3)]

    def chain_box(self) -> tuple[torch.Tensor, torch.Tensor]:
        low, high = self.training_region_
        return low, torch.tensor([self.cut, float(high[1])], dtype=torch.float64)

    def likelihood_score(self, u: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        x = self.x_obs_ if x is None else x
        return (x.sum(0) - len(x) * u).to(torch.float64)


def test_noise_smoothed_estimator_is_corrected_copy_by_copy_inside_its_chain_box(setting):
    r"""Each chain targets its own copy's posterior (second coordinate's mean shifted by about
    c - 1 = 3.2 sd), truncated to the chain box: the first coordinate is a half-normal below the
    mean (mean - sd sqrt(2/pi), sd sqrt(1 - 2/pi) sd). Chains mixed up between copies, or on the
    raw data, miss the per-copy means by about 3 sd."""
    _, mean, sd = setting
    est = NoisyCopiesEstimator(setting[0].x_obs_, float(mean[0]))
    owner = [0] * 60 + [1] * 60 + [2] * 60
    start = mean + 0.1 * torch.randn(180, 5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    start[:, :, 0] = start[:, :, 0].clamp_max(float(mean[0]))
    init = Posterior(start, ["a", "b"], info={"chain_copies": owner})
    post = mh_correct(est, 180 * 30, chains=180, init=init, acceptance="quadrature", num_nodes=2,
                      step_size_factor=1.0, burn_in=200, thin=3, seed=4)
    assert post.info["chain_copies"] == owner and len(post.info["acceptance_rate_per_copy"]) == 3
    draws = post.samples  # [180, 30, 2]
    assert (draws[..., 0] <= mean[0] + 1e-12).all()
    shift = N_OBS / (N_OBS + 1 / PRIOR_SD**2)
    for c in range(3):
        block = draws[60 * c:60 * (c + 1)].reshape(-1, 2)
        se = sd / math.sqrt(len(block) / 3)  # an effective sample size of a third of the draws
        assert abs(float(block[:, 1].mean()) - (float(mean[1]) + (c - 1) * shift)) < 5 * se, c
        half_normal_mean = float(mean[0]) - sd * math.sqrt(2 / math.pi)
        assert abs(float(block[:, 0].mean()) - half_normal_mean) < 5 * se, c
    with pytest.raises(ValueError, match="chain_copies"):
        mh_correct(est, 100, init=Posterior(start, ["a", "b"]))


def test_langevin_sample_records_each_chains_copy_for_the_correction(known_score_estimator):
    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    est.likelihood_.smoothing = DataSmoothing(0.5, 3, est.seed)
    copies = est.noisy_copies()
    assert len(copies) == 3 and not torch.equal(copies[0], copies[1])
    assert all(torch.equal(a, b) for a, b in zip(copies, est.noisy_copies()))  # the same on every call
    post = est.sample(60, chains=30, max_steps=200, seed=2)
    assert post.info["chain_copies"] == [0] * 10 + [1] * 10 + [2] * 10
    fixed = mh_correct(est, 60, init=post, acceptance="quadrature", num_nodes=2, burn_in=20, thin=2, seed=2)
    assert fixed.info["chain_copies"] == post.info["chain_copies"] and fixed.samples.shape == (30, 2, 2)


def test_bad_input(setting):
    est, _, _ = setting
    with pytest.raises(ValueError, match="acceptance"):
        mh_correct(est, acceptance="exact")
    with pytest.raises(ValueError, match="step_size"):
        mh_correct(est, step_size=-1.0)
    with pytest.raises(RuntimeError, match="fit"):
        mh_correct(object())


def test_cli_option_mh_correction(tmp_path, capsys):
    """method = "score-langevin" with [options] mh_correction (apps/langevin.py)."""
    import json

    from scorebayes.cli import main

    (tmp_path / "sim.py").write_text(
        "import torch\n"
        "def simulate(theta, n, generator=None):\n"
        "    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator,"
        " dtype=theta.dtype)\n")
    config = '''method = "score-langevin"
seed = 2
[model]
simulator = "sim.py:simulate"
parameters = ["mu"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 5.0
[data]
true_parameters = [1.5]
n = 40
[options]
table_size = 2000
num_groups = 200
group_size = 50
localize = false
curvature_penalties = [0.0]
mean_penalties = [0.0]
schedule = { epochs = 8, patience = 8 }
mean_schedule = { epochs = 10, batch_size = 32 }
num_samples = 200
mh_correction = "%s"
'''
    (tmp_path / "run.toml").write_text(config % "quadrature")
    assert main(["run", str(tmp_path / "run.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    row = summary["parameters"][0]
    assert abs(row["mean"] - 1.5) < 5 * (row["sd"] + 0.2)
    (tmp_path / "bad.toml").write_text(config % "exact")
    assert main(["run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "bad"), "--quiet"]) != 0
    # started from the Langevin chains, with pCN jumps
    (tmp_path / "ula.toml").write_text(config % "quadrature" + 'mh_init = "ula"\nmh_jump_every = 5\nchains = 20\n')
    assert main(["run", str(tmp_path / "ula.toml"), "--out", str(tmp_path / "ula"), "--quiet"]) == 0
    row = json.loads((tmp_path / "ula" / "summary.json").read_text())["parameters"][0]
    assert abs(row["mean"] - 1.5) < 5 * (row["sd"] + 0.2)
    for extra, message in (('mh_init = "prior"\n', "mh_init"), ("mh_jump_every = 0\n", "mh_jump_every")):
        (tmp_path / "bad.toml").write_text(config % "quadrature" + extra)
        capsys.readouterr()
        assert main(["run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "bad2"), "--quiet"]) != 0
        assert message in capsys.readouterr().err  # and the refused run leaves no manifest behind
    (tmp_path / "bad.toml").write_text((config % "quadrature").replace('mh_correction = "quadrature"\n', "")
                                       + "mh_jump_every = 5\n")
    assert main(["run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "bad3"), "--quiet"]) != 0
    assert 'needs mh_correction = "quadrature" or "learned"' in capsys.readouterr().err
