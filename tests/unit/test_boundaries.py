"""Architecture rules that CI enforces."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import nneditor

ROOT = Path(nneditor.__file__).parent


def _core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages([str(ROOT)], prefix="nneditor."):
        if info.name.startswith("nneditor.ui") or info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


def test_core_never_imports_qt():
    modules = _core_modules()
    assert len(modules) > 10
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'PyQt5', 'PyQt6', 'pyqtgraph'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"Qt imported by the core: {out.stdout.strip()}"


def test_no_pyside_import_statements_outside_ui():
    offenders = []
    for path in ROOT.rglob("*.py"):
        if "ui" in path.relative_to(ROOT).parts[:1]:
            continue
        text = path.read_text(encoding="utf-8")
        if "import PySide6" in text or "from PySide6" in text:
            offenders.append(str(path))
    assert offenders == []


def _module_imports() -> dict[str, set[str]]:
    """module -> the modules of the package it imports (every import statement, also inside
    functions and ``TYPE_CHECKING`` blocks: a type-only import is still a dependency)."""
    import ast

    mods: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = ("nneditor", *path.relative_to(ROOT).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    deps.add(sub if sub in mods else base)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_circles():
    graph = _module_imports()
    assert len(graph) > 100 and "nneditor.artifacts.registry" in graph
    assert _circles(graph) == []


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles(_module_imports() | {"nneditor.errors": {"nneditor.api"}}) != []
