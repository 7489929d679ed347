"""A read-only view of the current revision for display: a Graph and a Document.

The opened :class:`Document` keeps describing the untouched source; the canvas, hierarchy and
inspector of an edited model show a *revision view* built from the session's
:class:`~nneditor.editing.onnx_edits.EditState`:

- unchanged source nodes become light copies that share the source node's lazily decoded
  attributes and its subgraphs (a node at its original position is reused as is);
- changed or inserted nodes are built from their NodeProto; scalar and list attributes are
  decoded with ``onnx.helper.get_attribute_value``, tensor and graph attributes (which edits
  never change) are taken from the source node;
- inputs, outputs, initializers, value types, opsets and local functions are the source's
  (edits change neither the interface nor the initializer set).

Invariants: nothing here touches Qt or writes a file; the revision document owns no byte
sources (closing it never closes the source's maps); with no active change the source
document itself is returned.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import onnx
from onnx import helper

from nneditor.editing.onnx_edits import EditState
from nneditor.model.document import Document
from nneditor.model.graph import Graph, Node

_A = onnx.AttributeProto
_SIMPLE = {_A.FLOAT, _A.INT, _A.STRING, _A.FLOATS, _A.INTS, _A.STRINGS}


def revision_graph(state: EditState) -> Graph:
    """The entry graph of ``state`` as a :class:`Graph` (node ``k`` is entry ``k``)."""
    source = state.doc.graph
    assert source is not None
    src_nodes = source.nodes
    nodes: list[Node] = []
    with _gc_paused():
        for k, entry in enumerate(state.entries):
            original = src_nodes[entry.src] if entry.src is not None else None
            if entry.proto is None:
                assert original is not None
                nodes.append(original if entry.src == k else _moved(original, k))
            else:
                nodes.append(_from_proto(k, entry.proto, original))
    return Graph(
        name=source.name,
        nodes=nodes,
        inputs=list(source.inputs),
        outputs=list(source.outputs),
        initializers=list(source.initializers),
        value_info=source.value_info,
        kind=source.kind,
        opsets=dict(source.opsets),
        functions=list(source.functions),
        domain=source.domain,
    )


def revision_document(doc: Document, state: EditState | None) -> Document:
    """``doc`` with its graph replaced by the revision's; ``doc`` itself when nothing changed."""
    if state is None or not _changed(state):
        return doc
    return dataclasses.replace(
        doc,
        graph=revision_graph(state),
        sources=[],
        notes=[*doc.notes, "showing an edited revision; the source file is unchanged"],
    )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while allocating ~100k small objects (full passes over a big heap
    made a 50k-node copy 18x slower); it is restored even when the loop raises."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _changed(state: EditState) -> bool:
    return any(e.proto is not None or e.src != k for k, e in enumerate(state.entries)) or (
        len(state.entries) != len(state.src.node_fields)
    )


def _moved(node: Node, index: int) -> Node:
    """A copy of an unchanged node at a new position, sharing its lazy attributes."""
    return Node(
        index,
        node.name,
        node.op_type,
        node.domain,
        node.inputs,
        node.outputs,
        attr_source=lambda: node.attributes,
        subgraphs=node.subgraphs,
        info=node.info,
    )


def _from_proto(index: int, proto: onnx.NodeProto, original: Node | None) -> Node:
    names = {a.name for a in proto.attribute}
    subgraphs = (
        {k: g for k, g in original.subgraphs.items() if k in names} if original is not None else {}
    )
    return Node(
        index,
        proto.name,
        proto.op_type,
        proto.domain,
        tuple(proto.input),
        tuple(proto.output),
        attr_source=lambda: _attributes(proto, original),
        subgraphs=subgraphs,
        info=original.info if original is not None else None,
    )


def _attributes(proto: onnx.NodeProto, original: Node | None) -> dict[str, Any]:
    kept = original.attributes if original is not None else {}
    out: dict[str, Any] = {}
    for attr in proto.attribute:
        if attr.type in _SIMPLE and not attr.ref_attr_name:
            out[attr.name] = _text(helper.get_attribute_value(attr))
        elif attr.name in kept:
            out[attr.name] = kept[attr.name]
        else:
            out[attr.name] = f"<{_A.AttributeType.Name(attr.type).lower()}>"
    return out


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_text(v) for v in value]
    return value
