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
