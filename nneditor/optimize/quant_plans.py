"""Commit plans for quantization: weight conversion and portable QDQ insertion.

Invariants:

- :func:`weight_plan`: every chosen weight ``W`` becomes ``W_quantized`` (int8/uint8, same
  shape) + ``W_scale`` + ``W_zero_point`` feeding one ``DequantizeLinear`` whose output replaces
  ``W`` at each MatMul/Gemm/Conv weight slot. ``W`` (its initializer, or its Constant node) is
  removed only when nothing else reads it (no other node, subgraph or graph output). The int8 values are produced on demand, block by
  block, with the same scale and zero point the preview showed.
- :func:`qdq_plan`: float values stay; ``QuantizeLinear -> DequantizeLinear`` pairs are inserted
  on the chosen edges: weight edges (parameters from the weights' ranges) and activation edges
  whose ranges the caller supplies (e.g. from a trace), per tensor. Graph outputs keep their
  float producer; only node inputs are rewired.
- New names never collide with existing values, initializers or node names.
- ``min_opset``: 10 (per tensor), 13 (per-axis), 19 (float16/bfloat16 scales).

Runtime note (measured with onnxruntime 1.32, CPU): with extended graph optimizations ORT may
fuse ``DequantizeLinear -> MatMul`` into ``MatMulNBits``, which also quantizes activations;
outputs then differ from the model's mathematical definition (and from the weight-only error
of the preview). With ``ORT_ENABLE_BASIC`` the committed model computes exactly
``x @ dequantized(W)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from nneditor.jobs import JobHandle
from nneditor.model.document import Document
from nneditor.model.graph import Graph
from nneditor.optimize.plans import EditPlan, NewInitializer, NewNode, Rewire
from nneditor.optimize.qmath import (
    QuantSettings,
    compute_params,
    quantize_values,
)
from nneditor.optimize.quantize import (
    MIN_ELEMENTS,
    QuantPreview,
    Target,
    select_targets,
    tensor_ranges,
)
from nneditor.optimize.weights import (
    BLOCK_ELEMS,
    NameAllocator,
    OptimizeError,
    all_value_names,
    channel_shape,
    iter_blocks,
    read_block,
    require_graph,
)

Params = tuple[np.ndarray, np.ndarray]


def weight_plan(
    doc: Document,
    settings: QuantSettings,
    tensor_names: Sequence[str] | None = None,
    *,
    preview: QuantPreview | None = None,
    handle: JobHandle | None = None,
    min_elements: int = MIN_ELEMENTS,
    block_elems: int = BLOCK_ELEMS,
) -> EditPlan:
    """Plan storing the chosen weights as 8-bit values + DequantizeLinear (see module doc)."""
    graph = require_graph(doc)
    names = NameAllocator(all_value_names(graph))
    plan = EditPlan(
        "quantize-weights", f"Store weights as {settings.describe()} + DequantizeLinear"
    )
    outputs = {vi.name for vi in graph.outputs}
    for target, (scale, zp) in _targets_with_params(
        doc, settings, tensor_names, preview, handle, min_elements, block_elems, plan
    ):
        info, axis = target.info, target.axis
        base = info.name
        q_name = names.new(f"{base}_quantized")
        s_name, z_name = names.new(f"{base}_scale"), names.new(f"{base}_zero_point")
        out = names.new(f"{base}_dequantized")
        plan.new_initializers += [
            NewInitializer(
                q_name,
                settings.qdtype_name,
                info.shape,
                _q_producer(target, scale, zp, settings, block_elems),
                f"quantized values of {base}",
            ),
            NewInitializer.of(s_name, scale, f"scale of {base}"),
            NewInitializer.of(z_name, zp, f"zero point of {base}"),
        ]
        first = min(u.node_index for u in info.uses)
        plan.nodes.append(
            NewNode(
                names.new(f"{base}_DequantizeLinear"),
                "DequantizeLinear",
                (q_name, s_name, z_name),
                (out,),
                {"axis": axis} if axis is not None else {},
                insert_before=first,
            )
        )
        plan.rewires += [
            Rewire(u.node_index, u.node_name, u.input_index, u.value or base, out)
            for u in info.uses
        ]
        plan.remove_nodes.extend(info.aliases)  # Identity copies nobody reads any more
        if info.other_readers or base in outputs:
            plan.notes.append(
                f"{base} stays stored as floats too: it is also read by "
                f"{', '.join(info.other_readers) or 'a graph output'}"
            )
        elif info.constant_node is not None:
            plan.remove_nodes.append(info.constant_node)
        else:
            plan.remove_initializers.append(base)
        plan.min_opset = max(plan.min_opset, _opset_for(info.ref.dtype, axis))
    _note_opset(graph, plan)
    return plan


def qdq_plan(
    doc: Document,
    settings: QuantSettings,
    tensor_names: Sequence[str] | None = None,
    *,
    activations: Mapping[str, tuple[float, float]] | None = None,
    preview: QuantPreview | None = None,
    handle: JobHandle | None = None,
    min_elements: int = MIN_ELEMENTS,
    block_elems: int = BLOCK_ELEMS,
) -> EditPlan:
    """Plan inserting QuantizeLinear/DequantizeLinear pairs (see module docstring).

    ``tensor_names=[]`` selects no weight edges (activations only); ``None`` selects all
    eligible weights. ``activations`` maps value names to their observed ``(min, max)``.
    """
    graph = require_graph(doc)
    names = NameAllocator(all_value_names(graph))
    plan = EditPlan("quantize-qdq", f"Insert {settings.describe()} QuantizeLinear/DequantizeLinear")
    for target, (scale, zp) in _targets_with_params(
        doc, settings, tensor_names, preview, handle, min_elements, block_elems, plan
    ):
        info = target.info
        slots = [
            (u.node_index, u.node_name, u.input_index, u.value or info.name) for u in info.uses
        ]
        _insert_pair(plan, names, info.name, scale, zp, target.axis, slots, info.ref.dtype)
        plan.remove_nodes.extend(info.aliases)  # Identity copies nobody reads any more
    for value, (rmin, rmax) in (activations or {}).items():
        _plan_activation(plan, names, graph, value, rmin, rmax, settings)
    _note_opset(graph, plan)
    return plan


# -- shared pieces ---------------------------------------------------------------------------


def _targets_with_params(
    doc: Document,
    settings: QuantSettings,
    tensor_names: Sequence[str] | None,
    preview: QuantPreview | None,
    handle: JobHandle | None,
    min_elements: int,
    block_elems: int,
    plan: EditPlan,
) -> list[tuple[Target, Params]]:
    handle = handle or JobHandle()
    if tensor_names is not None and len(tensor_names) == 0:
        return []
    targets, skipped = select_targets(doc, settings, tensor_names, min_elements)
    plan.notes += [f"{s['name']} is not quantized: {s['reason']}" for s in skipped]
    known = {}
    if preview is not None and preview.settings == settings:
        known = {t.name: (t.axis, t.scale, t.zero_point) for t in preview.tensors}
    progress = [0, sum(t.info.ref.size for t in targets)]
    out: list[tuple[Target, Params]] = []
    for target in targets:
        cached = known.get(target.info.name)
        if cached is not None and cached[0] == target.axis:
            out.append((target, (cached[1], cached[2])))
            continue
        ranges = tensor_ranges(target.info, target.axis, handle, progress, block_elems)
        if isinstance(ranges, str):
            plan.notes.append(f"{target.info.name} is not quantized: {ranges}")
            continue
        scale, zp = compute_params(ranges[0], ranges[1], settings, target.info.ref.dtype)
        if target.axis is None:
            scale, zp = scale.reshape(()), zp.reshape(())
        out.append((target, (scale, zp)))
    return out


def _q_producer(
    target: Target,
    scale: np.ndarray,
    zp: np.ndarray,
    settings: QuantSettings,
    block_elems: int,
) -> Callable[[], np.ndarray]:
    """A function computing the quantized tensor block by block (one int8 output array)."""

    def produce() -> np.ndarray:
        ref, axis = target.info.ref, target.axis
        out = np.empty(ref.shape, dtype=settings.qdtype)
        for block in iter_blocks(ref.shape, block_elems):
            x = read_block(ref, block)
            if axis is None:
                s_b, z_b = scale, zp
            else:
                sl, shp = block.channel_slice(axis), channel_shape(x.ndim, axis)
                s_b, z_b = scale[sl].reshape(shp), zp[sl].reshape(shp)
            out[block.key()] = quantize_values(x, s_b, z_b, settings)[0]
        return out

    return produce


def _insert_pair(
    plan: EditPlan,
    names: NameAllocator,
    value: str,
    scale: np.ndarray,
    zp: np.ndarray,
    axis: int | None,
    slots: list[tuple[int, str, int, str]],
    dtype: str,
) -> None:
    """QuantizeLinear(value) -> DequantizeLinear -> every slot in ``slots`` (node index, node
    name, input index, the value it reads now: ``value`` or an Identity copy of it)."""
    s_name, z_name = names.new(f"{value}_scale"), names.new(f"{value}_zero_point")
    q_out, dq_out = names.new(f"{value}_quantized"), names.new(f"{value}_dequantized")
    plan.new_initializers += [
        NewInitializer.of(s_name, scale, f"scale of {value}"),
        NewInitializer.of(z_name, zp, f"zero point of {value}"),
    ]
    attrs = {"axis": axis} if axis is not None else {}
    first = min(s[0] for s in slots)
    plan.nodes += [
        NewNode(
            names.new(f"{value}_QuantizeLinear"),
            "QuantizeLinear",
            (value, s_name, z_name),
            (q_out,),
            dict(attrs),
            insert_before=first,
        ),
        NewNode(
            names.new(f"{value}_DequantizeLinear"),
            "DequantizeLinear",
            (q_out, s_name, z_name),
            (dq_out,),
            dict(attrs),
            insert_before=first,
        ),
    ]
    plan.rewires += [Rewire(i, n, k, old, dq_out) for i, n, k, old in slots]
    plan.min_opset = max(plan.min_opset, _opset_for(dtype, axis))


def _plan_activation(
    plan: EditPlan,
    names: NameAllocator,
    graph: Graph,
    value: str,
    rmin: float,
    rmax: float,
    settings: QuantSettings,
) -> None:
    consumers = graph.consumers().get(value, [])
    if not consumers:
        raise OptimizeError(
            f"value {value!r} is not read by any node of the main graph, so there is no edge "
            "to put QuantizeLinear/DequantizeLinear on"
        )
    if not (np.isfinite(rmin) and np.isfinite(rmax)) or rmin > rmax:
        raise OptimizeError(
            f"the range given for {value!r} ({rmin}, {rmax}) is not a finite (min, max) pair"
        )
    vi = graph.value_type(value)
    dtype = vi.dtype if vi is not None and vi.dtype else "float32"
    if dtype not in ("float32", "float16", "bfloat16"):
        raise OptimizeError(
            f"value {value!r} has dtype {dtype}; QuantizeLinear takes float32, float16 or bfloat16"
        )
    if vi is None or not vi.dtype:
        plan.notes.append(f"the dtype of {value} is not declared; float32 scales are assumed")
    if settings.per_channel:
        plan.notes.append(f"{value} is an activation: it is quantized per tensor")
    per_tensor = QuantSettings(settings.signed, settings.symmetric, False)
    scale, zp = compute_params(np.asarray(rmin), np.asarray(rmax), per_tensor, dtype)
    slots = [
        (node.index, node.name, i, value)
        for node in consumers
        for i, inp in enumerate(node.inputs)
        if inp == value
    ]
    _insert_pair(plan, names, value, scale.reshape(()), zp.reshape(()), None, slots, dtype)
    if any(vi.name == value for vi in graph.outputs):
        plan.notes.append(f"{value} is also a graph output; the output keeps the float values")


def _opset_for(dtype: str, axis: int | None) -> int:
    if dtype in ("float16", "bfloat16"):
        return 19
    return 13 if axis is not None else 10


def _note_opset(graph: Graph, plan: EditPlan) -> None:
    """Raising the model's opset import to what the inserted nodes need is done at commit only
    where it changes nothing else: every default-domain operator the graph uses (subgraphs
    included) must keep the same schema version. Otherwise refuse, naming the operators."""
    have = graph.opsets.get("", graph.opsets.get("ai.onnx", 0))
    need = plan.min_opset
    if not have or have >= need:
        return
    changed = _ops_changed_between(graph, have, need)
    if changed:
        raise OptimizeError(
            f"this model imports ONNX opset {have}, and the inserted QuantizeLinear/"
            f"DequantizeLinear nodes need opset {need} ({_why_opset(need)}); raising the opset "
            f"would change how {len(changed)} operator type(s) of the model are read "
            f"({', '.join(changed[:8])}{'…' if len(changed) > 8 else ''}). Convert the model to "
            f"opset {need} first (onnx.version_converter.convert_version(model, {need})), or "
            + ("quantize per tensor (without --per-channel)" if need == 13 else "use float32")
        )
    plan.notes.append(
        f"the model's opset import is raised from {have} to {need} (none of its operators "
        "changed between the two)"
    )


def _why_opset(need: int) -> str:
    return {
        10: "QuantizeLinear first appeared in opset 10",
        13: "a per-channel axis needs opset 13",
        19: "float16/bfloat16 scales need opset 19",
    }.get(need, "schema versions")


#: operators whose meaning changed in a new version without a change of signature (opset 13:
#: Softmax and its kin reduce over one axis instead of flattening to 2-D)
_SEMANTIC_CHANGES = frozenset({"Softmax", "LogSoftmax", "Hardmax"})


def _ops_changed_between(graph: Graph, have: int, need: int) -> list[str]:
    """Default-domain operator types of ``graph`` (subgraphs included) that would be read
    differently at opset ``need``: a newer schema with other attributes, inputs or outputs
    (Squeeze's axes became an input in 13), or a known change of meaning. A newer schema that
    only admits more types (Add, MatMul... in 13 gained bfloat16) reads the same."""
    import onnx.defs  # only when an opset must be raised

    def signature(schema: onnx.defs.OpSchema) -> tuple[object, ...]:
        # names only: an input that became optional (Resize's roi in 13) reads the same
        return (
            sorted(schema.attributes),
            [i.name for i in schema.inputs],
            [o.name for o in schema.outputs],
        )

    used = sorted({n.op_type for n, _owner in graph.walk() if n.domain in ("", "ai.onnx")})
    changed = []
    for op in used:
        try:
            old = onnx.defs.get_schema(op, have, "")
            new = onnx.defs.get_schema(op, need, "")
        except onnx.defs.SchemaError:
            changed.append(op)  # unknown to onnx: cannot prove it unchanged
            continue
        if old.since_version != new.since_version and (
            op in _SEMANTIC_CHANGES or signature(old) != signature(new)
        ):
            changed.append(op)
    return changed


__all__ = ["qdq_plan", "weight_plan"]
