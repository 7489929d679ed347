"""Declared or inferred dtype/shape of every value of an ONNX entry graph, for display.

Exporters often omit value_info, leaving intermediate values untyped. onnx's shape inference
over the weight-free skeleton (initializers as typed inputs, no payloads) fills them in without
loading any weights. Inference is best effort: values it cannot type stay unknown.
"""

from __future__ import annotations

import onnx

from nneditor.editing.onnx_edits import EditState
from nneditor.editing.onnx_source import SourceModel, skeleton
from nneditor.model.document import Document
from nneditor.model.graph import ValueInfo


def infer_value_types(doc: Document) -> dict[str, ValueInfo]:
    """Value name -> ValueInfo for the document's entry graph ({} when not ONNX)."""
    if doc.format != "onnx" or doc.graph is None:
        return {}
    from nneditor.artifacts.onnx.elem_types import value_info_from_proto

    src = SourceModel(doc.path)
    try:
        state = EditState.from_source(src, doc)
        types = state.init_types()
        model = skeleton(src, state.protos(), types)
        _embed_small_constants(model, doc, types)
        try:
            inferred = onnx.shape_inference.infer_shapes(
                model, check_type=False, strict_mode=False, data_prop=True
            )
        except Exception:  # inference is a convenience; an unusual model simply stays untyped
            return {}
        out: dict[str, ValueInfo] = {}
        for vi in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output):
            info = value_info_from_proto(vi)
            if info.dtype is not None:
                out[info.name] = info
        return out
    finally:
        src.close()


def _embed_small_constants(
    model: onnx.ModelProto, doc: Document, types: dict[str, tuple[int, list[int]]]
) -> None:
    """Give shape inference the values of tiny initializers (Reshape targets, axes...)."""
    from onnx import numpy_helper

    small = []
    for name in types:
        ref = doc.tensors.get(name)
        if ref is not None and ref.size <= 64 and ref.dtype.startswith(("int", "float")):
            try:
                small.append(numpy_helper.from_array(ref.read(), name))
            except Exception:  # an unreadable constant just stays symbolic
                continue
    names = {t.name for t in small}
    kept = [vi for vi in model.graph.input if vi.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.graph.initializer.extend(small)
