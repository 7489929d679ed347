"""The revision view (a Graph/Document of the current revision) and EditSession.goto."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor import api
from nneditor.editing.revision_view import revision_document, revision_graph
from nneditor.editing.session import EditSession

W = np.arange(24, dtype=np.float32).reshape(4, 6)


@pytest.fixture
def model_path(tmp_path, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    then = helper.make_graph(
        [helper.make_node("Identity", ["y"], ["t"], name="then_id")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 6])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["y"], ["e"], name="else_neg")],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 6])],
    )
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("LeakyRelu", ["h"], ["r"], name="act", alpha=0.2),
        helper.make_node("Softmax", ["r"], ["y"], name="sm", axis=1),
        helper.make_node("If", ["c"], ["z"], name="branch", then_branch=then, else_branch=other),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 6])],
        [numpy_helper.from_array(W, "W")],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def rows(graph) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:  # noqa: ANN001
    return [(n.name, n.op_type, tuple(n.inputs), tuple(n.outputs)) for n in graph.nodes]


def test_no_change_shows_the_source_document(model_path):  # noqa: ANN001
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc, use_journal=False)
        assert revision_document(doc, s.state()) is doc
        assert revision_document(doc, None) is doc
        s.close()


def test_the_view_follows_inserts_renames_and_attribute_edits(model_path):  # noqa: ANN001
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc, use_journal=False)
        s.apply([{"op": "insert_unary", "value": "h", "op_type": "Neg"}])
        s.apply([{"op": "rename_node", "node": "branch", "new": "choose"}])
        s.apply([{"op": "set_attr", "node": "act", "attr": "alpha", "value": 0.5}])
        view = revision_document(doc, s.state())
        assert view is not doc and view.sources == []
        assert rows(view.graph) == [
            ("mm", "MatMul", ("x", "W"), ("h",)),
            ("Neg_on_h", "Neg", ("h",), ("h_neg",)),
            ("act", "LeakyRelu", ("h_neg",), ("r",)),
            ("sm", "Softmax", ("r",), ("y",)),
            ("choose", "If", ("c",), ("z",)),
        ]
        assert [n.index for n in view.graph.nodes] == [0, 1, 2, 3, 4]
        assert view.graph.nodes[2].attributes["alpha"] == pytest.approx(0.5)
        assert view.graph.nodes[3].attributes == {"axis": 1}
        # subgraphs of a changed node are the source's (edits never touch bodies)
        branch = doc.graph.nodes[3]
        assert view.graph.nodes[4].subgraphs == branch.subgraphs
        assert set(view.graph.nodes[4].subgraphs) == {"then_branch", "else_branch"}
        # the source document still describes the file; its tensors still read
        assert rows(doc.graph)[1] == ("act", "LeakyRelu", ("h",), ("r",))
        view.close()
        np.testing.assert_array_equal(doc.tensors["W"].read(), W)
        # the hierarchy builds on the view like on any graph
        h = api.hierarchy(view)
        assert h is not None and len(h.node_group) == 5
        s.close()


def test_the_view_matches_the_exported_model(model_path, tmp_path):  # noqa: ANN001
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc, use_journal=False)
        s.apply([{"op": "remove_unary", "node": "act"}])
        s.apply([{"op": "replace_op", "node": "sm", "op_type": "LogSoftmax"}])
        graph = revision_graph(s.state())
        s.export(tmp_path / "out.onnx")
        s.close()
    ref = onnx.load(str(tmp_path / "out.onnx")).graph.node
    assert rows(graph) == [(n.name, n.op_type, tuple(n.input), tuple(n.output)) for n in ref]


def test_goto_moves_the_cursor_and_is_journaled(model_path):  # noqa: ANN001
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc)
        s.apply([{"op": "rename_node", "node": "mm", "new": "a"}])
        s.apply([{"op": "rename_node", "node": "a", "new": "b"}])
        seen: list[int] = []
        s.chain.listeners.append(lambda: seen.append(s.chain.cursor))
        s.goto(1)
        assert seen == [1] and s.chain.can_redo
        assert revision_graph(s.state()).nodes[0].name == "a"
        s.goto(1)  # no move, no record
        assert seen == [1]
        with pytest.raises(IndexError):
            s.goto(3)
        s.close()
        again = EditSession.open(doc)  # the journal replays the cursor
        assert again.recovered and again.chain.cursor == 1 and len(again.chain.revisions) == 2
        again.close()


def test_patched_tensors_read_their_new_bytes_and_the_source_stays(model_path, unchanged):  # noqa: ANN001
    check = unchanged(model_path)
    want = W.copy()
    want[0, 5] = 2.5
    want[2, 0:2] = [-1.0, 7.0]
    with nneditor.open(model_path) as doc:
        s = EditSession.open(doc, use_journal=False)
        s.apply([{"op": "patch_tensor", "tensor": "W", "offset": 20, "hex": "00002040"}])
        two = np.array([-1.0, 7.0], np.float32).tobytes().hex()
        s.apply([{"op": "patch_tensor", "tensor": "W", "offset": 48, "hex": two}])
        view = revision_document(doc, s.state())
        assert view.graph is doc.graph  # bytes only: the graph is the source's
        np.testing.assert_array_equal(view.tensors["W"].read(), want)
        np.testing.assert_array_equal(view.tensors["W"].read("1:3"), want[1:3])
        np.testing.assert_array_equal(view.tensors["W"].read("1"), W[1])  # untouched rows
        assert view.tensors["W"].info["patched"] == 2
        np.testing.assert_array_equal(doc.tensors["W"].read(), W)  # the source still reads W
        s.close()
    check()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"


@pytest.mark.parametrize(
    "plan",
    [
        {"kind": "quantize", "mode": "weights", "signed": True, "symmetric": True},
        {"kind": "quantize", "mode": "qdq", "signed": True, "symmetric": True},
        {"kind": "prune", "method": "nm", "n": 2, "m": 4},
    ],
)
def test_optimization_revisions_show_what_the_export_holds(plan, tmp_path, monkeypatch):  # noqa: ANN001
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    with nneditor.open(EXAMPLE) as doc:
        s = EditSession.open(doc, use_journal=False)
        s.apply([{"op": "apply_plan", "plan": plan}])
        view = revision_document(doc, s.state())
        s.export(tmp_path / "out.onnx")
        ref = onnx.load(str(tmp_path / "out.onnx"))
        assert rows(view.graph) == [
            (n.name, n.op_type, tuple(n.input), tuple(n.output)) for n in ref.graph.node
        ]
        assert sorted(view.graph.initializers) == sorted(t.name for t in ref.graph.initializer)
        for t in ref.graph.initializer:
            want = numpy_helper.to_array(t)
            got = view.tensors[t.name].read()
            assert got.dtype == want.dtype and got.shape == want.shape, t.name
            np.testing.assert_array_equal(got, want, err_msg=t.name)
        opset = next(o.version for o in ref.opset_import if o.domain in ("", "ai.onnx"))
        assert view.graph.opsets.get("", view.graph.opsets.get("ai.onnx")) == opset
        assert api.hierarchy(view) is not None
        s.close()


def test_decoded_loaders_never_serve_a_freed_loaders_values():
    """Views decode plan tensors with DecodedLoader; its default cache key must be unique
    (an ``id()`` is reused once a loader is freed, and the shared cache kept the old array)."""
    from nneditor.tensors.loaders import DecodedLoader

    for k in range(200):
        loader = DecodedLoader(lambda k=k: np.full(3, k, np.int64))
        assert loader.read((3,), None)[0] == k
        del loader
