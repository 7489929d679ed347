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
- The ONNX Runtime backend reads the file through :class:`~nneditor.tracing.model_bytes.
  ModelBytes` instead (no onnx import, no weights decoded); its entries equal
  :func:`value_entries`.
"""

from __future__ import annotations

import onnx
from onnx import AttributeProto, GraphProto

from nneditor.tracing.capture import ValueEntry


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
