"""The API reference renders: no reST left in the docstrings or on the built pages.

mkdocstrings (Google style) prints Sphinx markup literally: ``:math:`x```, ``:class:`Foo```,
``.. math::`` and ``| line`` blocks show up as text, and an ``Example:`` section (an admonition to
griffe, only ``Examples:`` is a section) collapses its doctest into one paragraph. Docstrings use
``$x$`` / ``$$ ... $$`` (pymdownx.arithmatex), ``[`Foo`][scorebayes.module.Foo]`` cross-references
and ``Examples:`` sections.

Two levels: a source scan of every docstring under ``src/`` (instant; names the file and line), and
one build of the site (a few seconds; ``mkdocs.yml`` is strict, so an unresolved cross-reference
fails the build too) whose pages are checked as a reader gets them.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

ROLES = r"(?:py:)?(?:math|class|func|meth|mod|attr|data|obj|exc|const|ref|doc|term)"
#: reST in a docstring's text: a role, a directive, a line block, a singular ``Example:`` section
SOURCE_RST = re.compile(
    rf"(?P<role>(?<![\w`]):{ROLES}:`)"
    r"|(?P<directive>^[ \t]*\.\. [a-z][\w-]*::)"
    r"|(?P<line_block>^[ \t]*\| )"
    r"|(?P<example>^[ \t]*Example:[ \t]*$)",
    re.MULTILINE,
)
#: the same on a built page: Markdown has turned the role's `target` into <code>target</code>
PAGE_RST = re.compile(
    rf"(?P<role>:{ROLES}:(?:<code>|`))"
    r"|(?P<directive>(?:^|>)[ \t]*\.\. [a-z][\w-]*::)"
    r"|(?P<line_block><(?:p|li)>\| )",
    re.MULTILINE,
)


def _docstrings(tree: ast.AST):
    """Every statement-level string: module, class, function and attribute docstrings."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            for stmt in body if isinstance(body, list) else []:
                if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                        and isinstance(stmt.value.value, str)):
                    yield stmt.value


def source_problems(text: str, lineno: int = 1) -> list[tuple[int, str, str]]:
    """``(line, kind, excerpt)`` for each piece of reST in one docstring; fenced code is skipped."""
    problems, fence = [], False
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence or line.lstrip().startswith((">>>", "...")):
            continue
        for m in SOURCE_RST.finditer(line):
            if m.lastgroup == "line_block" and line.rstrip().endswith("|"):
                continue  # a Markdown table row
            problems.append((lineno + i, m.lastgroup, line.strip()[:80]))
    return problems


def test_source_scan_finds_rst():
    text = "A :math:`x` and :class:`~a.B`.\n\n.. math::\n\n    y\n\nExample:\n    >>> :func:`f`\n| a\n"
    kinds = [kind for _, kind, _ in source_problems(text)]
    assert kinds == ["role", "role", "directive", "example", "line_block"]
    assert source_problems("$x$, [`B`][a.B], ``:math:`` in code\n\nExamples:\n    >>> 1\n| a | b |") == []


def test_no_rst_in_docstrings():
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        for node in _docstrings(ast.parse(path.read_text())):
            problems += [f"{path.relative_to(ROOT)}:{line}: {kind}: {excerpt}"
                         for line, kind, excerpt in source_problems(node.value, node.lineno)]
    assert not problems, "reST in docstrings (mkdocstrings prints it as text):\n" + "\n".join(problems)


# -- the built site ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once per test run (xdist workers share it through a lock)."""
    from filelock import FileLock
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, shared by the workers
    out, done = root / "docs-site", root / "docs-site.done"
    with FileLock(str(root / "docs-site.lock")):
        if not done.exists():
            os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
            build(load_config(config_file=str(ROOT / "mkdocs.yml"), site_dir=str(out)))
            done.touch()
    return out


def _pages(site: Path) -> list[Path]:
    pages = sorted((site / "reference").glob("*/index.html"))
    assert len(pages) >= 5, pages
    return pages


def _text(html: str) -> str:
    """The page without scripts and highlighted code, where reST would be legitimate."""
    html = re.sub(r"<script\b.*?</script>", "", html, flags=re.DOTALL)
    return re.sub(r"<pre\b.*?</pre>", "", html, flags=re.DOTALL)


def page_rst(html: str) -> list[str]:
    text = _text(html)
    return [f"{m.lastgroup}: ...{text[max(0, m.start() - 60):m.end() + 40]!r}..." for m in PAGE_RST.finditer(text)]


def page_example_problems(html: str) -> list[str]:
    """An ``Examples`` section whose next block is not highlighted code, an ``Example``
    admonition, or a doctest prompt outside a code block (Markdown reads ``>>>`` as quotes)."""
    problems = []
    for m in re.finditer(r'doc-section-title">Examples?:?</span>', html):
        following = html[m.end():m.end() + 400]
        if not re.match(r'\s*</p>\s*<div class="(?:language-\w+ )?highlight"', following):
            problems.append(f"Examples section not followed by a code block: {following[:120]!r}")
    for m in re.finditer(r'<(?:details|div) class="(?:admonition )?examples?"', html):
        problems.append(f"Example admonition (write 'Examples:'): {html[m.start():m.start() + 200]!r}")
    text = _text(html)
    for m in re.finditer(r"&gt;&gt;&gt;|<blockquote>\s*<blockquote>\s*<blockquote>", text):
        problems.append(f"doctest outside a code block: {text[m.start():m.start() + 120]!r}")
    return problems


def test_page_checks_catch_rst_and_collapsed_examples():
    bad = ('<p>a :math:<code>x</code> and :class:<code>B</code></p>\n<p>.. math:: y</p><p>| Ref</p>'
           '<details class="example" open><summary>Example</summary><blockquote><blockquote>'
           '<blockquote><p>import torch</p></blockquote></blockquote></blockquote></details>')
    assert [p.split(":")[0] for p in page_rst(bad)] == ["role", "role", "directive", "line_block"]
    assert len(page_example_problems(bad)) == 2
    good = ('<p><span class="doc-section-title">Examples:</span></p>\n    <div class="highlight"><pre>'
            '<span class="gp">&gt;&gt;&gt; </span>:math:`x`</pre></div><p><span class="arithmatex">'
            '\\(x\\)</span></p>')
    assert page_rst(good) == [] and page_example_problems(good) == []


def test_reference_pages_show_no_rst(site):
    problems = [f"{page.relative_to(site)}: {p}" for page in _pages(site) for p in page_rst(page.read_text())]
    assert not problems, "reST printed as text on the built pages:\n" + "\n".join(problems)


def test_reference_examples_are_code_blocks(site):
    problems, sections = [], 0
    for page in _pages(site):
        html = page.read_text()
        sections += len(re.findall(r'doc-section-title">Examples:', html))
        problems += [f"{page.relative_to(site)}: {p}" for p in page_example_problems(html)]
    assert not problems, "\n".join(problems)
    assert sections >= 5, "the reference should show the docstrings' Examples sections"


def test_reference_pages_typeset_math_and_link(site):
    html = "".join(page.read_text() for page in _pages(site))
    assert html.count('class="arithmatex"') > 100  # $...$ reached arithmatex
    assert "$$" not in _text(re.sub(r'<(span|div) class="arithmatex">.*?</\1>', "", html, flags=re.DOTALL))
    assert html.count('class="autorefs autorefs-internal"') > 100  # cross-references are links
    assert "mathjax" in html.lower()  # the typesetting script is on the page
