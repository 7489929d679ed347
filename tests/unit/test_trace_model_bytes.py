"""The worker's wire walk of an ONNX file (its values) and its session bytes (source + extra
outputs), checked against onnx's own parse of the same file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nneditor.tracing.model_bytes import ModelBytes
from nneditor.tracing.model_copy import value_entries

ROOT = Path(__file__).resolve().parents[2]


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


def _entries(entries):
    return [(e.name, e.scope, e.producer, e.op_type, e.in_loop) for e in entries]


@pytest.mark.parametrize("as_inputs", [False, True])
def test_the_wire_walk_lists_the_values_onnx_lists(tmp_path, as_inputs):
    path = _model(tmp_path, as_inputs)
    src = ModelBytes(path)
    try:
        assert _entries(src.entries) == _entries(value_entries(onnx.load(str(path))))
        assert src.outputs == ["y"]
        names = [(e.name, e.scope, e.op_type) for e in src.entries]
        assert names[0] == ("x", "", "") and ("t", "if/then_branch", "Relu") in names
        assert "w" not in [e.name for e in src.entries]  # an initializer, even when an input
    finally:
        src.close()


def _looping_model(tmp_path):
    """Loop and Scan bodies (values in a loop), unnamed nodes, a sparse initializer, a name
    produced twice, a Scan inside an If."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "one"], ["acc_out"], name="inc"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1]),
        ],
        initializer=[numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    scan_body = helper.make_graph(
        [
            helper.make_node("Add", ["s_in", "row"], ["s_out"]),
            helper.make_node("Neg", ["s_out"], ["neg"]),
        ],
        "scan_body",
        [
            helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("row", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("neg", TensorProto.FLOAT, [2]),
        ],
    )
    scan = helper.make_node(
        "Scan", ["init", "rows"], ["final", "negs"], num_scan_inputs=1, body=scan_body
    )
    branch = helper.make_graph(
        [scan], "branch", [], [helper.make_tensor_value_info("final", TensorProto.FLOAT, None)]
    )
    empty = helper.make_graph(
        [helper.make_node("Identity", ["init"], ["final2"])],
        "other",
        [],
        [helper.make_tensor_value_info("final2", TensorProto.FLOAT, None)],
    )
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0], np.float32), "sp"),
        numpy_helper.from_array(np.array([1], np.int64), "sp_idx"),
        [3],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Loop", ["n", "c", "a"], ["a_final"], body=body),
            helper.make_node("Loop", ["n", "c", "a"], ["a_again"], name="loop2", body=body),
            helper.make_node("Identity", ["a_final"], ["a_final"]),  # produced twice
            helper.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=empty),
            helper.make_node("Identity", ["sp"], ["sp_copy"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("init", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("rows", TensorProto.FLOAT, [3, 2]),
            helper.make_tensor_value_info("sp", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        sparse_initializer=[sparse],
    )
    path = tmp_path / "loops.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _real_models() -> list[Path]:
    found = sorted(ROOT.glob("examples/**/*.onnx"))
    cache = Path.home() / ".cache" / "nneditor" / "testdata"
    found += sorted(p for p in cache.glob("*.onnx") if p.stat().st_size < 64 * 2**20)
    return found


def test_the_wire_walk_agrees_on_loops_scans_sparse_and_real_models(tmp_path):
    paths = [_looping_model(tmp_path), *_real_models()]
    assert len(paths) > 1
    for path in paths:
        src = ModelBytes(path)
        try:
            model = onnx.load(str(path), load_external_data=False)
            assert _entries(src.entries) == _entries(value_entries(model)), path.name
            assert src.outputs == [o.name for o in model.graph.output], path.name
        finally:
            src.close()
    src = ModelBytes(paths[0])
    names = {e.name: e for e in src.entries}
    src.close()
    assert "sp" not in names and names["sp_copy"].op_type == "Identity"
    assert names["acc_out"].in_loop and names["acc_out"].scope == "Loop_0/body"
    assert names["neg"].scope == "If_3/then_branch/Scan_0/body" and names["neg"].in_loop
    assert names["final2"].scope == "If_3/else_branch" and not names["final2"].in_loop


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
