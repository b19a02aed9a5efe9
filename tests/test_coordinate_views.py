"""CoordinateViewScoreNet: one network per parameter on its own view of the data.

Truth: a Gaussian data set x_i ~ N(theta, I_d), i = 1..n, flattened to one row ``[n d]``
(the full-data view), whose likelihood score is exactly sum_i (x_ij - theta_j). Coordinate j's
information sits in the entries ``i d + j``, so the right views learn it and views that show
coordinate j another coordinate's entries cannot (the best such score given theta is 0).
"""

import json

import pytest
import torch
from torch.distributions import Normal

from scorebayes.cli import main
from scorebayes.models import get_model
from scorebayes.priors import independent
from scorebayes.sbi import ScoreLangevin
from scorebayes.scores.losses import evaluate_score
from scorebayes.scores.networks import CoordinateViewScoreNet
from scorebayes.scores.training import TrainingSchedule, fit_score_network

D, N_OBS = 3, 10


def own_views(shift: int = 0):
    """Coordinate j sees the entries of coordinate (j + shift) % D in every observation."""
    return [[i * D + (j + shift) % D for i in range(N_OBS)] for j in range(D)]


def ragged_views():
    """Coordinate 1 sees every entry, coordinates 0 and 2 their own: two blocks, interleaved."""
    views = own_views()
    views[1] = list(range(N_OBS * D))
    return views


def gaussian_table(num: int, seed: int, prior_sd: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    theta = prior_sd * torch.randn(num, D, generator=g)
    x = theta[:, None, :] + torch.randn(num, N_OBS, D, generator=g)
    true_score = (x - theta[:, None, :]).sum(1)
    return theta, x.reshape(num, 1, N_OBS * D), true_score, -theta / prior_sd**2


ALL_TIED = [list(range(D))]


@pytest.mark.parametrize("activation,views,tied,embedding", [
    ("elu", own_views(), (), 0), ("tanh", own_views(), (), 0), ("elu", ragged_views(), (), 0),
    ("elu", own_views(), ALL_TIED, 0), ("tanh", ragged_views(), [[0, 2]], 0),
    ("elu", ragged_views(), (), 4), ("tanh", own_views(), (), 3)])  # with a shared embedding of x
def test_forward_mode_jacobian_equals_autograd(activation, views, tied, embedding):
    torch.manual_seed(0)
    net = CoordinateViewScoreNet(D, N_OBS * D, views, hidden=(16, 8), activation=activation, tied=tied,
                                 embedding=embedding)
    theta, x, _, _ = gaussian_table(64, 1)
    net.fit_standardisation(theta, x)
    s, jac = net.score_and_jacobian(theta[:5], x[:5])
    leaf = theta[:5].clone().requires_grad_(True)
    out = net(leaf[:, None, :], x[:5]).sum(1)
    auto = torch.stack([torch.autograd.grad(out[:, j].sum(), leaf, retain_graph=True)[0] for j in range(D)], 1)
    assert torch.allclose(s.sum(1), out, atol=1e-6)
    assert torch.allclose(jac, auto, atol=1e-5, rtol=1e-4)
    assert auto.abs().max() > 1e-3  # the comparison is not between zeros


def test_activation_without_closed_form_falls_back_to_autograd():
    net = CoordinateViewScoreNet(D, N_OBS * D, own_views(), hidden=(8,), activation="gelu")
    theta, x, _, _ = gaussian_table(8, 2)
    assert net.score_and_jacobian(theta, x) is None
    assert evaluate_score(net, theta, x).jacobian.shape == (8, D, D)


def test_each_output_depends_only_on_its_view():
    net = CoordinateViewScoreNet(D, N_OBS * D, own_views(), hidden=(8,))
    theta, x, _, _ = gaussian_table(4, 3)
    moved = x.clone()
    moved[..., [i * D + 1 for i in range(N_OBS)]] += 1.0  # coordinate 1's entries only
    change = (net(theta[:, None], moved) - net(theta[:, None], x)).abs().amax((0, 1))
    assert change[1] > 1e-4 and change[0] == 0 and change[2] == 0


def test_a_shared_embedding_shows_every_network_all_of_the_data():
    """With ``embedding=k`` each network sees its view and e(x), one MLP on all of x: moving
    coordinate 1's entries changes every output, and e has one copy (not one per network)."""
    torch.manual_seed(0)
    net = CoordinateViewScoreNet(D, N_OBS * D, own_views(), hidden=(8,), embedding=4, embedding_hidden=(16,))
    assert [b.views.shape[-1] for b in net.blocks] == [N_OBS + 4]
    assert sum(p.numel() for p in net.embed.parameters()) == N_OBS * D * 16 + 16 + 16 * 4 + 4
    theta, x, _, _ = gaussian_table(4, 3)
    moved = x.clone()
    moved[..., [i * D + 1 for i in range(N_OBS)]] += 1.0
    change = (net(theta[:, None], moved) - net(theta[:, None], x)).abs().amax((0, 1))
    assert (change > 1e-5).all(), change


@pytest.mark.parametrize("embedding, tied, message", [
    (-1, (), "width >= 0"), (2.5, (), "width >= 0"), (True, (), "width >= 0"),
    (4, ALL_TIED, "cannot go with tied")])
def test_bad_embeddings_are_refused_with_the_reason(embedding, tied, message):
    with pytest.raises(ValueError, match=message):
        CoordinateViewScoreNet(D, N_OBS * D, own_views(), embedding=embedding, tied=tied)


def test_ragged_views_keep_each_output_on_its_own_view():
    """Views of two lengths run as two blocks; outputs come back in coordinate order."""
    net = CoordinateViewScoreNet(D, N_OBS * D, ragged_views(), hidden=(8,))
    assert [b.coords.tolist() for b in net.blocks] == [[0, 2], [1]]
    theta, x, _, _ = gaussian_table(4, 3)
    for j in range(D):  # moving coordinate j's entries changes output j and the all-seeing output 1
        moved = x.clone()
        moved[..., [i * D + j for i in range(N_OBS)]] += 1.0
        change = (net(theta[:, None], moved) - net(theta[:, None], x)).abs().amax((0, 1))
        assert {k for k in range(D) if change[k] > 0} == {j, 1}


@pytest.mark.parametrize("hidden,tied,embedding", [((16, 8), (), 0), ((), (), 0), ((16, 8), [[0, 2]], 0),
                                                   ((16, 8), (), 5)])
def test_chain_drift_with_the_data_part_computed_once_equals_the_forward_pass(hidden, tied, embedding):
    """sum_over_observations splits each first layer into theta and data parts (views of two
    lengths, several observations, chains in chunks of 3; the shared embedding, which is in the
    data part) and must equal the plain sum."""
    torch.manual_seed(0)
    net = CoordinateViewScoreNet(D, N_OBS * D, ragged_views(), hidden=hidden, tied=tied, embedding=embedding)
    theta, x, _, _ = gaussian_table(64, 6)
    net.fit_standardisation(theta, x)
    chains, data = theta[:7], x[:4, 0]  # 7 chains, 4 observations of the full view
    with torch.no_grad():
        fast = net.sum_over_observations(chains, data, max_elements=3 * 4 * D * 16)
        slow = net(chains[:, None, :], data[None]).sum(1)
    assert torch.allclose(fast, slow, atol=1e-5, rtol=1e-5)
    assert slow.abs().min() > 1e-4  # outputs of every coordinate are compared, not zeros


def r_squared(net, theta, x, true_score):
    with torch.no_grad():
        pred = net(theta[:, None, :], x).sum(1)
    return 1 - ((pred - true_score) ** 2).sum(0) / ((true_score - true_score.mean(0)) ** 2).sum(0)


def test_right_views_learn_the_score_wrong_views_cannot():
    theta, x, _, grad_q = gaussian_table(3000, 4)
    test_theta, test_x, test_score, _ = gaussian_table(1000, 5)
    schedule = TrainingSchedule(epochs=40, penalty_epochs=0, batch_size=64, lr=(3e-3, 1e-4), patience=40,
                                validation_fraction=0.2)
    scores = {}
    for name, views in (("right", own_views()), ("ragged", ragged_views()), ("wrong", own_views(1))):
        torch.manual_seed(0)
        net = CoordinateViewScoreNet(D, N_OBS * D, views, hidden=(32, 16))
        fit_score_network(net, theta, x, grad_q, schedule=schedule, generator=torch.Generator().manual_seed(0))
        scores[name] = r_squared(net, test_theta, test_x, test_score)
    assert (scores["right"] > 0.9).all(), scores["right"]
    # one coordinate seeing everything (a superset of its own entries) still learns its score
    assert (scores["ragged"] > 0.85).all(), scores["ragged"]
    assert (scores["wrong"] < 0.1).all(), scores["wrong"]  # no information about theta_j in the wrong view


def _rolled(theta, x, shift):
    """Coordinates moved cyclically by ``shift``, in theta and in every observation of ``x``."""
    rolled_x = x.reshape(*x.shape[:-1], N_OBS, D).roll(shift, -1).reshape(x.shape)
    return theta.roll(shift, -1), rolled_x


@pytest.mark.parametrize("tied", [ALL_TIED, ()])
def test_tied_networks_are_equivariant_under_a_cyclic_shift_of_the_coordinates(tied):
    """The Gaussian's coordinates are exchangeable: moving them (and their entries of x) round
    by one must move the score's outputs round by one. Tied networks do so exactly, for any
    weights; untied ones do not (the check can fail)."""
    torch.manual_seed(0)
    net = CoordinateViewScoreNet(D, N_OBS * D, own_views(), hidden=(16, 8), tied=tied)
    theta, x, _, _ = gaussian_table(256, 7)
    net.fit_standardisation(theta, x)
    if tied:  # one shift and scale for the group's coordinates, and for each view position
        assert torch.all(net.theta_norm.shift == net.theta_norm.shift[0])
        assert torch.all(net.x_norm.scale.reshape(N_OBS, D) == net.x_norm.scale.reshape(N_OBS, D)[:, :1])
        assert sum(p.numel() for p in net.parameters()) * D == sum(
            p.numel() for p in CoordinateViewScoreNet(D, N_OBS * D, own_views(), hidden=(16, 8)).parameters())
    with torch.no_grad():
        out = net(theta[:8, None], x[:8])
        moved = net(*(t[:, None] if t.dim() == 2 else t for t in _rolled(theta[:8], x[:8], 1)))
    error = (moved - out.roll(1, -1)).abs().max()
    assert error < 1e-5 if tied else error > 1e-2


def test_tied_networks_learn_from_fewer_rows():
    """Each row teaches a tied network once per member: on 300 rows the tied net's unexplained
    variance of the true score is under 0.6x the untied one's (two seeds; measured 0.34x)."""
    theta, x, _, grad_q = gaussian_table(300, 4)
    test_theta, test_x, test_score, _ = gaussian_table(1000, 5)
    schedule = TrainingSchedule(epochs=60, penalty_epochs=0, batch_size=32, lr=(3e-3, 1e-4), patience=60,
                                validation_fraction=0.2)
    unexplained = {}
    for tied in (ALL_TIED, ()):
        errors = []
        for seed in (0, 1):
            torch.manual_seed(seed)
            net = CoordinateViewScoreNet(D, N_OBS * D, own_views(), hidden=(32, 16), tied=tied)
            fit_score_network(net, theta, x, grad_q, schedule=schedule, generator=torch.Generator().manual_seed(seed))
            errors.append(1 - r_squared(net, test_theta, test_x, test_score))
        unexplained[bool(tied)] = torch.stack(errors).mean()
    assert unexplained[True] < 0.6 * unexplained[False], unexplained
    assert unexplained[True] < 0.05, unexplained


@pytest.mark.parametrize("tied,message", [([[0]], "at least two"), ([[0, 2], [2, 0]], "disjoint"),
                                          ([[0, 3]], "outside"), ([[0, 1]], "one length"),
                                          ([["a", 1]], "integer")])
def test_bad_tied_groups_are_refused_with_the_reason(tied, message):
    with pytest.raises(ValueError, match=message):
        CoordinateViewScoreNet(D, N_OBS * D, ragged_views(), tied=tied)


def gaussian_simulator(theta, n, generator=None):
    return theta[:, None, :] + torch.randn(len(theta), n, theta.shape[1], generator=generator, dtype=theta.dtype)


def prior():
    return independent([Normal(torch.tensor(0.0, dtype=torch.float64), 2.0) for _ in range(D)])


def test_score_langevin_checks_views_before_any_simulation():
    with pytest.raises(ValueError, match="one index list per parameter"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", score_views=own_views()[:2])
    with pytest.raises(ValueError, match=r"non-empty index lists; empty for parameters \[1\]"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", score_views=[[0, 1], [], [3, 4]])
    with pytest.raises(ValueError, match="integer indices"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", score_views=[[0, 1], ["a"], [3, 4]])
    with pytest.raises(ValueError, match="mode 'n', 'full' or 'markov'"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="single", score_views=own_views())
    with pytest.raises(ValueError, match="needs score_views"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", tied_views=ALL_TIED)
    with pytest.raises(ValueError, match="one length"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", score_views=ragged_views(), tied_views=ALL_TIED)
    with pytest.raises(ValueError, match="shared_embedding is appended to per-parameter views: it needs score_views"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", shared_embedding=8)
    with pytest.raises(ValueError, match="shared embedding must be a width >= 0"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", score_views=own_views(), shared_embedding=-2)
    with pytest.raises(ValueError, match="shared embedding cannot go with tied networks"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", score_views=own_views(), tied_views=ALL_TIED,
                      shared_embedding=8)
    calls = []

    def counting(theta, n, generator=None):
        calls.append(len(theta))
        return gaussian_simulator(theta, n, generator)

    est = ScoreLangevin.from_options(prior(), counting, mode="full", localize=False, score_views=[[0, 40]] * D,
                        progress=False)
    with pytest.raises(ValueError, match="outside the network's data view of length 30"):
        est.fit(torch.zeros(N_OBS, D))
    assert calls == [2]  # the pilot only


def sample_means(view):
    """``vec(x) [..., n D] -> [..., D]``: each coordinate's mean over the observations."""
    return view.reshape(*view.shape[:-1], N_OBS, D).mean(-2)


@pytest.mark.parametrize("seed, options", [
    (6, {"score_views": own_views()}),
    # coordinate j's network sees only the appended feature mean_i x_ij (sufficient for theta_j)
    (7, {"data_features": sample_means, "score_views": [[N_OBS * D + j] for j in range(D)]}),
    (8, {"score_views": own_views(), "tied_views": ALL_TIED}),  # one network for the exchangeable coordinates
])
def test_full_mode_posterior_with_views_matches_the_analytic_one(seed, options):
    """End to end: the analytic posterior is N(sum x / (n + 1/4), 1 / (n + 1/4)) per coordinate."""
    g = torch.Generator().manual_seed(seed)
    truth = torch.tensor([0.5, -1.0, 1.5], dtype=torch.float64)
    x_obs = gaussian_simulator(truth[None], N_OBS, g)[0]
    est = ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", localize=False, table_size=3000,
                        hidden=(32, 16), seed=1, progress=False, **options,
                        schedule=TrainingSchedule(epochs=40, penalty_epochs=0, batch_size=64, lr=(3e-3, 1e-4),
                                                  validation_fraction=0.2))
    post = est.fit(x_obs).sample(400, chains=200, max_steps=2000)
    draws = post.draws.reshape(-1, D)
    precision = N_OBS + 0.25
    mean, sd = x_obs.sum(0) / precision, precision ** -0.5
    # Monte Carlo SE of the mean is sd / 20; the learned score may shift it by a fraction of sd
    assert ((draws.mean(0) - mean).abs() < 0.35 * sd).all(), (draws.mean(0), mean, sd)
    assert ((draws.std(0) / sd - 1).abs() < 0.15).all(), draws.std(0) / sd


def test_epidemic_views_pick_the_facility_and_the_own_column():
    model = get_model("epidemic10")
    T, width = model.steps, model.floors + 2
    labels = (100 * torch.arange(T)[:, None] + torch.arange(width)[None]).reshape(-1)  # vec(S), S[t, c] = 100 t + c
    own = [width - 1] + list(range(1, width))
    for j, view in enumerate(model.score_views()):
        seen = labels[view]
        assert sorted((seen % 100).unique().tolist()) == sorted({0, own[j]})
        assert sorted((seen // 100).unique().tolist()) == list(range(T))
    wide = model.score_views(see_all=("beta_facility", "beta_room"))
    assert [len(v) for v in wide] == [T * width] + [2 * T] * model.floors + [T * width]
    assert wide[1:-1] == model.score_views()[1:-1]
    with pytest.raises(ValueError, match="unknown parameters \\['beta_lobby'\\]"):
        model.score_views(see_all=("beta_lobby",))


def test_epidemic_floors_are_exchangeable():
    """What tying the floor rates' networks rests on: swapping two floors' rates swaps their
    columns of S in distribution. Mean prevalence over time of floor 1 and floor 10 (rates 0.02
    and 0.20, then swapped), 2,000 data sets each: equal within 4 Monte Carlo SEs after the swap,
    far apart without it."""
    model = get_model("epidemic10")
    J = model.floors
    assert model.exchangeable_rates() == [list(range(1, J + 1))]
    theta = model.true_parameters.clone()
    swapped = theta.clone()
    swapped[[1, J]] = theta[[J, 1]]
    runs = []
    for seed, th in ((0, theta), (1, swapped)):
        x = model.simulator(th.expand(2000, -1), model.n_obs, torch.Generator().manual_seed(seed))
        runs.append(x[..., [1, J]].mean(1))  # [2000, 2]: floors 1 and J, mean over time
    (a, b) = runs
    se = ((a[:, 0].var() + b[:, 1].var()) / 2000).sqrt()
    assert (a[:, 0].mean() - b[:, 1].mean()).abs() < 4 * se  # floor 1 at 0.02 = floor J at 0.02
    assert (a[:, 1].mean() - b[:, 0].mean()).abs() < 4 * se
    assert (a[:, 0].mean() - a[:, 1].mean()).abs() > 20 * se  # the rates do differ between floors


def run_config(tmp_path, model_name: str, options: str) -> int:
    """``scorebayes run`` on a score-langevin config of a builtin model in mode 'full'."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'method = "score-langevin"\n[model]\nsimulator = "builtin:{model_name}"\n'
                   f'[options]\nmode = "full"\nlocalize = false\n{options}\n')
    return main(["run", str(cfg), "--out", str(tmp_path / "o"), "--quiet"])


@pytest.mark.parametrize("model_name, options, message", [
    ("gaussian_mean", 'score_views = "builtin"', '[options] score_views = "builtin": needs a builtin epidemic'),
    ("epidemic5", 'score_views = "own"', '[options] score_views = "own": must be one of "builtin" or a list'),
    ("gaussian_mean", 'data_features = "builtin"', '[options] data_features = "builtin": needs a builtin epidemic'),
    ("epidemic5", 'data_features = 3', '[options] data_features = 3: must be one of "builtin" or "file.py:function"'),
    ("epidemic5", 'score_views = "builtin"\ntied_views = "floors"',
     '[options] tied_views = "floors": must be one of "builtin" or a list'),
    ("gaussian_mean", 'score_views = [[0]]\ntied_views = "builtin"',
     '[options] tied_views = "builtin": needs a builtin epidemic'),
])
def test_cli_score_views_errors(tmp_path, capsys, model_name, options, message):
    assert run_config(tmp_path, model_name, options) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("features", ["", 'data_features = "builtin"', 'data_features = "feat.py:overall_mean"',
                                      'data_features = "builtin"\ntied_views = "builtin"',
                                      'data_features = "builtin"\nshared_embedding = 4'])
def test_cli_builtin_score_views_run(tmp_path, features):
    (tmp_path / "feat.py").write_text("def overall_mean(view):\n    return view.mean(-1, keepdim=True)\n")
    options = 'score_views = "builtin"\n' + features + """
hidden = [8]
table_size = 40
schedule = {epochs = 1, penalty_epochs = 0, batch_size = 10}
num_samples = 20
chains = 10
max_steps = 20"""
    assert run_config(tmp_path, "epidemic5", options) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert len(summary["parameters"]) == 7


def test_data_features_errors_come_before_any_simulation():
    with pytest.raises(TypeError, match="data_features must be a function"):
        ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", data_features=[1, 2])
    calls = []

    def counting(theta, n, generator=None):
        calls.append(len(theta))
        return gaussian_simulator(theta, n, generator)

    for features, message in ((lambda v: v.sum(-1), r"must map the network's view \[..., p\]"),
                              (lambda v: v[..., :1] / 0.0, "non-finite values")):
        est = ScoreLangevin.from_options(prior(), counting, mode="full", localize=False, data_features=features,
                            progress=False)
        with pytest.raises(ValueError, match=message):
            est.fit(torch.ones(N_OBS, D))
    # features indexed by the views: an index past p + k is caught too
    est = ScoreLangevin.from_options(prior(), counting, mode="full", localize=False, data_features=sample_means,
                        score_views=[[N_OBS * D + D]] * D, progress=False)
    with pytest.raises(ValueError, match="outside the network's data view of length 33"):
        est.fit(torch.zeros(N_OBS, D))
    assert calls == [2, 2, 2]  # the pilots only


def test_epidemic_floor_spread_matches_its_definition():
    """sd, max, min over the floors of p_j(t), and cov_j(p_j(t) - p_j(t-1), p_j(t-1)), per time."""
    model = get_model("epidemic5")
    T, width, J = model.steps, model.floors + 2, model.floors
    g = torch.Generator().manual_seed(0)
    S = torch.rand(2, T, width, generator=g, dtype=torch.float64)
    got = model.floor_spread(S.reshape(2, -1)).reshape(2, T, 4)
    for b in range(2):
        for t in (0, 1, T - 1):
            p = S[b, t, 1:J + 1]
            prev = S[b, t - 1, 1:J + 1] if t > 0 else torch.zeros(J, dtype=torch.float64)
            inc = p - prev
            cov = ((inc - inc.mean()) * (prev - prev.mean())).sum() / J
            want = torch.stack([p.std(), p.max(), p.min(), cov])
            assert torch.allclose(got[b, t], want), (b, t)
    views = model.score_views(spread=True)
    spread_idx = list(range(T * width, T * (width + 4)))
    assert all(v[-4 * T:] == spread_idx for v in views)
    assert [v[:-4 * T] for v in views] == model.score_views()
    with pytest.raises(ValueError, match="takes vec\\(S\\) of length"):
        model.floor_spread(S[:, :-1].reshape(2, -1))


def test_epidemic_spread_summaries_go_to_the_named_rates_only():
    """``spread=names`` appends the summaries to those rates' views and leaves the others' as
    without them; a name that is not a rate, or a bare string, is an error."""
    model = get_model("epidemic5")
    T, width = model.steps, model.floors + 2
    spread_idx = list(range(T * width, T * (width + 4)))
    named = ("beta_facility", "beta_floor2")
    views, plain = model.score_views(spread=named), model.score_views()
    for name, view, without in zip(model.parameter_names, views, plain):
        assert view == (without + spread_idx if name in named else without), name
    assert model.score_views(spread=model.parameter_names) == model.score_views(spread=True)
    assert model.score_views(spread=()) == plain
    with pytest.raises(ValueError, match="spread: unknown parameters \\['beta_lobby'\\]"):
        model.score_views(spread=("beta_lobby",))
    with pytest.raises(TypeError, match="spread must be True, False or a sequence of names"):
        model.score_views(spread="beta_room")


def test_the_observed_view_is_built_once_per_data_set():
    """A chain's drift calls likelihood_score at every step with one data tensor: its view and
    features are computed once, and again for another tensor or after an in-place edit, with
    the same scores as a fresh computation."""
    seen = []

    def recording_means(view):
        seen.append(view.shape[0])
        return sample_means(view)

    est = ScoreLangevin.from_options(prior(), gaussian_simulator, mode="full", localize=False, table_size=60,
                        hidden=(8,), data_features=recording_means, seed=0, progress=False,
                        schedule=TrainingSchedule(epochs=1, penalty_epochs=0, batch_size=20))
    x_obs = torch.zeros(N_OBS, D, dtype=torch.float64)
    est.fit(x_obs)
    u = torch.randn(5, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    seen.clear()
    first = [est.likelihood_score(u) for _ in range(3)]
    assert seen == [1] and all(torch.equal(s, first[0]) for s in first)
    est.x_obs_.add_(1.0)  # an in-place edit of the fitted estimator's data
    edited = est.likelihood_score(u)
    assert seen == [1, 1] and not torch.allclose(edited, first[0])
    assert torch.equal(est.likelihood_score(u, est.x_obs_.clone()), edited) and seen == [1, 1, 1]


def sum_and_difference_simulator(theta, n, generator=None):
    """``theta [B, 2] = (a, b) -> x [B, n, 2]``: ``y1 = a + b + e1`` (the total, like the epidemic's
    facility column) and ``y2 = a - b + e2`` (how it splits), ``e ~ N(0, I)``."""
    mean = torch.stack([theta[:, 0] + theta[:, 1], theta[:, 0] - theta[:, 1]], -1)
    return mean[:, None, :] + torch.randn(len(theta), n, 2, generator=generator, dtype=theta.dtype)


def composite_langevin_law(y_mean, n: int, prior_precision: float):
    r"""Stationary law of the Langevin diffusion whose drift is, per coordinate, the view's score:
    :math:`a` sees only the totals :math:`y_1`, so its drift is :math:`\partial_a \log p(y_1 \mid
    \theta) + \partial_a \log\pi`; :math:`b` sees everything. Linear drift :math:`B\theta + c` with

    .. math:: B = \begin{pmatrix} -n - \tau & -n \\ 0 & -2n - \tau \end{pmatrix},\quad
              c = n\,(\bar y_1,\ \bar y_1 - \bar y_2),

    so the law is Gaussian, mean :math:`-B^{-1}c`, covariance :math:`\Sigma` solving the Lyapunov
    equation :math:`B\Sigma + \Sigma B^\top + 2I = 0`. Not the posterior: :math:`B` is not
    symmetric, the field is no gradient."""
    tau = prior_precision
    B = torch.tensor([[-n - tau, -n], [0.0, -2 * n - tau]], dtype=torch.float64)
    c = n * torch.stack([y_mean[0], y_mean[0] - y_mean[1]])
    kron = torch.kron(B, torch.eye(2, dtype=torch.float64)) + torch.kron(torch.eye(2, dtype=torch.float64), B)
    sigma = torch.linalg.solve(kron, -2 * torch.eye(2, dtype=torch.float64).reshape(-1)).reshape(2, 2)
    return -torch.linalg.solve(B, c), sigma


def test_views_that_miss_information_give_a_composite_law_not_the_posterior():
    """What a view does (the caveat in CoordinateViewScoreNet's docstring): coordinate j's network
    learns E[d_j log p(x | theta) | theta, x_V] = d_j log p(x_V | theta), the score of its view's
    likelihood. Here a's view (the totals y1) misses the split y2, which informs a, so the chains'
    law is the Lyapunov one of composite_langevin_law: a's SD 1.5x the posterior's, b's the
    posterior's. With the sufficient view (everything) a's SD is the posterior's (the
    contrast that makes the check fail when views are ignored). With a shared embedding of all of
    the data appended to the totals view (ScoreLangevin.from_options(shared_embedding=4)), a's network can learn
    the full score again, and the chains sample the posterior."""
    n, tau = 10, 0.25
    prior2 = independent([Normal(torch.tensor(0.0, dtype=torch.float64), 2.0) for _ in range(2)])
    truth = torch.tensor([[0.5, -1.0]], dtype=torch.float64)
    x_obs = sum_and_difference_simulator(truth, n, torch.Generator().manual_seed(3))[0]
    y_mean = x_obs.mean(0)
    post_sd = (2 * n + tau) ** -0.5  # the posterior: precision (2n + tau) I
    post_mean = n * torch.stack([y_mean.sum(), y_mean[0] - y_mean[1]]) / (2 * n + tau)
    law_mean, law_cov = composite_langevin_law(y_mean, n, tau)
    assert law_cov[0, 0].sqrt() / post_sd > 1.45 and torch.isclose(law_cov[1, 1].sqrt(), torch.tensor(post_sd, dtype=torch.float64))
    everything = list(range(2 * n))
    cases = {"totals": ([[2 * i for i in range(n)], everything], law_mean, law_cov.diagonal().sqrt()),
             "all": ([everything, everything], post_mean, torch.full((2,), post_sd, dtype=torch.float64)),
             "totals+embedding": ([[2 * i for i in range(n)], everything], post_mean,
                                  torch.full((2,), post_sd, dtype=torch.float64))}
    sds = {}
    for label, (views, mean, sd) in cases.items():
        est = ScoreLangevin.from_options(prior2, sum_and_difference_simulator, mode="full", localize=False, table_size=3000,
                            hidden=(32, 16), seed=1, progress=False, score_views=views,
                            shared_embedding=4 if label.endswith("embedding") else 0,
                            schedule=TrainingSchedule(epochs=40, penalty_epochs=0, batch_size=64, lr=(3e-3, 1e-4),
                                                      validation_fraction=0.2))
        draws = est.fit(x_obs).sample(400, chains=200, max_steps=2000).draws.reshape(-1, 2)
        sds[label] = draws.std(0)
        # 400 draws: the SDs' Monte Carlo error is ~4%, the learned score's a few % more
        assert ((draws.mean(0) - mean).abs() < 0.35 * sd).all(), (label, draws.mean(0), mean)
        assert ((sds[label] / sd - 1).abs() < 0.15).all(), (label, sds[label], sd)
    assert sds["totals"][0] / sds["all"][0] > 1.25
    assert sds["totals"][0] / sds["totals+embedding"][0] > 1.25
