import math
from itertools import product

import numpy as np
import pytest
import torch
from scipy import optimize

from scorebayes.discrete import (
    CMPGraphicalModel, CMPModel, DFDLoss, DiscreteModel, IsingModel, KSDLoss, PoissonGraphicalModel,
    PoissonModel, PseudoLikelihoodLoss, TruncatedLikelihoodLoss, UserModel, BernoulliModel, sample_cmp,
)

D64 = torch.float64


def _user_logp(theta, x):
    # a model on a finite domain {0,1,2} x {0,1} x {-1,0,1}
    return (theta[:, :1] * x[:, 0] + theta[:, 1:2] * x[:, 0] * x[:, 1] - 0.3 * x[:, 1] ** 2
            - 0.5 * (x[:, 2] - 1) ** 2 + theta[:, 1:2] * x[:, 2] * x[:, 0])


USER = UserModel(_user_logp, [[0, 2], [0, 1], [-1, 1]], ["a", "b"])


def _data(n=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.stack([torch.randint(0, 3, (n,), generator=g), torch.randint(0, 2, (n,), generator=g),
                     torch.randint(-1, 2, (n,), generator=g)], -1).to(D64)
    assert torch.unique(x, dim=0).shape[0] == 18  # the empirical pmf has full support
    return x


def brute_force_dfd(model, theta, x):
    """Definition 3 with q the empirical pmf (full support on a finite domain):
    sum_x q(x) || grad^- p / p - grad^- q / q ||^2, grad^- h(x)_j = h(x) - h(x^{j-})."""
    rows, counts = torch.unique(x, dim=0, return_counts=True)
    q = {tuple(r.tolist()): c.item() / x.shape[0] for r, c in zip(rows, counts, strict=True)}
    th = torch.as_tensor(theta, dtype=D64)[None]
    total = 0.0
    for r, qr in q.items():
        xr = torch.tensor([r], dtype=D64)
        lp = model.log_unnormalized(th, xr)[0, 0]
        minus, _ = model.domain.minus(xr)
        for j in range(len(r)):
            y = list(r)
            y[j] = minus[0, j].item()
            p_ratio = torch.exp(model.log_unnormalized(th, torch.tensor([y], dtype=D64))[0, 0] - lp).item()
            total += qr * ((1 - p_ratio) - (1 - q[tuple(y)] / qr)) ** 2
    return total


@pytest.mark.parametrize("model, x, thetas", [
    (USER, _data(), [[0.3, -0.2], [-0.4, 0.1]]),
    (IsingModel(2), 2 * torch.randint(0, 2, (400, 4), generator=torch.Generator().manual_seed(3)).to(D64) - 1,
     [[1.5], [0.6]]),
])
def test_loss_matches_definition_3(model, x, thetas):
    """Proposition 1: n DFD(p_theta || p_n) = D_n(theta) + const, checked by differences."""
    loss = DFDLoss(model, x)
    th = torch.tensor(thetas, dtype=D64)
    diff_loss = (loss(th[:1]) - loss(th[1:])).item() / x.shape[0]
    diff_brute = brute_force_dfd(model, thetas[0], x) - brute_force_dfd(model, thetas[1], x)
    assert diff_loss == pytest.approx(diff_brute, rel=1e-9, abs=1e-9)


def test_loss_matches_closed_forms_on_counts():
    """Half-bounded domains: the paper's eq. (21) for Poisson and the CMP ratios of Section 4.1."""
    x = torch.tensor([[0.0], [1.0], [4.0], [4.0], [7.0]], dtype=D64)
    for theta in (0.7, 3.0):
        expected = ((x / theta) ** 2 - 2 * (x + 1) / theta).sum().item()
        assert DFDLoss(PoissonModel(), x)(torch.tensor([[theta]], dtype=D64)).item() == pytest.approx(expected)
    t1, t2 = 3.0, 0.6
    expected = ((x ** (2 * t2)) / t1**2 - 2 * (x + 1) ** t2 / t1).sum().item()
    assert DFDLoss(CMPModel(), x)(torch.tensor([[t1, t2]], dtype=D64)).item() == pytest.approx(expected)


def test_compression_and_paths_agree():
    x = sample_cmp(torch.tensor([4.0, 0.75]), 500, generator=torch.Generator().manual_seed(2))
    th = torch.tensor([[4.0, 0.75], [2.0, 1.2], [6.0, 0.5]], dtype=D64)
    model = CMPModel()
    generic = UserModel(model.log_unnormalized, [[0, "inf"]], model.names)
    values = [DFDLoss(model, x)(th), DFDLoss(model, x, compress=False)(th), DFDLoss(generic, x)(th),
              DFDLoss(generic, x, compress=False)(th)]
    for v in values[1:]:
        assert torch.allclose(v, values[0], rtol=1e-10)
    assert DFDLoss(model, x).num_terms < 40  # repeated values merged
    # frequency table input
    vals, cnt = torch.unique(x, return_counts=True)
    assert torch.allclose(DFDLoss(model, vals[:, None], cnt)(th), values[0], rtol=1e-10)
    # float32 agrees
    assert torch.allclose(DFDLoss(model, x)(th.float()).double(), values[0], rtol=1e-5)


@pytest.mark.parametrize("model, theta", [
    (CMPModel(), [[3.0, 0.7]]),
    (BernoulliModel(), [[0.3]]),
    (PoissonGraphicalModel(4), None),
    (CMPGraphicalModel(4), None),
    (IsingModel(3, coding="pm1", edge_count="single", boundary="free"), [[2.0]]),
    (IsingModel(3, coding="01", edge_count="double", boundary="periodic"), [[2.0]]),
])
def test_closed_form_log_ratios_match_the_pmf(model, theta):
    g = torch.Generator().manual_seed(0)
    th = torch.tensor(theta, dtype=D64) if theta else 0.3 * torch.randn(2, model.num_params, generator=g, dtype=D64)
    if model.domain.kinds[0] == "bounded":
        low, high = model.domain.low[0].item(), model.domain.high[0].item()
        x = low + (high - low) * torch.randint(0, 2, (30, model.dim), generator=g).to(D64)
    else:
        x = torch.randint(0, 4, (30, model.dim), generator=g).to(D64)
    closed = model.log_ratios(th, x)
    generic = DiscreteModel.log_ratios(model, th, x)
    assert torch.equal(closed[2], generic[2])
    valid = closed[2]
    assert torch.allclose(closed[0][:, valid], generic[0][:, valid], atol=1e-10)
    assert torch.allclose(closed[1], generic[1], atol=1e-10)


def test_graphical_parameter_counts():
    assert PoissonGraphicalModel(10).num_params == 55
    assert CMPGraphicalModel(10).num_params == 65
    assert CMPGraphicalModel(10).default_prior().event_shape == (65,)


def test_ising_conventions():
    free, per = IsingModel(4), IsingModel(4, boundary="periodic")
    assert len(free.edges) == 2 * 4 * 3 and len(per.edges) == 2 * 16
    x = torch.randint(0, 2, (5, 16), generator=torch.Generator().manual_seed(0)).double()
    single = IsingModel(4, coding="01").log_unnormalized(torch.tensor([[1.0]], dtype=D64), x)
    double = IsingModel(4, coding="01", edge_count="double").log_unnormalized(torch.tensor([[1.0]], dtype=D64), x)
    assert torch.allclose(double, 2 * single)
    # an Ising data set compresses to at most 9 distinct terms
    spins = 2 * x - 1
    assert DFDLoss(free, spins).num_terms <= 9


def test_star_boundary_gradients_are_finite():
    x = torch.tensor([[0.0], [0.0], [1.0], [3.0]], dtype=D64)
    log_x = UserModel(lambda t, y: y[:, 0] * t[:, :1].log() - t[:, 1:] * torch.lgamma(y[:, 0] + 1),
                      [[0, "inf"]], ["a", "b"])
    for model in (CMPModel(), log_x):
        for dtype in (torch.float32, D64):
            th = torch.tensor([[2.0, 0.7]], dtype=dtype, requires_grad=True)
            DFDLoss(model, x)(th).sum().backward()
            assert torch.isfinite(th.grad).all()


def _population_dfd(model, theta, support, pmf):
    x = torch.as_tensor(support, dtype=D64)[:, None]
    lm, lp, valid = model.log_ratios(torch.tensor([theta], dtype=D64), x)
    terms = torch.where(valid, torch.exp(2 * lm), torch.zeros(())) - 2 * torch.exp(lp)
    return float((torch.as_tensor(pmf, dtype=D64) * terms[0, :, 0]).sum())


def test_population_minimiser_is_the_truth():
    from scipy import stats

    y = np.arange(200)
    pois = optimize.minimize_scalar(lambda t: _population_dfd(PoissonModel(), [t], y, stats.poisson.pmf(y, 4.0)),
                                    bounds=(0.5, 20), method="bounded", options={"xatol": 1e-10})
    assert pois.x == pytest.approx(4.0, abs=1e-5)
    n_trials = 12
    binom = UserModel(lambda t, x: x[:, 0] * torch.logit(t[:, :1]) - torch.lgamma(x[:, 0] + 1)
                      - torch.lgamma(n_trials - x[:, 0] + 1), [[0, n_trials]], ["p"])
    yb = np.arange(n_trials + 1)
    res = optimize.minimize_scalar(lambda t: _population_dfd(binom, [t], yb, stats.binom.pmf(yb, n_trials, 0.3)),
                                   bounds=(0.01, 0.99), method="bounded", options={"xatol": 1e-10})
    assert res.x == pytest.approx(0.3, abs=1e-5)
    logp = y * math.log(4.0) - 0.75 * np.array([math.lgamma(v + 1) for v in y])
    pmf = np.exp(logp - np.logaddexp.reduce(logp))
    cmp_fit = optimize.minimize(lambda t: _population_dfd(CMPModel(), list(t), y, pmf), x0=[3.0, 1.0],
                                method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})
    assert np.allclose(cmp_fit.x, [4.0, 0.75], atol=1e-4)


def test_ksd_matches_brute_force_stein_kernel():
    model = PoissonModel()
    x = torch.tensor([[0.0], [1.0], [1.0], [3.0], [4.0]], dtype=D64)
    dom = model.domain

    def kern(a, b):
        return math.exp(-float((a != b).sum()) / 1)

    def brute(theta):
        th = torch.tensor([[theta]], dtype=D64)
        lm, _, valid = model.log_ratios(th, x)
        u = 1 - torch.where(valid, lm.exp(), torch.zeros(()))[0]
        plus = dom.plus(x)
        total = 0.0
        for a in range(5):
            for b in range(5):
                xa, xb, pa, pb = x[a], x[b], plus[a], plus[b]
                total += (u[a, 0] * u[b, 0] * kern(xa, xb) + u[a, 0] * (kern(xa, pb) - kern(xa, xb))
                          + u[b, 0] * (kern(pa, xb) - kern(xa, xb))
                          + kern(pa, pb) - kern(pa, xb) - kern(xa, pb) + kern(xa, xb)).item()
        return total / 5  # n * KSD^2 = n * (1/n^2) sum

    loss = KSDLoss(model, x, kernel="hamming")
    th = torch.tensor([[2.0], [0.7]], dtype=D64)
    assert (loss(th[:1]) - loss(th[1:])).item() == pytest.approx(brute(2.0) - brute(0.7), rel=1e-9)
    assert torch.allclose(KSDLoss(model, x, compress=False)(th), loss(th), rtol=1e-10)
    per_row = (loss.per_row(th) * loss.row_counts).sum(-1)
    assert torch.allclose(per_row, loss(th), rtol=1e-10)


def test_pseudo_likelihood_matches_enumeration():
    model = IsingModel(2, boundary="free")
    states = torch.tensor(list(product([-1.0, 1.0], repeat=4)), dtype=D64)
    x = states[[0, 3, 5, 9, 9, 15]]
    theta = torch.tensor([[1.7]], dtype=D64)
    brute = 0.0
    for row in x:
        for j in range(4):
            flipped = row.clone()
            flipped[j] = -flipped[j]
            lp = model.log_unnormalized(theta, torch.stack([row, flipped]))[0]
            brute -= (lp[0] - torch.logsumexp(lp, 0)).item()
    assert PseudoLikelihoodLoss(model, x)(theta).item() == pytest.approx(brute, rel=1e-10)
    with pytest.raises(ValueError, match="binary"):
        PseudoLikelihoodLoss(PoissonModel(), torch.tensor([[1.0]]))


def test_truncated_likelihood_is_the_poisson_nll():
    from scipy import stats

    x = torch.tensor([[0.0], [2.0], [5.0], [5.0]], dtype=D64)
    loss = TruncatedLikelihoodLoss(PoissonModel(), x)
    assert loss(torch.tensor([[3.0]], dtype=D64)).item() == pytest.approx(
        -stats.poisson.logpmf(x[:, 0].numpy(), 3.0).sum(), rel=1e-10)
