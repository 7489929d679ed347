"""Axis-aware Scan normalisation: the rewritten copy run by onnx.reference equals ONNX Runtime
on the original model (nonzero axes, negative axes, reverse directions, undeclared ranks)."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from nneditor.tracing.scan_normalize import ScanRewriteError, normalize_scans

ort = pytest.importorskip("onnxruntime")


def scan_model(in_axis, out_axis, in_dir=0, out_dir=0, declare=True, opset=16):
    """State (2,) accumulates slices of x (3 slices of 2); scan output = 2 * running sum."""
    slice_shape = [2] if declare else None
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s", "xt"], ["s2"]),
            helper.make_node("Mul", ["s2", "two"], ["y"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("xt", TensorProto.FLOAT, slice_shape),
        ],
        [
            helper.make_tensor_value_info("s2", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, slice_shape),
        ],
        [numpy_helper.from_array(np.array([2, 2], np.float32), "two")],
    )
    attrs = {
        "body": body,
        "num_scan_inputs": 1,
        "scan_input_axes": [in_axis],
        "scan_output_axes": [out_axis],
        "scan_input_directions": [in_dir],
        "scan_output_directions": [out_dir],
    }
    xshape = [2, 3] if in_axis in (1, -1) else [3, 2]
    graph = helper.make_graph(
        [
            helper.make_node("Scan", ["init", "x"], ["fin", "ys"], name="scan", **attrs),
            helper.make_node("Relu", ["ys"], ["r"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("init", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape),
        ],
        [
            helper.make_tensor_value_info("fin", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, None),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {
        "init": np.array([0.5, -1], np.float32),
        "x": np.arange(6, dtype=np.float32).reshape(xshape) - 2,
    }
    return model, feeds


@pytest.mark.parametrize(
    "in_axis,out_axis,in_dir,out_dir",
    [
        (1, 0, 0, 0),
        (1, 1, 0, 0),
        (0, 1, 0, 0),
        (-1, -1, 0, 0),
        (1, 1, 1, 0),
        (0, 0, 1, 1),
        (1, 1, 1, 1),
    ],
)
def test_normalised_scan_matches_onnxruntime(in_axis, out_axis, in_dir, out_dir):
    model, feeds = scan_model(in_axis, out_axis, in_dir, out_dir)
    expected = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, feeds)
    with pytest.raises(RuntimeError, match="not implemented"):
        ReferenceEvaluator(model).run(None, feeds)  # why the rewrite exists
    copy_ = copy.deepcopy(model)
    assert normalize_scans(copy_) == 1
    got = ReferenceEvaluator(copy_).run(None, feeds)
    for e, g in zip(expected, got, strict=True):
        assert e.shape == g.shape
        np.testing.assert_array_equal(e, g)
    scan = next(n for n in copy_.graph.node if n.op_type == "Scan")
    assert {a.name for a in scan.attribute} == {"body", "num_scan_inputs"}
    assert list(scan.input)[0] == "init" and "fin" in scan.output  # names kept


def test_axis_zero_scans_are_left_alone():
    model, _ = scan_model(0, 0)
    before = model.SerializeToString()
    assert normalize_scans(model) == 0
    assert model.SerializeToString() == before


def test_undeclared_rank_uses_shape_inference_or_refuses():
    model, feeds = scan_model(1, 1, declare=False)
    inferred = onnx.shape_inference.infer_shapes(model)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in inferred.graph.input}
    ranks["ys"] = 2
    copy_ = copy.deepcopy(model)
    assert normalize_scans(copy_, lambda: ranks) == 1
    expected = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, feeds)
    np.testing.assert_array_equal(ReferenceEvaluator(copy_).run(None, feeds)[1], expected[1])
    with pytest.raises(ScanRewriteError) as exc:
        normalize_scans(copy.deepcopy(model), {})
    assert str(exc.value) == (
        "Scan node 'scan': the rank of scan input 0 is unknown, so its axis 1 cannot be moved to "
        "the front; declare the body's input/output shapes"
    )


def test_scan_inside_a_subgraph_is_normalised():
    inner, feeds = scan_model(1, 1)
    branch = helper.make_graph(
        list(inner.graph.node),
        "then",
        [],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["r2"])],
        "else",
        [],
        [helper.make_tensor_value_info("r2", TensorProto.FLOAT, None)],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=other)],
        "g",
        [*inner.graph.input, helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    feeds["c"] = np.array(True)
    expected = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, feeds)
    assert normalize_scans(model) == 1
    np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, feeds)[0], expected[0])
