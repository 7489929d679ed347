"""Validated ONNX edits: previews, exported models checked by onnx and onnxruntime, undo."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.editing.session import EditSession

RNG = np.random.default_rng(11)
W = RNG.standard_normal((4, 6)).astype(np.float32)
B = RNG.standard_normal((6,)).astype(np.float32)
B2 = RNG.standard_normal((6,)).astype(np.float32)
X = RNG.standard_normal((3, 4)).astype(np.float32)


@pytest.fixture
def model_path(tmp_path, monkeypatch):
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("Relu", ["h"], ["r"], name="act"),
        helper.make_node("Add", ["r", "B"], ["y"], name="add"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, [3, 6]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 6])],
        [
            numpy_helper.from_array(W, "W"),
            numpy_helper.from_array(B, "B"),
            numpy_helper.from_array(B2, "B2"),
        ],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def run(path, x=X):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {"x": x}
    if "ids" in [i.name for i in sess.get_inputs()]:
        feeds["ids"] = np.zeros((3, 6), np.int64)
    return sess.run(["y"], feeds)[0]


def edit(path, tmp_path, changes, name="out.onnx"):
    with nneditor.open(path) as doc:
        s = EditSession.open(doc)
        preview = s.prepare(changes)
        assert preview.ok, preview.error
        s.commit(preview, "test")
        out = tmp_path / name
        report = s.export(out)
        s.close()
    onnx.checker.check_model(str(out), full_check=True)
    return out, preview, report


def test_relu_to_leaky_relu_changes_exactly_the_negative_values(model_path, tmp_path, unchanged):
    check = unchanged(model_path)
    out, preview, report = edit(
        model_path,
        tmp_path,
        [
            {"op": "replace_op", "node": "act", "op_type": "LeakyRelu"},
            {"op": "set_attr", "node": "act", "attr": "alpha", "value": 0.1},
        ],
    )
    assert preview.diff == ["node 'act': Relu → LeakyRelu", "node 'act': alpha unset → 0.1"]
    h = X @ W
    want = np.where(h > 0, h, np.float32(0.1) * h) + B
    np.testing.assert_allclose(run(out), want, rtol=1e-6, atol=1e-6)
    before = run(model_path)
    changed = ~np.isclose(run(out), before)
    assert np.array_equal(changed, h < 0)
    assert "onnxruntime CPU session created" in report.checks
    check()


def test_insert_remove_rename_reconnect_patch(model_path, tmp_path):
    h = X @ W
    out, p, _ = edit(
        model_path, tmp_path, [{"op": "insert_unary", "value": "r", "op_type": "Neg"}], "a.onnx"
    )
    np.testing.assert_allclose(run(out), -np.maximum(h, 0) + B, rtol=1e-6, atol=1e-6)
    assert p.diff[0].startswith("insert Neg")
    out, _, _ = edit(model_path, tmp_path, [{"op": "remove_unary", "node": "act"}], "b.onnx")
    np.testing.assert_allclose(run(out), h + B, rtol=1e-6, atol=1e-6)
    out, _, _ = edit(
        model_path, tmp_path, [{"op": "rename_node", "node": "add", "new": "bias_add"}], "c.onnx"
    )
    assert [n.name for n in onnx.load(str(out)).graph.node] == ["mm", "act", "bias_add"]
    out, _, _ = edit(
        model_path,
        tmp_path,
        [{"op": "reconnect", "node": "add", "index": 1, "value": "B2"}],
        "d.onnx",
    )
    np.testing.assert_allclose(run(out), np.maximum(h, 0) + B2, rtol=1e-6, atol=1e-6)
    one = np.float32(2.5).tobytes().hex()
    out, _, _ = edit(
        model_path,
        tmp_path,
        [{"op": "patch_tensor", "tensor": "W", "offset": 4 * 5, "hex": one}],
        "e.onnx",
    )
    w2 = W.copy()
    w2[0, 5] = 2.5
    np.testing.assert_allclose(run(out), np.maximum(X @ w2, 0) + B, rtol=1e-6, atol=1e-6)
    got = numpy_helper.to_array(
        next(t for t in onnx.load(str(out)).graph.initializer if t.name == "W")
    )
    assert np.array_equal(got, w2)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"op": "reconnect", "node": "add", "index": 1, "value": "ids"}, "not valid ONNX"),
        ({"op": "reconnect", "node": "mm", "index": 0, "value": "y"}, "would create a cycle"),
        (
            {"op": "set_attr", "node": "act", "attr": "alpha", "value": 1},
            "Relu has no attribute 'alpha'",
        ),
        (
            {"op": "patch_tensor", "tensor": "B", "offset": 20, "hex": "00000000aa"},
            "does not fit in 'B' (24 bytes)",
        ),
        ({"op": "replace_op", "node": "act", "op_type": "Add"}, "Add takes 2–2 inputs"),
        ({"op": "rename_node", "node": "nope", "new": "x"}, "no node named 'nope'"),
        ({"op": "insert_unary", "value": "y", "op_type": "Relu"}, "is a graph output"),
        ({"op": "set_attr", "node": "act", "attr": "x", "value": 1}, "has no attribute 'x'"),
    ],
)
def test_invalid_edits_are_refused_with_a_sentence(model_path, change, needle):
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc)
        p = s.prepare([change])
        assert not p.ok and needle in p.error, p.error
        assert s.chain.cursor == 0
        s.close()


def test_undo_restores_bit_identical_export(model_path, tmp_path):
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc, use_journal=False)
        s.export(tmp_path / "orig.onnx")
        s.apply([{"op": "replace_op", "node": "act", "op_type": "Sigmoid"}])
        assert s.chain.dirty
        s.export(tmp_path / "edited.onnx")
        assert not s.chain.dirty
        s.undo()
        assert s.chain.dirty
        s.export(tmp_path / "undone.onnx")
        s.close()
    assert (tmp_path / "orig.onnx").read_bytes() == (tmp_path / "undone.onnx").read_bytes()
    assert (tmp_path / "orig.onnx").read_bytes() != (tmp_path / "edited.onnx").read_bytes()
    np.testing.assert_array_equal(run(tmp_path / "undone.onnx"), run(model_path))


def test_external_data_layout_and_provenance(model_path, tmp_path, monkeypatch):
    from nneditor.export import onnx_writer

    monkeypatch.setattr(onnx_writer, "EXTERNAL_MIN", 16)
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc, use_journal=False)
        s.apply([{"op": "rename_node", "node": "mm", "new": "matmul"}], "rename")
        report = s.export(tmp_path / "ext.onnx", force_external=True)
        s.close()
    assert report.data_path is not None and report.data_path.exists()
    m = onnx.load(str(tmp_path / "ext.onnx"), load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in m.graph.initializer)
    meta = {p.key: p.value for p in m.metadata_props}
    assert len(meta["nneditor.source_sha256"]) == 64 and "rename" in meta["nneditor.revisions"]
    np.testing.assert_array_equal(run(tmp_path / "ext.onnx"), run(model_path))


def test_export_never_overwrites_source_and_cancel_publishes_nothing(model_path, tmp_path):
    from nneditor.errors import CancelledError, NNEditorError
    from nneditor.jobs import CancelToken, JobHandle

    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc, use_journal=False)
        with pytest.raises(NNEditorError, match="never overwrites a source"):
            s.export(model_path)
        token = CancelToken()
        token.cancel()
        dest = tmp_path / "cancelled.onnx"
        with pytest.raises(CancelledError):
            s.export(dest, JobHandle(token))
        assert not dest.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".nneditor-export-")]
        s.close()


def test_inferred_value_types_fill_missing_value_info(model_path):
    from nneditor.editing.value_types import infer_value_types

    with nneditor.open(model_path) as doc:
        types = infer_value_types(doc)
    assert types["h"].dtype == "float32" and types["h"].shape == (3, 6)
    assert types["r"].shape == (3, 6) and types["y"].dtype == "float32"
