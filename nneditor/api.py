"""The public scripting API.

``open(path)`` returns a :class:`~nneditor.model.document.Document`:

- ``doc.format``, ``doc.format_version``, ``doc.metadata`` (long arrays are lazy),
- ``doc.tensors[name].read()`` or ``.read("0:2,:,5")`` (reads only the needed byte ranges),
- ``doc.graph`` (or ``None`` and ``doc.graph_unavailable_reason``),
- ``doc.capabilities[action].available`` / ``.reason``.

``hierarchy(doc)`` gives the semantic levels (architecture → blocks → layers → operators).
Use documents as context managers (``with nneditor.open(p) as doc:``) to release file maps.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from nneditor.jobs.collector import paused_collection
from nneditor.model.capabilities import Capability
from nneditor.model.document import Document

if TYPE_CHECKING:
    from nneditor.semantic.hierarchy import Hierarchy


def open(path: str | os.PathLike[str]) -> Document:  # noqa: A001
    """Open an artifact (file or folder) by its contents, lazily."""
    from nneditor.semantic.open_graph import open_with_graph

    doc = open_with_graph(path)
    if doc.format != "onnx" and not doc.capabilities["trace"].available:
        doc.capabilities = doc.capabilities.replaced(trace=_what_traces(doc))
    return doc


def _what_traces(doc: Document) -> Capability:
    """What traces an artifact the ONNX tracers do not: the NumPy decoder (a checkpoint with
    a synthesized graph), else a tracer plugin, else the sentence ``nneditor trace`` refuses
    with."""
    refusal = (
        "this build traces ONNX models, GGUF files and Hugging Face snapshots; a tracer plugin "
        f"can add {doc.format} artifacts"
    )
    if doc.graph is None and doc.format in ("gguf", "huggingface"):
        reason = doc.graph_unavailable_reason.rstrip(".") or "it has none"
        refusal = (
            f"the NumPy decoder traces {doc.format} checkpoints through their graph, and this "
            f"one has no graph: {reason}; a tracer plugin can add it"
        )
    if doc.graph is not None and doc.format in ("gguf", "huggingface"):
        from nneditor.decoder import DecoderUnsupported, decoder_config

        try:
            cfg = decoder_config(doc)
        except DecoderUnsupported as exc:
            refusal = str(exc)
        except Exception as exc:  # metadata the decoder cannot read: said, the open goes on
            return Capability(False, f"the NumPy decoder cannot read this checkpoint ({exc})")
        else:
            return Capability(True, f"NumPy decoder on CPU: {cfg.describe()}")
    from nneditor.tracing.plugins.compat import compatible_plugins

    ids = compatible_plugins(doc, "auto")
    if ids:
        return Capability(True, f"with the tracer plugin {', '.join(ids)}")
    return Capability(False, refusal)


def hierarchy(doc: Document) -> Hierarchy | None:
    """The semantic hierarchy of the document's graph (None when it has no graph)."""
    if doc.graph is None:
        return None
    from nneditor.semantic.hierarchy import build_hierarchy

    with paused_collection():
        return build_hierarchy(doc.graph, doc.tensors)
