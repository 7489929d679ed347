"""Private copies of edited revisions for tracing: written once per revision, the revision's
model (checked with ONNX Runtime against the same edit made with the onnx library), never
marked saved, refused for a revision that is no longer current, and only a few kept."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.editing.session import EditSession
from nneditor.errors import NNEditorError
from nneditor.ui.trace import staging

W = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)
X = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)


@pytest.fixture
def session(tmp_path, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("Relu", ["h"], ["y"], name="act"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(W, "W")],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    doc = nneditor.open(path)
    s = EditSession.open(doc, use_journal=False)
    yield s
    s.close()
    doc.close()


def _commit(s: EditSession, op: str) -> str:
    preview = s.prepare([{"op": "replace_op", "node": "act", "op_type": op}])
    assert preview.ok, preview.error
    return s.commit(preview, op).id


def _run(path) -> np.ndarray:  # noqa: ANN001
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(["y"], {"x": X})[0]


def test_the_copy_is_the_revision_and_is_written_once(session, tmp_path) -> None:  # noqa: ANN001
    source = session.doc.path
    before = source.read_bytes()
    rev = _commit(session, "Sigmoid")
    root = tmp_path / "traces"
    path = staging.stage_revision(session, root, rev)
    assert path.parent.parent == root / staging.REVISIONS and rev in path.parent.name
    np.testing.assert_allclose(_run(path), 1 / (1 + np.exp(-(X @ W))), rtol=1e-6)
    assert session.chain.dirty  # a copy for tracing is not a save
    stamp = path.stat().st_mtime_ns
    assert staging.stage_revision(session, root, rev) == path
    assert path.stat().st_mtime_ns == stamp  # reused, not rewritten
    assert source.read_bytes() == before


def test_a_revision_that_is_no_longer_current_is_refused(session, tmp_path) -> None:  # noqa: ANN001
    rev = _commit(session, "Sigmoid")
    session.undo()
    with pytest.raises(NNEditorError, match="not the current edited revision"):
        staging.stage_revision(session, tmp_path, rev)
    with pytest.raises(NNEditorError, match="source"):
        staging.stage_revision(session, tmp_path, "source")
    session.redo()
    with pytest.raises(NNEditorError, match="changed"):
        session.write_copy(tmp_path / "x.onnx", revision="another")
    assert not (tmp_path / "x.onnx").exists()


def test_only_the_newest_copies_are_kept(session, tmp_path) -> None:  # noqa: ANN001
    paths = []
    for op in ("Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Softplus"):
        paths.append(staging.stage_revision(session, tmp_path, _commit(session, op)))
    kept = sorted(p.name for p in (tmp_path / staging.REVISIONS).iterdir())
    assert len(kept) == staging.KEEP + 1
    assert paths[-1].parent.name in kept and paths[0].parent.name not in kept
    np.testing.assert_allclose(_run(paths[-1]), np.log1p(np.exp(X @ W)), rtol=1e-5)
