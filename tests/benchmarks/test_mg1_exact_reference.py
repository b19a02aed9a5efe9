"""Bookkeeping of the mg1 exact-reference benchmark (no importance sampling)."""

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("mg1_exact_reference.py", "mg1_exact_reference_bench")


def _exact(r, mean=(1.0, 5.0, 0.2)):
    sd = [0.01, 0.1, 0.01]
    return {"rep": r, "seed": 0, "settings": {}, "seconds": 1.0, "mean": list(mean), "sd": sd,
            "low": [m - 2 * s for m, s in zip(mean, sd)], "high": [m + 2 * s for m, s in zip(mean, sd)],
            "width": [4 * s for s in sd], "covers": [True] * 3, "ess": [100.0], "min_x": 1.01}


def test_compare_gives_width_ratios_offsets_and_holds(bench):
    exact = {0: _exact(0), 1: _exact(1)}
    records = {("m", 0): {"mean": [1.02, 5.0, 0.2], "low": [0.94, 4.6, 0.18], "high": [1.10, 5.4, 0.22]},
               ("m", 1): {"mean": [1.0, 5.3, 0.2], "low": [0.92, 5.2, 0.18], "high": [1.08, 5.4, 0.22]},
               ("m", 2): {"mean": [0, 0, 0], "low": [0, 0, 0], "high": [1, 1, 1]}}  # no exact: ignored
    row = bench.compare(exact, records)["m"]
    assert row["reps"] == [0, 1]
    np.testing.assert_allclose(row["width_ratio"], [4.0, 1.25, 1.0])  # theta2: (0.8 / 0.4 + 0.2 / 0.4) / 2
    np.testing.assert_allclose(row["offset_sd"], [1.0, 1.5, 0.0])  # (2 + 0)/2, (0 + 3)/2
    assert row["holds_exact_mean"] == [2, 1, 2]


def test_main_saves_each_repetition_and_reuses_it(bench, tmp_path, monkeypatch):
    """A repetition's reference is appended as it completes, and a later run with the same settings
    renders from it without computing it again; the method rows come from mg1_partial.jsonl."""
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setitem(bench.write_results.__globals__, "RESULTS", tmp_path)
    calls = []

    def fake(model, r, seed, settings, progress):
        calls.append(r)
        return {**_exact(r), "settings": settings}

    monkeypatch.setattr(bench, "exact_record", fake)
    rec = {"method": "m", "rep": 0, "base_seed": 0, "mean": [1.0, 5.0, 0.2], "low": [0.98, 4.8, 0.18],
           "high": [1.02, 5.2, 0.22]}
    (tmp_path / "mg1_partial.jsonl").write_text(json.dumps(rec) + "\n")
    bench.main(["--reps", "2", "--quiet", "--draws", "100", "--rounds", "1"])
    assert calls == [0, 1]
    assert len((tmp_path / "mg1_exact_reference_partial.jsonl").read_text().splitlines()) == 2
    bench.main(["--reps", "2", "--quiet", "--draws", "100", "--rounds", "1"])
    assert calls == [0, 1]  # reused
    out = json.loads((tmp_path / "mg1_exact_reference.json").read_text())
    assert out["methods"]["m"]["width_ratio"] == pytest.approx([1.0, 1.0, 1.0])
    assert (tmp_path / "mg1_exact_reference.png").stat().st_size > 1000
    bench.main(["--reps", "2", "--quiet", "--draws", "200", "--rounds", "1"])  # other settings: recomputed
    assert calls == [0, 1, 0, 1]


def test_method_records_leave_out_records_made_under_other_settings(bench, tmp_path, monkeypatch):
    """A row's record made before its settings changed is stale in mg1's table and so here: only
    the record with mg1's current fingerprint (and rows without settings) are compared."""
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    current = bench.config_fingerprint(bench.mg1.record_configs(bench.mg1.SMALL)["n-model-features-mh"])
    row = {"base_seed": 0, "mean": [1.0] * 3, "low": [0.9] * 3, "high": [1.1] * 3}
    lines = [{"method": "n-model-features-mh", "rep": 0, "config": "old", **row},
             {"method": "n-model-features-mh", "rep": 1, "config": current, **row},
             {"method": "n-model", "rep": 0, **row}]
    (tmp_path / "mg1_partial.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    assert sorted(bench.method_records(0)) == [("n-model", 0), ("n-model-features-mh", 1)]
