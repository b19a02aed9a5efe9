"""ScoreLangevin.fit input checks that run before any expensive work."""

import numpy as np
import pytest
import torch
from torch.distributions import Normal

from scorebayes.priors import independent
from scorebayes.sbi import ScoreLangevin
from scorebayes.scores.training import TrainingSchedule

T = 7


def fixed_length(theta, n, generator):
    """A time-series simulator: only data sets of length T exist."""
    if n != T:
        raise ValueError(f"this simulator returns T={T} rows; got n={n}")
    return theta[:, None, :] + torch.randn(len(theta), n, 1, generator=generator, dtype=theta.dtype)


def estimator(**kw):
    return ScoreLangevin.from_options(independent([Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)]), fixed_length,
                         mode="full", localize=False, table_size=32, progress=False,
                         schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=16), **kw)


def test_fixed_length_simulator_passes_the_pilot_check():
    est = estimator().fit(torch.zeros(T, 1))
    assert est.sample(8, chains=4, max_steps=40).draws.shape == (8, 1)


def test_column_mismatch_is_reported_before_the_tables():
    with pytest.raises(ValueError, match="p=1 columns per observation but the observed data have p=2"):
        estimator().fit(torch.zeros(T, 2))


def test_dense_preconditioning_samples_an_ill_conditioned_posterior(known_score_estimator, langevin_spy):
    r"""Known likelihood score :math:`-P(u - m)` with curvatures 1e4 and 1 along rotated axes.

    The automatic step is set by the stiff direction, so plain chains barely move along the soft
    one within ``max_steps``; whitened chains must match the exact Gaussian posterior.
    """
    rot = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.float64) / 2**0.5
    precision = rot @ torch.diag(torch.tensor([1e4, 1.0], dtype=torch.float64)) @ rot.T
    m = torch.tensor([0.5, -0.3], dtype=torch.float64)
    est = known_score_estimator(precision, m)
    post_precision = precision + torch.eye(2, dtype=torch.float64) / 9.0
    cov = torch.linalg.inv(post_precision)
    mean = cov @ (precision @ m)
    sd = cov.diagonal().sqrt()

    post = est.sample(4000, chains=200, precondition="dense", max_steps=4000, seed=1)
    draws = post.draws
    # MC error with 4000 (weakly correlated) draws: se(mean) ~ sd/sqrt(ESS); allow ESS >= 1000
    assert ((draws.mean(0) - mean).abs() < 4 * sd / 1000**0.5).all(), (draws.mean(0), mean)
    assert ((draws.std(0) / sd - 1).abs() < 0.1).all(), (draws.std(0), sd)
    assert post.info["precondition"] == "dense"

    # the automatic schedule respects max_steps also with tempering (relaxation ~1e4 steps here),
    # with the ESS stopping rule (the default) and with a fixed budget
    for fixed in ({}, {"burn_in": 300}):
        est.sample(40, chains=4, tempering=True, max_steps=2000, seed=2, **fixed)
        seen = langevin_spy
        assert (seen["rule"] is None) == bool(fixed)
        assert len(seen["tempering"]) * seen["steps_per_stage"] > 0
        assert 1000 < seen["total_steps"] <= 2000, seen


def _pseudo_huber_estimator(known_score_estimator, *, stiff: float = 1e4, delta: float = 0.1):
    r"""A posterior that is not Gaussian in u, with exact moments by quadrature.

    Likelihood along rotated axes :math:`z = R^\top(u - m)`: pseudo-Huber in :math:`z_1`,
    :math:`-\lambda\delta^2(\sqrt{1 + (z_1/\delta)^2} - 1)`, Gaussian in :math:`z_2`; prior
    :math:`N(0, 9I)`, so the posterior factorises in z. Its curvature along :math:`z_1` is
    :math:`\lambda = 10^4` at the mode (sd 0.01) but about 0.4 at the prior-drawn starts
    (:math:`|z_1| \sim 3`): whitened by the curvature at the starts, the chains need ~13,000 steps
    to relax (measured), so 4,000 leave the stiff axis too wide.
    """
    rot = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.float64) / 2**0.5  # columns: axes
    m = torch.tensor([0.5, -0.3], dtype=torch.float64)
    est = known_score_estimator(torch.eye(2, dtype=torch.float64), m)

    def score(u, x=None, compiled=False):
        z = (u - m) @ rot
        grad_z = torch.stack([-stiff * z[:, 0] / torch.sqrt(1 + (z[:, 0] / delta) ** 2), -z[:, 1]], -1)
        return grad_z @ rot.T

    est.likelihood_.score = score
    prior_mean = -(m @ rot)
    grid = torch.linspace(-0.3, 0.3, 200_001, dtype=torch.float64)
    log_post = -stiff * delta**2 * (torch.sqrt(1 + (grid / delta) ** 2) - 1) - (grid - prior_mean[0]) ** 2 / 18
    w = torch.softmax(log_post, 0)
    mean1 = (w * grid).sum()
    sd1 = (w * (grid - mean1) ** 2).sum().sqrt()
    precision2 = 1 + 1 / 9
    mean = torch.stack([mean1, prior_mean[1] / 9 / precision2])
    sd = torch.stack([sd1, torch.tensor(precision2, dtype=torch.float64) ** -0.5])
    return est, lambda draws: (draws.double() - m) @ rot, mean, sd


@pytest.mark.filterwarnings("ignore:the chains have not forgotten")
def test_adapted_whitening_samples_a_posterior_that_is_not_gaussian(known_score_estimator):
    """With the same 4,000 steps, whitening refitted to the chains (adapt_steps) matches the exact
    moments; whitening by the curvature at the starts leaves the stiff axis 25% too wide."""
    est, to_z, mean, sd = _pseudo_huber_estimator(known_score_estimator)
    adapted = est.sample(4000, chains=200, precondition="dense", adapt_steps=2000, max_steps=2000,
                         tempering=True, seed=1)
    z = to_z(adapted.draws.reshape(-1, 2))
    # MC error: ESS >= 1000 of the 4,000 draws; sd: ULA inflates the stiffest by <= 2.6% (kappa = 0.1)
    assert ((z.mean(0) - mean).abs() < 4 * sd / 1000**0.5).all(), (z.mean(0), mean)
    assert ((z.std(0) / sd - 1).abs() < 0.08).all(), (z.std(0), sd)
    assert adapted.info["warmup_steps"] == 2000 + 9 * 50  # windows + tempering stages
    assert adapted.info["relaxation_steps"] < 100

    at_starts = est.sample(4000, chains=200, precondition="dense", max_steps=4000, tempering=True, seed=1)
    z = to_z(at_starts.draws.reshape(-1, 2))
    assert z.std(0)[0] / sd[0] - 1 > 0.15, (z.std(0), sd)
    assert at_starts.info["relaxation_steps"] > 5000


@pytest.mark.filterwarnings("ignore:the chains have not forgotten")
def test_warm_start_from_a_posterior_samples_the_posterior_not_the_start(known_score_estimator, langevin_spy):
    """init=Posterior: chains start at its draws, whitened by their covariance. The start is off
    (0.5 sd shifted, 1.5x too wide), so only chains that move give the exact moments; from the
    proposal, whitened at the starts, the same 1,000 steps leave the stiff axis far too wide."""
    from scorebayes.posterior import Posterior
    from scorebayes.samplers.langevin import covariance_preconditioner

    est, to_z, mean, sd = _pseudo_huber_estimator(known_score_estimator)
    rot = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.float64) / 2**0.5
    m = torch.tensor([0.5, -0.3], dtype=torch.float64)
    z = (mean + 0.5 * sd) + 1.5 * sd * torch.randn(1000, 2, generator=torch.Generator().manual_seed(5),
                                                   dtype=torch.float64)
    previous = Posterior(m + z @ rot.T)  # u = m + R z
    warm = est.sample(4000, chains=200, precondition="dense", max_steps=1000, init=previous, seed=1)
    # the chains start at the given draws, whitened by their covariance: u = c + L v
    centre, L = covariance_preconditioner(previous.draws)
    starts = centre + langevin_spy["init"] @ L.T
    nearest = torch.cdist(starts, previous.draws).min(1).values
    assert nearest.max() < 1e-6, nearest.max()  # cdist rounding ~6e-8; by the curvature: 2.3
    z = to_z(warm.draws.reshape(-1, 2))
    # MC error: ESS >= 1000 of the 4,000 draws; sd: ULA inflates the stiffest by <= 2.6% (kappa = 0.1)
    assert ((z.mean(0) - mean).abs() < 4 * sd / 1000**0.5).all(), (z.mean(0), mean)
    assert ((z.std(0) / sd - 1).abs() < 0.08).all(), (z.std(0), sd)
    assert warm.info["relaxation_steps"] < 500  # whitened by draws 1.5x too wide: ~230 steps

    cold = est.sample(4000, chains=200, precondition="dense", max_steps=1000, seed=1)
    assert to_z(cold.draws.reshape(-1, 2)).std(0)[0] / sd[0] - 1 > 0.15
    assert cold.info["relaxation_steps"] > 5000
    with pytest.raises(ValueError, match="at least 2 draws of dimension 2"):
        est.sample(10, init=Posterior(torch.zeros(5, 3)))
    with pytest.raises(ValueError, match="init must be 'proposal', 'prior' or a Posterior"):
        est.sample(10, init="posterior")


def _name(likelihood, arguments):
    from scorebayes.sbi.sample_store import samples_name

    return samples_name(arguments, likelihood)


def test_warm_started_samples_are_stored_under_their_start(known_score_estimator):
    """A run store must not hand a cold start's samples, or another warm start's, back."""
    from scorebayes.posterior import Posterior

    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    a, b = Posterior(torch.zeros(4, 2)), Posterior(torch.ones(4, 2))
    names = [_name(est.likelihood_, {"num_samples": 10, "init": init}) for init in ("proposal", a, b)]
    assert len(set(names)) == 3
    assert _name(est.likelihood_, {"num_samples": 10, "init": Posterior(torch.zeros(4, 2))}) == names[1]


def test_tensor_valued_sample_arguments_are_named_by_their_values(known_score_estimator):
    """torch prints 0.00101 and 0.00104 alike (``tensor(0.0010)``): stored samples must be named
    by the values, not their print, or one step size's samples are handed back for the other.
    Names of plain Python arguments are unchanged (samples stored before stay found)."""
    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    assert repr(torch.tensor(0.00101)) == repr(torch.tensor(0.00104))
    names = [_name(est.likelihood_, {"num_samples": 10, "step_size": step})
             for step in (torch.tensor(0.00101), torch.tensor(0.00104), np.array(0.00101), 0.00101)]
    assert names[0] != names[1]
    assert len(set(names)) == 4  # a tensor, an array and a float are different arguments
    long = [_name(est.likelihood_, {"num_samples": 10, "tempering": torch.linspace(0.1, 0.9, 2000) + shift})
            for shift in (0.0, 1e-3)]
    assert long[0] != long[1]  # elided with "..." in print
    assert _name(est.likelihood_, {"num_samples": 10, "tempering": [0.5, 0.9]}) == \
        _name(est.likelihood_, {"num_samples": 10, "tempering": [0.5, 0.9]})


def test_warm_started_samples_are_found_again_in_the_store(known_score_estimator, tmp_path, monkeypatch):
    """Stored samples are named by sample()'s arguments only: a local derived from them (the warm
    start's sampler, whose repr holds a memory address) gave another process another name, so
    warm-started samples were never found again. Within one process the address can be reused, so
    the reload alone cannot catch that: the names' keys are checked against the signature."""
    import inspect

    import scorebayes.sbi.estimator as estimator_module
    import scorebayes.sbi.sampling as sbi_module
    from scorebayes.sbi import ScoreLangevin
    from scorebayes.store import RunStore

    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    est.store = RunStore(tmp_path / "run", config=None, seed=0)
    named, runs = [], []
    real_name = estimator_module.samples_name
    monkeypatch.setattr(estimator_module, "samples_name",
                        lambda arguments, likelihood: named.append(set(arguments)) or real_name(arguments, likelihood))
    for sampler in ("run_langevin", "run_langevin_to_ess"):  # fixed budget, ESS target
        real_run = getattr(sbi_module, sampler)
        monkeypatch.setattr(sbi_module, sampler, lambda *a, real_run=real_run, **k: runs.append(1) or real_run(*a, **k))
    cold = est.sample(200, chains=4, max_steps=200)
    warm = est.sample(200, chains=4, max_steps=200, init=cold)
    assert len(runs) == 2
    again = est.sample(200, chains=4, max_steps=200, init=cold)
    assert len(runs) == 2, "the warm-started samples were sampled again instead of loaded"
    assert torch.equal(again.draws, warm.draws)
    arguments = set(inspect.signature(ScoreLangevin.sample).parameters) - {"self"}
    assert all(keys <= arguments for keys in named), [keys - arguments for keys in named]


def test_adapt_steps_is_checked_before_sampling(known_score_estimator):
    est = known_score_estimator(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="pass precondition='dense'"):
        est.sample(10, adapt_steps=100)
    with pytest.raises(ValueError, match="adapt_steps must be an integer >= 0"):
        est.sample(10, adapt_steps=-1, precondition="dense")
    with pytest.raises(ValueError, match="reset_stragglers must be True or False"):
        est.sample(10, adapt_steps=10, precondition="dense", reset_stragglers="yes")


class _Stop(Exception):
    pass


def test_localize_in_support_confines_the_localization_to_the_data_support(monkeypatch):
    import scorebayes.sbi.localization.minimum_distance

    seen = {}

    def capture(simulator, x_obs, prior, **options):
        seen.update(options)
        raise _Stop

    def support(x_obs):
        return torch.tensor([-5.0]), x_obs.min().reshape(1)

    monkeypatch.setattr(scorebayes.sbi.localization.minimum_distance, "localize", capture)
    x_obs = torch.linspace(0.5, 2.0, T)[:, None]
    est = ScoreLangevin.from_options(independent([Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)]), fixed_length,
                        mode="full", support_fn=support, localize_in_support=True, progress=False)
    with pytest.raises(_Stop):
        est.fit(x_obs)
    assert torch.equal(seen["support"][1], torch.tensor([0.5]))
    seen.clear()
    plain = ScoreLangevin.from_options(independent([Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)]), fixed_length,
                          mode="full", support_fn=support, progress=False)
    with pytest.raises(_Stop):
        plain.fit(x_obs)
    assert "support" not in seen  # off by default: the paper's localization


def test_localize_in_support_needs_one_support():
    with pytest.raises(ValueError, match="needs support_fn"):
        estimator(localize_in_support=True)
    with pytest.raises(ValueError, match="not both"):
        estimator(localize_in_support=True, support_fn=lambda x: (x.min(), x.max()),
                  localization={"support": (torch.zeros(1), torch.ones(1))})


def _plateau_estimator(known_score_estimator, *, height: float = 2000.0, width: float = 1.5):
    r"""Likelihood :math:`\exp\{-A(1 - e^{-|u - m|^2/2w^2})\}`: a bump of posterior sd ~0.03 and,
    beyond ~7 units from ``m``, a plateau 2,000 nats down whose drift is only the prior's
    ``-u/9``. Prior-drawn starts (sd 3) land on it, where steps sized for the bump barely move."""
    m = torch.tensor([0.5, -0.3], dtype=torch.float64)
    est = known_score_estimator(torch.eye(2, dtype=torch.float64), m)

    def score(u, x=None, compiled=False):
        d = u - m
        return -height / width**2 * torch.exp(-(d**2).sum(-1, keepdim=True) / (2 * width**2)) * d

    est.likelihood_.score = score
    precision = height / width**2 + 1 / 9  # the bump is Gaussian to O(sd^2 / w^2) = 5e-4
    return est, m, height / width**2 * m / precision, precision**-0.5


def test_warm_up_restarts_chains_stuck_on_a_plateau(known_score_estimator):
    """Without reset_stragglers 18% of these draws stay on the plateau (mean off by 17 sds,
    checked); with it, every draw is in the bump and the moments match the exact posterior."""
    est, m, mean, sd = _plateau_estimator(known_score_estimator)
    with pytest.warns(UserWarning, match="warm-up restarted"):
        post = est.sample(2000, chains=100, precondition="dense", adapt_steps=1000, max_steps=1000,
                          tempering=True, seed=1)
    draws = post.draws.reshape(-1, 2)
    assert post.info["chains_reset"] > 0
    assert ((draws - m).norm(dim=-1) < 1).all()
    # MC error: ESS >= 500 of the 2,000 draws; ULA at kappa = 0.1 inflates sds by <= 3%
    assert ((draws.mean(0) - mean).abs() < 4 * sd / 500**0.5).all(), (draws.mean(0), mean)
    assert ((draws.std(0) / sd - 1).abs() < 0.1).all(), (draws.std(0), sd)


def test_straggler_restarts_leave_chains_of_the_posterior_alone():
    """Exact draws of an 11-d Gaussian: no restart at the default gap; three chains 1,000 nats
    down are moved onto other chains' states, and the others keep theirs."""
    from scorebayes.samplers.adaptation import default_straggler_gap, reset_stragglers

    g = torch.Generator().manual_seed(3)
    A = torch.randn(11, 11, generator=g, dtype=torch.float64)
    cov = A @ A.T / 11 + 0.1 * torch.eye(11, dtype=torch.float64)
    P = torch.linalg.inv(cov)
    L = torch.linalg.cholesky(cov)

    def score(u):
        return -u @ P

    gap = default_straggler_gap(11)
    assert 24 < gap < 26
    for seed in range(5):
        u = torch.randn(100, 11, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) @ L.T
        moved, healthy = reset_stragglers(score, u, gap, g)
        assert healthy.all() and torch.equal(moved, u)
    far = u.clone()
    far[[4, 50, 99]] = 45 * L[:, 0]  # 45 sds out: log-density 1,000 nats lower
    moved, healthy = reset_stragglers(score, far, gap, g)
    assert (~healthy).nonzero()[:, 0].tolist() == [4, 50, 99]
    assert torch.equal(moved[healthy], far[healthy])
    rows = {tuple(r.tolist()) for r in far[healthy]}
    assert all(tuple(r.tolist()) in rows for r in moved[~healthy])  # copies of healthy chains' states
