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
            Rewire(u.node_index, u.node_name, u.input_index, base, out) for u in info.uses
        ]
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
        slots = [(u.node_index, u.node_name, u.input_index) for u in info.uses]
        _insert_pair(plan, names, info.name, scale, zp, target.axis, slots, info.ref.dtype)
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
    slots: list[tuple[int, str, int]],
    dtype: str,
) -> None:
    """QuantizeLinear(value) -> DequantizeLinear -> every slot in ``slots``."""
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
    plan.rewires += [Rewire(i, n, k, value, dq_out) for i, n, k in slots]
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
        (node.index, node.name, i)
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
    have = graph.opsets.get("", graph.opsets.get("ai.onnx", 0))
    if have and have < plan.min_opset:
        plan.notes.append(
            f"the model imports default-domain opset {have}; the inserted nodes need opset "
            f"{plan.min_opset} (raise the model's opset import when committing)"
        )


__all__ = ["qdq_plan", "weight_plan"]
