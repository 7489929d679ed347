"""The worker's private model copy: which values exist, and exposing them as graph outputs.

Invariants:

- The source model is read (mapped by :class:`ModelBytes`, or ``onnx.load`` for the reference
  evaluator) but never written; every change happens in memory, nothing is saved.
- :func:`value_entries` lists graph inputs, then node outputs in node order; values computed
  inside If/Loop/Scan bodies are listed (scope = the owning node path) so that they can be
  reported as not captured rather than silently missing.
- Exposed outputs carry the declared or inferred element type when known and no type otherwise
  (ONNX Runtime accepts untyped graph outputs); shapes are never asserted.
- For models with external data the copy keeps the original relative locations; the runtime is
  pointed at the model's own folder (ORT session option), so nothing is copied or linked.
- :class:`ModelBytes` never decodes the entry graph's weights: its structure is parsed from the
  wire without initializer payloads, and the session bytes are the source bytes followed by a
  small ModelProto holding only the extra graph outputs. Protobuf merges a repeated embedded
  message field on parse (the second ``graph`` field appends its outputs to the first), so the
  runtime reads exactly the source model plus the exposed outputs, with no re-encoding.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import onnx
from onnx import AttributeProto, GraphProto

from nneditor.artifacts.onnx import wire_index as w
from nneditor.tracing.capture import ValueEntry

_M_GRAPH = 7
_G_INITIALIZER = 5
_T_NAME = 8


def value_entries(
    model: onnx.ModelProto, initializers: set[str] | frozenset[str] = frozenset()
) -> list[ValueEntry]:
    """Graph inputs (not initializers) and every node output, nested ones with their scope.

    ``initializers`` names entry-graph initializers the model was parsed without (see
    :class:`ModelBytes`)."""
    graph = model.graph
    inits = {i.name for i in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
    inits |= initializers
    out = [ValueEntry(vi.name, "", "", "") for vi in graph.input if vi.name not in inits]
    seen = {e.name for e in out}
    _walk(graph, "", False, out, seen)
    return out


def _walk(
    graph: GraphProto, scope: str, in_loop: bool, out: list[ValueEntry], seen: set[str]
) -> None:
    for i, node in enumerate(graph.node):
        label = node.name or f"{node.op_type}_{i}"
        looping = in_loop or node.op_type in ("Loop", "Scan")
        for attr in node.attribute:
            kind = attr.type
            if kind != AttributeProto.GRAPH and kind != AttributeProto.GRAPHS:
                continue
            subs = [attr.g] if kind == AttributeProto.GRAPH else list(attr.graphs)
            for k, sub in enumerate(subs):
                tag = attr.name if attr.type == AttributeProto.GRAPH else f"{attr.name}[{k}]"
                inner = f"{scope}/{label}/{tag}" if scope else f"{label}/{tag}"
                _walk(sub, inner, looping, out, seen)
        for name in node.output:
            if name and name not in seen:
                seen.add(name)
                out.append(ValueEntry(name, scope, label, node.op_type, in_loop))


def has_external_data(model: onnx.ModelProto) -> bool:
    def graph_has(g: GraphProto) -> bool:
        for t in g.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                return True
        for node in g.node:
            for attr in node.attribute:
                if (
                    attr.type == AttributeProto.TENSOR
                    and attr.t.data_location == onnx.TensorProto.EXTERNAL
                ):
                    return True
                for sub in [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs):
                    if graph_has(sub):
                        return True
        return False

    return graph_has(model.graph)


def known_types(model: onnx.ModelProto, infer: bool = True) -> dict[str, onnx.TypeProto]:
    """Element types of main-graph values: declared value_info first, then shape inference."""
    types: dict[str, onnx.TypeProto] = {}
    if infer:
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
            for vi in inferred.graph.value_info:
                types[vi.name] = vi.type
        except Exception:  # inference is a convenience; untyped outputs work too
            pass
    for vi in (*model.graph.value_info, *model.graph.output, *model.graph.input):
        if vi.type.WhichOneof("value") is not None:
            types[vi.name] = vi.type
    return types


def expose_outputs(
    model: onnx.ModelProto, names: list[str], infer_types: bool = False
) -> list[str]:
    """Add ``names`` (main-graph values) as graph outputs; returns all output names in order.

    Without ``infer_types`` only declared types are used (shape inference can take longer
    than the inference itself); untyped outputs are accepted by current ONNX Runtime.
    Calling it again with ``infer_types=True`` fills in the missing element types.
    """
    existing = [o.name for o in model.graph.output]
    exposed = set(existing)
    types = known_types(model, infer_types) if names else {}
    for out in model.graph.output:
        t = types.get(out.name)
        if out.type.WhichOneof("value") is None and t is not None and t.HasField("tensor_type"):
            out.type.tensor_type.elem_type = t.tensor_type.elem_type
    wanted = [n for n in names if n not in exposed]
    for name in wanted:
        vi = onnx.ValueInfoProto(name=name)
        t = types.get(name)
        if t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type:
            vi.type.tensor_type.elem_type = t.tensor_type.elem_type
        model.graph.output.append(vi)
    return existing + wanted


class ModelBytes:
    """A read-only map of an ONNX file: structure without entry-graph weights, session bytes.

    The file is mapped, not read: its pages are shared with the page cache. Hand-written
    because onnx can only parse a whole ModelProto (weights included), which costs more than
    the runtime's own load for a weight-heavy model.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            size = fh.seek(0, 2)
            if size == 0:
                raise ValueError(f"{self.path} is empty; it holds no ONNX model")
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        buf = memoryview(self._map)
        try:
            top = w.scan(buf, 0, size, "the model")
            graphs = [f for f in top if f[0] == _M_GRAPH and f[1] == w.LEN]
            if len(graphs) != 1:
                raise ValueError(f"{self.path} does not hold exactly one graph")
            model = onnx.ModelProto.FromString(
                b"".join(buf[f[2] : _end(f)] for f in top if f[0] != _M_GRAPH)
            )
            _f, _wt, _at, gpos, glen = graphs[0]
            kept, names = [], set()
            for f in w.scan(buf, gpos, gpos + glen, "the graph"):
                if f[0] == _G_INITIALIZER and f[1] == w.LEN:
                    names.add(_tensor_name(buf, f))
                else:
                    kept.append(buf[f[2] : _end(f)])
            model.graph.MergeFromString(b"".join(kept))
        finally:
            buf.release()
        self.structure = model
        self.initializer_names = frozenset(names)

    def with_outputs(self, names: list[str]) -> tuple[bytes, list[str]]:
        """Session bytes exposing ``names`` as extra (untyped) graph outputs, and every output
        name in order."""
        existing = [o.name for o in self.structure.graph.output]
        have = set(existing)
        wanted = [n for n in names if n not in have]
        extra = onnx.ModelProto(
            graph=onnx.GraphProto(output=[onnx.ValueInfoProto(name=n) for n in wanted])
        ).SerializeToString()
        return b"".join((self._map, extra)), existing + wanted

    def close(self) -> None:
        """Unmap the file (idempotent); :attr:`structure` stays usable."""
        self._map.close()


def _end(f: w.Field) -> int:
    return f[3] if f[1] == w.VARINT else f[3] + f[4]


def _tensor_name(buf: memoryview, f: w.Field) -> str:
    for sub in w.scan(buf, f[3], f[3] + f[4], "an initializer"):
        if sub[0] == _T_NAME and sub[1] == w.LEN:
            return w.text(buf, sub[3], sub[4])
    return ""
