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
from nneditor.model.capabilities import Capabilities, Capability
from nneditor.model.document import Document

if TYPE_CHECKING:
    from nneditor.semantic.hierarchy import Hierarchy


def open(path: str | os.PathLike[str]) -> Document:  # noqa: A001
    """Open an artifact (file or folder) by its contents, lazily."""
    from nneditor.semantic.checkpoint_graphs import open_with_graph

    doc = open_with_graph(path)
    if doc.graph is not None and doc.format in ("gguf", "huggingface"):
        entries = dict(doc.capabilities)
        entries["trace"] = _checkpoint_trace(doc)
        doc.capabilities = Capabilities(entries)
    elif doc.format != "onnx" and not doc.capabilities["trace"].available:
        _say_what_traces(doc)
    return doc


def _say_what_traces(doc: Document) -> None:
    """Formats the built-in tracers do not run: a tracer plugin that does, or the sentence
    ``nneditor trace`` refuses with."""
    from nneditor.tracing.plugins.compat import compatible_plugins

    ids = compatible_plugins(doc, "auto")
    entries = dict(doc.capabilities)
    entries["trace"] = (
        Capability(True, f"with the tracer plugin {', '.join(ids)}")
        if ids
        else Capability(
            False,
            f"this build traces ONNX models, GGUF files and Hugging Face snapshots; a tracer "
            f"plugin can add {doc.format} artifacts",
        )
    )
    doc.capabilities = Capabilities(entries)


def _checkpoint_trace(doc: Document) -> Capability:
    """What traces a checkpoint with a graph: the NumPy decoder, a tracer plugin, or why not
    (the sentence ``nneditor trace`` refuses with)."""
    from nneditor.decoder import DecoderUnsupported, decoder_config

    try:
        cfg = decoder_config(doc)
    except DecoderUnsupported as exc:
        from nneditor.tracing.plugins.compat import compatible_plugins

        ids = compatible_plugins(doc, "auto")
        if ids:
            return Capability(True, f"with the tracer plugin {', '.join(ids)}")
        return Capability(False, str(exc))
    except Exception as exc:  # metadata the decoder cannot read: said, the open goes on
        return Capability(False, f"the NumPy decoder cannot read this checkpoint ({exc})")
    return Capability(True, f"NumPy decoder on CPU: {cfg.describe()}")


def hierarchy(doc: Document) -> Hierarchy | None:
    """The semantic hierarchy of the document's graph (None when it has no graph)."""
    if doc.graph is None:
        return None
    from nneditor.semantic.hierarchy import build_hierarchy

    with paused_collection():
        return build_hierarchy(doc.graph, doc.tensors)
