"""`scorebayes run` tells failures apart by kind (scorebayes.cli): bad input (exit 2, one line, no
traceback), the user's code raising (exit 2, the user's file and line), a bug (exit 1, "a bug in
scorebayes", the traceback in DIR/error.log)."""

import sys
import textwrap
from pathlib import Path

import pytest

from scorebayes.cli import main

SIMS = '''
import torch

def simulate(theta, n, generator=None):
    return theta[:, None, :] + torch.randn(theta.shape[0], n, 1, generator=generator, dtype=theta.dtype)

def raises(theta, n, generator=None):
    raise ValueError("rate must be positive")  # line 8

def raises_on_big_batches(theta, n, generator=None):
    if theta.shape[0] > 2:
        raise ZeroDivisionError("queue overflow")  # line 12
    return simulate(theta, n, generator)
'''

CONFIG = """
method = "abc"
seed = 1
[model]
simulator = "sims.py:{fn}"
parameters = ["mu"]
[[prior]]
dist = "normal"
loc = 0.0
scale = 2.0
[data]
true_parameters = [0.5]
n = 10
[options]
num_simulations = 300
k = 20
on_simulator_error = "raise"
"""


def write(tmp_path, fn="simulate", text=CONFIG):
    (tmp_path / "sims.py").write_text(SIMS)
    path = tmp_path / "run.toml"
    path.write_text(textwrap.dedent(text).format(fn=fn))
    return str(path)


def test_bad_input_is_exit_2_one_line_and_no_traceback(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = write(tmp_path, text=CONFIG.replace("k = 20", "k = -1"))
    assert main(["run", cfg, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == "scorebayes: error: [options] k = -1: must be an integer >= 1\n"
    assert not out.exists()
    assert main(["--debug", "run", cfg, "--out", str(out), "--quiet"]) == 2  # --debug: the traceback too
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("scorebayes: error: [options] k = -1: must be an integer >= 1\n")


def test_a_bug_in_the_library_is_exit_1_with_the_traceback_in_error_log(tmp_path, capsys, monkeypatch):
    from scorebayes.apps import baselines

    def broken(*args, **kwargs):
        raise RuntimeError("index out of range in the table")

    monkeypatch.setattr(baselines, "simulate_table", broken)
    out = tmp_path / "out"
    assert main(["run", write(tmp_path), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    log = out / "error.log"
    assert err == (f"scorebayes: internal error: RuntimeError: index out of range in the table "
                   f"(a bug in scorebayes; traceback in {log})\n")
    text = log.read_text()
    assert text.startswith("Traceback") and "in broken" in text
    assert text.rstrip().endswith("RuntimeError: index out of range in the table")


def test_a_library_value_error_is_a_bug_not_bad_input(tmp_path, capsys, monkeypatch):
    from scorebayes.apps import baselines

    def broken(*args, **kwargs):
        raise ValueError("shapes [3, 2] and [2] do not match")

    monkeypatch.setattr(baselines, "simulate_table", broken)
    assert main(["run", write(tmp_path), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "internal error: ValueError: shapes [3, 2] and [2] do not match (a bug in scorebayes" in err


def test_the_users_simulator_raising_names_its_file_and_line(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", write(tmp_path, "raises"), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    sims = tmp_path / "sims.py"
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "the simulator raised ValueError: rate must be positive" in err
    assert f"at {sims}:8 in raises" in err
    assert not out.exists()


def test_the_users_simulator_raising_deep_in_the_run_names_its_file_and_line(tmp_path, capsys):
    # the pilot simulations (two draws) work; the reference table's first block raises
    out = tmp_path / "out"
    assert main(["run", write(tmp_path, "raises_on_big_batches"), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "a bug in scorebayes" not in err, err
    assert err.startswith("scorebayes: error: your code raised ZeroDivisionError: queue overflow at "
                          f"{tmp_path / 'sims.py'}:12 in raises_on_big_batches")


def test_the_users_file_failing_to_import_names_its_line(tmp_path, capsys):
    (tmp_path / "broken.py").write_text("import torch\n\nSCALE = 1 / 0\n")
    cfg = write(tmp_path)
    text = (tmp_path / "run.toml").read_text().replace("sims.py:simulate", "broken.py:simulate")
    (tmp_path / "run.toml").write_text(text)
    assert main(["run", cfg, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "importing broken.py raised ZeroDivisionError: division by zero" in err
    assert f"at {tmp_path / 'broken.py'}:3 in <module>" in err


def test_an_unreadable_config_is_bad_input(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text('method = "abc\n')
    assert main(["run", str(tmp_path / "bad.toml"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scorebayes: error: ") and "invalid TOML" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", [["status", "nothere"], ["bench", "no-such-benchmark"]])
def test_other_commands_report_bad_input_in_one_line(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    code = main(command)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err


def test_bench_help_reaches_the_benchmark_and_the_bare_command_lists_them(capsys, monkeypatch):
    """``bench NAME --help`` prints the benchmark's own options (not the ``bench`` command's),
    ``bench --help`` the list of benchmarks, and ``bench`` alone is bad input."""
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the bench command sets the script's argv
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "peers", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--nle-init" in out and "--methods" in out
    assert main(["bench", "--help"]) == 0
    assert "peers" in capsys.readouterr().out.split("benchmarks:")[1]
    assert main(["bench"]) == 2
    assert capsys.readouterr().err.startswith("scorebayes: error: bench needs a benchmark name")
