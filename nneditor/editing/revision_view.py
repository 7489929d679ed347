"""A read-only view of the current revision for display: a Graph and a Document.

The opened :class:`Document` keeps describing the untouched source; the canvas, hierarchy and
inspector of an edited model show a *revision view* built from the session's
:class:`~nneditor.editing.onnx_edits.EditState`:

- unchanged source nodes become light copies that share the source node's lazily decoded
  attributes and its subgraphs (a node at its original position is reused as is);
- changed or inserted nodes are built from their NodeProto; scalar and list attributes are
  decoded with ``onnx.helper.get_attribute_value``; tensor and graph attributes are taken
  from the source node (edits never change them; a Constant value an optimization rewrote
  shows its new values in the tensor catalog, under the Constant's output name);
- inputs, value types, opsets and local functions are the source's, updated by what
  optimization plans record (added/removed initializers, declared output shapes, a raised
  default-domain opset);
- a tensor with byte patches reads through :class:`PatchedSource`, which overlays the
  patches on the bytes a read asks for (only a range that a patch overlaps is copied);
  initializers a plan adds or replaces, and Constant values a plan rewrote, are decoded on
  demand (bounded cache) from the plan or the edited NodeProto.

Invariants: nothing here touches Qt or writes a file; the revision document owns no byte
sources (closing it never closes the source's maps); with no active change the source
document itself is returned.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import onnx
from onnx import helper, numpy_helper

from nneditor.editing.onnx_edits import EditState
from nneditor.io.source import ByteSource
from nneditor.model.document import Document
from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.loaders import DecodedLoader

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
    removed = state.removed_inits
    shapes = state.shape_updates
    value_info = source.value_info
    if shapes:
        value_info = {k: _reshaped(v, shapes) for k, v in value_info.items()}
    opsets = dict(source.opsets)
    if state.min_opset:
        key = "ai.onnx" if "ai.onnx" in opsets and "" not in opsets else ""
        opsets[key] = max(int(opsets.get(key, 0) or 0), state.min_opset)
    return Graph(
        name=source.name,
        nodes=nodes,
        inputs=list(source.inputs),
        outputs=[_reshaped(vi, shapes) for vi in source.outputs],
        initializers=[n for n in source.initializers if n not in removed] + state.added_inits,
        value_info=value_info,
        kind=source.kind,
        opsets=opsets,
        functions=list(source.functions),
        domain=source.domain,
    )


def revision_document(doc: Document, state: EditState | None) -> Document:
    """``doc`` with its graph and tensors replaced by the revision's; ``doc`` itself when the
    revision changes nothing."""
    if state is None:
        return doc
    graph_changed = _changed(state) or bool(
        state.added_inits or state.removed_inits or state.shape_updates or state.min_opset
    )
    tensors_changed = bool(state.patches or state.new_inits or state.removed_inits)
    if not graph_changed and not tensors_changed:
        return doc
    return dataclasses.replace(
        doc,
        graph=revision_graph(state) if graph_changed else doc.graph,
        tensors=revision_tensors(state) if graph_changed or tensors_changed else doc.tensors,
        sources=[],
        notes=[*doc.notes, "showing an edited revision; the source file is unchanged"],
    )


def revision_tensors(state: EditState) -> TensorCatalog:
    """The source catalog with patches, plan initializers and rewritten Constants applied."""
    tensors = state.doc.tensors
    constants = _rewritten_constants(state)
    if not (state.patches or state.new_inits or state.removed_inits or constants):
        return tensors
    refs: list[TensorRef] = []
    for name, ref in tensors.items():
        if name in state.removed_inits:
            continue
        if name in state.new_inits:
            ref = _computed(state.new_inits[name], ref.info, "replaced by an optimization")
        elif name in constants:
            ref = _computed_constant(ref, constants[name])
        elif name in state.patches:
            ref = _patched(ref, state.patches[name])
        refs.append(ref)
    for name in state.added_inits:
        refs.append(_computed(state.new_inits[name], {"kind": "initializer"}, "added"))
    return TensorCatalog(refs)


class PatchedSource(ByteSource):
    """``base`` with byte patches ``[(absolute offset, bytes), ...]`` applied in order."""

    def __init__(self, base: ByteSource, patches: list[tuple[int, bytes]]) -> None:
        self.base = base
        self.patches = patches
        self.size = base.size
        self.path = base.path
        self.label = base.label

    def view(self, offset: int, length: int) -> memoryview:
        view = self.base.view(offset, length)
        end = offset + length
        hits = [(o, d) for o, d in self.patches if o < end and o + len(d) > offset]
        if not hits:
            return view
        buf = bytearray(view)
        for o, data in hits:
            lo, hi = max(o, offset), min(o + len(data), end)
            buf[lo - offset : hi - offset] = data[lo - o : hi - o]
        return memoryview(bytes(buf))


def _patched(ref: TensorRef, patches: list[tuple[int, bytes]]) -> TensorRef:
    base = getattr(ref.loader, "source", None)
    if ref.offset is None or not isinstance(base, ByteSource):
        return ref  # the core only patches raw ranges, which have both
    loader = copy.copy(ref.loader)
    loader.source = PatchedSource(base, [(ref.offset + o, d) for o, d in patches])  # type: ignore[attr-defined]
    return dataclasses.replace(ref, loader=loader, info={**ref.info, "patched": len(patches)})


def _computed(init: Any, info: dict[str, Any], how: str) -> TensorRef:
    """A plan's initializer (``NewInitializer``: name, dtype, shape, nbytes, array)."""
    return TensorRef(
        init.name,
        str(init.dtype),
        tuple(init.shape),
        int(init.nbytes),
        "computed",
        DecodedLoader(lambda: init.array),
        info={**info, "revision": how, **({"role": init.role} if init.role else {})},
    )


def _rewritten_constants(state: EditState) -> dict[str, onnx.TensorProto]:
    """Output name -> new tensor of edited Constant nodes whose value differs from the source."""
    out: dict[str, onnx.TensorProto] = {}
    for e in state.entries:
        p = e.proto
        if p is None or p.op_type != "Constant" or not p.output:
            continue
        attr = next((a for a in p.attribute if a.name == "value" and a.type == _A.TENSOR), None)
        if attr is None:
            continue
        if e.src is not None:
            before = state.src.node_proto(e.src)
            old = next((a for a in before.attribute if a.name == "value"), None)
            if old is not None and old.t == attr.t:
                continue
        out[p.output[0]] = attr.t
    return out


def _computed_constant(ref: TensorRef, tensor: onnx.TensorProto) -> TensorRef:
    array = numpy_helper.to_array(tensor)
    return dataclasses.replace(
        ref,
        dtype=str(array.dtype),
        shape=tuple(array.shape),
        nbytes=int(array.nbytes),
        encoding="computed",
        loader=DecodedLoader(lambda: array),
        offset=None,
        info={**ref.info, "revision": "rewritten by an optimization"},
    )


def _reshaped(vi: ValueInfo, shapes: dict[str, Any]) -> ValueInfo:
    new = shapes.get(vi.name)
    if new is None or vi.shape is None or len(vi.shape) != len(new):
        return vi
    dims = tuple(n if isinstance(n, int) else d for d, n in zip(vi.shape, new, strict=True))
    return ValueInfo(vi.name, vi.dtype, dims, vi.doc)


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
