"""Lookups the workbench needs over one opened document (built once, in the open job).

Qt-free on purpose: it is built on a worker thread and tested without a display.

Invariants:
- Built from the document's main graph and its hierarchy; both are read-only afterwards.
- ``group_by_id`` covers every group of the hierarchy; ``ordered_members(g)`` interleaves a
  group's child groups and direct operators by first computing node index (topological order;
  input-less constants do not count for a group).
- ``node_category(i)`` is one of :data:`CATEGORIES`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nneditor.jobs.protocol import JobHandle
from nneditor.model.document import Document
from nneditor.model.graph import Graph, ValueInfo
from nneditor.semantic.graph_index import weight_only_nodes
from nneditor.semantic.hierarchy import LAYER_PRIORITY, Group, Hierarchy

_NONE = 1 << 60  # "no node" in first-node order (sorts last)

#: Style categories of canvas items, in legend order.
CATEGORIES = (
    "attention",
    "ffn",
    "conv",
    "norm",
    "recurrent",
    "embedding",
    "head",
    "stack",
    "io",
    "constant",
    "other",
)

_CONSTANT_OPS = {"Constant", "ConstantOfShape"}


def style_category(category: str) -> str:
    """Map a hierarchy category ("attention+ffn", "block", "") to a style category."""
    for part in (category or "").split("+"):
        if part in CATEGORIES:
            return part
    return "other"


@dataclass(frozen=True)
class Member:
    """One entry of a group's ordered contents: a child group or a direct operator."""

    group: Group | None = None
    node: int = -1

    @property
    def first(self) -> int:
        return self.group.first() if self.group is not None else self.node


class ModelIndex:
    """Producer/consumer maps, group lookups and per-node categories for one document."""

    def __init__(self, doc: Document, hierarchy: Hierarchy | None) -> None:
        self.doc = doc
        self.hierarchy = hierarchy
        self.graph: Graph | None = doc.graph
        nodes = self.graph.nodes if self.graph is not None else []
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        for i, node in enumerate(nodes):
            for out in node.outputs:
                if out:
                    self.producer[out] = i
            for name in node.inputs:
                if name:
                    self.consumers.setdefault(name, []).append(i)
        self.initializers = (
            frozenset(self.graph.initializers) if self.graph is not None else frozenset()
        )
        self.graph_inputs = [vi.name for vi in self.graph.inputs] if self.graph is not None else []
        self.graph_outputs = (
            [vi.name for vi in self.graph.outputs] if self.graph is not None else []
        )
        self.group_by_id: dict[str, Group] = {}
        if hierarchy is not None:
            for g in hierarchy.root.walk():
                self.group_by_id[g.id] = g
        self._node_pattern = self._pattern_kinds(hierarchy)
        self.anchors: set[int] = (
            {p.anchor for p in hierarchy.patterns} if hierarchy is not None else set()
        )
        self._members: dict[int, list[Member]] = {}
        self._first: dict[int, int] = {}
        self._computing: dict[int, int] = {}
        self._boundary: dict[int, tuple[list[str], list[str]]] = {}
        self._chunk_members: dict[int, set[int]] = {}
        self.cross: list[tuple[int, int, str]] | None = None
        self.counts: dict[str, int] = {"blocks": 0, "layers": 0}
        self._weight_only: frozenset[int] | None = None

    # ------------------------------------------------------------------ basic lookups

    @property
    def node_count(self) -> int:
        return len(self.graph.nodes) if self.graph is not None else 0

    @property
    def root(self) -> Group | None:
        return self.hierarchy.root if self.hierarchy is not None else None

    def node(self, i: int) -> Any:
        assert self.graph is not None
        return self.graph.nodes[i]

    def is_weight(self, name: str) -> bool:
        """Initializers and outputs of constant-producing operators (known without running),
        also through Identity aliases (PyTorch's exporter feeds every call of a shared
        module its weights through an Identity of the one stored tensor)."""
        for _ in range(64):
            if name in self.initializers:
                return True
            p = self.producer.get(name)
            if p is None:
                return False
            node = self.node(p)
            if node.op_type != "Identity" or len(node.inputs) != 1:
                return node.op_type in _CONSTANT_OPS and not any(node.inputs)
            name = node.inputs[0]
        return False

    def value_info(self, name: str) -> ValueInfo | None:
        """Declared dtype/shape of a value from the graph or the tensor catalog."""
        vi = self.graph.value_type(name) if self.graph is not None else None
        if vi is not None:
            return vi
        ref = self.doc.tensors.get(name)
        if ref is not None:
            return ValueInfo(name, ref.dtype, tuple(ref.shape))
        return None

    @property
    def weight_only(self) -> frozenset[int]:
        """Operators computed from weights alone (QDQ weight pairs...), on first use."""
        if self._weight_only is None:
            nodes = self.graph.nodes if self.graph is not None else []
            self._weight_only = weight_only_nodes(nodes, self.initializers)
        return self._weight_only

    def is_constant_op(self, i: int) -> bool:
        """A constant-producing operator without inputs, an Identity of a weight, or an
        operator computed from weights alone (its value is known without running)."""
        node = self.node(i)
        if node.op_type == "Identity" and len(node.inputs) == 1:
            return self.is_weight(node.inputs[0])
        if node.op_type in _CONSTANT_OPS and not any(node.inputs):
            return True
        return i in self.weight_only

    def is_initializer(self, name: str) -> bool:
        return name in self.initializers

    def prepare(self) -> None:
        """Build what the canvas needs before the first frame (call on the open job).

        ``cross`` lists every value use that crosses between innermost groups (or comes from
        a graph input): ``(producer or -1, consumer, value)``. Edges between groups and the
        ports of any group are derived from it, without walking the group's operators.
        """
        if self.cross is not None:
            return
        cross: list[tuple[int, int, str]] = []
        inner = self.hierarchy.node_group if self.hierarchy is not None else []
        if self.graph is not None:
            for i, node in enumerate(self.graph.nodes):
                for v in node.inputs:
                    if not v or v in self.initializers:
                        continue
                    p = self.producer.get(v)
                    if p is None:
                        cross.append((-1, i, v))
                    elif inner and inner[p] is not inner[i]:
                        cross.append((p, i, v))
        self.cross = cross
        if self.root is not None:
            self.first_node(self.root)
            self.counts = {
                "blocks": sum(1 for g in self.root.walk() if g.kind == "block"),
                "layers": sum(1 for g in self.root.walk() if g.kind == "layer"),
            }

    def inside(self, g: Group, i: int) -> bool:
        """True when operator ``i`` belongs to ``g`` (a hierarchy group or a chunk group)."""
        if g.kind == "chunk":
            members = self._chunk_members.get(id(g))
            if members is None:
                members = self._chunk_members[id(g)] = set(g.nodes)
            return i in members
        return self.contains(g, i)

    def boundary(self, g: Group) -> tuple[list[str], list[str]]:
        """(inputs, outputs) of ``g``: activation values entering it and leaving it."""
        key = id(g)
        cached = self._boundary.get(key)
        if cached is not None:
            return cached
        if g.kind == "model":
            cached = (list(self.graph_inputs), list(self.graph_outputs))
        elif g.kind == "chunk":
            cached = self._chunk_boundary(g)
        else:
            self.prepare()
            assert self.cross is not None
            ins: dict[str, None] = {}
            outs: dict[str, None] = {}
            for p, c, v in self.cross:
                c_in = self.contains(g, c)
                p_in = p >= 0 and self.contains(g, p)
                if c_in and not p_in:
                    ins[v] = None
                elif p_in and not c_in:
                    outs[v] = None
            for v in self.graph_outputs:
                producer = self.producer.get(v)
                if producer is not None and self.contains(g, producer):
                    outs[v] = None
            cached = (list(ins), list(outs))
        self._boundary[key] = cached
        return cached

    def _chunk_boundary(self, g: Group) -> tuple[list[str], list[str]]:
        members = set(g.nodes)
        ins: dict[str, None] = {}
        outs: dict[str, None] = {}
        graph_outputs = set(self.graph_outputs)
        for i in g.nodes:
            node = self.node(i)
            for v in node.inputs:
                if v and v not in self.initializers and self.producer.get(v) not in members:
                    ins[v] = None
            for v in node.outputs:
                if v and (
                    v in graph_outputs or any(c not in members for c in self.consumers.get(v, ()))
                ):
                    outs[v] = None
        return list(ins), list(outs)

    def contains(self, g: Group, i: int) -> bool:
        """True when operator ``i`` lies inside group ``g``."""
        inner = self.innermost(i)
        while inner is not None:
            if inner is g:
                return True
            inner = inner.parent
        return False

    def innermost(self, i: int) -> Group | None:
        if self.hierarchy is None or not 0 <= i < len(self.hierarchy.node_group):
            return None
        return self.hierarchy.node_group[i]

    def first_node(self, g: Group) -> int:
        """Smallest index of a computing node inside ``g`` (cached; groups are immutable once
        built). Input-less constants do not count: exporters often list every Constant at the
        top of the graph, which would otherwise put a late stage first. A group holding only
        constants falls back to its smallest index."""
        key = id(g)
        if key not in self._first:
            first = self._computing_first(g)
            if first == _NONE:
                first = min((i for c in g.walk() for i in c.nodes), default=_NONE)
            self._first[key] = first
        return self._first[key]

    def _computing_first(self, g: Group) -> int:
        key = id(g)
        found = self._computing.get(key)
        if found is None:
            firsts = [i for i in g.nodes if not self.is_constant_op(i)]
            firsts.extend(self._computing_first(c) for c in g.children)
            found = self._computing[key] = min(firsts, default=_NONE)
        return found

    def ordered_members(self, g: Group) -> list[Member]:
        """Child groups and direct operators of ``g`` in topological (first node) order."""
        key = id(g)
        cached = self._members.get(key)
        if cached is None:
            entries = [(self.first_node(c), 0, Member(group=c)) for c in g.children]
            entries.extend((i, 1, Member(node=i)) for i in g.nodes)
            entries.sort(key=lambda e: (e[0], e[1]))
            cached = [e[2] for e in entries]
            self._members[key] = cached
        return cached

    # ------------------------------------------------------------------ categories

    @staticmethod
    def _pattern_kinds(hierarchy: Hierarchy | None) -> dict[int, str]:
        out: dict[int, str] = {}
        if hierarchy is None:
            return out
        rank = {k: r for r, k in enumerate(LAYER_PRIORITY)}
        for p in hierarchy.patterns:
            if p.kind not in rank:
                continue
            for i in p.nodes:
                old = out.get(i)
                if old is None or rank[p.kind] < rank[old]:
                    out[i] = p.kind
        return out

    def node_category(self, i: int) -> str:
        op = self.node(i).op_type
        if op in _CONSTANT_OPS:
            return "constant"
        kind = self._node_pattern.get(i)
        if kind:
            return style_category(kind)
        g = self.innermost(i)
        if g is not None and g.kind == "layer":
            return style_category(g.category)
        return "other"

    def node_in_pattern(self, i: int) -> bool:
        return i in self._node_pattern

    def patterns_of_node(self, i: int) -> list[Any]:
        if self.hierarchy is None:
            return []
        return [p for p in self.hierarchy.patterns if i in p.nodes]

    # ------------------------------------------------------------------ ancestry

    def ancestors(self, g: Group) -> list[Group]:
        """``g``'s path from the root (root first, ``g`` last)."""
        return g.path()

    def iter_groups(self) -> Iterator[Group]:
        if self.hierarchy is not None:
            yield from self.hierarchy.root.walk()


def index_document(doc: Document, handle: JobHandle) -> ModelIndex:
    """Hierarchy and workbench index of ``doc``: steps 1-2 of 3 of an open or revision job
    (checks for cancellation between them)."""
    from nneditor import api

    hierarchy = None
    if doc.graph is not None:
        handle.progress(1, 3, "Finding blocks and patterns")
        hierarchy = api.hierarchy(doc)
        handle.check_cancelled()
    handle.progress(2, 3, "Indexing")
    index = ModelIndex(doc, hierarchy)
    index.prepare()
    return index
