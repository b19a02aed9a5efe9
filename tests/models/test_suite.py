"""The suite of models with exact posteriors: contracts, references against independent truth,
numerical likelihoods, simulators' distributions and the g-and-k MCMC's diagnostics."""

import math
import pickle

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from torch.distributions import Normal

from scorebayes.models import LinearRegression
from scorebayes.models.suite import SUITE, check_moments, check_posterior, suite_models
from scorebayes.models.suite.bounded import kumaraswamy_log_density
from scorebayes.models.suite.counts import nb_log_pmf
from scorebayes.models.suite.gandk import (
    gk_cdf,
    gk_inverse,
    gk_log_density,
    gk_quantile,
    octile_summaries,
    sample_quantiles,
)
from scorebayes.models.suite.gandk_reference import gandk_mcmc
from scorebayes.models.suite.mcmc import run_mcmc
from scorebayes.models.suite.quadrature import grid_draws, grid_posterior
from scorebayes.priors import ParameterSpace, independent, sample

F64 = torch.float64
MODELS = {m.name: m for m in suite_models()}
CONJUGATE = ["gaussian_mean", "exponential_rate", "poisson_rate", "linear_regression5"]
QUADRATURE = ["negative_binomial", "student_t", "lognormal", "kumaraswamy"]
DISCRETE = ["poisson_rate", "negative_binomial"]


def _x_obs(name, seed=1):
    return MODELS[name].observed(torch.Generator().manual_seed(seed))


def _t(v):
    return torch.as_tensor(v, dtype=F64)


# ----------------------------------------------------------------------------- contracts
def test_registry_covers_the_brief():
    assert set(SUITE) == set(MODELS) and len(SUITE) >= 8
    assert [m.name for m in suite_models(["gandk", "lognormal"])] == ["gandk", "lognormal"]
    with pytest.raises(ValueError, match="unknown suite model"):
        suite_models(["nope"])
    dims = {m.dim for m in MODELS.values()}
    ns = {m.n_obs for m in MODELS.values()}
    assert min(dims) == 1 and max(dims) == 5 and min(ns) == 50 and max(ns) == 1000
    from scorebayes.models import MODELS as BUILTIN  # the suite is kept out of the main registry
    assert "gandk" not in BUILTIN and "negative_binomial" not in BUILTIN


@pytest.mark.parametrize("name", sorted(SUITE))
def test_model_contract(name):
    model = SUITE[name]()
    d, p = model.dim, model.obs_dim
    assert model.name == name and len(model.parameter_names) == d
    assert isinstance(model.description, str) and "\n" not in model.description
    assert tuple(model.prior.event_shape) == (d,)
    assert model.true_parameters.dtype == F64
    assert torch.isfinite(model.prior.log_prob(model.true_parameters))
    g = torch.Generator().manual_seed(0)
    theta = sample(model.prior, 3, generator=g)
    assert theta.dtype == F64 and theta.shape == (3, d)
    x = model.simulator(theta, 11, g)
    assert x.shape == (3, 11, p) and x.dtype == F64
    summaries = model.summary_fn(model.simulator(theta, model.n_obs, g))
    assert summaries.dim() == 2 and summaries.shape[0] == 3 and torch.isfinite(summaries).all()
    assert model.observed(torch.Generator().manual_seed(1)).shape == (model.n_obs, p)
    assert model.simulator.reparametrised == (name not in DISCRETE)
    ParameterSpace(model.prior)  # an unconstrained bijection exists
    pickle.loads(pickle.dumps(model))


@pytest.mark.parametrize("name", sorted(set(SUITE) - set(DISCRETE)))
def test_reparametrised_transform_is_differentiable(name):
    model = MODELS[name]
    z = model.simulator.latent(2, 9, torch.Generator().manual_seed(0))
    theta = model.true_parameters[None].repeat(2, 1).requires_grad_(True)
    x = model.simulator.transform(theta, z)
    (grad,) = torch.autograd.grad(x.sum(), theta)
    assert torch.isfinite(grad).all() and (grad.abs().sum(0) > 0).all()
    assert torch.equal(x.detach(), model.simulator.transform(theta.detach(), z))


# ------------------------------------------------------------------ conjugate references
def _analytic_moments(name, x):
    """The closed forms, written out independently of the models' code."""
    n = x.shape[0]
    if name == "gaussian_mean":
        v = 1.0 / (1.0 / 9.0 + n)
        return v * x.sum(0), torch.full((3,), math.sqrt(v), dtype=F64)
    if name == "exponential_rate":
        a, b = 2.0 + n, 1.0 + float(x.sum())
        return _t([a / b]), _t([math.sqrt(a) / b])
    if name == "poisson_rate":
        a, b = 2.0 + float(x.sum()), 0.5 + n
        return _t([a / b]), _t([math.sqrt(a) / b])
    X = np.column_stack([np.ones(n), x[:, :4].numpy()])
    cov = np.linalg.inv(np.eye(5) / 9.0 + X.T @ X)
    return _t(cov @ X.T @ x[:, 4].numpy()), _t(np.sqrt(np.diag(cov)))


@pytest.mark.parametrize("name", CONJUGATE)
def test_conjugate_reference(name):
    model, x = MODELS[name], _x_obs(name)
    mean, sd = model.exact_moments(x)
    want_mean, want_sd = _analytic_moments(name, x)
    assert torch.allclose(mean, want_mean, rtol=1e-10, atol=1e-12)
    assert torch.allclose(sd, want_sd, rtol=1e-10)
    assert (torch.abs(mean - model.true_parameters) < 4 * sd).all()  # the truth is plausible
    num = 20_000
    post = model.reference_posterior(x, num, torch.Generator().manual_seed(3))
    assert post.draws.shape == (num, model.dim)
    # 4 standard errors: of a mean sd / sqrt(N), of a (near-normal) SD sd / sqrt(2N)
    assert (torch.abs(post.mean() - mean) < 4 * sd / math.sqrt(num)).all()
    assert (torch.abs(post.sd() - sd) < 4 * sd / math.sqrt(2 * num)).all()


def test_check_posterior_tolerances():
    model, x = MODELS["lognormal"], _x_obs("lognormal")
    mean, sd = model.exact_moments(x)
    post = model.reference_posterior(x, 4000, torch.Generator().manual_seed(17))
    check = check_posterior(model, x, post)
    assert check.passed and (check.mean_error < 0.1).all() and "passed" in check.format()
    assert check_posterior(model, x, post.draws).passed
    assert not check_posterior(model, x, post.draws + 0.35 * sd).passed
    assert check_moments(mean + 0.29 * sd, 1.24 * sd, mean, sd).passed
    assert not check_moments(mean, 0.74 * sd, mean, sd).passed
    assert not check_moments(mean, 1.26 * sd, mean, sd).passed
    with pytest.raises(ValueError, match="shapes differ"):
        check_moments(mean, sd[:1], mean, sd)


# ---------------------------------------------------------------------- quadrature helper
def test_grid_on_a_correlated_gaussian_posterior():
    """The 2-d regression posterior (correlated, analytic): grid moments to 1e-3 SD, draws."""
    model = LinearRegression(n_obs=30)
    x = model.observed(torch.Generator().manual_seed(4))
    exact = model.posterior_distribution(x)
    sd = exact.variance.sqrt()
    assert abs(float(exact.covariance_matrix[0, 1] / sd.prod())) > 0.05

    def log_post(th):
        mean = th[:, None, 0] + th[:, None, 1] * x[None, :, 0]
        return model.prior.log_prob(th) + Normal(mean, model.sigma).log_prob(x[None, :, 1]).sum(1)

    inf = torch.full((2,), math.inf, dtype=F64)
    grid = grid_posterior(log_post, torch.tensor([3.0, 3.0], dtype=F64), -inf, inf)
    assert (torch.abs(grid.mean - exact.mean) < 1e-3 * sd).all()
    assert (torch.abs(grid.sd - sd) < 1e-3 * sd).all()
    num = 40_000
    draws = grid_draws(grid, num, torch.Generator().manual_seed(5))
    assert (torch.abs(draws.mean(0) - exact.mean) < 4 * sd / math.sqrt(num)).all()
    assert (torch.abs(draws.std(0) - sd) < 4 * sd / math.sqrt(2 * num)).all()


def test_grid_on_a_skewed_posterior_at_the_support_edge():
    """A Gamma(3, 2) density on (0, inf): mass up to the support's edge, a poor start."""
    gamma = torch.distributions.Gamma(_t(3.0), _t(2.0))

    def log_post(th):
        inside = th[:, 0] > 0
        return torch.where(inside, gamma.log_prob(th[:, 0].clamp(min=1e-300)), -math.inf)

    grid = grid_posterior(log_post, _t([40.0]), _t([0.0]), _t([math.inf]))
    sd = math.sqrt(3.0) / 2.0
    assert abs(float(grid.mean[0]) - 1.5) < 1e-3 * sd and abs(float(grid.sd[0]) - sd) < 1e-3 * sd
    assert float(grid.low[0]) == 0.0


def test_grid_widens_for_heavy_tails():
    """A t_5 density: 8 Laplace SDs leave mass at the edges, so the box must grow."""
    t5 = torch.distributions.StudentT(_t(5.0), _t(2.0), _t(1.5))

    def log_post(th):
        return t5.log_prob(th[:, 0])

    inf = _t([math.inf])
    grid = grid_posterior(log_post, _t([0.0]), -inf, inf, cells=2000, edge_tol=1e-7)
    sd = 1.5 * math.sqrt(5 / 3)
    assert float(grid.high[0] - grid.low[0]) > 2 * 8 * 1.5  # wider than the Laplace box
    assert abs(float(grid.mean[0]) - 2.0) < 1e-3 * sd and abs(float(grid.sd[0]) - sd) < 0.01 * sd


def test_quadrature_grid_is_converged_and_cached():
    model = MODELS["negative_binomial"]
    x = _x_obs("negative_binomial")
    grid = model.grid(x)
    assert model.grid(x) is grid
    low, high = grid.low, grid.high
    fine = grid_posterior(lambda th: model.log_posterior(th, x), grid.mean, low, high, cells=600)
    assert (torch.abs(fine.mean - grid.mean) < 1e-4 * grid.sd).all()
    assert (torch.abs(fine.sd - grid.sd) < 1e-4 * grid.sd).all()


# ------------------------------------------------------------ likelihoods of the grid models
def _scipy_loglik(name, theta, x):
    x = x[:, 0].numpy()
    a, b = float(theta[0]), float(theta[1])
    if name == "negative_binomial":
        return stats.nbinom.logpmf(x, b, b / (a + b)).sum()
    if name == "student_t":
        return stats.t.logpdf(x, 3, loc=a, scale=b).sum()
    if name == "lognormal":
        return stats.lognorm.logpdf(x, b, scale=math.exp(a)).sum()
    return np.sum(np.log(a * b) + (a - 1) * np.log(x) + (b - 1) * np.log1p(-x**a))


@pytest.mark.parametrize("name", QUADRATURE)
def test_grid_models_likelihood_and_reference(name):
    model, x = MODELS[name], _x_obs(name)
    theta = model.true_parameters * torch.tensor([[1.0, 1.0], [0.8, 1.3], [1.2, 0.7]], dtype=F64)
    got = model.log_likelihood(theta, x)
    want = [_scipy_loglik(name, th, x) for th in theta]
    assert np.allclose(got.numpy(), want, rtol=1e-10, atol=1e-8)
    mean, sd = model.exact_moments(x)
    assert (torch.abs(mean - model.true_parameters) < 4 * sd).all()
    num = 20_000
    post = model.reference_posterior(x, num, torch.Generator().manual_seed(6))
    assert (torch.abs(post.mean() - mean) < 4 * sd / math.sqrt(num)).all()
    # the SD of the SD estimate, from the draws' kurtosis
    kurt = torch.tensor(stats.kurtosis(post.draws.numpy(), axis=0, fisher=False), dtype=F64)
    assert (torch.abs(post.sd() - sd) < 4 * sd * torch.sqrt((kurt - 1) / (4 * num))).all()


def test_count_pmf_sums_to_one():
    x = torch.arange(0, 3000, dtype=F64)
    for mu, r in [(5.0, 2.0), (0.5, 0.3), (40.0, 10.0)]:
        pmf = nb_log_pmf(x, _t(mu), _t(r)).exp()
        assert abs(float(pmf.sum()) - 1) < 1e-10
        assert abs(float((x * pmf).sum()) - mu) < 1e-8
        assert abs(float((x * x * pmf).sum() - mu**2) - (mu + mu**2 / r)) < 1e-6


def test_kumaraswamy_density_integrates_to_one_and_is_the_cdf_derivative():
    for a, b in [(2.0, 5.0), (0.6, 0.7), (15.0, 18.0)]:
        def pdf(v, a=a, b=b):
            return float(kumaraswamy_log_density(_t(v), _t(a), _t(b)).exp())
        total, _ = integrate.quad(pdf, 0, 1, limit=200)
        assert abs(total - 1) < 1e-7
        for v in (0.1, 0.5, 0.9):
            h = 1e-6
            cdf = [1 - (1 - w**a) ** b for w in (v - h, v + h)]
            assert pdf(v) == pytest.approx((cdf[1] - cdf[0]) / (2 * h), rel=1e-6, abs=1e-9)


# ------------------------------------------------------------------------ the g-and-k law
GK_THETAS = torch.tensor([[3.0, 1.0, 2.0, 0.5], [0.0, 2.0, 0.0, 0.0], [1.0, 0.3, 6.0, 2.0],
                          [5.0, 4.0, 0.5, 0.05]], dtype=F64)


def test_gandk_inverse_recovers_the_latents_over_the_prior():
    g = torch.Generator().manual_seed(7)
    theta = 10 * torch.rand(2000, 4, generator=g, dtype=F64)
    theta[:, 1] = theta[:, 1].clamp(min=1e-2)
    z = torch.randn(2000, 100, generator=g, dtype=F64)
    # a case where plain Newton from 0 cycles between 0 and 3.9 (rtsafe's bisection fixes it)
    theta[0] = torch.tensor([1.5114, 2.4304, 0.2117, 3.0716], dtype=F64)
    z[0, 0] = 1.2448
    assert torch.allclose(gk_inverse(gk_quantile(z, theta), theta), z, atol=1e-9)
    warm = gk_inverse(gk_quantile(z, theta), theta, z + 0.3)
    assert torch.allclose(warm, z, atol=1e-9)


def test_gandk_density_integrates_to_one_and_is_the_cdf_derivative():
    for theta in GK_THETAS:
        th = theta[None]
        A, B = float(th[0, 0]), float(th[0, 1])
        # a grid uniform in asinh((x - A) / B): fine near the centre, geometric in the tails
        lo, hi = (math.asinh((float(gk_quantile(_t([[v]]), th)) - A) / B) for v in (-8.5, 8.5))
        x = A + B * torch.sinh(torch.linspace(lo, hi, 200_001, dtype=F64))[None]
        f = gk_log_density(x, th)[0].exp()[0]
        assert abs(float(torch.trapezoid(f, x[0])) - 1) < 1e-6
        pts = gk_quantile(torch.tensor([[-2.0, -0.5, 0.0, 0.7, 2.5]], dtype=F64), th)
        h = 1e-5 * float(th[0, 1])
        deriv = (gk_cdf(pts + h, th) - gk_cdf(pts - h, th)) / (2 * h)
        assert torch.allclose(gk_log_density(pts, th)[0].exp(), deriv, rtol=1e-6)
    # g = k = 0 is N(A, B^2)
    x = torch.linspace(-5, 5, 11, dtype=F64)[None]
    assert torch.allclose(gk_log_density(x, GK_THETAS[1:2])[0], Normal(0.0, 2.0).log_prob(x))


def test_gandk_log_density_gradient_matches_finite_differences():
    x = gk_quantile(torch.randn(1, 30, generator=torch.Generator().manual_seed(8), dtype=F64),
                    GK_THETAS[:1])
    for theta in GK_THETAS:
        th = theta[None].clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(gk_log_density(x, th)[0].sum(), th)
        for j in range(4):
            step = torch.zeros(1, 4, dtype=F64)
            step[0, j] = 1e-6
            fd = (gk_log_density(x, theta[None] + step)[0].sum()
                  - gk_log_density(x, theta[None] - step)[0].sum()) / 2e-6
            assert float(grad[0, j]) == pytest.approx(float(fd), rel=1e-5, abs=1e-5)


def test_sample_quantiles_match_torch_quantile():
    x = torch.randn(5, 37, generator=torch.Generator().manual_seed(16), dtype=F64)
    q = torch.tensor([0.0, 0.125, 0.5, 0.9, 1.0], dtype=F64)
    assert torch.allclose(sample_quantiles(x, q), torch.quantile(x, q, dim=1).T, atol=1e-14)


def test_octile_summaries():
    x = torch.randn(2, 100_001, 1, generator=torch.Generator().manual_seed(9), dtype=F64)
    s = octile_summaries(3.0 + 2.0 * x)
    # normal: median 3, IQR 2 * 1.349, no skew, Moors kurtosis 1.233
    want = torch.tensor([3.0, 2 * 1.34898, 0.0, 1.2331], dtype=F64)
    assert torch.allclose(s, want.expand(2, 4), atol=0.03)


# ------------------------------------------------------------------ simulators' distributions
def _ks_pvalue(name, x, theta):
    x = x.reshape(-1).numpy()
    a = theta.numpy()
    cdfs = {
        "exponential_rate": lambda v: stats.expon.cdf(v, scale=1 / a[0]),
        "student_t": lambda v: stats.t.cdf(v, 3, loc=a[0], scale=a[1]),
        "lognormal": lambda v: stats.lognorm.cdf(v, a[1], scale=math.exp(a[0])),
        "kumaraswamy": lambda v: 1 - (1 - v ** a[0]) ** a[1],
        "gandk": lambda v: gk_cdf(torch.as_tensor(v)[None], theta[None])[0].numpy(),
    }
    return stats.kstest(x, cdfs[name]).pvalue


@pytest.mark.parametrize("name", ["exponential_rate", "student_t", "lognormal", "kumaraswamy",
                                  "gandk"])
def test_continuous_simulator_matches_its_distribution(name):
    model = MODELS[name]
    theta = model.true_parameters
    x = model.simulator(theta[None], 400_000, torch.Generator().manual_seed(10))
    assert _ks_pvalue(name, x, theta) > 1e-3


def test_count_simulators_match_their_distributions():
    g = torch.Generator().manual_seed(11)
    N = 200_000
    nb = MODELS["negative_binomial"]
    x = nb.simulator(nb.true_parameters[None], N, g)[0, :, 0]
    assert torch.equal(x, x.round()) and (x >= 0).all()
    counts = np.bincount(x.long().numpy(), minlength=60)[:60]
    probs = nb_log_pmf(torch.arange(60, dtype=F64), *nb.true_parameters).exp().numpy()
    keep = probs * N > 20
    chi2 = ((counts[keep] - N * probs[keep]) ** 2 / (N * probs[keep])).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3
    pois = MODELS["poisson_rate"]
    y = pois.simulator(pois.true_parameters[None], N, g)[0, :, 0]
    lam = float(pois.true_parameters[0])
    assert abs(float(y.mean()) - lam) < 4 * math.sqrt(lam / N)
    assert abs(float(y.var()) - lam) < 4 * lam * math.sqrt((2 + 1 / lam) / N)


def test_gaussian_and_regression_simulators():
    g = torch.Generator().manual_seed(12)
    N = 100_000
    gm = MODELS["gaussian_mean"]
    x = gm.simulator(gm.true_parameters[None], N, g)[0]
    assert (torch.abs(x.mean(0) - gm.true_parameters) < 4 / math.sqrt(N)).all()
    assert torch.allclose(torch.cov(x.T), torch.eye(3, dtype=F64), atol=4 * math.sqrt(2 / N))
    lr = MODELS["linear_regression5"]
    rows = lr.simulator(lr.true_parameters[None], N, g)[0]
    assert torch.allclose(torch.cov(rows[:, :4].T), torch.eye(4, dtype=F64),
                          atol=4 * math.sqrt(2 / N))
    beta = lr.summary_fn(rows[None])[0]  # least squares: SE sigma / sqrt(N) per coefficient
    assert (torch.abs(beta - lr.true_parameters) < 4 / math.sqrt(N)).all()
    resid = rows[:, 4] - lr.design(rows[:, :4]) @ lr.true_parameters
    assert abs(float(resid.var()) - 1.0) < 4 * math.sqrt(2 / N)


# ------------------------------------------------------------------------------ MCMC
def test_mcmc_engine_on_a_known_skewed_target():
    """Independent coordinates: N(1, 0.5^2) and Gamma(4, 2) (skewed, on (0, inf))."""
    prior = independent([Normal(_t(1.0), _t(0.5)), torch.distributions.Gamma(_t(4.0), _t(2.0))])

    def log_target(theta, aux):
        return prior.log_prob(theta), aux

    g = torch.Generator().manual_seed(13)
    init = torch.stack([1 + torch.randn(64, generator=g, dtype=F64),
                        1 + torch.rand(64, generator=g, dtype=F64)], 1)
    run = run_mcmc(log_target, init, adapt_steps=300, iterations=200, min_ess=5000, generator=g)
    draws = run.draws.reshape(-1, 2)
    mean, sd = _t([1.0, 2.0]), _t([0.5, 1.0])
    assert (run.rhat < 1.01).all() and (run.ess > 5000).all()
    assert (torch.abs(draws.mean(0) - mean) < 4 * sd / run.ess.sqrt()).all()
    sd_se = sd * torch.sqrt(_t([2.0, 3.5]) / (4 * run.ess))  # kurtosis - 1: normal 2, Gamma(4) 3.5
    assert (torch.abs(draws.std(0) - sd) < 4 * sd_se).all()


def test_gandk_mcmc_converges_and_covers_the_truth():
    model = MODELS["gandk"]
    x = _x_obs("gandk")
    run = gandk_mcmc(x, chains=32, min_ess=1500, adapt_steps=300, iterations=100)
    assert run.draws.shape[0] == 32 and (run.rhat < 1.01).all() and (run.ess > 1500).all()
    draws = run.draws.reshape(-1, 4)
    assert (torch.abs(draws.mean(0) - model.true_parameters) < 4 * draws.std(0)).all()
    assert gandk_mcmc(x, chains=32, min_ess=1500, adapt_steps=300, iterations=100) is run


@pytest.mark.slow
def test_gandk_reference_agrees_with_an_independent_run():
    model = MODELS["gandk"]
    x = _x_obs("gandk")
    mean, sd = model.exact_moments(x)
    run = model.mcmc(x)
    assert (run.rhat < 1.01).all() and (run.ess > 20_000).all()
    other = gandk_mcmc(x, seed=1)
    draws = other.draws.reshape(-1, 4)
    se = sd * torch.sqrt(1 / run.ess + 1 / other.ess)
    assert (torch.abs(draws.mean(0) - mean) < 4 * se).all()
    assert (torch.abs(draws.std(0) - sd) < 4 * se).all()
    post = model.reference_posterior(x, 10_000, torch.Generator().manual_seed(14))
    assert post.draws.shape == (10_000, 4)
    assert (torch.abs(post.mean() - mean) < 4 * sd / math.sqrt(10_000)).all()


@pytest.mark.slow
def test_gandk_reference_agrees_with_importance_sampling():
    """A different algorithm: self-normalised importance sampling from a wide multivariate t."""
    from scorebayes.models.suite.gandk_reference import gandk_log_posterior

    model = MODELS["gandk"]
    x = _x_obs("gandk")
    mean, sd = model.exact_moments(x)
    draws = model.mcmc(x).draws.reshape(-1, 4)
    chol = torch.linalg.cholesky(1.5 * torch.cov(draws.T))
    g = torch.Generator().manual_seed(15)
    N, df = 100_000, 5
    chi2 = (torch.randn(N, df, generator=g, dtype=F64) ** 2).sum(1)
    eps = torch.randn(N, 4, generator=g, dtype=F64)
    theta = mean + (eps @ chol.T) / torch.sqrt(chi2 / df)[:, None]
    y = torch.linalg.solve_triangular(chol, (theta - mean).T, upper=False).T
    log_q = -0.5 * (df + 4) * torch.log1p((y * y).sum(1) / df)
    log_p = torch.cat([gandk_log_posterior(theta[a:a + 2000], x)[0] for a in range(0, N, 2000)])
    w = torch.softmax(log_p - log_q, 0)
    is_mean = (w[:, None] * theta).sum(0)
    is_sd = (w[:, None] * (theta - is_mean) ** 2).sum(0).sqrt()
    se = sd * math.sqrt(1 / float(1 / (w * w).sum()) + 1 / float(model.mcmc(x).ess.min()))
    assert (torch.abs(is_mean - mean) < 4 * se).all()
    assert (torch.abs(is_sd - sd) < 4 * 1.5 * se).all()
