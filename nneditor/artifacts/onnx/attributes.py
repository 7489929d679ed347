"""Node attributes, decoded on demand into plain Python values.

Value mapping: FLOAT -> float, INT -> int, STRING -> str, TENSOR -> TensorRef, GRAPH -> Graph
(the node's subgraph), SPARSE_TENSOR -> TensorRef (densified on read), TYPE_PROTO -> str,
list kinds -> lists of those. An attribute referring to a function attribute
(``ref_attr_name``) becomes an :class:`AttributeRef`.

Small attributes are parsed with ``pb.AttributeProto.FromString``; attributes that carry
tensors or graphs in nodes indexed from the wire keep byte ranges (see :class:`WireAttribute`),
so a Constant's 500 MB tensor is never copied to be shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from nneditor.artifacts.onnx import protos as pb
from nneditor.artifacts.onnx import wire_index as w
from nneditor.artifacts.onnx.elem_types import describe_type
from nneditor.artifacts.onnx.objects import OnnxNode, as_text
from nneditor.artifacts.onnx.tensor_index import index_sparse, index_tensor
from nneditor.artifacts.onnx.tensors import TensorContext, make_ref, make_sparse_ref
from nneditor.errors import ArtifactError
from nneditor.io.source import MemorySource

A = pb.AttributeProto
GRAPH_KINDS = (A.GRAPH, A.GRAPHS)


@dataclass(frozen=True, slots=True)
class AttributeRef:
    """An attribute inside a function body that takes the caller's attribute ``name``."""

    name: str

    def __str__(self) -> str:
        return f"@{self.name}"


@dataclass(slots=True)
class WireAttribute:
    """One AttributeProto of a node indexed from the wire: name, type and payload ranges."""

    name: str
    type: int
    start: int
    length: int
    tensors: list[tuple[int, int]] = field(default_factory=list)  # t (5) / tensors (10)
    sparse: list[tuple[int, int]] = field(default_factory=list)  # 22 / 23
    graphs: list[tuple[int, int]] = field(default_factory=list)  # g (6) / graphs (11)
    listed: bool = False  # the tensor/graph values came from a repeated field

    @property
    def heavy(self) -> bool:
        return bool(self.tensors or self.sparse or self.graphs)


def scan_attribute(buf: memoryview | bytes, start: int, length: int, what: str) -> WireAttribute:
    attr = WireAttribute("", 0, start, length)
    for fno, wt, _at, pos, n in w.scan(buf, start, start + length, what):
        if wt == w.LEN:
            if fno == 1:
                attr.name = w.text(buf, pos, n)
            elif fno in (5, 10):
                attr.tensors.append((pos, n))
                attr.listed |= fno == 10
            elif fno in (6, 11):
                attr.graphs.append((pos, n))
                attr.listed |= fno == 11
            elif fno in (22, 23):
                attr.sparse.append((pos, n))
                attr.listed |= fno == 23
        elif wt == w.VARINT and fno == 20:
            attr.type = n
    return attr


def graph_keys(attr: WireAttribute) -> list[str]:
    """Keys of ``node.subgraphs`` for an attribute's graphs: ``name`` or ``name[i]``."""
    if attr.listed:
        return [f"{attr.name}[{i}]" for i in range(len(attr.graphs))]
    return [attr.name] * min(1, len(attr.graphs))


def decode_wire_attributes(
    node: OnnxNode, attrs: list[WireAttribute], ctx: TensorContext, known: dict[str, Any]
) -> dict[str, Any]:
    """The attributes dict of a wire-indexed node. ``known``: values already built (tensors)."""
    buf = None
    out: dict[str, Any] = {}
    for attr in attrs:
        if attr.name in known:
            out[attr.name] = known[attr.name]
        elif attr.graphs:
            graphs = [node.subgraphs[k] for k in graph_keys(attr) if k in node.subgraphs]
            out[attr.name] = graphs if attr.listed else (graphs[0] if graphs else None)
        elif attr.tensors or attr.sparse:
            if buf is None:
                buf = ctx.source.view(0, ctx.source.size)
            out[attr.name] = _wire_tensors(buf, attr, ctx, node)
        else:
            data = ctx.source.read(attr.start, attr.length)
            try:
                proto = A.FromString(data)
            except DecodeError as exc:
                raise ArtifactError(
                    f"attribute {attr.name!r} of node {node.name!r} cannot be decoded ({exc})",
                    offset=attr.start,
                ) from None
            out[attr.name] = attribute_value(proto, ctx, node)
    return out


def _wire_tensors(buf: memoryview, attr: WireAttribute, ctx: TensorContext, node: OnnxNode) -> Any:
    refs = []
    for i, (pos, n) in enumerate(attr.tensors):
        what = f"tensor of attribute {attr.name!r} of node {node.name!r}"
        label = f"{node.name or node.op_type}.{attr.name}" + (f"[{i}]" if attr.listed else "")
        refs.append(make_ref(ctx, index_tensor(buf, pos, n, what), label, {"kind": "attribute"}))
    for i, (pos, n) in enumerate(attr.sparse):
        what = f"sparse tensor of attribute {attr.name!r} of node {node.name!r}"
        label = f"{node.name or node.op_type}.{attr.name}" + (f"[{i}]" if attr.listed else "")
        refs.append(
            make_sparse_ref(ctx, index_sparse(buf, pos, n, what), label, {"kind": "attribute"})
        )
    return refs if attr.listed else refs[0]


class NodeDecoder:
    """Decodes the attributes of one graph's nodes parsed by protobuf (``OnnxNode._decode``);
    ``protos`` are those parsed NodeProtos, in stored order without the wire-indexed ones."""

    __slots__ = ("protos", "ctx")

    def __init__(self, protos: Any, ctx: TensorContext) -> None:
        self.protos = protos
        self.ctx = ctx

    def __call__(self, node: OnnxNode) -> dict[str, Any]:
        return proto_attributes(node, self.ctx)


def proto_attributes(node: OnnxNode, ctx: TensorContext) -> dict[str, Any]:
    """The attributes dict of a node parsed by protobuf (``node._message()``)."""
    out: dict[str, Any] = {}
    proto = node._message()
    if proto is None:
        return out
    for attr in proto.attribute:
        out[as_text(attr.name)] = attribute_value(attr, ctx, node)
    return out


def attribute_value(attr: Any, ctx: TensorContext, node: OnnxNode) -> Any:
    """Decode one parsed AttributeProto."""
    name = as_text(attr.name)
    if attr.ref_attr_name:
        return AttributeRef(as_text(attr.ref_attr_name))
    kind = attr.type or _infer_type(attr)
    if kind == A.FLOAT:
        return float(attr.f)
    if kind == A.INT:
        return int(attr.i)
    if kind == A.STRING:
        return as_text(attr.s)
    if kind == A.FLOATS:
        return [float(x) for x in attr.floats]
    if kind == A.INTS:
        return list(attr.ints)
    if kind == A.STRINGS:
        return [as_text(s) for s in attr.strings]
    if kind in (A.TENSOR, A.TENSORS, A.SPARSE_TENSOR, A.SPARSE_TENSORS):
        return _proto_tensors(attr, kind, ctx, node, name)
    if kind in GRAPH_KINDS:
        graphs = [g for k, g in node.subgraphs.items() if k == name or k.startswith(f"{name}[")]
        if kind == A.GRAPH:
            return graphs[0] if graphs else f"graph {as_text(attr.g.name)!r}"
        return graphs or [f"graph {as_text(g.name)!r}" for g in attr.graphs]
    if kind == A.TYPE_PROTO:
        return describe_type(attr.tp)
    if kind == A.TYPE_PROTOS:
        return [describe_type(t) for t in attr.type_protos]
    return None


def _infer_type(attr: Any) -> int:
    """IR v1 attributes may omit ``type``; infer it from the field that is set."""
    for fld, kind in (("f", A.FLOAT), ("i", A.INT), ("s", A.STRING), ("t", A.TENSOR)):
        if attr.HasField(fld):
            return kind
    if attr.HasField("g"):
        return A.GRAPH
    for fld, kind in (
        ("floats", A.FLOATS),
        ("ints", A.INTS),
        ("strings", A.STRINGS),
        ("tensors", A.TENSORS),
        ("graphs", A.GRAPHS),
    ):
        if len(getattr(attr, fld)):
            return kind
    return A.UNDEFINED


def _proto_tensors(attr: Any, kind: int, ctx: TensorContext, node: OnnxNode, name: str) -> Any:
    base = f"{node.name or node.op_type}.{name}"
    if kind == A.TENSOR:
        return proto_tensor_ref(attr.t, base, ctx)
    if kind == A.TENSORS:
        return [proto_tensor_ref(t, f"{base}[{i}]", ctx) for i, t in enumerate(attr.tensors)]
    if kind == A.SPARSE_TENSOR:
        return proto_sparse_ref(attr.sparse_tensor, base, ctx)
    return [proto_sparse_ref(t, f"{base}[{i}]", ctx) for i, t in enumerate(attr.sparse_tensors)]


def _memory_context(ctx: TensorContext, data: bytes) -> TensorContext:
    return TensorContext(MemorySource(data), ctx.external, ctx.token, ctx.notes, in_file=False)


def proto_tensor_ref(tensor: Any, label: str, ctx: TensorContext) -> Any:
    """TensorRef for a TensorProto already parsed into memory (small attribute tensors)."""
    data = tensor.SerializeToString()
    mem = _memory_context(ctx, data)
    return make_ref(mem, index_tensor(data, 0, len(data), label), label, {"kind": "attribute"})


def proto_sparse_ref(sparse: Any, label: str, ctx: TensorContext) -> Any:
    data = sparse.SerializeToString()
    mem = _memory_context(ctx, data)
    return make_sparse_ref(
        mem, index_sparse(data, 0, len(data), label), label, {"kind": "attribute"}
    )
