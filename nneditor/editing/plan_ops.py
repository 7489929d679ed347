"""Committing quantization and pruning plans as revisions.

A plan change is journaled by its *settings* (``{"op": "apply_plan", "plan": {...}}``), never
by its arrays: replaying recomputes the plan from the untouched source, which is deterministic.
:func:`build_plan` maps the settings to an :class:`~nneditor.optimize.plans.EditPlan`;
:func:`apply_plan` applies one to an :class:`~nneditor.editing.onnx_edits.EditState`.

Plans are computed against the source document, so a plan refuses to apply over edits that
already replaced or removed the tensors it touches ("already quantized").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from onnx import numpy_helper

from nneditor.editing.onnx_edits import EditError, Entry

if TYPE_CHECKING:
    from nneditor.editing.onnx_edits import EditState
    from nneditor.model.document import Document
    from nneditor.optimize.plans import EditPlan


def build_plan(doc: Document, spec: dict[str, Any]) -> EditPlan:
    """The EditPlan described by ``spec`` (see module docstring). Raises EditError."""
    from nneditor.optimize.prune import NM, Masks, Threshold, prune_plan
    from nneditor.optimize.qmath import QuantSettings
    from nneditor.optimize.quant_plans import qdq_plan, weight_plan
    from nneditor.optimize.weights import OptimizeError

    kind = spec.get("kind")
    tensors = spec.get("tensors")
    try:
        if kind == "quantize":
            settings = QuantSettings(
                signed=bool(spec.get("signed", True)),
                symmetric=bool(spec.get("symmetric", True)),
                per_channel=bool(spec.get("per_channel", False)),
            )
            fn = qdq_plan if spec.get("mode") == "qdq" else weight_plan
            return fn(doc, settings, tensors)
        if kind == "prune":
            method = spec.get("method")
            if method == "threshold":
                return prune_plan(doc, Threshold(float(spec["threshold"])), tensors)
            if method == "nm":
                return prune_plan(doc, NM(int(spec["n"]), int(spec["m"])), tensors)
            if method == "mask":
                return prune_plan(doc, Masks(dict(spec["masks"])), tensors)
            if method == "channels":
                from nneditor.optimize.channel_prune import channel_prune_plan

                return channel_prune_plan(doc, spec["node"], [int(c) for c in spec["channels"]])
        raise EditError(f"unknown optimization plan {spec!r}")
    except OptimizeError as exc:
        raise EditError(str(exc)) from None


def apply_plan(state: EditState, plan: EditPlan) -> None:
    touched = {i.name for i in (*plan.replace_initializers, *plan.replace_constants)}
    touched |= set(plan.remove_initializers)
    clash = sorted(touched & (set(state.new_inits) | state.removed_inits))
    if clash:
        raise EditError(
            f"{clash[0]!r} was already replaced by an earlier optimization in this revision chain; "
            "undo it first (plans are computed from the source model)"
        )
    by_src = {e.src: k for k, e in enumerate(state.entries) if e.src is not None}
    for init in plan.replace_initializers:
        state.new_inits[init.name] = init
        state.patches.pop(init.name, None)
    existing = set(state.doc.tensors.keys())
    for init in plan.new_initializers:
        if init.name in existing or init.name in state.new_inits:
            raise EditError(f"the plan adds {init.name!r}, which already exists")
        state.new_inits[init.name] = init
        state.added_inits.append(init.name)
    for init in plan.replace_constants:
        k = _constant_entry(state, init.name)
        proto = state.proto(k)
        attr = next((a for a in proto.attribute if a.name == "value"), None)
        if attr is None:
            raise EditError(f"the Constant producing {init.name!r} has no tensor value to replace")
        attr.t.CopyFrom(numpy_helper.from_array(init.array, init.name))
    for rw in plan.rewires:
        at = by_src.get(rw.node_index)
        if at is None:
            raise EditError(f"node {rw.node_name!r} was removed by an earlier edit; undo it first")
        proto = state.proto(at)
        if rw.input_index >= len(proto.input) or proto.input[rw.input_index] != rw.old_value:
            raise EditError(f"node {rw.node_name!r} was changed by an earlier edit; undo it first")
        proto.input[rw.input_index] = rw.new_value
    state.removed_inits.update(plan.remove_initializers)
    inserts: dict[int, list[Any]] = {}
    from onnx import helper

    for n in plan.nodes:
        node = helper.make_node(
            n.op_type, list(n.inputs), list(n.outputs), name=n.name, domain=n.domain, **n.attrs
        )
        inserts.setdefault(n.insert_before, []).append(node)
    removed = set(plan.remove_nodes)
    entries: list[Entry] = []
    for e in state.entries:
        if e.src is not None:
            for node in inserts.pop(e.src, []):
                entries.append(Entry(None, node))
            if e.src in removed:
                continue
        entries.append(e)
    for leftover in inserts.values():
        entries.extend(Entry(None, node) for node in leftover)
    state.entries = entries
    for su in plan.shape_updates:
        state.shape_updates[su.value] = su.new_shape
    state.min_opset = max(state.min_opset, plan.min_opset)
    state.log.append(plan.description)
    state.log.extend(plan.notes)


def _constant_entry(state: EditState, value: str) -> int:
    for k in range(len(state.entries)):
        _name, op, _dom, _ins, outs = state.header(k)
        if op == "Constant" and value in outs:
            return k
    raise EditError(f"no Constant node produces {value!r}")
