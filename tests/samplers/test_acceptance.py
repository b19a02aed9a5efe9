import math

import numpy as np
import pytest
import torch

from scorebayes.samplers.acceptance import (
    AlwaysAccept,
    ExactRule,
    LearnedRule,
    Move,
    QuadratureRule,
    TaylorRule,
    quadrature_nodes,
)


def log_p(x):
    # non-quadratic log-density: quartic + periodic term
    return (-0.25 * x**4 - 0.5 * x**2 + torch.sin(2 * x)).sum(-1)


def score(x):
    return -(x**3) - x + 2 * torch.cos(2 * x)


def make_move(generator, scale=0.8, n=200, d=2):
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    xp = x + scale * torch.randn(n, d, generator=generator, dtype=torch.float64)
    zeros = torch.zeros(n, dtype=torch.float64)
    return Move(x, xp, score(x), score(xp), zeros)


def log_diff(rule, move):
    """Unclamped estimate of log p(x') - log p(x): the rules clamp at 0, so use a big offset."""
    shifted = move._replace(log_q_ratio=move.log_q_ratio - 1e3)
    return rule(shifted) + 1e3


@pytest.mark.parametrize("kind,k", [("lobatto", 2), ("lobatto", 3), ("lobatto", 5), ("legendre", 1),
                                    ("legendre", 4)])
def test_quadrature_nodes_integrate_polynomials(kind, k):
    t, w = quadrature_nodes(k, kind)
    assert np.isclose(w.sum(), 1.0) and np.all((t >= 0) & (t <= 1))
    degree = 2 * k - 3 if kind == "lobatto" else 2 * k - 1
    for p in range(degree + 1):
        assert np.isclose((w * t**p).sum(), 1 / (p + 1)), (kind, k, p)
    # one degree more is not exact (so the degree claim is tight)
    assert not np.isclose((w * t ** (degree + 1)).sum(), 1 / (degree + 2))


def test_lobatto_two_nodes_is_taylor_one_averaging(generator):
    move = make_move(generator)
    torch.testing.assert_close(QuadratureRule(score, 2)(move), TaylorRule()(move))


@pytest.mark.parametrize("kind", ["lobatto", "legendre"])
def test_quadrature_error_falls_with_k(kind, generator):
    move = make_move(generator)
    truth = log_p(move.x_prop) - log_p(move.x)
    ks = [2, 3, 4, 6, 8] if kind == "lobatto" else [1, 2, 3, 5, 7]
    errors = [float((log_diff(QuadratureRule(score, k, kind), move) - truth).abs().max()) for k in ks]
    assert all(b < a for a, b in zip(errors, errors[1:], strict=False)), errors
    assert errors[-1] < 1e-3 * errors[0]


def test_taylor_variants_exact_where_expected(generator):
    # quadratic log p: Taylor-1 averaging and both Taylor-2 are exact, Taylor-1 plain is not
    prec = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)

    def qscore(x):
        return -x @ prec

    x = torch.randn(50, 2, generator=generator, dtype=torch.float64)
    xp = x + torch.randn(50, 2, generator=generator, dtype=torch.float64)
    move = Move(x, xp, qscore(x), qscore(xp), torch.zeros(50, dtype=torch.float64))
    truth = -0.5 * ((xp @ prec) * xp).sum(-1) + 0.5 * ((x @ prec) * x).sum(-1)
    for rule in [TaylorRule(), TaylorRule(2, False, qscore), TaylorRule(2, True, qscore)]:
        torch.testing.assert_close(log_diff(rule, move), truth)
    assert (log_diff(TaylorRule(1, False), move) - truth).abs().max() > 0.1


def test_taylor_two_averaging_beats_one_plain(generator):
    move = make_move(generator, scale=0.1)
    truth = log_p(move.x_prop) - log_p(move.x)
    err1 = (log_diff(TaylorRule(1, False), move) - truth).abs().mean()
    err2 = (log_diff(TaylorRule(2, True, score), move) - truth).abs().mean()
    assert err2 < 0.1 * err1


def test_exact_rule_and_support(generator):
    move = make_move(generator)
    rule = ExactRule(log_p)
    expected = (log_p(move.x_prop) - log_p(move.x)).clamp(max=0)
    torch.testing.assert_close(rule(move), expected)

    def half_line(x):
        lp = log_p(x)
        return torch.where(x[:, 0] > 0, lp, torch.full_like(lp, -math.inf))

    out = ExactRule(half_line)(move._replace(x=move.x.abs()))
    assert torch.all(out[move.x_prop[:, 0] <= 0] == -math.inf)


def test_learned_rule_forms(generator):
    # Barker's a = r / (1 + r) satisfies detailed balance; the ratio form gives min(1, r)
    def barker(x_to, x_from):
        return torch.nn.functional.logsigmoid(log_p(x_to) - log_p(x_from))

    move = make_move(generator)
    log_r = log_p(move.x_prop) - log_p(move.x)
    torch.testing.assert_close(LearnedRule(barker)(move), torch.nn.functional.logsigmoid(log_r))
    torch.testing.assert_close(LearnedRule(barker, form="ratio")(move), log_r.clamp(max=0))
    with pytest.raises(ValueError, match="form"):
        LearnedRule(barker, form="other")


def test_always_accept_and_missing_scores(generator):
    move = make_move(generator)
    assert torch.all(AlwaysAccept()(move) == 0)
    with pytest.raises(ValueError, match="needs scores"):
        TaylorRule()(move._replace(score=None))
    with pytest.raises(ValueError, match="order"):
        TaylorRule(3)


def test_log_density_difference_integrates_a_gaussian_score_over_long_segments():
    """Exact log-density differences of N(m, S) from its score alone, also for end points 200
    sds out (a chain stuck in the far tail): the composite rule resolves the peak near the start."""
    from scorebayes.samplers.acceptance import log_density_difference

    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 3, generator=g, dtype=torch.float64)
    S = A @ A.T / 3 + 0.01 * torch.eye(3, dtype=torch.float64)
    P = torch.linalg.inv(S)
    m = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64)

    def log_p(x):
        return -0.5 * (((x - m) @ P) * (x - m)).sum(-1)

    start = m + 0.1 * torch.randn(5, 3, generator=g, dtype=torch.float64)
    end = m + torch.cat([torch.randn(3, 3, generator=g, dtype=torch.float64),
                         200 * S.diagonal().sqrt() * torch.ones(2, 3, dtype=torch.float64)])
    got = log_density_difference(lambda x: -(x - m) @ P, start, end)
    # a quadratic integrand along the segment: Gauss-Legendre is exact up to rounding
    assert torch.allclose(got, log_p(end) - log_p(start), rtol=1e-10, atol=1e-8), (got, log_p(end) - log_p(start))
    # one shared start broadcasts
    shared = log_density_difference(lambda x: -(x - m) @ P, m, end)
    assert torch.allclose(shared, log_p(end) - log_p(m), rtol=1e-10)


def test_log_density_difference_resolves_a_peaked_non_polynomial_density():
    """log p = -A(1 - exp(-|x|^2 / 2)) (a plateau far out): 2,000 nats between the peak and a point
    8 units out, to 1e-6 relative, with the default 16 pieces x 4 nodes."""
    from scorebayes.samplers.acceptance import log_density_difference

    A = 2000.0

    def log_p(x):
        return -A * (1 - torch.exp(-(x**2).sum(-1) / 2))

    def score(x):
        return -A * torch.exp(-(x**2).sum(-1, keepdim=True) / 2) * x

    start = torch.zeros(1, 2, dtype=torch.float64)
    end = torch.tensor([[8.0, 0.0], [0.5, 0.5], [-3.0, 4.0]], dtype=torch.float64)
    got = log_density_difference(score, start, end)
    want = log_p(end) - log_p(start)
    assert torch.allclose(got, want, rtol=1e-6), (got, want)
    coarse = log_density_difference(score, start, end, pieces=1, num_nodes=2)
    assert not torch.allclose(coarse, want, rtol=1e-2)  # one 2-node piece misses the peak: pieces matter


def test_log_density_difference_checks_its_arguments():
    from scorebayes.samplers.acceptance import log_density_difference

    with pytest.raises(ValueError, match="pieces must be >= 1"):
        log_density_difference(lambda x: x, torch.zeros(2, 2), torch.ones(2, 2), pieces=0)
    with pytest.raises(ValueError, match=r"\[C, d\]"):
        log_density_difference(lambda x: x, torch.zeros(2), torch.ones(2))
