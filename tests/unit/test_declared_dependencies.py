"""Every library the package imports without a guard is one pyproject.toml declares: a plain
``pip install nneditor`` must run every command (tokenizers came only with the test extras
once, and ``nneditor tokenize`` ended in an internal error on a plain install).

An import inside ``try: ... except ImportError`` (or ModuleNotFoundError) is optional by
construction and skipped; so are the runtimes and libraries the package names as optional
extras or as plugins' own (onnxruntime, torch, ...), which its code imports only where it
says what is missing."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nneditor"
#: import name -> the distribution that provides it, where the two differ
DISTRIBUTIONS = {
    "google": "protobuf",
    "PySide6": "PySide6-Essentials",
    "shiboken6": "PySide6-Essentials",
    "yaml": "pyyaml",
}
#: imported only where their absence is said (optional extras, tracer plugins' runtimes, the
#: scripting console's libraries, image inputs)
OPTIONAL = {
    *("onnxruntime", "torch", "safetensors", "transformers", "diffusers"),
    *("matplotlib", "PIL", "scipy", "sklearn"),
}


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for spec in project["dependencies"]:
        name = spec.split(";")[0]
        for sep in "<>=!~[ ":
            name = name.split(sep)[0]
        names.add(name.strip().lower())
    return names


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``node`` sits in a try block that handles ImportError."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                caught = handler.type
                names = (
                    ([caught] if not isinstance(caught, ast.Tuple) else list(caught.elts))
                    if caught is not None
                    else []
                )
                if caught is None or any(
                    isinstance(n, ast.Name)
                    and n.id in ("ImportError", "ModuleNotFoundError", "Exception")
                    for n in names
                ):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def _unguarded_imports() -> dict[str, list[str]]:
    """Third-party top-level modules -> where the package imports them without a guard."""
    found: dict[str, list[str]] = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            if _guarded(node, parents):
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("nneditor", "__future__"):
                    continue
                found.setdefault(top, []).append(f"{file.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_unguarded_import_is_a_declared_dependency() -> None:
    declared = _declared()
    missing = {
        top: where[:3]
        for top, where in _unguarded_imports().items()
        if top not in OPTIONAL and DISTRIBUTIONS.get(top, top).lower() not in declared
    }
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_check_sees_tokenizers() -> None:
    """(The check can fail: the tokenize package imports tokenizers without a guard.)"""
    assert "nneditor/tokenize/hf_files.py" in " ".join(_unguarded_imports()["tokenizers"])
    assert "tokenizers" in _declared()
