"""Quantization and pruning plans from their journaled settings.

A plan change is journaled by its *settings* (``{"op": "apply_plan", "plan": {...}}``), never
by its arrays: replaying recomputes the plan from the untouched source, which is deterministic.
:func:`build_plan` maps the settings to an :class:`~nneditor.optimize.plans.EditPlan`; the
edit state (:mod:`nneditor.editing.onnx_edits`) applies it like any other change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nneditor.errors import EditError

if TYPE_CHECKING:
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
