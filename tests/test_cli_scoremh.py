import csv
import json

import numpy as np
import pytest

from scorebayes.cli import main

FAST = """
[options]
chains = 200
steps = 60
keep = 20
score_epochs = 15
score_hidden = 32
acceptance_epochs = 60
acceptance_hidden = 32
"""


def write_data(path, rows, header="a,b"):
    with open(path, "w") as fh:
        if header:
            fh.write(header + "\n")
        for r in rows:
            fh.write(",".join(str(v) for v in r) + "\n")


def config(tmp_path, extra="", data="data.csv", options=FAST):
    text = f'method = "score-mh"\nseed = 1\n[data]\nobserved = "{data}"\n{options}{extra}'
    (tmp_path / "run.toml").write_text(text)
    return str(tmp_path / "run.toml")


@pytest.mark.parametrize("proposal,acceptance", [("mala", "learned"), ("rw", "quadrature"), ("ula", "taylor")])
def test_score_mh_end_to_end(tmp_path, proposal, acceptance):
    rng = np.random.default_rng(0)
    write_data(tmp_path / "data.csv", rng.normal([1.0, -2.0], [1.0, 0.5], size=(800, 2)))
    cfg = config(tmp_path, f'proposal = "{proposal}"\nacceptance = "{acceptance}"\n')
    out = tmp_path / "out"
    assert main(["run", cfg, "--out", str(out), "--quiet"]) == 0
    with open(out / "samples.csv") as fh:
        rows = list(csv.reader(fh))
    assert {"a", "b"} <= set(rows[0])
    assert len(rows) - 1 == 200 * 20
    assert (out / "samples_vs_data.png").is_file() and (out / "pairplot.png").is_file()
    summary = json.loads((out / "summary.json").read_text())
    means = {p["name"]: p["mean"] for p in summary["parameters"]}
    assert abs(means["a"] - 1.0) < 0.4 and abs(means["b"] + 2.0) < 0.3
    assert 0 < summary["acceptance_rate"] <= 1


@pytest.mark.parametrize("content,extra,message", [
    ("nan", "", "non-finite"),
    ("few", "", "at least"),
    ("ok", 'proposal = "hmc"\n', "proposal"),
    ("ok", 'bogus = 1\n', "unknown key"),
    ("ok", 'steps = 0\n', "steps = 0: must be an integer >= 1"),
    ("ok", 'step_size = -0.1\n', "step_size"),
])
def test_bad_input_one_line(tmp_path, capsys, content, extra, message):
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(5 if content == "few" else 100, 2))
    if content == "nan":
        rows[3, 1] = np.nan
    write_data(tmp_path / "data.csv", rows)
    key = extra.split("=")[0].strip()
    options = "\n".join(line for line in FAST.splitlines() if not line.startswith(key + " "))
    cfg = config(tmp_path, extra, options=options + "\n")
    assert main(["run", cfg, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
