"""Fast checks of the monotone benchmark's bookkeeping (and one tiny fit, for score_diagnosis)."""

import json

import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("monotone.py", "monotone_bench")


def test_table2_summary_layout(bench):
    records = [{"method": "single-model", "rep": r, "cost": 100.0, "cost_localization": 6.0, "seconds": 1.0,
                "ks": 0.1 * (r + 1), "w1": 0.002, "coverage_fn": 0.9, "ci_width_fn": 0.02} for r in range(3)]
    out = bench.summarise_table2(records, reps=2)
    row = out["single-model"]
    assert row["reps"] == 2
    assert row["ks"] == pytest.approx(0.15) and row["ks_sd"] == pytest.approx(0.0707, abs=1e-3)
    assert {"cost", "seconds", "ks", "w1", "coverage", "ci_width"} <= set(row)


def test_localization_cache_patches_and_restores(bench, monkeypatch):
    import scorebayes.sbi.localization.minimum_distance as loc

    calls = []

    def fake(sim, x, prior, **kw):
        calls.append(1)
        return "result"

    monkeypatch.setattr(loc, "localize", fake)  # undone after the test, whatever the cache does
    cache = bench._LocalizationCache()
    x = torch.zeros(3, 2)
    with cache.use():
        assert loc.localize(None, x, None) == "result"
        assert loc.localize(None, x.clone(), None) == "result"
        assert loc.localize(None, x + 1, None) == "result"
    assert len(calls) == 2  # the second call on the same data was cached
    assert loc.localize is fake  # the cache put back what it found


def test_fig8_partial_resume(bench, tmp_path, monkeypatch):
    """Saved Fig. 8 losses are read back per repetition (same seed and scale only) and not refitted."""
    import json

    path = tmp_path / "fig8.jsonl"
    losses = {"loss-1": 1.0, "loss-n": 2.0, "loss-n-posterior": 3.0, "cost": 4.0, "seconds": 5.0}
    rows = [{"rep": 0, "variant": v, "base_seed": 0, "scale": "small", **losses} for v in bench.VARIANTS]
    rows.append({"rep": 1, "variant": "n-model", "base_seed": 0, "scale": "small", **losses})
    rows.append({"rep": 1, "variant": "1-model", "base_seed": 7, "scale": "small", **losses})  # other seed
    rows.append({"rep": 2, "variant": "1-model", "base_seed": 0, "scale": "full", **losses})  # other scale
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = bench._load_fig8_partial(path, seed=0, scale="small")
    assert sorted(done) == [0, 1]
    assert set(done[0]) == set(bench.VARIANTS) and set(done[1]) == {"n-model"}
    assert done[1]["n-model"] == losses

    def no_fit(*a, **k):
        raise AssertionError("a saved variant was refitted")

    monkeypatch.setattr(bench, "score_model", no_fit)
    out = bench.score_losses(None, {"fig8": {}}, None, None, 0, False, done=done[0])
    assert out == done[0]


def test_figure8_renders(bench, tmp_path):
    losses = [{v: {"loss-1": 1.0 + r, "loss-n": 10.0 + r, "loss-n-posterior": 5.0 + r} for v in bench.VARIANTS}
              for r in range(3)]
    path = tmp_path / "fig8.png"
    bench.figure8(losses, path)
    assert path.stat().st_size > 1000


@pytest.fixture
def fake_table_run(bench, tmp_path, monkeypatch):
    """Table runs write to ``tmp_path``, every method returns draws near the truth and each record
    is ``{"ks": 0.5}``: the bookkeeping alone."""
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setitem(bench.run_repetitions.__globals__, "RESULTS", tmp_path)
    monkeypatch.setitem(bench.announce_rows_left_out.__globals__, "RESULTS", tmp_path)

    def fake_methods(model, cfg, progress, refs=None):
        def method(x_obs, seed):
            draws = model.true_parameters + 0.01 * torch.randn(50, model.true_parameters.numel(),
                                                               dtype=torch.float64)
            return bench.MethodResult(bench.Posterior(draws, model.parameter_names), cost=1.0)
        return {m: method for m in bench.METHODS}

    monkeypatch.setattr(bench, "make_methods", fake_methods)
    monkeypatch.setattr(bench, "table2_record", lambda model, refs: lambda m, post, x, r: {"ks": 0.5})
    return tmp_path


def test_a_methods_subset_saves_records_without_dropping_rendered_rows(bench, fake_table_run, capsys):
    """``--methods npe`` over a monotone.json that also holds abc saves npe's records and leaves
    monotone.json alone, instead of rewriting Table 2 with npe's row only."""
    tmp_path = fake_table_run
    rendered = {"name": "monotone", "methods": {"abc": {}, "npe": {}}}
    (tmp_path / "monotone.json").write_text(json.dumps(rendered))
    bench.main(["--methods", "npe", "--reps", "1", "--parts", "table", "--quiet"])
    assert "would drop the rows abc of monotone.md" in capsys.readouterr().out
    assert json.loads((tmp_path / "monotone.json").read_text()) == rendered
    records = [json.loads(line) for line in (tmp_path / "monotone_partial.jsonl").read_text().splitlines()]
    assert [(r["method"], r["rep"], r["ks"]) for r in records] == [("npe", 0, 0.5)]


def test_only_reps_saves_those_repetitions_alone(bench, fake_table_run, capsys):
    """``--only-reps 1`` (a paper-scale repetition on its own process) records repetition 1 only
    and renders nothing; with parts other than the table it is refused before any work."""
    tmp_path = fake_table_run
    bench.main(["--methods", "npe", "--reps", "2", "--only-reps", "1", "--parts", "table", "--quiet"])
    assert "recorded repetitions [1]" in capsys.readouterr().out
    assert not (tmp_path / "monotone.json").exists()
    records = [json.loads(line) for line in (tmp_path / "monotone_partial.jsonl").read_text().splitlines()]
    assert [(r["method"], r["rep"]) for r in records] == [("npe", 1)]
    with pytest.raises(SystemExit, match="--only-reps runs the table's repetitions alone"):
        bench.main(["--methods", "npe", "--only-reps", "1", "--parts", "table,fig1", "--quiet"])


@pytest.mark.parametrize("features", [False, True])
def test_score_diagnosis_gives_the_net_its_own_view_of_the_data(bench, features):
    """The raw score net is evaluated on the observed data as it was trained: with the design row
    appended when the row uses ``data_features`` (the design row's record once failed there,
    after 45 min of sampling, on a [n, 2] input to a net built for [n, 12])."""
    from scorebayes.models import get_model
    from scorebayes.posterior import Posterior

    model = get_model("monotone")
    g = torch.Generator().manual_seed(0)
    x_obs = model.observed(g)
    cfg = {"localization": {}, "single": {"N": 200, "N_R": 4, "m_R": 20, "epochs": 1, "penalty_epochs": 0,
                                          "batch": 50, "mean_epochs": 1, "mean_penalty_epochs": 0}}
    sl = bench.score_model(model, cfg, localize=False, seed=0,
                           data_features=model.design_features if features else None)
    sl.fit(x_obs)
    ref = Posterior(model.reference_posterior(x_obs, 40, g).draws, model.parameter_names)
    out = bench.score_diagnosis(model, sl, ref, x_obs, num=20)
    for key in ("debiased", "raw"):
        assert all(np.isfinite(v) for v in out[key].values()), out
    assert out["raw"]["err_norm2"] != out["debiased"]["err_norm2"]  # the mean net is subtracted
