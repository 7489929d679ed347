"""The public scripting API.

``open(path)`` returns a :class:`~nneditor.model.document.Document`:

- ``doc.format``, ``doc.format_version``, ``doc.metadata`` (long arrays are lazy),
- ``doc.tensors[name].read()`` or ``.read("0:2,:,5")`` (reads only the needed byte ranges),
- ``doc.graph`` (or ``None`` and ``doc.graph_unavailable_reason``),
- ``doc.capabilities[action].available`` / ``.reason``.

Use it as a context manager (``with nneditor.open(p) as doc:``) to release file maps promptly.
"""

from __future__ import annotations

import builtins
import os
from pathlib import Path

from nneditor.artifacts.registry import open_document
from nneditor.model.document import Document

_builtin_open = builtins.open


def open(path: str | os.PathLike[str]) -> Document:  # noqa: A001
    """Open an artifact (file or folder) by its contents, lazily."""
    return open_document(Path(path))
