"""onnx's protobuf message classes, without importing the whole onnx package.

``import onnx`` costs 45-60 ms (its helpers, checker bindings, composition and mapping
tables), paid by every look at an ONNX file, though the reader needs only the message classes
of ``onnx/onnx_ml_pb2.py``. That module is loaded here by itself, under its own name, so that
a later ``import onnx`` finds it in ``sys.modules`` and uses the very same classes
(``onnx.ModelProto is protos.ModelProto``; the descriptor pool holds the file once); a
one-shot import hook hands it to the package as its ``onnx_ml_pb2`` attribute, which the
import system sets only for submodules it loads itself. Where that fails, or onnx is already
imported, the classes come from onnx as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_NAME = "onnx.onnx_ml_pb2"


class _Attach(importlib.abc.MetaPathFinder):
    """Removes itself at the next ``import onnx`` and gives the package the module loaded
    here before the package's ``__init__`` runs."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "onnx":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("onnx")
        loader = spec.loader if spec is not None else None
        module_pb2 = sys.modules.get(_NAME)
        if loader is None or module_pb2 is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            module.onnx_ml_pb2 = module_pb2  # type: ignore[attr-defined]
            run(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _alone() -> ModuleType | None:
    spec = importlib.util.find_spec("onnx")  # finds the package without running it
    places = spec.submodule_search_locations if spec is not None else None
    if not places:
        return None
    path = Path(next(iter(places))) / "onnx_ml_pb2.py"
    sub = importlib.util.spec_from_file_location(_NAME, path)
    if sub is None or sub.loader is None or not path.is_file():
        return None
    module = importlib.util.module_from_spec(sub)
    sys.modules[_NAME] = module
    try:
        sub.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(_NAME, None)
        raise
    sys.meta_path.insert(0, _Attach())
    return module


def _load() -> Any:
    found = sys.modules.get(_NAME)
    if found is not None:
        return found
    if "onnx" not in sys.modules:
        try:
            module = _alone()
        except Exception:  # an unusual install: the package's own import below
            module = None
        if module is not None:
            return module
    import onnx

    return onnx.onnx_ml_pb2


_pb2 = _load()
ModelProto: Any = _pb2.ModelProto
GraphProto: Any = _pb2.GraphProto
FunctionProto: Any = _pb2.FunctionProto
NodeProto: Any = _pb2.NodeProto
AttributeProto: Any = _pb2.AttributeProto
