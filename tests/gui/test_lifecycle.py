"""Opening, closing, errors, background jobs and the --screenshot path."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def _top_levels() -> set[int]:
    return {id(w) for w in QApplication.topLevelWidgets() if w.isVisible()}


def test_open_close_cycles_leak_nothing(qtbot, window, open_model, nested_model, unchanged):  # noqa: ANN001
    check = unchanged(nested_model)
    threads_before = threading.active_count()
    open_model(nested_model)
    window.close_model()
    baseline = _top_levels()
    for _ in range(3):
        open_model(nested_model)
        assert window.central_widget is window.workbench
        with qtbot.waitSignal(window.documentClosed, timeout=5000):
            window.top_bar.close_button.click()
        assert window.central_widget is window.start
        assert window.index is None and window.session is None
        assert window.workbench.scene.item_count == 0
        assert not window.left_dock.isVisible()
    assert _top_levels() == baseline
    assert window.runner.wait(5000)
    assert window.runner.pool.activeThreadCount() == 0
    assert threading.active_count() <= threads_before + 1
    check()


def test_recent_files_are_listed_and_reopen(qtbot, window, open_model, nested_model):  # noqa: ANN001
    open_model(nested_model)
    window.close_model()
    items = [window.start.recents.item(i) for i in range(window.start.recents.count())]
    assert [it.toolTip() for it in items] == [str(nested_model.resolve())]
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.start.recents.itemClicked.emit(items[0])
    assert window.index is not None


def test_corrupt_file_shows_the_error_and_start_screen_stays_usable(
    qtbot,
    window,
    open_model,
    tmp_path,
    monkeypatch,  # noqa: ANN001
):
    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(
        QMessageBox,
        "critical",
        staticmethod(lambda parent, title, text, *a: shown.append((title, text))),
    )
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(EXAMPLE.read_bytes()[:3000])
    with qtbot.waitSignal(window.openFailed, timeout=30000):
        window.open_path(str(bad))
    assert len(shown) == 1
    title, text = shown[0]
    assert title == "Cannot open this file"
    assert "broken.onnx" in text and text.endswith(".")
    assert "Traceback" not in text
    assert window.central_widget is window.start
    assert window.start.open_button.isEnabled()
    # still usable: a good model opens afterwards
    open_model(EXAMPLE)
    assert window.index is not None and window.index.doc.format == "onnx"


def test_unknown_file_error_names_the_problem(qtbot, window, tmp_path, monkeypatch):  # noqa: ANN001
    shown: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "critical", staticmethod(lambda parent, title, text, *a: shown.append(text))
    )
    junk = tmp_path / "notes.txt"
    junk.write_text("just some text, not a model\n")
    with qtbot.waitSignal(window.openFailed, timeout=30000):
        window.open_path(str(junk))
    assert shown and "not a model format NNEditor recognises" in shown[0]


def test_a_newer_open_supersedes_an_older_one(qtbot, window, nested_model):  # noqa: ANN001
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(EXAMPLE))
        window.open_path(str(nested_model))
    assert window.runner.wait(10000)
    qtbot.wait(50)
    assert window.index is not None and window.index.doc.path == nested_model


def test_tensor_panel_opens_from_the_inspector(qtbot, window, open_model, nested_model):  # noqa: ANN001
    import onnx
    from onnx import numpy_helper
    from PySide6.QtCore import Qt

    from nneditor.ui.tensor.dialog import TensorPanelDialog

    open_model(nested_model)
    opened: list[TensorPanelDialog] = []
    window.inspector.tensorRequested.emit("b1.fc1")
    qtbot.waitUntil(
        lambda: bool(opened.extend(w for w in window.findChildren(TensorPanelDialog)) or opened),
        timeout=5000,
    )
    dialog = opened[0]
    model = dialog.panel.view_tab.model
    qtbot.waitUntil(lambda: model.rowCount() > 0 and model.columnCount() > 0, timeout=10000)
    ref = next(t for t in onnx.load(nested_model).graph.initializer if t.name == "b1.fc1")
    first = numpy_helper.to_array(ref)[0, 0]
    text = model.data(model.index(0, 0), Qt.ItemDataRole.DisplayRole)
    assert float(text) == pytest.approx(float(first), rel=1e-5)
    assert "b1" in dialog.panel.meta.toPlainText()
    dialog.close()


def test_job_runner_drops_stale_results(qtbot):  # noqa: ANN001
    from nneditor.ui.jobs import QtJobRunner

    runner = QtJobRunner()
    got: list[object] = []
    gate = threading.Event()

    def slow(handle):  # noqa: ANN001, ANN202
        gate.wait(5)
        return "old"

    discarded: list[object] = []
    runner.submit(slow, lambda r: got.append(r.value), channel="c", on_discard=discarded.append)
    runner.submit(lambda h: "new", lambda r: got.append(r.value), channel="c")
    gate.set()
    assert runner.wait(5000)
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)
    assert got == ["new"]
    assert discarded == ["old"]
    assert runner.shutdown()
    assert runner.pool.activeThreadCount() == 0


def test_job_errors_and_progress_arrive_on_the_gui_thread(qtbot):  # noqa: ANN001
    from nneditor.ui.jobs import QtJobRunner

    runner = QtJobRunner()
    seen: list[tuple[str, bool]] = []
    main = threading.get_ident()

    def job(handle):  # noqa: ANN001, ANN202
        handle.progress(1, 2, "half")
        raise ValueError("boom")

    runner.submit(
        job,
        lambda r: seen.append((f"done:{r.error}", threading.get_ident() == main)),
        on_progress=lambda d, t, m: seen.append((m, threading.get_ident() == main)),
    )
    qtbot.waitUntil(lambda: any(s[0].startswith("done") for s in seen), timeout=5000)
    assert ("half", True) in seen
    assert ("done:boom", True) in seen
    runner.shutdown()


@pytest.mark.parametrize(
    "extra", [[], ["--level", "operators", "--select", "/blocks.0/attn/Softmax_13"]]
)
def test_screenshot_writes_a_png(tmp_path: Path, extra: list[str]) -> None:
    out = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", NNEDITOR_CONFIG_DIR=str(tmp_path / "cfg"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nneditor",
            str(EXAMPLE),
            "--screenshot",
            str(out),
            "--size",
            "1100x720",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert (img.width(), img.height()) == (1100, 720)


def test_screenshot_of_a_bad_file_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", NNEDITOR_CONFIG_DIR=str(tmp_path / "cfg"))
    proc = subprocess.run(
        [sys.executable, "-m", "nneditor", str(bad), "--screenshot", str(tmp_path / "x.png")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("nneditor:")]
    assert len(lines) == 1 and "bad.onnx" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_cancel_while_opening_keeps_the_start_screen(qtbot, window, nested_model, monkeypatch):  # noqa: ANN001
    import time

    from nneditor.ui import main_window

    real_open = main_window.api.open

    def slow_open(path):  # noqa: ANN001, ANN202
        time.sleep(0.4)
        return real_open(path)

    monkeypatch.setattr(main_window.api, "open", slow_open)
    window.open_path(str(nested_model))
    assert window.cancel_button.isVisible() or not window.isVisible()
    window.cancel_open()
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=10000)
    assert window.index is None
    assert window.central_widget is window.start
    assert "cancelled" in window.status_label.text().lower()


def test_dropping_a_file_opens_it(qtbot, window, nested_model):  # noqa: ANN001
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(nested_model))])
    event = QDropEvent(
        QPointF(20, 20),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.start.dropEvent(event)
    assert window.index is not None and window.index.doc.path == nested_model


def test_a_first_level_laid_out_in_the_background_is_shown(qtbot, window, tmp_path):  # noqa: ANN001
    """Over SYNC_LAYOUT_ITEMS items the layout runs on the job runner, which the Traced model
    pane's canvas shares: its layout on the same channel dropped the model graph's, and the
    window never painted (a 388-operator TFLite face detector hung --screenshot)."""
    import onnx
    from onnx import TensorProto, helper

    from nneditor.ui.workbench import SYNC_LAYOUT_ITEMS

    n = SYNC_LAYOUT_ITEMS + 30
    nodes = [
        helper.make_node("Relu", [f"v{k}"], [f"v{k + 1}"], name=f"model/layer_{k}x/Relu")
        for k in range(n)
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [1, 4])],
    )
    path = tmp_path / "wide.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(path))
    assert len(window.session.level.items) > SYNC_LAYOUT_ITEMS
    assert window.workbench.scene.item_count > SYNC_LAYOUT_ITEMS


def test_a_narrow_window_shortens_the_actions_not_the_views(qtbot, window, open_model) -> None:  # noqa: ANN001
    """At 1,100 px the model actions take their short labels and the view switcher keeps its
    whole names; at 1,400 px every label is whole again."""
    from PySide6.QtWidgets import QAbstractButton

    open_model(EXAMPLE)
    bar = window.top_bar

    def buttons() -> list[QAbstractButton]:
        return [b for b in bar.findChildren(QAbstractButton) if b.text() in VIEWS]

    window.resize(1100, 700)
    qtbot.waitUntil(lambda: bar.compact, timeout=3000)
    assert bar.open_button.text() == "Open" and bar.types_button.text() == "Types"
    assert bar.open_button.toolTip().startswith("Open a model file")
    qtbot.wait(50)  # the layout settles
    assert sorted(b.text() for b in buttons()) == sorted(VIEWS)
    for b in buttons():  # drawn whole: its width holds its text
        assert b.width() >= b.fontMetrics().horizontalAdvance(b.text()), b.text()
    window.resize(1400, 700)
    qtbot.waitUntil(lambda: not bar.compact, timeout=3000)
    assert bar.open_button.text() == "Open model"


VIEWS = ("Model graph", "Trace", "Traced model")
