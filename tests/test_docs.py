"""Every ```python block of the documentation runs (documentation that runs).

The blocks of one page run in order in one namespace, as a reader would run them, in a fresh
temporary directory. A block right after an ``<!-- no-test -->`` comment is skipped: pages use it
only for blocks that need a cluster or hours, and say so.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"(<!--\s*no-test\s*-->\s*\n)?```python\n(.*?)```", re.S)


def page_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, code, skipped)`` for each python block of a Markdown page."""
    text = path.read_text()
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2), m.group(1) is not None)
            for m in BLOCK.finditer(text)]


PAGES = sorted(p for p in DOCS.rglob("*.md") if any(not skip for _, _, skip in page_blocks(p)))


def test_the_block_finder(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("a\n```python\nx = 1\n```\n<!-- no-test -->\n```python\nhours()\n```\n")
    assert page_blocks(page) == [(3, "x = 1\n", False), (7, "hours()\n", True)]


def test_some_pages_have_code():
    assert len(PAGES) >= 5, PAGES


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    namespace: dict = {"__name__": "__docs__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small settings trip the fit's own warnings
        for line, code, skipped in page_blocks(page):
            if skipped:
                continue
            exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)  # noqa: S102 - our own docs


TOML_BLOCK = re.compile(r"```toml\n(.*?)```", re.S)
EXAMPLES = DOCS.parent / "examples"
#: the example config each page's TOML fragments belong to (its method's)
EXAMPLE_OF = {"score-langevin": "langevin_sbi.toml", "dfd-bayes": "dfd_bayes.toml", "score-mh": "score_mh.toml"}
TOML_PAGES = sorted(p for p in DOCS.rglob("*.md") if TOML_BLOCK.search(p.read_text()))


def _data_files(folder: Path) -> None:
    """The files the pages' whole configs name: the examples', plus x.csv (50 rows of the linear
    regression), counts.csv (500 CMP draws) and cmp.py (the CMP log-pmf without its normaliser)."""
    import importlib.util
    import shutil

    import numpy as np

    from scorebayes.discrete import sample_cmp

    for name in ("linreg_sim.py", "dfd_cmp_counts.csv", "moons_samples.csv"):
        shutil.copy(EXAMPLES / name, folder / name)
    shutil.copy(EXAMPLES / "moons_samples.csv", folder / "samples.csv")
    spec = importlib.util.spec_from_file_location("linreg_sim", EXAMPLES / "linreg_sim.py")
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    x = sim.simulate(torch.tensor([[0.5, -1.0]], dtype=torch.float64), 50, torch.Generator().manual_seed(0))[0]
    np.savetxt(folder / "x.csv", x.numpy(), delimiter=",")
    counts = sample_cmp(torch.tensor([4.0, 0.75]), 500, generator=torch.Generator().manual_seed(0))
    np.savetxt(folder / "counts.csv", counts.numpy(), fmt="%d", delimiter=",")
    (folder / "cmp.py").write_text(
        "import torch\n\n\ndef log_p(theta, x):\n"
        "    return x[:, 0] * theta[:, :1].log() - theta[:, 1:] * torch.lgamma(x[:, 0] + 1)\n")


WHOLE = [(p, i) for p in TOML_PAGES for i, b in enumerate(TOML_BLOCK.findall(p.read_text())) if "method =" in b]


@pytest.mark.parametrize("page, index", WHOLE, ids=[f"{p.relative_to(DOCS)}-{i}" for p, i in WHOLE])
def test_whole_configs_run_as_printed(page, index, tmp_path, capsys):
    """A page's whole config runs with ``scorebayes run`` beside the files it names."""
    from scorebayes.cli import main

    _data_files(tmp_path)
    config = tmp_path / "run.toml"
    config.write_text(TOML_BLOCK.findall(page.read_text())[index])
    assert main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"]) == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "summary.json").exists() and (tmp_path / "out" / "samples.csv").exists()


@pytest.mark.parametrize("page", TOML_PAGES, ids=[str(p.relative_to(DOCS)) for p in TOML_PAGES])
def test_toml_blocks_pass_the_config_schema(page, tmp_path):
    """Every config on a page is valid (running it would need its data files and minutes): a whole
    config is checked with its [data] replaced by the method's example data, a fragment (no
    ``method``) merged into the score-langevin example; the schema refuses unknown keys and bad values."""
    import shutil
    import tomllib

    from scorebayes.apps.schema import validate

    for name in ("linreg_sim.py", "dfd_cmp_counts.csv", "moons_samples.csv"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    for block in TOML_BLOCK.findall(page.read_text()):
        given = tomllib.loads(block)
        method = given.get("method", "score-langevin")
        config = tomllib.loads((EXAMPLES / EXAMPLE_OF[method]).read_text())
        if "method" in given:
            given.pop("data", None)
            config.pop("options", None)
            if "log_unnormalized" in given.get("model", {}) or "simulator" in given.get("model", {}):
                given["model"] = config["model"]  # the example's own model file
            config.update(given)
        else:  # a fragment of [options] (or of the top level)
            options = given.pop("options", given)
            config["options"] = {**config.get("options", {}), **options}
        validate(config, tmp_path)
