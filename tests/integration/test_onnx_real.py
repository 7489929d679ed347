"""The ONNX reader on real models shipped in PyPI wheels, checked against onnx.load."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from nneditor.artifacts.onnx.reader import open_document
from nneditor.model.graph import Graph, ValueInfo

pytestmark = pytest.mark.realdata

#: name -> (top-level nodes, nodes including nested subgraphs), from TESTDATA.md
MODELS = {
    "silero_vad.onnx": (5, 689),
    "silero_vad_16k_op15.onnx": (121, 350),
    "ch_PP-OCRv4_rec_infer.onnx": (860, 860),
    "ch_PP-OCRv4_det_infer.onnx": (672, 672),
}


def _count(graph: onnx.GraphProto) -> int:
    total = 0
    for node in graph.node:
        total += 1
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                total += _count(a.g)
            for g in a.graphs:
                total += _count(g)
    return total


def _tensors(graph: onnx.GraphProto, out: list[tuple[str, np.ndarray]]) -> list:
    """Every initializer and Constant tensor, depth first in stored order."""
    for t in graph.initializer:
        out.append((t.name, numpy_helper.to_array(t)))
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for a in node.attribute:
                if a.name == "value":
                    out.append((node.output[0], numpy_helper.to_array(a.t)))
                elif a.name.startswith("value_"):
                    out.append((node.output[0], np.array(onnx.helper.get_attribute_value(a))))
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _tensors(a.g, out)
            for g in a.graphs:
                _tensors(g, out)
    return out


def _value_info(vi: onnx.ValueInfoProto) -> tuple[str, str | None, tuple | None]:
    tt = vi.type.tensor_type
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
    shape = None
    if tt.HasField("shape"):
        # a dim named "?" (Paddle2ONNX's unknown extent) is read as unknown, not as a symbol
        shape = tuple(
            d.dim_value
            if d.HasField("dim_value")
            else (d.dim_param if d.HasField("dim_param") and d.dim_param != "?" else None)
            for d in tt.shape.dim
        )
    return vi.name, dtype, shape


def _same_nodes(ours: Graph, ref: onnx.GraphProto) -> None:
    """Nodes, their plain attributes and nested subgraphs agree with onnx, recursively."""
    A = onnx.AttributeProto
    assert len(ours.nodes) == len(ref.node)
    for got, want in zip(ours.nodes, ref.node, strict=True):
        assert (got.op_type, got.name, got.domain) == (want.op_type, want.name, want.domain)
        assert (got.inputs, got.outputs) == (tuple(want.input), tuple(want.output))
        attrs = got.attributes
        assert sorted(attrs) == sorted(a.name for a in want.attribute)
        for a in want.attribute:
            value = onnx.helper.get_attribute_value(a)
            if a.type in (A.INT, A.FLOAT):
                assert attrs[a.name] == value
            elif a.type in (A.INTS, A.FLOATS):
                assert attrs[a.name] == list(value)
            elif a.type == A.STRING:
                assert attrs[a.name] == value.decode()
            elif a.type == A.TENSOR:
                assert attrs[a.name].read().tobytes() == numpy_helper.to_array(a.t).tobytes()
            elif a.type == A.GRAPH:
                assert attrs[a.name] is got.subgraphs[a.name]
                _same_nodes(got.subgraphs[a.name], a.g)


def _ours(vi: ValueInfo) -> tuple[str, str | None, tuple | None]:
    return vi.name, vi.dtype, vi.shape


@pytest.mark.parametrize("name", sorted(MODELS))
def test_real_model_matches_onnx(
    name: str, realdata: Callable[[str], Path], unchanged: Callable
) -> None:
    path = realdata(name)
    check = unchanged(path)
    ref = onnx.load(str(path))
    top, total = MODELS[name]
    assert len(ref.graph.node) == top and _count(ref.graph) == total
    init_names = {t.name for t in ref.graph.initializer}
    with open_document(path) as doc:
        g = doc.graph
        assert g is not None
        assert len(g.nodes) == top
        assert g.node_count == total
        assert doc.format_version == str(ref.ir_version)
        assert g.opsets == {o.domain: o.version for o in ref.opset_import}
        ref_inputs = [_value_info(v) for v in ref.graph.input if v.name not in init_names]
        assert [_ours(v) for v in g.inputs] == ref_inputs
        assert [_ours(v) for v in g.outputs] == [_value_info(v) for v in ref.graph.output]
        _same_nodes(g, ref.graph)
        expected = _tensors(ref.graph, [])
        refs = list(doc.tensors.values())
        assert len(refs) == len(expected) > 0
        for (tname, arr), t in zip(expected, refs, strict=True):
            assert t.name.split("#")[0] == tname
            got = t.read()
            assert got.dtype == arr.dtype and got.shape == arr.shape, tname
            assert got.tobytes() == arr.tobytes(), tname
            if t.encoding == "raw" and t.shape:
                assert t.read("0:1").tobytes() == arr[0:1].tobytes()
        assert not doc.notes
    check()
