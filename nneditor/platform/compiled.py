"""NNEditor's optional compiled loops, when the install built them.

``setup.py`` builds a few hot loops as optional C extensions (the ONNX reader's wire loops,
``artifacts/onnx/_cwire.c``). Where no C compiler is at hand the install goes on and every caller keeps its pure-Python loop, which
stays the reference (tests run both and compare them). ``NNEDITOR_PURE_PYTHON=1`` turns the
compiled loops off.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def pure_python() -> bool:
    """True when the user asked for the pure-Python loops."""
    return os.environ.get("NNEDITOR_PURE_PYTHON", "") not in ("", "0")


def compiled(name: str) -> ModuleType | None:
    """The compiled module ``name`` (a dotted path), or None: not built, or turned off."""
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
