"""The configuration schema (scorebayes.apps.schema): bad configs of every method are refused in
one line naming the table, key, value and what is allowed, before any simulation (exit 2)."""

import re
import textwrap
import time

import numpy as np
import pytest

import scorebayes.apps.baselines  # noqa: F401 - imported here so the timing below is the work only
import scorebayes.apps.dfd  # noqa: F401
import scorebayes.apps.langevin  # noqa: F401
import scorebayes.apps.scoremh  # noqa: F401
from scorebayes.apps.schema import SCHEMAS, check_priors, cli_reference, validate
from scorebayes.apps.schema_types import SchemaError
from scorebayes.cli import main

SIMS = '''
from pathlib import Path

import torch

def simulate(theta, n, generator=None):
    Path(__file__).with_name("called").write_text("simulate")
    return theta[:, None, :1] + torch.randn(theta.shape[0], n, 1, generator=generator, dtype=theta.dtype)

def logp(theta, x):
    Path(__file__).with_name("called").write_text("logp")
    return x[:, 0] * theta[:, :1].log() - torch.lgamma(x[:, 0] + 1)
'''

BASE = {
    "sim": """
        method = "{method}"
        seed = 0
        [model]
        simulator = "sims.py:simulate"
        parameters = ["mu", "sigma"]
        [[prior]]
        dist = "normal"
        loc = 0.0
        scale = 5.0
        [[prior]]
        dist = "gamma"
        concentration = 2.0
        rate = 1.0
        [data]
        true_parameters = [1.0, 2.0]
        n = 20
        [options]
        """,
    "dfd-bayes": """
        method = "dfd-bayes"
        [model]
        log_unnormalized = "sims.py:logp"
        domain = [[0, "inf"]]
        parameters = ["rate"]
        [[prior]]
        dist = "gamma"
        concentration = 1.5
        rate = 0.5
        [data]
        observed = "counts.csv"
        [options]
        num_bootstrap = 10
        """,
    "score-mh": """
        method = "score-mh"
        [data]
        observed = "samples.csv"
        [options]
        steps = 300
        """,
}
OPTIONS = {"score-langevin": "table_size = 200\n", "abc": "num_simulations = 1000\nk = 50\n",
           "abc-pmc": "rounds = 2\nsimulations_per_round = 500\nk = 50\n",
           "bsl": "num_chains = 2\nnum_steps = 50\nburn_in = 10\nnum_sims = 10\n",
           "npe": 'estimator = "maf"\nnum_simulations = 400\n', "dfd-bayes": "", "score-mh": ""}


def write(tmp_path, method, change=None, extra=""):
    (tmp_path / "sims.py").write_text(SIMS)
    np.savetxt(tmp_path / "counts.csv", np.random.default_rng(0).poisson(3.0, (50, 1)), fmt="%d", delimiter=",")
    np.savetxt(tmp_path / "samples.csv", np.random.default_rng(0).normal(size=(50, 2)), delimiter=",",
               header="a,b", comments="")
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2)))
    text = textwrap.dedent(BASE.get(method, BASE["sim"])).format(method=method) + OPTIONS[method] + extra
    if change is not None:
        old, new = change
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


# (method, (old, new) or None, extra [options] lines, the message's parts in order)
BAD = [
    ("score-langevin", ("table_size = 200", 'table_size = "lots"'), "",
     ['[options] table_size = "lots": must be an integer >= 1']),
    ("score-langevin", ("table_size = 200", "table_size = -5"), "",
     ["[options] table_size = -5: must be an integer >= 1"]),
    ("score-langevin", ("table_size = 200", "table_siz = 200"), "",
     ["[options] table_siz = 200: unknown key; did you mean table_size?"]),
    ("score-langevin", None, "num_simulations = -5\n",
     ["[options] num_simulations = -5: must be a number > 0"]),
    ("score-langevin", None, 'preset = "papers"\n',
     ['[options] preset = "papers": must be one of "default", "paper"; did you mean "paper"?']),
    ("score-langevin", None, "threads = 0\n", ["[options] threads = 0: must be an integer >= 1"]),
    ("score-langevin", ('dist = "gamma"\nconcentration = 2.0\nrate = 1.0', 'dist = "normal"\nloc = 0.0\nscale = -1.0'),
     "", ["[[prior]] 2 (normal) scale = -1.0: must be > 0"]),
    ("score-langevin", ('dist = "gamma"', 'dist = "gama"'), "",
     ['[[prior]] 2 dist = "gama": unknown distribution; did you mean gamma?', "(one of beta, cauchy"]),
    ("abc", ("rate = 1.0\n", ""), "", ["[[prior]] 2 (gamma) rate: missing: gamma takes concentration, rate"]),
    ("bsl", ("rate = 1.0", "rate = 1.0\nshape = 2.0"), "",
     ["[[prior]] 2 (gamma) shape = 2.0: unknown argument; gamma takes concentration, rate"]),
    ("npe", ('dist = "normal"\nloc = 0.0\nscale = 5.0', 'dist = "uniform"\nlow = 1.0\nhigh = 0.0'), "",
     ["[[prior]] 1 (uniform) high = 0.0: must be > low = 1.0"]),
    ("abc", ('dist = "normal"\nloc = 0.0\nscale = 5.0', 'dist = "beta"\nconcentration1 = 0\nconcentration0 = 1'),
     "", ["[[prior]] 1 (beta) concentration1 = 0: must be > 0"]),
    ("abc", ("scale = 5.0", 'scale = "big"'), "", ['[[prior]] 1 (normal) scale = "big": must be a number']),
    ("score-langevin", ("true_parameters = [1.0, 2.0]\nn = 20", 'observed = "nothere.csv"'), "",
     ['[data] observed = "nothere.csv": file not found: ', "nothere.csv"]),
    ("abc-pmc", ("true_parameters = [1.0, 2.0]\nn = 20", 'observed = "cube.npy"'), "",
     ['[data] observed = "cube.npy": expected a [n, p] table, got shape (2, 2, 2)']),
    ("score-langevin", ("[1.0, 2.0]", "[1.0, 2.0, 3.0]"), "",
     ["[data] true_parameters = [1.0, 2.0, 3.0]: has 3 values for 2 parameters"]),
    ("abc", ("[1.0, 2.0]", "[1.0, -2.0]"), "", ["[data] true_parameters = [1.0, -2.0]: lie outside the prior's support"]),
    ("abc", ("n = 20", "n = 20.5"), "", ["[data] n = 20.5: must be an integer >= 1"]),
    ("abc", ("seed = 0", "sed = 0"), "", ["sed = 0: unknown key; did you mean seed?"]),
    ("abc", ("seed = 0", "seed = -1"), "", ["seed = -1: must be an integer >= 0"]),
    ("abc", ('method = "abc"', 'method = "acb"'), "", ['method = "acb": must be one of "score-langevin"',
                                                      'did you mean "abc"?']),
    ("score-langevin", ('method = "score-langevin"', 'method = "score-langvin"'), "",
     ['method = "score-langvin": must be one of', 'did you mean "score-langevin"?']),
    ("abc", ("simulator =", "simulatr ="), "", ['[model] simulatr = "sims.py:simulate": unknown key; '
                                                "did you mean simulator?"]),
    ("bsl", ("sims.py:simulate", "nothere.py:simulate"), "",
     ['[model] simulator = "nothere.py:simulate": file not found: ', "nothere.py"]),
    ("abc", ("sims.py:simulate", "builtin:mg2"), "",
     ['[model] simulator = "builtin:mg2": unknown built-in model; did you mean builtin:mg1?']),
    ("abc", ('parameters = ["mu", "sigma"]', 'parameters = ["mu", "mu"]'), "",
     ['[model] parameters = ["mu", "mu"]: must not repeat a name']),
    ("score-langevin", None, "schedule = {epoch = 5}\n",
     ["[options] schedule epoch = 5: unknown key; did you mean epochs?"]),
    ("score-langevin", None, "hidden = [64, 0]\n", ["[options] hidden = [64, 0]: must be a non-empty list of int >= 1"]),
    ("score-langevin", None, 'mh_init = "ula"\n', ['[options] mh_init = "ula": needs mh_correction = "quadrature"']),
    ("score-langevin", None, 'localize = "yes"\n', ['[options] localize = "yes": must be true or false']),
    ("score-langevin", None, 'tempering = [0.5, 1.5]\n', ["[options] tempering = [0.5, 1.5]: must be true or false or a list"]),
    ("score-langevin", None, 'executor = "threads"\n',
     ['[options] executor = "threads": must be one of "serial", "processes", "dask"']),
    ("abc", ("k = 50", "k = 5000"), "", ["[options] k = 5000: must be <= num_simulations = 1000"]),
    ("abc-pmc", ("rounds = 2", "rounds = 2.5"), "", ["[options] rounds = 2.5: must be an integer >= 1"]),
    ("bsl", None, 'executor = "processes"\n',
     ['[options] executor = "processes": bsl simulates inside its Markov chain']),
    ("bsl", ("burn_in = 10", "burn_in = 50"), "", ["[options] burn_in = 50: must be < num_steps = 50"]),
    ("npe", None, "patience = 5\n", ['[options] patience = 5: not an option of estimator = "maf"']),
    ("npe", None, "validation_fraction = 1.5\n", ["[options] validation_fraction = 1.5: must be a number in (0, 1)"]),
    ("dfd-bayes", None, 'loss = "kds"\n', ['[options] loss = "kds": must be one of "dfd", "ksd"; did you mean "ksd"?']),
    ("dfd-bayes", ('log_unnormalized = "sims.py:logp"', 'model = "builtin:cmpp"'), "",
     ['[model] model = "builtin:cmpp": must be one of "builtin:bernoulli"', 'did you mean "builtin:cmp"?']),
    ("dfd-bayes", None, "num_bootstraps = 5\n",
     ["[options] num_bootstraps = 5: unknown key; did you mean num_bootstrap?"]),
    ("dfd-bayes", ('domain = [[0, "inf"]]', 'domain = [[0, "infinity"]]'), "",
     ['[model] domain = [[0, "infinity"]]: must be a list of [low, high] pairs']),
    ("score-mh", None, 'proposal = "mal"\n', ['[options] proposal = "mal": must be one of', 'did you mean "mala"?']),
    ("score-mh", None, "keep = 500\n", ["[options] keep = 500: must be <= steps = 300"]),
    ("score-mh", ("[data]", '[model]\nsimulator = "sims.py:simulate"\n[data]'), "",
     ['model = {simulator = "sims.py:simulate"}: unknown key; allowed: data, method, name, options, seed']),
]


@pytest.mark.parametrize("method, change, extra, parts", BAD,
                         ids=[f"{m}-{p[0][:40]}" for m, _, _, p in BAD])
def test_bad_config_is_one_line_before_any_simulation(tmp_path, capsys, method, change, extra, parts):
    cfg = write(tmp_path, method, change, extra)
    out = tmp_path / "out"
    start = time.perf_counter()
    code = main(["run", str(cfg), "--out", str(out), "--quiet"])
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("scorebayes: error: ") and "Traceback" not in err, err
    position = 0
    for part in parts:  # each part, in order
        found = err.find(part, position)
        assert found >= 0, (part, err)
        position = found + len(part)
    assert not (tmp_path / "called").exists(), "the user's simulator or model was called"
    assert not out.exists(), "a refused run left an output directory"
    assert seconds < 2.0, seconds


def test_every_key_has_a_type_a_default_and_a_meaning():
    for method, sections in SCHEMAS.items():
        for where, keys in sections.items():
            for key in keys.values():
                assert key.meaning and key.type.name and key.default_shown(), (method, where, key.name)


def test_the_schema_keys_are_those_the_methods_accept():
    from scorebayes.apps import langevin
    from scorebayes.apps.common import EXECUTION_KEYS
    from scorebayes.sbi import ScoreLangevin
    from scorebayes.sbi.settings import OPTION_GROUPS

    options = set(SCHEMAS["score-langevin"]["[options]"])
    library = (set(OPTION_GROUPS) | langevin._keywords(ScoreLangevin.__init__) | langevin._keywords(ScoreLangevin.sample))
    library -= langevin._RESERVED | {"seed", "tables", "networks", "training", "simulation"}
    cli_only = {"mh_correction", "mh_init", "mh_jump_every", "calibration", *EXECUTION_KEYS}
    assert options == library | cli_only


def test_a_valid_config_passes_and_runs_unchanged(tmp_path):
    for method in ("score-langevin", "abc", "abc-pmc", "bsl", "npe", "dfd-bayes", "score-mh"):
        import tomllib

        cfg = write(tmp_path, method)
        validate(tomllib.loads(cfg.read_text()), tmp_path)  # no error


def test_prior_checks_follow_torch_arg_constraints():
    assert check_priors([{"dist": "halfnormal", "scale": 1.0}, {"dist": "laplace", "loc": 0, "scale": 2}]) == 2
    with pytest.raises(SchemaError, match=re.escape("[[prior]] 1 (exponential) rate = 0.0: must be > 0")):
        check_priors([{"dist": "exponential", "rate": 0.0}])
    with pytest.raises(SchemaError, match=re.escape("[[prior]] 1 (normal) loc = inf: must be a number")):
        check_priors([{"dist": "normal", "loc": float("inf"), "scale": 1.0}])


def test_cli_reference_has_a_section_per_method_and_table():
    text = cli_reference()
    for method in SCHEMAS:
        assert f"## `{method}`" in text
    assert "### [options] schedule" in text and "### [[prior]]" in text
    assert "| `table_size` | int >= 1 | 80000 (single), 1000 (other modes) |" in text
    assert ("| `num_simulations` | float > 0 | the default plan's total (about 7,800 at n = 200; 4,200 with "
            "calibrate = false) | the whole simulation budget, in data sets of the observed size n") in text
    assert "| `normal` | `loc` a finite number, `scale` > 0 |" in text
    cells = [len(re.split(r"(?<!\\)\|", line)) - 2 for line in text.splitlines() if line.startswith("| `")]
    assert set(cells) == {4, 2}  # key, type, default, meaning; and dist, arguments
