"""NNEditor: inspect, navigate, edit, optimize and trace neural-network artifacts.

The public scripting API lives in :mod:`nneditor.api` and is re-exported here::

    import nneditor
    doc = nneditor.open("model.onnx")
    doc.tensors["conv1.weight"].read("0:2")
"""

from __future__ import annotations

__version__ = "0.1.0"

from nneditor.api import open  # noqa: A004 - the API's entry point is deliberately `open`
from nneditor.errors import ArtifactError, NNEditorError

__all__ = ["ArtifactError", "NNEditorError", "__version__", "open"]
