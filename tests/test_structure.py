"""The house's limits, measured on the source: sizes of modules, classes, functions and
constructors, and no import cycle between modules (imports under ``TYPE_CHECKING`` and inside
functions count too)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "scorebayes"
LIMITS = {"module": 400, "class": 300, "function": 120, "constructor arguments": 15}


def modules(root: Path = SRC) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def too_big(path: Path, name: str) -> list[str]:
    """What in one module is over ``LIMITS``."""
    source = path.read_text()
    found = []
    if len(source.splitlines()) > LIMITS["module"]:
        found.append(f"module {name}: {len(source.splitlines())} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            length = node.end_lineno - node.lineno + 1
            if length > LIMITS[kind]:
                found.append(f"{kind} {name}.{node.name}: {length} lines")
        methods = node.body if isinstance(node, ast.ClassDef) else []
        for init in (n for n in methods if isinstance(n, ast.FunctionDef) and n.name == "__init__"):
            args = init.args
            count = len(args.posonlyargs) + len(args.args) - 1 + len(args.kwonlyargs)
            if count > LIMITS["constructor arguments"]:
                found.append(f"constructor {name}.{node.name}: {count} arguments")
    return found


def imports(name: str, path: Path, package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``name`` imports anywhere in its file."""
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            candidates = [module] + [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        targets |= {c for c in candidates if c in known and c != name}
    return targets


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_nothing_is_over_the_size_limits():
    over = [line for name, (path, _) in modules().items() for line in too_big(path, name)]
    assert not over, over


def test_no_module_imports_itself_through_others():
    found = modules()
    graph = {name: imports(name, path, package, set(found)) for name, (path, package) in found.items()}
    assert not cycles(graph)


@pytest.mark.parametrize("kind", ["size", "cycle"])
def test_the_checks_find_what_they_look_for(tmp_path, kind):
    """Each check fails on a package built to break it."""
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    if kind == "size":
        (root / "big.py").write_text("def f():\n" + "    x = 1\n" * 130)
        assert too_big(root / "big.py", "pkg.big") == ["function pkg.big.f: 131 lines"]
    else:
        (root / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
        (root / "b.py").write_text("from .a import A\n")
        found = modules(root)
        graph = {name: imports(name, path, package, set(found)) for name, (path, package) in found.items()}
        assert cycles(graph) == [["pkg.a", "pkg.b"]]
