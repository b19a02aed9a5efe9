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
