"""Fast checks of the M/G/1 benchmark's bookkeeping (no fitting)."""

import json
import types

import pytest
import torch

from scorebayes.posterior import Posterior


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("mg1.py", "mg1_bench")


def _posterior(value):
    return Posterior(torch.full((4, 2, 3), value, dtype=torch.float64), ["a", "b", "c"])


@pytest.mark.parametrize("wrapped", [False, True])
def test_keep_first_saves_repetition_0_for_posteriors_and_method_results(bench, tmp_path, monkeypatch,
                                                                        wrapped):
    """keep_first saves repetition 0's draws for Fig. 2 and hands back what the method returned,
    whether a Posterior or a MethodResult (n-model-paper-table returns the latter)."""
    monkeypatch.setattr(bench.common, "RESULTS", tmp_path)

    def method(x_obs, seed):
        post = _posterior(float(seed))
        return bench.common.MethodResult(post, extra={"k": 1}) if wrapped else post

    run = bench.keep_first("mg1", {"m": method}, seed=0)["m"]
    first = bench.derive_seed(0, "m", 0)
    out = run(None, first)
    assert isinstance(out, bench.common.MethodResult) == wrapped
    saved = torch.load(tmp_path / "mg1_rep0_m.pt")
    assert saved["draws"].shape == (8, 3) and float(saved["draws"][0, 0]) == float(first)
    run(None, first + 1)  # another repetition leaves the saved draws alone
    assert float(torch.load(tmp_path / "mg1_rep0_m.pt")["draws"][0, 0]) == float(first)


def test_method_store_resumes_the_same_config_and_refuses_another(bench, tmp_path, monkeypatch):
    """The long n-model-paper-training run keeps its checkpoints in runs/bench/NAME-METHOD-SEED; the
    same config reopens it (resume), another config under that name is refused, not mixed in."""
    from scorebayes.store import StoreError

    monkeypatch.setattr(bench.common, "STORES", tmp_path)
    config = dict(bench.SMALL["n_paper_training"])
    store = bench.common.method_store("mg1", "n_paper_training", 7, config)
    assert store.path == tmp_path / "mg1-n_paper_training-7" and (store.path / "manifest.json").is_file()
    store.save_checkpoint("train-0", {"epoch": 12})
    again = bench.common.method_store("mg1", "n_paper_training", 7, config)
    assert again.load_checkpoint("train-0")["epoch"] == 12
    with pytest.raises(StoreError, match="another config") as refused:
        bench.common.method_store("mg1", "n_paper_training", 7, {**config, "epochs": 10})
    # the advice is the benchmark's (delete the folder), not the run command's --fresh
    assert "delete that folder" in str(refused.value) and "does not reset run stores" in str(refused.value)
    assert again.load_checkpoint("train-0")["epoch"] == 12  # nothing was touched


def test_trust_lines_report_each_round_and_only_rendered_repetitions(bench):
    rounds = [{"center_theta": [0.68, 6.3, 0.208], "sd_u": [0.41, 0.39, 0.026], "edge_fraction": 0.0,
               "laplace_sd_u": [0.04, 0.1, 0.03]},
              {"center_theta": [0.97, 5.07, 0.199], "sd_u": [0.2, 0.39, 0.026], "edge_fraction": 0.05,
               "laplace_sd_u": [0.04, 0.1, 0.03]}]
    rec = {"method": "single-model-trust", "rep": 1, "width": [0.12, 0.6, 0.017], "covers": [1.0, 0.0, 1.0],
           "trust_rounds": rounds, "edge_fraction": 0.0}
    other = {**rec, "method": "single-model"}
    (line,) = bench.trust_lines([rec, other, {**rec, "rep": 3}], reps=2)
    assert line.startswith("single-model-trust, repetition 1: round 1 centre (0.68, 6.3, 0.208)")
    assert "round 2 centre (0.97, 5.07, 0.199) sd_u (0.2, 0.39, 0.026), edge 5%" in line
    assert "0.120 / 0.600 / 0.017, covering yes / no / yes" in line


def test_features_method_builds_its_estimator_from_json_settings(bench, tmp_path, monkeypatch):
    """single-model-features names its data_features ("queue"), so its settings fingerprint the
    records and the run store; the estimator gets the summaries, nets in theta and its D^R size."""
    from scorebayes.models.mg1 import queue_features

    s = bench.SMALL["features"]
    config = {k: v for k, v in s.items() if k != "reps"}
    assert bench.common.config_fingerprint(config) != bench.common.config_fingerprint({**config, "N_R": 2_000})
    monkeypatch.setattr(bench.common, "STORES", tmp_path)
    store = bench.common.method_store("mg1", "single-model-features", 3, config)
    est = bench.single_estimator(bench.get_model("mg1"), s, 3, store)
    assert est.networks.data_features is queue_features and est.networks.coordinates == "constrained"
    assert est.tables.num_groups == 20_000 and est.networks.hidden == (64, 64) and est.store is store
    assert bench.single_estimator(bench.get_model("mg1"), bench.SMALL["single"], 3).networks.data_features is None
    with pytest.raises(ValueError, match="unknown data_features 'sorted'"):
        bench.single_estimator(bench.get_model("mg1"), {**s, "data_features": "sorted"}, 3)


def test_features_line_lists_only_rendered_repetitions_in_order(bench):
    recs = [{"method": "single-model-features", "rep": r, "width": [0.1 * (r + 1), 0.3, 0.016],
             "covers": [1.0, float(r != 1), 1.0]} for r in (2, 1, 0)]
    recs.append({"method": "single-model", "rep": 0, "width": [9.0, 9.0, 9.0], "covers": [0.0, 0.0, 0.0]})
    (line,) = bench.features_line(recs, reps=2)
    assert line.endswith("0: 0.100 / 0.300 / 0.016 (yes/yes/yes); 1: 0.200 / 0.300 / 0.016 (yes/no/yes).")
    assert bench.features_line(recs[3:], reps=2) == []
    mh = [{**recs[0], "method": "single-model-features-mh"}]
    (line,) = bench.features_line(recs + mh, reps=3, method="single-model-features-mh")
    assert line.startswith("single-model-features-mh per repetition")
    assert line.endswith("2: 0.300 / 0.300 / 0.016 (yes/yes/yes).")


def test_features_mh_corrects_the_features_fit_of_the_same_repetition(bench, tmp_path, monkeypatch):
    """single-model-features-mh on repetition r loads single-model-features' fit of repetition r
    (its seed and run store, same config) and its ULA chains, then MH-corrects those chains."""
    monkeypatch.setattr(bench.common, "STORES", tmp_path)
    seen = {}
    ula = Posterior(torch.full((6, 2, 3), 0.5, dtype=torch.float64), ["a", "b", "c"],
                    info={"simulations": 10.0, "chain_copies": [0, 0, 1, 1, 2, 2]})

    class FakeEstimator:
        def __init__(self):
            self.likelihood_ = types.SimpleNamespace(support_fn="cut")

        def fit(self, x):
            return self

        def sample(self, num, **kw):
            seen["sample"] = (num, kw)
            return ula

    def fake_single(model, s, seed, store=None):
        seen.update(settings=s, seed=seed, store=store.path.name)
        return FakeEstimator()

    def fake_mh(est, num, **kw):
        seen["mh"] = kw
        seen["mh_support_fn"] = est.likelihood_.support_fn
        return Posterior(ula.samples, ula.names, info={"acceptance_rate_per_copy": [0.8] * 3,
                                                       "jump_acceptance_rate_per_copy": [0.1] * 3})

    monkeypatch.setattr(bench, "single_estimator", fake_single)
    monkeypatch.setattr(bench, "mh_correct", fake_mh)
    run = bench.make_methods(bench.get_model("mg1"), bench.SMALL, ["single-model-features-mh"], base_seed=5)
    out = run["single-model-features-mh"](None, bench.derive_seed(5, "single-model-features-mh", 2))
    fit_seed = bench.derive_seed(5, "single-model-features", 2)
    assert seen["seed"] == fit_seed and seen["store"] == f"mg1-single-model-features-{fit_seed}"
    assert seen["settings"] is bench.SMALL["features_mh"]
    assert seen["mh"]["init"] is ula and seen["mh"]["max_steps"] == 4_000 and seen["mh"]["jump_every"] == 5
    assert seen["mh_support_fn"] == "cut"
    assert out.cost == 10.0 and out.extra["jump_acceptance_rate_per_copy"] == [0.1] * 3
    mh_only = {k for k in bench.SMALL["features_mh"] if k.startswith("mh_")}
    assert {k: v for k, v in bench.SMALL["features_mh"].items() if k not in mh_only} == bench.SMALL["features"]
    # the 1M variant fits with its own seed in its own store, 5x the table over 30 + 6 epochs
    run = bench.make_methods(bench.get_model("mg1"), bench.SMALL, ["single-model-features-1m-mh"], base_seed=5)
    run["single-model-features-1m-mh"](None, 77)
    assert seen["seed"] == 77 and seen["store"] == "mg1-single-model-features-1m-77"
    assert (seen["settings"]["N"], seen["settings"]["epochs"], seen["settings"]["penalty_epochs"]) == (10**6, 30, 6)
    assert seen["mh_support_fn"] == "cut"
    # the no-cut rows correct the same fits (same seeds and stores), with the MH chains not cut
    for method, fits, store in (("single-model-features-mh-nocut", "single-model-features", "features"),
                                ("single-model-features-1m-mh-nocut", "single-model-features-1m-mh", "features-1m")):
        run = bench.make_methods(bench.get_model("mg1"), bench.SMALL, [method], base_seed=5)
        run[method](None, bench.derive_seed(5, method, 3))
        fit_seed = bench.derive_seed(5, fits, 3)
        assert seen["seed"] == fit_seed and seen["store"] == f"mg1-single-model-{store}-{fit_seed}"
        assert seen["mh_support_fn"] is None and seen["sample"][1]["chains"] == seen["settings"]["chains"]
        key = bench.MH_ROWS[method][0]
        assert seen["settings"] is bench.SMALL[key] and bench.SMALL[key]["mh_support_cut"] is False
        cut_key = bench.MH_ROWS[method.removesuffix("-nocut")][0]
        # one store holds both rows' fits: reopening it with the cut row's settings raises on any other config
        bench.features_store(bench.SMALL, 1, key, bench.MH_ROWS[method][2])
        bench.features_store(bench.SMALL, 1, cut_key, bench.MH_ROWS[method][2])
    # the deep row: the 1M row's seeds and settings with a 3x128 net, in a store of its own
    method = "single-model-features-deep-mh-nocut"
    run = bench.make_methods(bench.get_model("mg1"), bench.SMALL, [method], base_seed=5)
    run[method](None, bench.derive_seed(5, method, 0))
    fit_seed = bench.derive_seed(5, "single-model-features-1m-mh", 0)
    assert seen["seed"] == fit_seed and seen["store"] == f"mg1-single-model-features-deep-{fit_seed}"
    assert seen["mh_support_fn"] is None
    assert seen["settings"] == {**bench.SMALL["features_1m_mh_nocut"], "hidden": (128, 128, 128),
                                "reps": bench.SMALL["features_deep_mh_nocut"]["reps"]}
    # the n-model row: n_estimator with its own seed and store, MH chains cut to the exact support,
    # one acceptance rate (no noisy copies)
    def fake_n(model, s, seed, store=None):
        seen.update(n_settings=s)
        return fake_single(model, s, seed, store)

    def fake_mh_n(est, num, **kw):
        seen["mh_support_fn"] = est.likelihood_.support_fn
        return Posterior(ula.samples, ula.names, info={"acceptance_rate": 0.6, "jump_acceptance_rate": 0.2})

    monkeypatch.setattr(bench, "n_estimator", fake_n)
    monkeypatch.setattr(bench, "mh_correct", fake_mh_n)
    method = "n-model-features-mh"
    run = bench.make_methods(bench.get_model("mg1"), bench.SMALL, [method], base_seed=5)
    out = run[method](None, bench.derive_seed(5, method, 4))
    assert seen["n_settings"] is bench.SMALL["n_features_mh"] and seen["n_settings"]["mode"] == "n"
    assert seen["store"] == f"mg1-n-model-features-{bench.derive_seed(5, method, 4)}"
    assert seen["mh_support_fn"] == "cut"
    assert out.extra["acceptance_rate_per_copy"] == [0.6] and out.extra["jump_acceptance_rate_per_copy"] == [0.2]


def test_a_methods_subset_saves_records_without_dropping_rendered_rows(bench, tmp_path, monkeypatch, capsys):
    """``--methods abc`` over an mg1.json that also holds single-model saves abc's records and leaves
    mg1.json/.md alone (rendering abc alone would drop single-model's row); where abc is the only
    rendered row, the same run renders."""
    monkeypatch.setattr(bench.common, "RESULTS", tmp_path)
    model = bench.get_model("mg1")
    truth = model.true_parameters

    def fake_methods(model, scale, chosen, seed):
        def method(x_obs, s):
            g = torch.Generator().manual_seed(s)
            draws = truth + 0.01 * torch.randn(400, 3, generator=g, dtype=torch.float64)
            return Posterior(draws, model.parameter_names, info={"simulations": 1.0})
        return {m: method for m in chosen}

    monkeypatch.setattr(bench, "make_methods", fake_methods)
    rendered = {"name": "mg1", "methods": {"abc": {}, "single-model": {}}}
    (tmp_path / "mg1.json").write_text(json.dumps(rendered))
    bench.main(["--methods", "abc", "--reps", "2", "--quiet"])
    out = capsys.readouterr().out
    assert "would drop the rows single-model of mg1.md" in out and "render with every method" in out
    assert json.loads((tmp_path / "mg1.json").read_text()) == rendered
    assert not (tmp_path / "mg1.md").exists()
    lines = (tmp_path / "mg1_partial.jsonl").read_text().splitlines()
    assert [json.loads(line)["method"] for line in lines] == ["abc", "abc"]
    # nothing rendered is dropped: the run renders from the saved records, computing nothing again
    (tmp_path / "mg1.json").write_text(json.dumps({"name": "mg1", "methods": {"abc": {}}}))
    bench.main(["--methods", "abc", "--reps", "2", "--quiet"])
    assert list(json.loads((tmp_path / "mg1.json").read_text())["methods"]) == ["abc"]
    assert (tmp_path / "mg1.md").exists() and len((tmp_path / "mg1_partial.jsonl").read_text().splitlines()) == 2
