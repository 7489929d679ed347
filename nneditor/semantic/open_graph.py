"""Open an artifact by its contents, a checkpoint with its synthesized graph.

What ``nneditor.open`` builds on, for the packages below the public API (the trace worker,
tokenization), which must not import it. The graph builders (checkpoint_graphs.py and the
families it dispatches to) are imported only for a GGUF file or a Hugging Face snapshot: a
look at an ONNX file does not load them.
"""

from __future__ import annotations

import os
from pathlib import Path

from nneditor.model.document import Document


def open_with_graph(path: str | os.PathLike[str]) -> Document:
    """Open ``path``; a checkpoint without a stored graph gets its synthesized one (or the
    reason it has none)."""
    from nneditor.artifacts.registry import open_document
    from nneditor.jobs.collector import paused_collection

    with paused_collection():  # the index built here lives as long as the document
        doc = open_document(Path(path))
        if doc.graph is None and doc.format in ("gguf", "huggingface"):
            from nneditor.semantic.checkpoint_graphs import attach_graph

            attach_graph(doc)
    return doc
