"""The worker's weight-free model structure and its session bytes (source + extra outputs),
checked against onnx's own parse of the same file."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nneditor.tracing.model_copy import ModelBytes, value_entries


def _model(tmp_path, initializers_as_inputs: bool = False):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    b = numpy_helper.from_array(np.ones(4, np.float32), "b")
    then = helper.make_graph(
        [helper.make_node("Relu", ["h"], ["t"], name="relu")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.zeros(1, np.float32), "inner_w")],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["h"], ["e"], name="neg")],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
    )
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "b"], ["h"], name="add"),
        helper.make_node("ReduceSum", ["h"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
        helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    if initializers_as_inputs:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4]))
    graph = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[w, b, numpy_helper.from_array(np.array(0, np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.metadata_props.add(key="k", value="v")
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("as_inputs", [False, True])
def test_structure_is_the_model_without_entry_graph_weights(tmp_path, as_inputs):
    path = _model(tmp_path, as_inputs)
    full = onnx.load(str(path))
    src = ModelBytes(path)
    try:
        assert src.initializer_names == {"w", "b", "zero"}
        assert len(src.structure.graph.initializer) == 0
        expected = onnx.ModelProto()
        expected.CopyFrom(full)
        del expected.graph.initializer[:]
        assert src.structure == expected  # everything else, subgraph weights included
        names = [
            (e.name, e.scope, e.op_type)
            for e in value_entries(src.structure, src.initializer_names)
        ]
        assert names == [(e.name, e.scope, e.op_type) for e in value_entries(full)]
        assert names[0] == ("x", "", "") and ("t", "if/then_branch", "Relu") in names
    finally:
        src.close()


def test_session_bytes_parse_as_the_source_plus_the_exposed_outputs(tmp_path):
    path = _model(tmp_path)
    src = ModelBytes(path)
    try:
        blob, outputs = src.with_outputs(["m", "y", "h"])
    finally:
        src.close()
    assert outputs == ["y", "m", "h"]
    merged = onnx.ModelProto.FromString(blob)
    expected = onnx.load(str(path))
    expected.graph.output.extend([onnx.ValueInfoProto(name="m"), onnx.ValueInfoProto(name="h")])
    assert merged == expected
    assert path.read_bytes() == blob[: path.stat().st_size]  # the source bytes, unchanged


def test_onnxruntime_runs_the_session_bytes(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = _model(tmp_path)
    src = ModelBytes(path)
    try:
        blob, outputs = src.with_outputs(["m", "h"])
    finally:
        src.close()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = dict(zip(outputs, ort.InferenceSession(blob).run(outputs, {"x": x}), strict=True))
    h = x @ np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    np.testing.assert_allclose(got["m"], h - 1)
    np.testing.assert_allclose(got["h"], h)
    np.testing.assert_allclose(got["y"], np.maximum(h, 0))


def test_unreadable_files_are_refused(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        ModelBytes(empty)
    no_graph = tmp_path / "nograph.onnx"
    no_graph.write_bytes(
        helper.make_model(helper.make_graph([], "g", [], [])).SerializeToString()[:4]
    )
    with pytest.raises(Exception, match="graph|truncated|field"):
        ModelBytes(no_graph)
