"""The Edit tab: previews, commits, history, undo/redo, Save changes…, recovery, close prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QFileDialog, QMessageBox, QPushButton

import nneditor
from nneditor.editing.session import EditSession
from nneditor.ui.edit.controller import EditController
from nneditor.ui.targets import Target


def node_index(path: Path, op_type: str) -> tuple[int, str]:
    model = onnx.load(str(path))
    for i, node in enumerate(model.graph.node):
        if node.op_type == op_type:
            return i, node.name
    raise AssertionError(op_type)


@pytest.fixture(autouse=True)
def _no_blocking_dialogs(monkeypatch):  # noqa: ANN001, ANN202
    """Modal dialogs would block: closing with unsaved revisions discards them unless a test
    answers otherwise, and an unexpected recovery prompt fails the test."""
    discard = QMessageBox.StandardButton.Discard
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a: discard))
    monkeypatch.setattr(
        EditController, "ask_recover", lambda self, n: pytest.fail("unexpected recovery prompt")
    )


@pytest.fixture
def editing(qtbot, open_model, nested_model):  # noqa: ANN001, ANN201
    """The window with the nested model open and its edit session ready."""
    window = open_model(nested_model)
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=10000)
    window.left_tabs.setCurrentWidget(window.edit_panel)
    return window


def preview(qtbot, panel) -> str:  # noqa: ANN001
    panel.preview_button.click()
    qtbot.waitUntil(lambda: panel._pending is None, timeout=20000)
    return panel.result_view.toPlainText()


def canvas_names(window) -> set[str]:  # noqa: ANN001
    return {it.detail for it in window.session.level.items if it.kind == "node"}


def commit_rename(qtbot, window, old: str, new: str) -> None:  # noqa: ANN001
    panel = window.edit_panel
    form = panel.choose("Rename node")
    form.node.setText(old)
    form.new.setText(new)
    preview(qtbot, panel)
    assert panel.commit_button.isEnabled()
    panel.commit_button.click()
    qtbot.waitUntil(lambda: any(n.name == new for n in window.index.graph.nodes), timeout=20000)


def test_preview_shows_the_diff_and_commit_needs_a_matching_preview(qtbot, editing, nested_model):  # noqa: ANN001
    window, panel = editing, editing.edit_panel
    i, name = node_index(nested_model, "Relu")
    window.session.select(Target.node(i), reveal=True)
    form = panel.choose("Rename node")
    assert form.node.text() == name  # prefilled from the canvas selection
    form.new.setText("relu_renamed")
    assert not panel.commit_button.isEnabled()
    text = preview(qtbot, panel)
    assert f"rename node '{name}' → 'relu_renamed'" in text
    assert "Valid" in text and "float32 [1, 4, 50]" in text
    assert panel.commit_button.isEnabled()
    form.new.setText("relu_renamed2")  # a changed field needs a new preview
    assert not panel.commit_button.isEnabled()
    preview(qtbot, panel)
    assert panel.commit_button.isEnabled()
    assert window.top_bar.save_button.isHidden()
    panel.commit_button.click()
    qtbot.waitUntil(lambda: not window.top_bar.save_button.isHidden(), timeout=5000)
    assert not panel.commit_button.isEnabled()
    qtbot.waitUntil(lambda: "relu_renamed2" in canvas_names(window), timeout=20000)
    assert panel.history.count() == 2 and panel.history.currentRow() == 1
    assert window.session.selection == Target.node(i)  # the selection survived the new view


def test_attribute_form_lists_the_schema_and_commits_a_typed_value(qtbot, editing, nested_model):  # noqa: ANN001
    window, panel = editing, editing.edit_panel
    i, name = node_index(nested_model, "Softmax")
    window.session.select(Target.node(i), reveal=True)
    form = panel.choose("Set attribute")
    assert [form.attr.itemText(k) for k in range(form.attr.count())] == ["axis"]
    assert "int" in form.info.text() and "-1" in form.info.text()
    form.value.setText("2")
    text = preview(qtbot, panel)
    assert "axis -1 → 2" in text
    panel.commit_button.click()
    qtbot.waitUntil(lambda: window.index.graph.nodes[i].attributes.get("axis") == 2, timeout=20000)


@pytest.mark.parametrize(
    ("title", "fields", "needle"),
    [
        ("Replace operator", {"op": "Add"}, "Add takes 2–2 inputs"),
        ("Insert unary operator", {"value": "OUTPUT"}, "is a graph output"),
        ("Rename node", {"node": "nope", "new": "x"}, "No node named 'nope'"),
    ],
)
def test_a_refused_edit_shows_the_sentence_and_changes_nothing(
    qtbot,
    editing,
    nested_model,
    title,
    fields,
    needle,  # noqa: ANN001
):
    window, panel = editing, editing.edit_panel
    i, name = node_index(nested_model, "Relu")
    window.session.select(Target.node(i), reveal=True)
    form = panel.choose(title)
    output = onnx.load(str(nested_model)).graph.output[0].name
    for key, value in fields.items():
        getattr(form, key).setText(output if value == "OUTPUT" else value)
    text = preview(qtbot, panel)
    assert needle in text and "Nothing was changed" in text
    assert not panel.commit_button.isEnabled()
    assert window.edit.session.chain.cursor == 0 and panel.history.count() == 1
    assert window.top_bar.save_button.isHidden()


def test_an_incomplete_form_says_what_is_missing(qtbot, editing):  # noqa: ANN001
    panel = editing.edit_panel
    form = panel.choose("Rename node")
    form.node.setText("")
    panel.preview_button.click()
    assert "Choose the node to rename" in panel.result_view.toPlainText()
    assert not panel.commit_button.isEnabled()


def test_commit_then_save_exports_a_checked_model_and_hides_the_button(
    qtbot,
    editing,
    nested_model,
    tmp_path,
    monkeypatch,
    unchanged,  # noqa: ANN001
):
    check = unchanged(nested_model)
    window = editing
    _, name = node_index(nested_model, "Relu")
    commit_rename(qtbot, window, name, "act")
    qtbot.waitUntil(lambda: not window.top_bar.save_button.isHidden(), timeout=5000)
    dest = tmp_path / "out" / "saved.onnx"
    dest.parent.mkdir()
    asked: list[str] = []
    shown: list[str] = []

    def fake_save(parent, title, default, filters):  # noqa: ANN001, ANN202
        asked.append(default)
        return str(dest), filters

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(fake_save))
    monkeypatch.setattr(
        QMessageBox, "information", staticmethod(lambda p, t, text, *a: shown.append(text))
    )
    with qtbot.waitSignal(window.edit.saved, timeout=30000):
        window.top_bar.save_button.click()
    assert window.top_bar.save_button.isHidden()
    assert asked == [str(nested_model.with_name("nested-edited.onnx"))]
    assert dest.exists()
    onnx.checker.check_model(str(dest), full_check=True)
    assert [n.name for n in onnx.load(str(dest)).graph.node if n.op_type == "Relu"][0] == "act"
    assert shown and "onnx.checker" in shown[0]
    assert "Saved saved.onnx" in window.status_label.text()
    assert "All changes saved" in window.edit_panel.history_state.text()
    check()


def test_a_failed_save_shows_the_sentence_and_keeps_the_button(
    qtbot,
    editing,
    nested_model,
    monkeypatch,  # noqa: ANN001
):
    window = editing
    _, name = node_index(nested_model, "Relu")
    commit_rename(qtbot, window, name, "act")
    errors: list[str] = []
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a: (str(nested_model), ""))
    )
    monkeypatch.setattr(
        QMessageBox, "critical", staticmethod(lambda p, t, text, *a: errors.append(text))
    )
    with qtbot.waitSignal(window.edit.saveFailed, timeout=20000):
        window.top_bar.save_button.click()
    assert "never overwrites a source" in errors[0]
    assert not window.top_bar.save_button.isHidden()
    assert window.edit.dirty


def test_undo_redo_and_history_clicks_update_the_canvas(qtbot, editing, nested_model):  # noqa: ANN001
    window = editing
    panel = window.edit_panel
    i, name = node_index(nested_model, "Relu")
    window.session.select(Target.node(i), reveal=True)
    commit_rename(qtbot, window, name, "first")
    commit_rename(qtbot, window, "first", "second")
    qtbot.waitUntil(lambda: "second" in canvas_names(window), timeout=20000)
    undo = next(a for a in window.actions() if a.text() == "Undo edit")
    undo.trigger()
    qtbot.waitUntil(lambda: "first" in canvas_names(window), timeout=20000)
    assert panel.redo_button.isEnabled()
    panel.redo_button.click()
    qtbot.waitUntil(lambda: "second" in canvas_names(window), timeout=20000)
    panel._on_history_clicked(panel.history.item(0))  # back to the source
    qtbot.waitUntil(lambda: window.index is window.source_index, timeout=20000)
    assert name.rsplit("/", 1)[-1] in canvas_names(window)
    assert window.edit.session.chain.cursor == 0
    qtbot.waitUntil(lambda: window.top_bar.save_button.isHidden(), timeout=5000)  # = source


def test_recovery_prompt_after_a_crash(qtbot, window, nested_model, monkeypatch):  # noqa: ANN001
    _, name = node_index(nested_model, "Relu")
    with nneditor.open(nested_model) as doc:  # a first session that never saved ("crash")
        s = EditSession.open(doc)
        s.apply([{"op": "rename_node", "node": name, "new": "recovered"}], "rename")
        s.close()
    asked: list[int] = []
    monkeypatch.setattr(EditController, "ask_recover", lambda self, n: asked.append(n) or True)
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(nested_model))
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=10000)
    assert asked == [1]
    assert not window.top_bar.save_button.isHidden()  # recovered revisions are unsaved
    qtbot.waitUntil(
        lambda: any(n.name == "recovered" for n in window.index.graph.nodes), timeout=20000
    )
    # Discard on the next open forgets them
    window.edit.session.journal.discard()
    window._close_model()
    asked.clear()
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(nested_model))
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=10000)
    assert asked == [] and not window.edit.dirty


def test_recovery_can_be_discarded(qtbot, window, nested_model, monkeypatch):  # noqa: ANN001
    _, name = node_index(nested_model, "Relu")
    with nneditor.open(nested_model) as doc:
        s = EditSession.open(doc)
        s.apply([{"op": "rename_node", "node": name, "new": "gone"}], "rename")
        s.close()
    monkeypatch.setattr(EditController, "ask_recover", lambda self, n: False)
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(nested_model))
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=10000)
    qtbot.wait(50)
    assert window.top_bar.save_button.isHidden() and not window.edit.dirty
    assert not any(n.name == "gone" for n in window.index.graph.nodes)
    assert window.edit_panel.history.count() == 1


def test_closing_with_unsaved_revisions_asks(qtbot, editing, nested_model, monkeypatch):  # noqa: ANN001
    window = editing
    _, name = node_index(nested_model, "Relu")
    commit_rename(qtbot, window, name, "act")
    answers = [QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Cancel]
    asked: list[str] = []

    def question(parent, title, text, *a):  # noqa: ANN001, ANN202
        asked.append(text)
        return answers.pop(0)

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    window.top_bar.close_button.click()
    assert len(asked) == 1 and "1 unsaved revision" in asked[0]
    assert window.index is not None  # Cancel keeps the model open
    window.close()  # quitting asks too
    assert len(asked) == 2 and window.isVisible()
    answers.append(QMessageBox.StandardButton.Discard)
    with qtbot.waitSignal(window.documentClosed, timeout=5000):
        window.close_model()
    assert window.index is None and window.top_bar.save_button.isHidden()
    # Discard also forgets the journal: reopening offers no recovery
    monkeypatch.setattr(EditController, "ask_recover", lambda self, n: pytest.fail("asked"))
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(nested_model))
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=10000)
    assert not window.edit.dirty


def test_non_onnx_documents_explain_and_offer_weights_only_export(
    qtbot,
    window,
    tmp_path,
    monkeypatch,  # noqa: ANN001
):
    from safetensors.numpy import load_file, save_file

    src = tmp_path / "w.safetensors"
    weights = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, np.int64)}
    save_file(weights, str(src))
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(src))
    panel = window.edit_panel
    assert panel.pages.currentWidget() is panel.message_page
    assert "not available" in panel.message_title.text()
    assert panel.message.text()
    assert not panel.weights_button.isHidden()
    assert "no graph or code" in panel.weights_note.text()
    dest = tmp_path / "weights-out.safetensors"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a: (str(dest), "")))
    shown: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "information", staticmethod(lambda p, t, text, *a: shown.append(text))
    )
    with qtbot.waitSignal(window.edit.saved, timeout=20000):
        panel.weights_button.click()
    got = load_file(str(dest))
    assert set(got) == {"a", "b"}
    np.testing.assert_array_equal(got["a"], weights["a"])
    np.testing.assert_array_equal(got["b"], weights["b"])
    assert "weights only — no graph or code" in shown[0]
    # the inspector's capability list offers the same export
    assert 'href="action:export_weights"' in window.inspector.toHtml()
    dest.unlink()
    with qtbot.waitSignal(window.edit.saved, timeout=20000):
        window.inspector.anchorClicked.emit(QUrl("action:export_weights"))
    assert set(load_file(str(dest))) == {"a", "b"}


def test_the_onnx_inspector_offers_no_weights_only_export(editing):  # noqa: ANN001
    assert "action:export_weights" not in editing.inspector.toHtml()


def test_save_shows_progress_and_cancel_publishes_nothing(
    qtbot,
    editing,
    nested_model,
    tmp_path,
    monkeypatch,  # noqa: ANN001
):
    import time

    window = editing
    _, name = node_index(nested_model, "Relu")
    commit_rename(qtbot, window, name, "act")
    real_export = EditSession.export

    def slow_export(self, dest, handle=None, **kw):  # noqa: ANN001, ANN202
        for k in range(400):  # ~8 s unless cancelled
            handle.progress(k, 400, "writing")
            handle.check_cancelled()
            time.sleep(0.02)
        return real_export(self, dest, handle, **kw)

    monkeypatch.setattr(EditSession, "export", slow_export)
    dest = tmp_path / "never.onnx"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a: (str(dest), "")))
    window.top_bar.save_button.click()
    assert window.edit.exporting and not window.edit_panel.preview_button.isEnabled()
    dialog = window.edit._progress
    assert dialog is not None and dialog.labelText() == "Saving never.onnx…"
    qtbot.waitUntil(lambda: dialog.value() > 0, timeout=5000)
    dialog.findChild(QPushButton).click()  # the dialog's Cancel button
    qtbot.waitUntil(lambda: not window.edit.exporting, timeout=5000)
    assert "cancelled" in window.status_label.text() and not dest.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".nneditor-export-")]
    assert not window.top_bar.save_button.isHidden() and window.edit.dirty


def test_tensor_bytes_form_is_prefilled_and_the_view_reads_the_patch(qtbot, editing, nested_model):  # noqa: ANN001
    window, panel = editing, editing.edit_panel
    i, _ = node_index(nested_model, "MatMul")
    weight = onnx.load(str(nested_model)).graph.node[i].input[1]
    before = window.index.doc.tensors[weight].read()
    window.session.select(Target.node(i), reveal=True)
    form = panel.choose("Replace tensor bytes")
    assert form.tensor.text() == weight
    assert "float32 [8, 8]" in form.info.text()
    form.offset.setText("4")
    form.hex.setText(np.float32(42.0).tobytes().hex())
    assert "replace 4 bytes at offset 4" in preview(qtbot, panel)
    panel.commit_button.click()
    qtbot.waitUntil(lambda: window.index is not window.source_index, timeout=20000)
    after = window.index.doc.tensors[weight].read()
    assert after[0, 1] == 42.0 and np.array_equal(
        np.delete(after.ravel(), 1), np.delete(before.ravel(), 1)
    )
    np.testing.assert_array_equal(window.source_index.doc.tensors[weight].read(), before)


def test_a_window_without_prompts_shows_the_source_and_keeps_the_journal(
    qtbot,
    window,
    nested_model,  # noqa: ANN001
):
    _, name = node_index(nested_model, "Relu")
    with nneditor.open(nested_model) as doc:
        s = EditSession.open(doc)
        s.apply([{"op": "rename_node", "node": name, "new": "kept"}], "rename")
        s.close()
    window.edit.interactive = False  # as with --screenshot
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(nested_model))
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=10000)
    assert not window.edit.dirty and window.top_bar.save_button.isHidden()
    assert any(n.name == name for n in window.index.graph.nodes)
    window.close_model()
    with nneditor.open(nested_model) as doc:  # the next interactive session can still recover
        again = EditSession.open(doc)
        assert again.recovered and again.chain.revisions[0].description == "rename"
        again.close()
