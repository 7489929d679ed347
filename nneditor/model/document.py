"""The format-neutral document every reader produces."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from nneditor.io.identity import Identity
from nneditor.io.source import ByteSource
from nneditor.model.capabilities import Capabilities
from nneditor.model.graph import Graph
from nneditor.model.tensor import TensorCatalog

#: Arrays longer than this are summarised (length + first items) in JSON and summaries.
SUMMARY_LIMIT = 16
#: Deeper containers are summarised as text (JSON printing recurses once per level).
SUMMARY_DEPTH = 64


class LazyList(Sequence[Any]):
    """A long metadata array whose items are decoded on demand (e.g. a 248k-token vocabulary).

    ``length`` is known at once; ``getter(i)`` decodes one item; ``item_type`` names the type.
    """

    def __init__(self, length: int, getter: Callable[[int], Any], item_type: str = "") -> None:
        self.length = length
        self._get = getter
        self.item_type = item_type

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(self.length))]
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(i)
        return self._get(i)

    def __iter__(self) -> Iterator[Any]:
        return (self._get(i) for i in range(self.length))

    def summary(self) -> dict[str, Any]:
        head = [summarise(x) for x in self[: min(SUMMARY_LIMIT // 2, self.length)]]
        return {"type": "array", "item_type": self.item_type, "length": self.length, "head": head}


def summarise(value: Any, depth: int = 0) -> Any:
    """JSON-friendly summary of a metadata value; long arrays become {length, head}.

    Containers nested deeper than ``SUMMARY_DEPTH`` levels (a hostile config.json can nest
    500 deep; printing that as indented JSON overflows Python's stack) become a short text.
    """
    if isinstance(value, LazyList):
        return value.summary()
    if isinstance(value, (list, tuple, dict)) and depth >= SUMMARY_DEPTH:
        kind = "object" if isinstance(value, dict) else "array"
        return f"<{kind} of {len(value)} items nested deeper than {SUMMARY_DEPTH} levels>"
    if isinstance(value, (list, tuple)):
        if len(value) > SUMMARY_LIMIT:
            return {
                "type": "array",
                "length": len(value),
                "head": [summarise(x, depth + 1) for x in value[: SUMMARY_LIMIT // 2]],
            }
        return [summarise(x, depth + 1) for x in value]
    if isinstance(value, dict):
        return {str(k): summarise(v, depth + 1) for k, v in value.items()}
    if isinstance(value, bytes):
        if len(value) > 64:
            return {"type": "bytes", "length": len(value)}
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf": strict JSON has no such numbers
    if isinstance(value, (str, int, float, bool)) or value is None:
        if isinstance(value, str) and len(value) > 4096:
            return value[:4096] + f"… ({len(value)} characters)"
        return value
    return str(value)


@dataclass(eq=False)
class Document:
    """An opened artifact.

    Attributes:
        format: lowercase format name ("onnx", "safetensors", "gguf", ...).
        format_version: the container's version string ("" if it has none).
        path: the file or folder opened.
        size_bytes: bytes on disk (all member files for folders).
        identity: fast identity, recorded at open.
        metadata: format metadata; long arrays are :class:`LazyList`.
        tensors: catalog of stored tensors.
        graph: the computation graph, or None with ``graph_unavailable_reason``.
        capabilities: action -> available + reason.
        tree: optional nested structure (pickle object trees, config) for the inspector.
        sources: byte sources held open (closed by :meth:`close`).
    """

    format: str
    format_version: str
    path: Path
    size_bytes: int
    identity: Identity
    metadata: dict[str, Any]
    tensors: TensorCatalog
    graph: Graph | None
    graph_unavailable_reason: str
    capabilities: Capabilities
    tree: Any = None
    sources: list[ByteSource] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def main_graph(self) -> Graph | None:
        """The entry graph (the name tracer plugins use: ``context.document.main_graph``)."""
        return self.graph

    def close(self) -> None:
        for src in self.sources:
            src.close()
        self.sources.clear()

    def __enter__(self) -> Document:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
