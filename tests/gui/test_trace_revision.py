"""After an edit, the window traces the edited revision (a private copy), never silently the
file on disk; the values are checked against ONNX Runtime on the same model edited with the
onnx library, and undoing plans the source again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QMessageBox  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"
GELU = "/blocks.0/mlp/Gelu_21"


@pytest.fixture(autouse=True)
def _discard_on_close(monkeypatch):  # noqa: ANN001, ANN202
    discard = QMessageBox.StandardButton.Discard
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a: discard))


def _commit(qtbot, window, changes: list[dict]):  # noqa: ANN001, ANN202
    got: list = []
    window.edit.preview(changes, lambda result, error: got.append((result, error)))
    qtbot.waitUntil(lambda: bool(got), timeout=20000)
    result, error = got[0]
    assert result is not None and result.preview.ok, error or result.preview.error
    return window.edit.commit(result, "Gelu -> Relu")


def _logits(path: Path, feed: dict) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(["logits"], feed)[0]


def test_an_edited_revision_is_traced_and_undo_plans_the_source(
    qtbot, open_model, window, tmp_path
) -> None:  # noqa: ANN001
    before = (EXAMPLE.read_bytes(), EXAMPLE.stat().st_mtime_ns)
    open_model(EXAMPLE)
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=20000)
    rev = _commit(qtbot, window, [{"op": "replace_op", "node": GELU, "op_type": "Relu"}])
    assert rev is not None
    feature, panel = window.trace, window.trace.panel
    feature.show_view("Trace")
    qtbot.waitUntil(lambda: panel.plan is not None and panel.revision == rev.id, timeout=30000)
    plan = panel.plan
    assert plan.revision == rev.id and plan.edits_of == str(EXAMPLE)
    copy = Path(plan.model.path)
    assert copy != EXAMPLE and copy.is_file()
    text = panel.plan_text.toPlainText()
    assert f"edited revision {rev.id}" in text and "not traced" in text
    staged = onnx.load(str(copy))
    assert [n.op_type for n in staged.graph.node if n.name == GELU] == ["Relu"]

    assert feature.inputs.generate_and_assign()
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=90000)
    assert runs, panel.outcome.text()
    run = runs[0]
    assert run.revision == rev.id and run.edits_of == str(EXAMPLE)

    # the reference: the same edit made with the onnx library, run by ONNX Runtime
    model = onnx.load(str(EXAMPLE))
    node = next(n for n in model.graph.node if n.name == GELU)
    node.op_type, node.domain = "Relu", ""
    del node.attribute[:]
    edited = tmp_path / "edited.onnx"
    onnx.save(model, str(edited))
    feed = {n: np.asarray(a) for n, a in panel.arrays.items()}
    want = _logits(edited, feed)
    got = run.load("logits")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, _logits(EXAMPLE, feed), rtol=1e-4, atol=1e-5)  # not the source

    # the Traced model pane shows the run on the revision's own graph, labelled
    pane = feature.traced
    assert pane.run is run and pane.index is window.index and pane.on_own_graph
    assert f"edited revision {rev.id}" in pane.summary.text()
    assert any(r.path == run.path for r in pane.runs)  # listed with the model's runs

    # undo: the Trace page plans the file as stored again
    window.edit.undo()
    feature.show_view("Trace")
    qtbot.waitUntil(lambda: panel.plan is not None and panel.revision == "source", timeout=30000)
    assert Path(panel.plan.model.path) == EXAMPLE and not panel.plan.edits_of
    # an older revision run picked now is shown on the graph as opened, with a note
    feature.show_run(run)
    assert pane.on_own_graph  # revision graph known in this session
    assert (EXAMPLE.read_bytes(), EXAMPLE.stat().st_mtime_ns) == before


def test_an_edit_during_a_run_keeps_the_run_and_plans_the_revision_after(
    qtbot, open_model, window
) -> None:  # noqa: ANN001
    from nneditor.tracing.runner import TraceRunner
    from nneditor.tracing.worker import TEST_HOOKS_ENV

    open_model(EXAMPLE)
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=20000)
    feature, panel = window.trace, window.trace.panel
    feature.show_view("Trace")
    qtbot.waitUntil(lambda: panel.plan is not None, timeout=30000)
    panel.trace_runner = TraceRunner(extra_env={TEST_HOOKS_ENV: "1"})
    panel.test_hooks = {"sleep_s": 2}
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run()
    rev = _commit(qtbot, window, [{"op": "replace_op", "node": GELU, "op_type": "Relu"}])
    qtbot.wait(300)
    assert panel.running and panel.revision == "source"  # not cancelled, not replanned yet
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert runs and runs[0].revision == "source" and not runs[0].edits_of
    feature.show_view("Trace")
    qtbot.waitUntil(lambda: panel.plan is not None and panel.revision == rev.id, timeout=30000)
    assert panel.plan.edits_of == str(EXAMPLE)


def test_assigned_inputs_stay_across_an_edit_that_keeps_them(
    qtbot, open_model, window, tmp_path
) -> None:  # noqa: ANN001
    open_model(EXAMPLE)
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=20000)
    feature, panel = window.trace, window.trace.panel
    feature.show_view("Trace")
    qtbot.waitUntil(lambda: panel.plan is not None, timeout=30000)
    ids = np.array([[7, 1, 42, 5, 9]], np.int64)
    np.save(tmp_path / "ids.npy", ids)
    assert feature.inputs.assign_path(tmp_path / "ids.npy"), feature.inputs.status.text()
    feature.show_view("Model graph")
    rev = _commit(qtbot, window, [{"op": "replace_op", "node": GELU, "op_type": "Relu"}])
    feature.show_view("Trace")
    qtbot.waitUntil(lambda: panel.plan is not None and panel.revision == rev.id, timeout=30000)
    np.testing.assert_array_equal(panel.arrays["input_ids"], ids)
    assert "still valid" in feature.inputs.status.text()
    assert "input_ids int64 [1, 5]" in panel.plan_text.toPlainText()
    window.edit.undo()  # back to the source: still the same set
    qtbot.waitUntil(lambda: panel.plan is not None and panel.revision == "source", timeout=30000)
    np.testing.assert_array_equal(panel.arrays["input_ids"], ids)
