"""Import a plugin's entry point (trace worker only, for an approved run, from the snapshot of
the plugin folder taken at approval). The folder becomes a package of its own, so relative
sibling imports (``from .helpers import forward``) work and two plugins never share modules."""

from __future__ import annotations

import hashlib
import importlib
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nneditor.tracing.plugins.manifest import PluginError


def load_entry(folder: Path, entry_file: str, function: str) -> Callable[..., Any]:
    package = "nneditor_tracer_" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    if package not in sys.modules:
        pkg = types.ModuleType(package)
        pkg.__path__ = [str(folder)]
        pkg.__package__ = package
        sys.modules[package] = pkg
    module_name = package + "." + entry_file[: -len(".py")].replace("/", ".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(
            f"the tracer's {entry_file} could not be imported: {exc} (install the runtime it "
            "needs into NNEditor's Python environment)"
        ) from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise PluginError(f"the tracer's {entry_file} has no function {function}()")
    return fn
