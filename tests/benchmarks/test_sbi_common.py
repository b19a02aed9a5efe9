"""Fast checks of benchmarks/_sbi_common.py: JSON layout, metrics, resume, pruned exact ABC."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.distributions import Normal

from scorebayes.posterior import Posterior
from scorebayes.priors import independent
from scorebayes.simulators import Simulator

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture()
def common(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("_sbi_common_test", BENCH / "_sbi_common.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "_sbi_common_test", mod)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    return mod


class _Fake:
    """Model stub: d = 2, truth 0, to_reported doubles the second coordinate."""

    true_parameters = torch.zeros(2, dtype=torch.float64)
    parameter_names = reported_names = ["a", "b"]

    def to_reported(self, theta):
        return torch.stack([theta[..., 0], 2 * theta[..., 1]], -1)

    def observed(self, generator=None):
        return torch.randn(10, 1, generator=generator, dtype=torch.float64)


def _exact_method(x_obs, seed):
    """Draws N(0, 1) per coordinate: CI95 width 2 * 1.96 (3.92, 7.84 after to_reported)."""
    g = torch.Generator().manual_seed(seed)
    shift = torch.randn(2, generator=g, dtype=torch.float64)  # random 'posterior mean' ~ N(0, 1)
    return Posterior(shift + torch.randn(20_000, 2, generator=g, dtype=torch.float64), ["a", "b"],
                     info={"simulations": 7.0, "simulations_by_stage": {"localization": 2.0}})


def test_layout_metrics_and_resume(common, tmp_path):
    calls = []

    def method(x, s):
        calls.append(s)
        return _exact_method(x, s)

    recs = common.run_repetitions("fake", _Fake(), {"m": method}, reps=40, seed=3, progress=False)
    summary = common.summarise(recs, ["a", "b"])
    common.write_results("fake", command="cmd", reps=40, methods=summary,
                         paper={"m": {"a": (0.1, 0.1, 3.9, 0.0, 0.95)}, "cost": {"m": 5}})
    data = json.loads((tmp_path / "fake.json").read_text())
    assert {"name", "command", "reps", "methods"} <= set(data)
    row = data["methods"]["m"]
    assert {"cost", "seconds", "parameters"} <= set(row)
    assert row["cost"] == 5.0 and row["cost_localization"] == 2.0  # localization counted apart
    for p, scale in (("a", 1.0), ("b", 2.0)):
        q = row["parameters"][p]
        assert set(q) == {"bias", "bias_sd", "ci_width", "ci_width_sd", "coverage"}
        assert q["ci_width"] == pytest.approx(2 * 1.96 * scale, rel=0.03)
        # bias = |N(0, scale^2)|: mean scale * sqrt(2/pi); 40 reps -> se ~ 0.6 scale / sqrt(40)
        assert q["bias"] == pytest.approx(scale * np.sqrt(2 / np.pi), abs=4 * 0.6 * scale / np.sqrt(40))
        assert 0.8 <= q["coverage"] <= 1.0  # the truth is inside the 95% interval in ~95% of reps
    assert "| m | paper |" in (tmp_path / "fake.md").read_text()
    # resume: nothing is recomputed, the records are identical
    n_calls = len(calls)
    again = common.run_repetitions("fake", _Fake(), {"m": method}, reps=40, seed=3, progress=False)
    assert len(calls) == n_calls and again == recs
    assert len((tmp_path / "fake_partial.jsonl").read_text().splitlines()) == 40


def _counting(calls: dict, name: str):
    """``_exact_method`` that counts its calls in ``calls[name]``."""
    def method(x, s):
        calls[name] += 1
        return _exact_method(x, s)
    return method


def test_max_reps_caps_expensive_methods(common, tmp_path):
    calls = {"cheap": 0, "costly": 0}


    recs = common.run_repetitions("capped", _Fake(), {"cheap": _counting(calls, "cheap"), "costly": _counting(calls, "costly")},
                                  reps=4, seed=1, progress=False, max_reps={"costly": 2})
    assert calls == {"cheap": 4, "costly": 2}
    summary = common.summarise(recs, ["a", "b"], reps=4)
    assert summary["cheap"]["reps"] == 4 and summary["costly"]["reps"] == 2


def test_max_reps_may_name_the_repetitions_a_method_runs_on(common, tmp_path, capsys):
    """A cap given as repetitions runs the method on those alone (a diagnostic variant on chosen
    data sets), in runs, plans and ``only_reps`` alike."""
    calls = {"cheap": 0, "chosen": 0}
    methods = {"cheap": _counting(calls, "cheap"), "chosen": _counting(calls, "chosen")}
    recs = common.run_repetitions("picked", _Fake(), methods, reps=5, seed=1, progress=False,
                                  max_reps={"chosen": (1, 3)})
    assert calls == {"cheap": 5, "chosen": 2}
    assert sorted(r["rep"] for r in recs if r["method"] == "chosen") == [1, 3]
    with pytest.raises(SystemExit):
        common.run_repetitions("picked", _Fake(), methods, reps=6, seed=1, progress=False,
                               max_reps={"chosen": (1, 3, 5)}, plan=True)
    plan = capsys.readouterr().out
    assert "chosen: recorded 1, 3; to run 5" in plan and "cheap: recorded 0-4; to run 5" in plan
    recs = common.run_repetitions("picked", _Fake(), methods, reps=6, seed=1, progress=False,
                                  max_reps={"chosen": (1, 3)}, only_reps=[2, 5])
    assert calls == {"cheap": 6, "chosen": 2}  # 5 is not the chosen method's, 2 is recorded


def test_seed_as_gives_a_variant_another_methods_seeds(common, tmp_path):
    """A variant with ``seed_as`` gets the seeds of the method it names (common random numbers);
    without it, each method its own."""
    seeds = {}

    def method(label):
        def run(x_obs, seed):
            seeds.setdefault(label, []).append(seed)
            return _exact_method(x_obs, seed)
        return run

    methods = {"base": method("base"), "variant": method("variant"), "other": method("other")}
    common.run_repetitions("seeds", _Fake(), methods, reps=2, seed=5, progress=False,
                           seed_as={"variant": "base"})
    assert seeds["variant"] == seeds["base"] == [common.derive_seed(5, "base", r) for r in range(2)]
    assert seeds["other"] == [common.derive_seed(5, "other", r) for r in range(2)] != seeds["base"]


def test_changed_configuration_reruns_fingerprinted_methods(common, tmp_path):
    calls = {"plain": 0, "tuned": 0}


    methods = {"plain": _counting(calls, "plain"), "tuned": _counting(calls, "tuned")}
    run = lambda lr: common.run_repetitions("conf", _Fake(), methods, reps=2, seed=1, progress=False,  # noqa: E731
                                           configs={"tuned": {"lr": lr, "hidden": (8, 4)}})
    run((1e-4, 1e-5))
    assert calls == {"plain": 2, "tuned": 2}
    run((1e-4, 1e-5))  # same settings: every record reused
    assert calls == {"plain": 2, "tuned": 2}
    recs = run((1e-3, 1e-5))  # changed settings: only the fingerprinted method re-runs
    assert calls == {"plain": 2, "tuned": 4}
    tuned = [r for r in recs if r["method"] == "tuned"]
    assert {r["config"] for r in tuned} == {common.config_fingerprint({"lr": (1e-3, 1e-5), "hidden": (8, 4)})}
    run((1e-4, 1e-5))  # back to the first settings: their records are still in the file
    assert calls == {"plain": 2, "tuned": 4}


def test_only_reps_split_runs_equal_one_run(common, tmp_path):
    """Repetitions run in two pieces (as two processes would) give the records of one run."""
    calls = {"m": 0}
    method = {"m": _counting(calls, "m")}
    run = lambda **kw: common.run_repetitions("split", _Fake(), method, reps=4, seed=2,  # noqa: E731
                                              progress=False, **kw)
    first = run(only_reps=[1, 3])
    assert [r["rep"] for r in first] == [1, 3] and calls["m"] == 2
    second = run(only_reps=[0, 2])
    assert [r["rep"] for r in second] == [0, 2] and calls["m"] == 4
    merged = run()
    assert calls["m"] == 4 and [r["rep"] for r in merged] == [0, 1, 2, 3]  # all reused
    (tmp_path / "split_partial.jsonl").unlink()
    whole = run()
    timeless = lambda recs: [{k: v for k, v in r.items() if not k.startswith("seconds")} for r in recs]  # noqa: E731
    assert timeless(whole) == timeless(merged)


def test_only_reps_says_which_repetitions_it_did_not_run_again(common, tmp_path, capsys):
    """--only-reps on repetitions already recorded with the same settings reuses them: it must say
    so, not leave the caller to believe they were computed and saved."""
    calls = {"m": 0}
    run = lambda **kw: common.run_repetitions("again", _Fake(), {"m": _counting(calls, "m")},  # noqa: E731
                                              reps=3, seed=2, progress=False, **kw)
    run(only_reps=[1])
    assert calls["m"] == 1 and "not recomputed" not in capsys.readouterr().out
    run(only_reps=[1, 2])
    out = capsys.readouterr().out
    assert calls["m"] == 2 and "already recorded with these settings, not recomputed: m 1 (" in out
    assert "m 2" not in out and "again_partial.jsonl" in out


@pytest.mark.parametrize("argv, message", [(["--only-reps", "1,x"], "comma-separated integers"),
                                           (["--only-reps", "-1"], "none negative"),
                                           (["--only-reps", "1", "--fresh"], "cannot be combined")])
def test_only_reps_rejects_bad_input(common, argv, message, capsys):
    with pytest.raises(SystemExit):
        common.parse_args("t", 3, ["m"], argv, only_reps=True)
    assert message in capsys.readouterr().err


def test_only_reps_extends_reps_and_is_offered_only_when_asked(common):
    args = common.parse_args("t", 3, ["m"], ["--only-reps", "4,2"], only_reps=True)
    assert args.only_reps == [2, 4] and args.reps == 5
    assert common.parse_args("t", 3, ["m"], [], only_reps=True).only_reps is None
    with pytest.raises(SystemExit):
        common.parse_args("t", 3, ["m"], ["--only-reps", "1"])


def test_plan_lists_what_would_run_and_computes_nothing(common, tmp_path, capsys):
    """--plan: per method the reusable and the missing repetitions (caps, changed settings and
    --only-reps respected), timed by the method's own records; nothing runs, nothing is written."""
    calls = {"cheap": 0, "costly": 0, "new": 0}
    methods = {m: _counting(calls, m) for m in calls}
    common.run_repetitions("plan", _Fake(), {"cheap": methods["cheap"], "costly": methods["costly"]},
                           reps=3, seed=1, progress=False, configs={"costly": {"lr": 1}})
    before = (tmp_path / "plan_partial.jsonl").read_text()
    cheap_seconds = [r["seconds"] for r in map(json.loads, before.splitlines()) if r["method"] == "cheap"]
    calls.update(cheap=0, costly=0)
    plan = lambda **kw: common.run_repetitions("plan", _Fake(), methods, seed=1, progress=False,  # noqa: E731
                                               plan=True, **kw)
    with pytest.raises(SystemExit) as stop:
        plan(reps=5, max_reps={"costly": 4}, configs={"costly": {"lr": 1}})
    assert stop.value.code == 0 and calls == {"cheap": 0, "costly": 0, "new": 0}
    assert (tmp_path / "plan_partial.jsonl").read_text() == before
    out = capsys.readouterr().out
    assert "cheap: recorded 0-2; to run 3-4" in out
    assert "costly: recorded 0-2; to run 3:" in out  # capped at 4 repetitions
    assert "new: recorded none; to run 0-4: unknown time" in out and "plus new (untimed)" in out
    # the estimates: the method's mean recorded seconds times its missing repetitions
    done = common._load_partial(tmp_path / "plan_partial.jsonl", 1, {})
    rows = {row["method"]: row for row in common.repetition_plan(done, ["cheap", "costly"], 5,
                                                                   max_reps={"costly": 4})}
    assert rows["cheap"]["seconds"] == pytest.approx(2 * np.mean(cheap_seconds))
    assert rows["costly"]["missing"] == [3]
    # changed settings make the fingerprinted method's records unusable; --only-reps narrows
    with pytest.raises(SystemExit):
        plan(reps=3, configs={"costly": {"lr": 2}}, only_reps=[1, 2])
    out = capsys.readouterr().out
    assert "costly: recorded none; to run 1-2: unknown time" in out and "cheap: recorded 1-2; to run none" in out
    assert common._reps_text([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    # with --fresh the plan is a full run, and the records it would drop are still there after it
    with pytest.raises(SystemExit):
        plan(reps=2, fresh=True)
    assert "cheap: recorded none; to run 0-1" in capsys.readouterr().out
    assert (tmp_path / "plan_partial.jsonl").read_text() == before


def test_plan_is_offered_only_when_asked(common):
    assert common.parse_args("t", 3, ["m"], ["--plan"], plan=True).plan is True
    assert common.parse_args("t", 3, ["m"], []).plan is False
    with pytest.raises(SystemExit):
        common.parse_args("t", 3, ["m"], ["--plan"])


def test_pruned_abc_equals_full_abc(common):
    from scorebayes.baselines import wasserstein1
    from scorebayes.parallel import make_generator
    from scorebayes.priors import sample

    prior = independent([Normal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64))] * 2)
    sim = Simulator(lambda th, n, g: th[:, None, :] + torch.randn(len(th), n, 2, generator=g, dtype=torch.float64))
    x_obs = 0.5 + torch.randn(30, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    post = common.abc_w1_pruned(x_obs, prior, sim, 600, k=20, seed=1, chunk=200, keep_candidates=100)
    assert post.info["exact"] and post.info["exact_solves"] < 600
    # brute force over the same draws
    thetas, dists = [], []
    for c in range(3):
        g = make_generator(1, "abc", c)
        th = sample(prior, 200, generator=g).to(torch.float64)
        thetas.append(th)
        dists.append(wasserstein1(sim(th, 30, g), x_obs))
    theta, dist = torch.cat(thetas), torch.cat(dists)
    best = theta[torch.sort(torch.argsort(dist)[:20]).values]
    assert torch.equal(post.draws.reshape(-1, 2), best)


def test_resumed_repetition_counts_its_stores_earlier_processes(common, tmp_path, monkeypatch):
    """A repetition resumed from a run store records this process's seconds plus the time the
    store's ledger logged for earlier processes (a training spread over sessions costs them all)."""
    import scorebayes.store as store_module

    monkeypatch.setattr(common, "STORES", tmp_path / "runs" / "bench")
    earlier = tmp_path / "runs" / "bench" / "t-m-11"
    common.method_store("t", "m", 11, {"N": 1}).save_json("meta", {})  # so the manifest exists
    for run, seconds in (("killed-once", 1000.0), ("killed-twice", 234.5)):
        store_module.RunStore.save_json_file(earlier / "json" / "ledger" / f"{run}.json", {"seconds": seconds})

    def method(x, s):
        store = common.method_store("t", "m", 11, {"N": 1})
        common.method_store("t", "m", 11, {"N": 1})  # opened twice: counted once
        store.save_json("meta", {"done": True})
        return _exact_method(x, s)

    (rec,) = common.run_repetitions("ledger", _Fake(), {"m": method}, reps=1, seed=3, progress=False)
    assert store_module._THIS_RUN in store_module.ledger(earlier)  # this process's own: not earlier
    assert rec["seconds_earlier_processes"] == pytest.approx(1234.5)
    assert rec["seconds"] == pytest.approx(rec["seconds_this_process"] + rec["seconds_earlier_processes"])
    assert rec["seconds_this_process"] < 60
