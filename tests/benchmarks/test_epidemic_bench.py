"""Fast checks of the epidemic benchmarks' note bookkeeping (no fitting)."""

import re

import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("epidemic5.py", "epidemic5_bench")


NAMES = ["a", "b"]
PAPER = {"gaussian-npe": {"a": (0, 0, 0.10, 0, 1), "b": (0, 0, 0.40, 0, 1)},
         "n-model": {"a": (0, 0, 0.05, 0, 1), "b": (0, 0, 0.10, 0, 1)}}


def _ratios(line: str) -> list[list[float]]:
    """The two number lists of a note line: the anchor's factors, then the anchored ratios."""
    return [[float(v) for v in group.split(" / ")] for group in re.findall(r"(\d+\.\d+(?: / \d+\.\d+)+)", line)]


def test_anchored_widths_divide_out_how_wide_the_repetitions_are(bench):
    """Repetitions twice as wide for the anchor, and twice as wide for the method, give the
    paper's ratio (1.00); a method half as wide as that gives 0.50. Repetitions the method did
    not run on, or beyond ``reps``, are left out of both means."""
    records = [
        # repetition 0: the anchor at 2x the paper's NPE, the n-model at 2x the paper's n-model
        {"method": "gaussian-npe", "rep": 0, "width": [0.20, 0.80]},
        {"method": "n-model", "rep": 0, "width": [0.10, 0.20]},
        {"method": "views", "rep": 0, "width": [0.05, 0.10]},
        # repetition 1: the anchor at the paper's width, the n-model too; views did not run
        {"method": "gaussian-npe", "rep": 1, "width": [0.10, 0.40]},
        {"method": "n-model", "rep": 1, "width": [0.05, 0.10]},
        # repetition 2 is beyond reps = 2: ignored
        {"method": "gaussian-npe", "rep": 2, "width": [9.0, 9.0]},
        {"method": "n-model", "rep": 2, "width": [9.0, 9.0]},
    ]
    paper = {**PAPER, "views": PAPER["n-model"]}
    lines = bench._anchored_widths(records, paper, 2, NAMES, ["n-model", "views"])
    assert len(lines) == 2 and "n-model (2 repetitions)" in lines[0] and "views (1 repetition)" in lines[1]
    (anchor_n, ratio_n), (anchor_v, ratio_v) = _ratios(lines[0]), _ratios(lines[1])
    assert anchor_n == pytest.approx([1.5, 1.5]) and ratio_n == pytest.approx([1.0, 1.0])
    assert anchor_v == pytest.approx([2.0, 2.0]) and ratio_v == pytest.approx([0.5, 0.5])


def test_anchored_widths_need_the_anchor_and_the_paper(bench):
    records = [{"method": "n-model", "rep": 0, "width": [0.1, 0.2]}]
    assert bench._anchored_widths(records, PAPER, 1, NAMES, ["n-model"]) == []  # no anchor records
    records.append({"method": "gaussian-npe", "rep": 0, "width": [0.1, 0.4]})
    assert bench._anchored_widths(records, None, 1, NAMES, ["n-model"]) == []
    assert bench._anchored_widths(records, PAPER, 1, NAMES, ["not-run"]) == []


def test_bsl_paper_scale_is_compared_with_the_papers_bsl_row(bench):
    """The BSL variant's paper row and cost are BSL's (Tables 3 and 7), the n-model variants'
    the n-model's; its settings are the paper's chains and simulations, fingerprinted."""
    paper = bench._paper_rows(bench.TABLE3, bench.COST7)
    assert paper[bench.BSL_PAPER] == paper["bsl"] != paper["n-model"]
    assert paper["cost"][bench.BSL_PAPER] == paper["cost"]["bsl"] == 1e6
    assert paper[bench.VIEWS] == paper["n-model"]
    settings = bench.SMALL["bsl_paper"]
    assert (settings["chains"], settings["length"], settings["sims"]) == (10, 1_000, 100)
    fingerprinted = bench._fingerprinted(bench.SMALL, bench.SMALL, [bench.BSL_PAPER])
    assert fingerprinted[bench.BSL_PAPER]["sims"] == 100 and "reps" not in fingerprinted[bench.BSL_PAPER]


def test_views_spread_is_an_n_model_variant_whose_settings_are_fingerprinted(bench):
    """The floor-spread variant is compared with the paper's n-model row, and its settings
    (``spread`` included) are part of its records' fingerprint, so changing them re-runs it."""
    paper = bench._paper_rows(bench.TABLE3, bench.COST7)
    assert paper[bench.VIEWS_SPREAD] == paper["n-model"] and bench.VIEWS_SPREAD in bench.N_MODEL_VARIANTS
    small = {**bench.SMALL, "views_spread": {"views": True, "spread": True, "hidden": (8,), "reps": 2}}
    fingerprinted = bench._fingerprinted(small, small, [bench.VIEWS_SPREAD])
    assert fingerprinted[bench.VIEWS_SPREAD]["spread"] is True and "reps" not in fingerprinted[bench.VIEWS_SPREAD]


def test_views_spread_floors_gives_the_summaries_to_the_named_rates_and_is_fingerprinted(bench):
    """The variant with the summaries for some rates only is an n-model variant; the names are in
    its fingerprint, and its note names them with the floors shortened to a run."""
    paper = bench._paper_rows(bench.TABLE3, bench.COST7)
    assert paper[bench.VIEWS_SPREAD_FLOORS] == paper["n-model"]
    assert bench.VIEWS_SPREAD_FLOORS in bench.N_MODEL_VARIANTS
    names = ("beta_facility", "beta_floor1", "beta_floor2", "beta_floor3")
    small = {**bench.SMALL, "views_spread_floors": {"views": True, "spread": names, "reps": 2}}
    fingerprinted = bench._fingerprinted(small, small, [bench.VIEWS_SPREAD_FLOORS])
    assert fingerprinted[bench.VIEWS_SPREAD_FLOORS]["spread"] == names
    assert bench._spread_rates(list(names)) == ["beta_facility", "floors 1-3"]
    assert bench._spread_rates(["beta_floor1", "beta_floor3"]) == ["floors 1, 3"]


def test_chance_of_a_short_rate_matches_a_simulation(bench):
    """Binomial formula against simulated coverage counts (200,000 tables of 10 x 12 intervals
    that each cover with probability 0.95); the tolerance is 4 Monte Carlo standard errors."""
    g = torch.Generator().manual_seed(0)
    sims, reps, rates = 200_000, 10, 12
    covered = (torch.rand(sims, reps, rates, generator=g) < 0.95).sum(1)
    simulated = (covered < 9).any(1).double().mean().item()
    exact = bench.chance_of_a_short_rate(reps, rates)
    assert abs(exact - simulated) < 4 * (exact * (1 - exact) / sims) ** 0.5
    assert bench.chance_of_a_short_rate(10, 1) == pytest.approx(1 - 0.95**10 - 10 * 0.95**9 * 0.05)
    assert bench.chance_of_a_short_rate(20, 1, floor=0.0) == pytest.approx(0.0)


def test_target_check_lists_wide_and_short_parameters_with_their_standard_errors(bench):
    """Rate a at the paper's width on every repetition (within target); rate b at 1.5x +- 0.1,
    above 1.1x by (1.5 - 1.1) / se = 0.4 / (0.115 / 2) = 6.9 standard errors (sd with n - 1),
    and covered on 2 of 4."""
    records = [{"method": "n-model", "rep": r, "width": [0.05, 0.10 * (1.5 + d)], "covers": [1.0, c]}
               for r, (d, c) in enumerate([(-0.1, 1.0), (0.1, 0.0), (-0.1, 1.0), (0.1, 0.0)])]
    records.append({"method": "n-model", "rep": 4, "width": [9.0, 9.0], "covers": [0.0, 0.0]})  # beyond reps
    line, = bench._target_check(records, PAPER, 4, NAMES, ["n-model", "not-run"])
    assert "width above 1.1x on 1 of 2 parameters (b 1.50 (+6.9 se)" in line
    assert "by more than 2 standard errors on 1 (b)" in line
    assert "coverage below 0.90 on 1 (b 2 of 4)" in line
    assert f"probability {bench.chance_of_a_short_rate(4, 2):.2f}" in line
    good = [{**r, "width": [0.05, 0.10], "covers": [1.0, 1.0]} for r in records[:4]]
    line, = bench._target_check(good, PAPER, 4, NAMES, ["n-model"])
    assert "every width within 1.1x" in line and "coverage >= 0.90 on every parameter" in line
    assert bench._target_check(records, None, 4, NAMES, ["n-model"]) == []


def test_n_estimator_gives_each_variant_its_views_and_summaries(bench):
    """The n-model builder shared by the benchmark and its pilots: no views for the plain row,
    each rate's two columns for ``views``, all of S for the named rates, and the floor-spread
    summaries appended (to the views and the network's input) only where ``spread`` says so."""
    from scorebayes.models import get_model

    model = get_model("epidemic10")
    base = {"N": 10, "epochs": 1, "batch": 5, "validation": 0.2, "hidden": (8,)}
    loc = {"replicates": 2, "iterations": 2}
    plain = bench.n_estimator(model, base, loc, 0)
    assert plain.networks.score_views is None and plain.networks.data_features is None
    views = bench.n_estimator(model, {**base, "views": True}, loc, 0)
    assert views.networks.score_views == [list(v) for v in model.score_views()] and views.networks.data_features is None
    wide = bench.n_estimator(model, {**base, "views": ("beta_facility",)}, loc, 0)
    assert wide.networks.score_views == [list(v) for v in model.score_views(see_all=("beta_facility",))]
    assert len(wide.networks.score_views[0]) > len(wide.networks.score_views[1])
    spread = bench.n_estimator(model, {**base, "views": True, "spread": True}, loc, 0)
    assert spread.networks.data_features == model.floor_spread
    assert spread.networks.score_views == [list(v) for v in model.score_views(spread=True)]
    assert all(len(s) > len(v) for s, v in zip(spread.networks.score_views, views.networks.score_views))
    assert spread.networks.tied_views == [] and views.networks.tied_views == []
    tied = bench.n_estimator(model, {**base, "views": True, "spread": True, "tied": True}, loc, 0)
    assert tied.networks.tied_views == [list(range(1, 11))] and tied.networks.score_views == spread.networks.score_views


def test_views_spread_tied_is_a_fingerprinted_n_model_variant_on_the_spread_rows_seeds(bench, load_benchmark):
    """The shared-floor-network variant is compared with the paper's n-model row, its ``tied``
    setting is in its fingerprint, and epidemic10 runs it on VIEWS_SPREAD's repetition seeds."""
    paper = bench._paper_rows(bench.TABLE3, bench.COST7)
    assert paper[bench.VIEWS_SPREAD_TIED] == paper["n-model"] and bench.VIEWS_SPREAD_TIED in bench.N_MODEL_VARIANTS
    ten = load_benchmark("epidemic10.py", "epidemic10_bench")
    assert ten.SMALL["views_spread_tied"] == {**ten.SMALL["views_spread"], "tied": True, "reps": 3}
    fingerprinted = bench._fingerprinted(ten.SMALL, ten.SMALL, [bench.VIEWS_SPREAD, bench.VIEWS_SPREAD_TIED])
    assert fingerprinted[bench.VIEWS_SPREAD_TIED] == {**fingerprinted[bench.VIEWS_SPREAD], "tied": True}
    assert bench.SEED_AS[bench.VIEWS_SPREAD_TIED] == bench.VIEWS_SPREAD


def test_views_spread_5x_is_the_spread_row_on_five_times_the_table_with_the_same_gradient_steps(bench, load_benchmark):
    """The 5x variant differs from VIEWS_SPREAD only in the table's size and the epochs, so that
    both take the same number of gradient steps; it runs on VIEWS_SPREAD's repetition seeds and its
    size is in its fingerprint."""
    ten = load_benchmark("epidemic10.py", "epidemic10_bench")
    spread, big = ten.SMALL["views_spread"], ten.SMALL["views_spread_5x"]
    assert {k: v for k, v in big.items() if k not in ("N", "epochs", "reps")} == \
        {k: v for k, v in spread.items() if k not in ("N", "epochs", "reps")}
    assert big["N"] == 5 * spread["N"]
    steps = [s["N"] * (1 - s["validation"]) / s["batch"] * s["epochs"] for s in (spread, big)]
    assert steps[0] == pytest.approx(steps[1])
    assert bench.SEED_AS[bench.VIEWS_SPREAD_5X] == bench.VIEWS_SPREAD and bench.VIEWS_SPREAD_5X in bench.N_MODEL_VARIANTS
    fingerprinted = bench._fingerprinted(ten.SMALL, ten.SMALL, [bench.VIEWS_SPREAD, bench.VIEWS_SPREAD_5X])
    assert fingerprinted[bench.VIEWS_SPREAD_5X] == {**fingerprinted[bench.VIEWS_SPREAD], "N": big["N"],
                                                    "epochs": big["epochs"]}
    from scorebayes.models import get_model

    model = get_model("epidemic10")
    assert bench._variant_repetitions(big["reps"], 10) == "repetitions 2, 7 only"
    est = bench.n_estimator(model, big, ten.SMALL["localization"], 0)
    assert est.tables.table_size == big["N"] and est.schedule.epochs == big["epochs"]


@pytest.mark.parametrize("variant_name, key, base_name, base_key, features", [
    ("VIEWS_SPREAD_EMBED", "views_spread_embed", "VIEWS_SPREAD", "views_spread", True),
    ("VIEWS_EMBED", "views_embed", "VIEWS", "views", False)])
def test_embed_variants_are_their_rows_with_a_shared_embedding(bench, load_benchmark, variant_name, key,
                                                               base_name, base_key, features):
    """An embedding variant differs from its row only in the shared embedding (and the
    repetitions it runs on), runs on that row's repetition seeds, has the embedding in its
    fingerprint, and builds per-rate networks that all see the embedding."""
    ten = load_benchmark("epidemic10.py", "epidemic10_bench")
    variant, base = getattr(bench, variant_name), getattr(bench, base_name)
    plain, embed = ten.SMALL[base_key], ten.SMALL[key]
    assert {k: v for k, v in embed.items() if k not in ("embedding", "reps")} == \
        {k: v for k, v in plain.items() if k != "reps"}
    assert bench.SEED_AS[variant] == base and variant in bench.N_MODEL_VARIANTS
    fingerprinted = bench._fingerprinted(ten.SMALL, ten.SMALL, [base, variant])
    assert fingerprinted[variant] == {**fingerprinted[base], "embedding": embed["embedding"]}
    from scorebayes.models import get_model

    model = get_model("epidemic10")
    est = bench.n_estimator(model, embed, ten.SMALL["localization"], 0)
    width = model.floors + 2 + (model.SPREAD_FEATURES if features else 0)
    net = est.networks.score_network(est.space, model.steps * width)
    assert net.embed is not None and net.embed[-1].out_features == embed["embedding"]
    assert net.embed[0].in_features == model.steps * width  # the embedding sees the whole view
    assert bench.n_estimator(model, plain, ten.SMALL["localization"], 0).networks.shared_embedding == 0
