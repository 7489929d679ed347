"""Compact graph structures: nodes, values, subgraphs and local functions.

Nodes use ``__slots__`` and tuples so that a 100k-node graph stays in tens of MB. Node
attributes are decoded lazily (readers pass an ``attr_source`` callable) because most
inspection never looks at them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Dim = int | str | None


@dataclass(slots=True)
class ValueInfo:
    """A named value's declared type: dtype name (or None if unknown) and shape (or None).

    A value that is not a tensor (an ONNX sequence, map or optional, such as the
    ``seq(map(int64, tensor(float32)))`` a scikit-learn ZipMap returns) has no dtype or shape;
    ``type_text`` then spells its type.
    """

    name: str
    dtype: str | None = None
    shape: tuple[Dim, ...] | None = None
    doc: str = ""
    type_text: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
        }
        if self.type_text:
            out["type"] = self.type_text
        return out

    def describe(self) -> str:
        """``float32 [1, ?]``, or the non-tensor type, or ``?`` when nothing is declared."""
        if self.type_text:
            return self.type_text
        if self.shape is None:
            return f"{self.dtype or '?'} ?"
        return (
            f"{self.dtype or '?'} ["
            + ", ".join("?" if d is None else str(d) for d in self.shape)
            + "]"
        )


class Node:
    __slots__ = (
        "index",
        "name",
        "op_type",
        "domain",
        "inputs",
        "outputs",
        "subgraphs",
        "_attrs",
        "_attr_source",
        "info",
    )

    def __init__(
        self,
        index: int,
        name: str,
        op_type: str,
        domain: str = "",
        inputs: tuple[str, ...] = (),
        outputs: tuple[str, ...] = (),
        attrs: dict[str, Any] | None = None,
        attr_source: Callable[[], dict[str, Any]] | None = None,
        subgraphs: dict[str, Graph] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.index = index
        self.name = name
        self.op_type = op_type
        self.domain = domain
        self.inputs = inputs
        self.outputs = outputs
        self._attrs = attrs
        self._attr_source = attr_source
        self.subgraphs = subgraphs or {}
        self.info = info

    @property
    def attributes(self) -> dict[str, Any]:
        """Attribute name -> decoded value (decoded on first access)."""
        if self._attrs is None:
            self._attrs = self._attr_source() if self._attr_source else {}
            self._attr_source = None
        return self._attrs

    @property
    def metadata(self) -> dict[str, str]:
        """Exporter notes on this node (ONNX ``metadata_props``); empty when there are none."""
        found = self.info.get("metadata") if self.info else None
        return found if isinstance(found, dict) else {}

    def __repr__(self) -> str:
        return f"Node({self.index}, {self.name!r}, {self.op_type!r})"


@dataclass(eq=False)
class Graph:
    """A graph: nodes in stored (topological for ONNX) order, declared inputs and outputs."""

    name: str
    nodes: list[Node] = field(default_factory=list)
    inputs: list[ValueInfo] = field(default_factory=list)
    outputs: list[ValueInfo] = field(default_factory=list)
    initializers: list[str] = field(default_factory=list)
    value_info: dict[str, ValueInfo] = field(default_factory=dict)
    kind: str = "main"  # main | subgraph | function
    opsets: dict[str, int] = field(default_factory=dict)
    functions: list[Graph] = field(default_factory=list)
    owner: Node | None = None  # the node whose attribute holds this subgraph
    domain: str = ""  # for functions

    def walk(self) -> Iterator[tuple[Node, Graph]]:
        """Every node of this graph and of its nested subgraphs (not functions), depth first."""
        for node in self.nodes:
            yield node, self
            for sub in node.subgraphs.values():
                yield from sub.walk()

    @property
    def node_count(self) -> int:
        """Nodes of this graph and of its nested subgraphs (what :meth:`walk` yields)."""
        nodes = self.nodes
        return len(nodes) + sum(
            sub.node_count for node in nodes if node.subgraphs for sub in node.subgraphs.values()
        )

    def value_type(self, name: str) -> ValueInfo | None:
        for vi in self.inputs:
            if vi.name == name:
                return vi
        for vi in self.outputs:
            if vi.name == name:
                return vi
        return self.value_info.get(name)

    def producers(self) -> dict[str, Node]:
        """Value name -> node producing it (this graph level only)."""
        out: dict[str, Node] = {}
        for node in self.nodes:
            for name in node.outputs:
                if name:
                    out[name] = node
        return out

    def consumers(self) -> dict[str, list[Node]]:
        """Value name -> nodes reading it (this graph level only)."""
        out: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    out.setdefault(name, []).append(node)
        return out
