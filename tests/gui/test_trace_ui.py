"""Tracing in the desktop window: Trace panel -> Traced model pane -> tensor overlay.

The traced values are checked against the capture files and against an independent
ONNX Runtime session on the same inputs; the source model is never modified.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy as safetensors_numpy

pytest.importorskip("PySide6")

from PySide6.QtCore import QPoint, Qt, QUrl  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def _traced(window, qtbot, timeout: int = 90000):  # noqa: ANN001, ANN202
    feature = window.trace
    feature.show_view("Trace")
    assert window.central.currentWidget() is feature.page
    panel = feature.panel
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=timeout)
    assert runs, panel.outcome.text()
    return feature, runs[0]


def _all_port_values(pane) -> set[str]:  # noqa: ANN001
    return {v for p in pane.port_items() for v in p.port.values}


def _click_port(qtbot, pane, item) -> None:  # noqa: ANN001
    view = pane.workbench.view
    view.centerOn(item.scenePos())
    pos = view.mapFromScene(item.scenePos())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))


def test_trace_panel_runs_and_ports_open_the_overlay(qtbot, open_model, window) -> None:  # noqa: ANN001
    ort = pytest.importorskip("onnxruntime")
    before = (EXAMPLE.read_bytes(), EXAMPLE.stat().st_mtime_ns)
    open_model(EXAMPLE)
    window.trace.show_view("Trace")  # inputs and plan are made when shown
    feature = window.trace
    text = feature.panel.plan_text.toPlainText()
    assert "backend:" in text and "device:" in text and "limits: wall clock" in text
    assert feature.inputs.table.rowCount() == 1
    assert "seq" in feature.inputs.assumptions.text()  # the symbolic dim set to 1 is stated
    assert feature.inputs.generate_and_assign()
    assert "generated set" in feature.panel.plan_text.toPlainText()
    feature, run = _traced(window, qtbot)
    assert window.central.currentWidget() is feature.traced
    assert window.top_bar.device.text() == run.provider_name
    pane = feature.traced
    pane.session.set_depth(4)  # operators: every captured value has a port
    qtbot.waitUntil(lambda: bool(pane.port_items()), timeout=10000)
    captured = {n for n in run.records if run.status(n) == "captured"}
    assert captured and captured <= _all_port_values(pane)
    # click the output port of the model's logits and compare with the file and ORT
    port = next(p for p in pane.port_items("logits") if not p.port.more)
    assert "logits" in port.toolTip() and "captured" in port.toolTip()
    _click_port(qtbot, pane, port)
    qtbot.waitUntil(lambda: bool(feature.overlays), timeout=5000)
    overlay = feature.overlays[-1]
    stored = safetensors_numpy.load_file(str(run.file("logits")))["logits"]  # reference reader
    np.testing.assert_array_equal(np.asarray(overlay.array), stored)
    feed = {n: np.asarray(feature.panel.arrays[n]) for n in feature.panel.arrays}
    sess = ort.InferenceSession(str(EXAMPLE), providers=["CPUExecutionProvider"])
    (expected,) = sess.run(["logits"], feed)
    np.testing.assert_allclose(stored, expected, rtol=1e-5, atol=1e-6)
    panel_ref = overlay.tensor_panel.ref
    np.testing.assert_array_equal(panel_ref.read(), stored)
    overlay.show_tab("Python")
    assert overlay.python_tab.tensor_path == run.file("logits")
    assert overlay.python_tab.tensor_location == run.location("logits")
    assert "<f4  ·  1×1×96" in overlay.python_tab.header.text()
    overlay.close()
    assert (EXAMPLE.read_bytes(), EXAMPLE.stat().st_mtime_ns) == before


def test_limit_change_withdraws_the_approval(qtbot, open_model, window) -> None:  # noqa: ANN001
    from nneditor.tracing.approval import ApprovalError, verify

    open_model(EXAMPLE)
    window.trace.show_view("Trace")  # inputs and plan are made when shown
    panel = window.trace.panel
    old = panel.approve_current()
    assert old is not None and panel.approval is old
    panel.limits["capture_mb"].setValue(1.0)
    assert panel.approval is None
    assert "withdrawn" in panel.approval_label.text()
    assert "capture budget 1 MB" in panel.plan_text.toPlainText()
    with pytest.raises(ApprovalError, match="the limits changed"):
        verify(old, panel.plan)


def test_cancel_publishes_nothing_and_stays_responsive(qtbot, open_model, window) -> None:  # noqa: ANN001
    from nneditor.tracing.runner import TraceRunner
    from nneditor.tracing.worker import TEST_HOOKS_ENV
    from nneditor.ui.trace.store import list_runs, traces_root

    open_model(EXAMPLE)
    window.trace.show_view("Trace")  # inputs and plan are made when shown
    panel = window.trace.panel
    panel.trace_runner = TraceRunner(extra_env={TEST_HOOKS_ENV: "1"})
    panel.test_hooks = {"sleep_s": 60}
    assert panel.approve_and_run()
    qtbot.wait(800)
    assert panel.running and panel.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: panel.elapsed.text().endswith(" s"), timeout=3000)  # the UI ticks
    with qtbot.waitSignal(panel.traceFailed, timeout=20000) as blocker:
        panel.cancel()
    assert "cancelled" in blocker.args[0] and "nothing was published" in blocker.args[0]
    assert not panel.running and panel.run_button.isEnabled()
    assert list_runs(root=traces_root()) == []
    assert [p.name for p in traces_root().iterdir()] == []


def test_picker_rejects_mismatched_tensor_file(qtbot, open_model, window, tmp_path) -> None:  # noqa: ANN001
    open_model(EXAMPLE)
    window.trace.show_view("Trace")  # inputs and plan are made when shown
    inputs = window.trace.inputs
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((1, 2), np.float32))
    assert not inputs.assign_path(bad)
    assert (
        "expects int64" in inputs.status.text() and "given float32 [1, 2]" in inputs.status.text()
    )
    good = tmp_path / "ids.npz"
    np.savez(good, input_ids=np.array([[1, 2, 3]], np.int64))
    assert inputs.assign_path(good)
    assert window.trace.panel.arrays is not None
    assert "input_ids int64 [1, 3]" in window.trace.panel.plan_text.toPlainText()


def test_open_trace_screenshot_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "NNEDITOR_HOME": str(tmp_path / "h")}
    trace = tmp_path / "trace"
    proc = subprocess.run(
        [sys.executable, "-m", "nneditor", "trace", str(EXAMPLE), "--out", str(trace), "--yes"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "shot.png"
    cmd = [sys.executable, "-m", "nneditor", str(EXAMPLE), "--open-trace", str(trace)]
    proc = subprocess.run(
        [*cmd, "--select", "logits", "--screenshot", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    bad = subprocess.run(
        [*cmd[:4], "--open-trace", str(tmp_path), "--screenshot", str(tmp_path / "x.png")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert bad.returncode == 2
    assert "is not a trace folder: it has no manifest.json" in bad.stderr


@pytest.mark.realdata
def test_realdata_silero_trace_shows_ports(qtbot, open_model, window, realdata, tmp_path) -> None:  # noqa: ANN001
    path = realdata("silero_vad_16k_op15.onnx")
    open_model(path)
    window.trace.show_view("Trace")  # inputs and plan are made when shown
    feed = tmp_path / "feed.npz"
    t = np.arange(512, dtype=np.float32) / 16000
    np.savez(
        feed,
        input=(0.3 * np.sin(2 * np.pi * 440 * t))[None].astype(np.float32),
        state=np.zeros((2, 1, 128), np.float32),
        sr=np.array(16000, np.int64),
    )
    assert window.trace.inputs.assign_path(feed), window.trace.inputs.status.text()
    feature, run = _traced(window, qtbot, timeout=180000)
    pane = feature.traced
    qtbot.waitUntil(lambda: bool(pane.port_items()), timeout=10000)
    shown = _all_port_values(pane)
    assert any(run.status(v) == "captured" for v in shown)


def test_partial_capture_is_labelled_partial(qtbot, open_model, window) -> None:  # noqa: ANN001
    open_model(EXAMPLE)
    window.trace.show_view("Trace")  # inputs and plan are made when shown
    window.trace.panel.limits["capture_mb"].setValue(0.003)  # ~3 KB of the 6 KB of values
    feature, run = _traced(window, qtbot)
    assert run.partial and "PARTIAL TRACE" in feature.traced.summary.text()
    (name,) = [n for n in run.records if run.status(n) == "partial"]
    rec = run.record(name)
    overlay = feature.open_overlay(name)
    assert overlay is not None and "partial" in overlay.windowTitle()
    assert overlay.metadata["partial"] and overlay.metadata["shape"] == rec["shape"]
    assert overlay.tensor_panel.is_partial
    assert overlay.python_tab.metadata["shape"] == rec["shape"]
    stored = safetensors_numpy.load_file(str(run.file(name)))[name]
    assert stored.ndim == 1 and stored.size < np.prod(rec["shape"])
    np.testing.assert_array_equal(np.asarray(overlay.array), stored)
    dropped = [n for n in run.records if run.status(n) == "dropped"]
    assert dropped and "capture budget" in run.record(dropped[0])["reason"]
    overlay.close()


def test_the_trace_view_prestarts_the_worker_its_run_uses(qtbot, open_model, window) -> None:  # noqa: ANN001
    import psutil

    pytest.importorskip("onnxruntime")
    open_model(EXAMPLE)
    panel = window.trace.panel
    assert panel.plan is None and panel.trace_runner._warm is None  # nothing before the view
    window.trace.show_view("Trace")
    assert panel.plan is not None and window.trace.inputs.table.rowCount() == 1
    qtbot.waitUntil(lambda: panel.trace_runner._warm is not None, timeout=10000)
    warm = panel.trace_runner._warm
    assert warm is not None
    _traced(window, qtbot)
    assert panel.result is not None and panel.result.worker_pid == warm.proc.pid
    qtbot.waitUntil(lambda: panel.trace_runner._warm is not None, timeout=10000)
    idle = panel.trace_runner._warm
    assert idle is not None and idle.proc.pid != warm.proc.pid
    panel.set_document(None)  # no traceable model: the idle worker is stopped
    assert panel.trace_runner._warm is None
    assert not psutil.pid_exists(idle.proc.pid) or (
        psutil.Process(idle.proc.pid).status() == psutil.STATUS_ZOMBIE
    )


def test_the_traced_pane_exports_every_capture_as_npy(qtbot, open_model, window, tmp_path) -> None:  # noqa: ANN001
    open_model(EXAMPLE)
    pane = window.trace.traced
    assert not pane.export_button.isEnabled()  # no trace yet
    feature, run = _traced(window, qtbot)
    assert pane.export_button.isEnabled() and pane.export_button.isVisible()
    dest = tmp_path / "npy"
    assert pane.export_npy(dest)
    qtbot.waitUntil(lambda: bool(pane.export_note), timeout=20000)
    stored = [n for n in run.records if run.status(n) in ("captured", "partial")]
    files = sorted(dest.glob("*.npy"))
    assert pane.export_note == f"Exported {len(stored)} .npy files to {dest}"
    assert len(files) == len(stored) and pane.drift_label.text() == pane.export_note
    values = safetensors_numpy.load_file(str(run.path / "values.safetensors"))
    for name in stored:
        rec = run.record(name)
        assert rec is not None
        (path,) = [f for f in files if f.name.startswith(f"{rec['index']:05d}_")]
        want = values[name] if name in values else np.load(run.path / rec["file"])
        np.testing.assert_array_equal(np.load(path, allow_pickle=False), want)


def test_operators_and_connections_open_their_traced_values(qtbot, open_model, window) -> None:  # noqa: ANN001
    open_model(EXAMPLE)
    feature, run = _traced(window, qtbot)
    pane = feature.traced
    pane.session.set_depth(4)  # operators
    qtbot.waitUntil(lambda: bool(pane.port_items()), timeout=10000)
    level = pane.session.level
    graph = pane.index.graph
    gelu = next(
        it for it in level.items if it.kind == "node" and graph.nodes[it.node].op_type == "Gelu"
    )
    value = graph.nodes[gelu.node].outputs[0]
    pane.workbench.view.itemClicked.emit(gelu.key)  # what a click on the operator sends
    qtbot.waitUntil(lambda: bool(feature.overlays), timeout=5000)
    np.testing.assert_array_equal(np.asarray(feature.overlays[-1].array), run.load(value))
    feature.overlays[-1].close()
    qtbot.waitUntil(lambda: not feature.overlays, timeout=5000)
    k = next(i for i, e in enumerate(level.edges) if e.values == [value])
    pane.workbench.view.edgeClicked.emit(k)  # the connection out of the Gelu carries it
    qtbot.waitUntil(lambda: bool(feature.overlays), timeout=5000)
    assert feature.overlays[-1].name == value
    # a value the run does not have is said, not opened
    before = len(feature.overlays)
    pane.open_values(["not-a-value"])
    assert len(feature.overlays) == before and "not captured" in pane.summary.text()


def test_the_model_graph_inspector_lists_and_opens_the_latest_trace(
    qtbot, open_model, window
) -> None:  # noqa: ANN001
    from nneditor.ui.targets import Target

    open_model(EXAMPLE)
    graph = window.index.graph
    i = next(k for k, n in enumerate(graph.nodes) if n.op_type == "Gelu")
    value = graph.nodes[i].outputs[0]
    window.session.select(Target.node(i))
    assert "Latest trace" not in window.inspector.toPlainText()  # nothing traced yet
    feature, run = _traced(window, qtbot)
    feature.show_view("Model graph")
    window.session.select(Target.node(i))
    text = window.inspector.toPlainText().replace("\u200b", "")
    shape = "[" + ", ".join(map(str, run.record(value)["shape"])) + "]"
    section = text.split("Latest trace", 1)[1].split("Click a value", 1)[0]
    assert value.rsplit("/", 1)[-1] in section and "captured" in section and shape in section
    window.inspector.anchorClicked.emit(QUrl(f"trace:{value}"))  # the value's link
    qtbot.waitUntil(lambda: bool(feature.overlays), timeout=5000)
    assert feature.overlays[-1].name == value
    np.testing.assert_array_equal(np.asarray(feature.overlays[-1].array), run.load(value))


def test_the_plus_port_chooser_and_the_trace_picker(qtbot, open_model, window) -> None:  # noqa: ANN001
    from types import SimpleNamespace

    from nneditor.ui.trace.ports import Port

    open_model(EXAMPLE)
    feature, first = _traced(window, qtbot)
    feature.show_view("Trace")
    feature.panel.limits["timeout_s"].setValue(599)  # another plan: another approval
    feature, second = _traced(window, qtbot)
    pane = feature.traced
    assert pane.run is second and [r.path for r in pane.runs[:2]] == [second.path, first.path]
    # the "+" port of a wide block lists every value of its side with its status
    values = [n for n in second.records if second.status(n) == "captured"][:3]
    pane.activate_port(SimpleNamespace(port=Port("out", tuple(values), more=True)))
    actions = pane.chooser.actions()
    assert [a.text().split()[0] for a in actions] == values
    assert all("[captured]" in a.text() for a in actions)
    actions[1].trigger()
    qtbot.waitUntil(lambda: bool(feature.overlays), timeout=5000)
    assert feature.overlays[-1].name == values[1]
    # the picker shows an earlier run of the model (what choosing its row sends)
    pane.picker.setCurrentIndex(1)
    pane.picker.activated.emit(1)
    assert pane.run is not None and pane.run.path == first.path


def test_the_trace_page_stacks_its_panels_when_they_do_not_fit_side_by_side(
    qtbot,  # noqa: ANN001
    open_model,  # noqa: ANN001
    window,  # noqa: ANN001
) -> None:
    from PySide6.QtCore import Qt

    open_model(EXAMPLE)
    window.trace.show_view("Trace")
    page = window.trace.page
    need = sum(page.widget(k).widget().minimumSizeHint().width() for k in range(2))
    for width, want in ((1400, Qt.Orientation.Vertical), (2200, Qt.Orientation.Horizontal)):
        window.resize(width, 900)
        qtbot.waitUntil(lambda w=want: page.orientation() == w, timeout=3000)
        if want == Qt.Orientation.Horizontal:
            assert page.width() >= need
            for k in range(2):  # nothing clipped: no horizontal scroll bar
                assert not page.widget(k).horizontalScrollBar().isVisible()


def test_a_text_input_offers_words_or_a_file_and_traces(
    qtbot, open_model, window, tmp_path
) -> None:  # noqa: ANN001
    """A string input (ai.onnx.ml CategoryMapper) gets the model's categories as automatic
    values; its source list holds only what makes text; the trace equals ONNX Runtime's."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node(
                "CategoryMapper",
                ["word"],
                ["id"],
                domain="ai.onnx.ml",
                cats_strings=["cat", "dog"],
                cats_int64s=[7, 9],
                default_int64=-1,
            )
        ],
        "g",
        [helper.make_tensor_value_info("word", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("id", TensorProto.INT64, ["n"])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)]
    )
    path = tmp_path / "words.onnx"
    path.write_bytes(model.SerializeToString())
    open_model(path)
    feature = window.trace
    feature.show_view("Trace")
    combo = feature.inputs.table.cellWidget(0, 3)
    assert [combo.itemData(i) for i in range(combo.count())] == ["auto", "tensor"]
    assert "words from the model's own vocabulary" in feature.inputs.assumptions.text()
    assert feature.inputs.generate_and_assign()
    feature, run = _traced(window, qtbot)
    word = np.asarray(feature.panel.arrays["word"])
    assert word.tolist() == ["cat"]
    (expected,) = ort.InferenceSession(str(path)).run(None, {"word": word})
    assert expected.tolist() == [7]
    stored = safetensors_numpy.load_file(str(run.file("id")))["id"]
    np.testing.assert_array_equal(stored, expected)
