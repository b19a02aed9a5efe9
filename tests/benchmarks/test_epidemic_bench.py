"""Fast checks of the epidemic benchmarks' note bookkeeping (no fitting)."""

import re

import pytest


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
