"""NNEditor: inspect, navigate, edit, optimize and trace neural-network artifacts.

The public scripting API lives in :mod:`nneditor.api` and is re-exported here::

    import nneditor
    doc = nneditor.open("model.onnx")
    doc.tensors["conv1.weight"].read("0:2")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nneditor._version import __version__
from nneditor.errors import ArtifactError, NNEditorError

if TYPE_CHECKING:
    from nneditor.api import open  # noqa: A004 - the API's entry point is deliberately `open`


def __getattr__(name: str) -> object:
    # Lazy, so worker processes (`python -m nneditor.scripting.worker`) do not pay for
    # importing the whole reader stack (ml_dtypes alone takes about a second) at start.
    if name == "open":
        from nneditor.api import open as api_open

        return api_open
    raise AttributeError(f"module 'nneditor' has no attribute {name!r}")


__all__ = ["ArtifactError", "NNEditorError", "__version__", "open"]
