"""The Python tab widget driving real script workers (pytest-qt, offscreen, no mocks of the engine).

Expected values come from NumPy/SciPy computed here in the test process, never from the
widget or the engine. Every run starts ``python -m nneditor.scripting.worker`` for real.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog

from nneditor.ui.python_tab import PythonTab
from nneditor.ui.python_tab.figures import FigureDialog

POSIX = os.name == "posix"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_TIMEOUT_MS = 90_000

# The script of PRODUCT.md (Bonsai walkthrough), verbatim.
PRODUCT_SCRIPT = """\
logits = np.asarray(tensor)[0, -1].astype(np.float64)
probs = scipy.special.softmax(logits)
top = np.argsort(probs)[-10:][::-1]
print("Top token IDs:", top.tolist())
plt.bar(top.astype(str), probs[top])
plt.xlabel("Token ID")
plt.ylabel("Next-token probability")
plt.tight_layout()
float(scipy.stats.entropy(probs))
"""

SLEEPER = "print('started', flush=True)\nimport time\ntime.sleep(120)\n"


@pytest.fixture
def logits_npy(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1234)
    path = tmp_path / "logits.npy"
    np.save(path, (rng.standard_normal((1, 3, 32)) * 3).astype(np.float32))
    return path


@pytest.fixture
def tab(qtbot, tmp_path: Path, logits_npy: Path):  # noqa: ANN001, ANN201
    widget = PythonTab(workdir=tmp_path / "runs")
    qtbot.addWidget(widget)
    widget.resize(980, 760)
    widget.set_tensor(logits_npy, {"name": "logits", "shape": [1, 3, 32]}, "logits")
    widget.show()
    yield widget
    widget.shutdown()


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _gone(pid: int, within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _run(qtbot, tab: PythonTab, code: str) -> object:  # noqa: ANN001
    """Set ``code``, click Run script and wait for the run's result."""
    tab.set_script(code)
    with qtbot.waitSignal(tab.runFinished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(tab.run_button, Qt.MouseButton.LeftButton)
    return finished.args[0]


def _wait_running_with_output(qtbot, tab: PythonTab, needle: str) -> None:  # noqa: ANN001
    qtbot.waitUntil(lambda: needle in tab.output.toPlainText(), timeout=RUN_TIMEOUT_MS)
    assert tab.status == "running" and tab.is_running


# -- default scripts and the editor (no worker) ----------------------------------------------


def test_logits_tensor_gets_the_product_example(tab):  # noqa: ANN001
    assert tab.script() == PRODUCT_SCRIPT
    assert tab.header.text() == "tensor = logits  ·  float32  ·  1×3×32"
    assert tab.status == "idle" and tab.status_label.text() == "Ready"
    assert tab.run_button.isEnabled() and not tab.stop_button.isEnabled()


def test_default_script_follows_rank_and_kind_and_keeps_edits(tab, tmp_path):  # noqa: ANN001
    rank2 = tmp_path / "l2.npy"
    np.save(rank2, np.zeros((4, 50), np.float32))
    tab.set_tensor(rank2, {}, "lm_head/logits")
    assert tab.script().startswith("logits = np.asarray(tensor)[-1].astype(np.float64)\n")
    hidden = tmp_path / "hidden.npy"
    np.save(hidden, np.zeros((1, 3, 8), np.float32))
    tab.set_tensor(hidden, {"name": "hidden_states"}, "hidden_states")
    assert "print(tensor.shape, tensor.dtype)\ntensor.mean()" in tab.script()
    partial = tmp_path / "partial.npy"
    np.save(partial, np.zeros(10, np.float32))
    tab.set_tensor(partial, {"shape": [1, 3, 248320], "status": "partial"}, "logits")
    assert "metadata['shape']" in tab.script()  # a flat prefix is not treated as logits
    assert "partial capture of [1, 3, 248320]" in tab.header.text()
    tab.set_script("my own script\n")
    tab.set_tensor(hidden, {}, "hidden_states")
    assert tab.script() == "my own script\n"  # an edited script survives a tensor change


def test_editor_tab_inserts_four_spaces_and_return_keeps_indentation(qtbot, tab):  # noqa: ANN001
    editor = tab.editor
    tab.set_script("")
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Tab)
    assert editor.toPlainText() == "    "
    qtbot.keyClicks(editor, "for i in x:")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.keyClicks(editor, "y")
    assert editor.toPlainText() == "    for i in x:\n        y"
    assert "\t" not in editor.toPlainText()
    editor.selectAll()
    qtbot.keyClick(editor, Qt.Key.Key_Backtab)
    assert editor.toPlainText() == "for i in x:\n    y"


def test_highlighter_colours_keywords_strings_and_comments(tab):  # noqa: ANN001
    tab.set_script("def f(x):  # it's a 'comment'\n    return 'a # b' + 12\n")
    doc = tab.editor.document()
    fmts = tab.editor.highlighter.formats

    def colour_at(line: int, column: int) -> str:
        block = doc.findBlockByNumber(line)
        for r in block.layout().formats():
            if r.start <= column < r.start + r.length:
                return r.format.foreground().color().name()
        return "none"

    assert colour_at(0, 0) == fmts["keyword"].foreground().color().name()  # def
    assert colour_at(0, 4) == fmts["definition"].foreground().color().name()  # f
    assert colour_at(0, 16) == fmts["comment"].foreground().color().name()  # quote in comment
    assert colour_at(1, 4) == fmts["keyword"].foreground().color().name()  # return
    assert colour_at(1, 15) == fmts["string"].foreground().color().name()  # '#' in a string
    assert colour_at(1, 21) == fmts["number"].foreground().color().name()
    assert colour_at(1, 19) == "none"  # the + operator


# -- the PRODUCT.md example -------------------------------------------------------------------


def test_softmax_example_shows_output_result_and_figure(
    qtbot,
    tab,
    logits_npy,
    tmp_path,
    unchanged,
    monkeypatch,  # noqa: ANN001
):
    special = pytest.importorskip("scipy.special")
    stats = pytest.importorskip("scipy.stats")
    pytest.importorskip("matplotlib")
    check = unchanged(logits_npy)
    logits = np.load(logits_npy)[0, -1].astype(np.float64)
    probs = special.softmax(logits)
    expected_top = np.argsort(probs)[-10:][::-1].tolist()
    expected_entropy = float(stats.entropy(probs))

    with qtbot.waitSignal(tab.runFinished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.keyClick(tab.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        assert tab.status == "running" and not tab.run_button.isEnabled()
    result = finished.args[0]

    assert tab.script() == PRODUCT_SCRIPT  # Ctrl+Return ran it without inserting a newline
    assert result.status == "ok", result.error
    assert tab.status == "ok" and tab.status_label.text().startswith("OK · ")
    assert tab.output.toPlainText() == f"Top token IDs: {expected_top}\n"
    assert result.result_value == pytest.approx(expected_entropy, rel=1e-12)
    shown = tab.result_line.text()
    assert shown.startswith("Result (float): ")
    assert float(shown.split(": ", 1)[1]) == pytest.approx(expected_entropy, rel=1e-12)
    assert len(tab.figure_strip.thumbs) == 1 and tab.figure_strip.isVisible()
    thumb = tab.figure_strip.thumbs[0]
    assert not thumb.pixmap().isNull() and thumb.pixmap().height() >= 90
    assert thumb.figure.data[:8] == PNG_MAGIC
    assert tab.run_button.isEnabled() and not tab.stop_button.isEnabled()

    shot = tab.grab()
    assert (shot.width(), shot.height()) == (980, 760)
    assert shot.save(str(tmp_path / "python_tab.png"))

    qtbot.mouseClick(thumb, Qt.MouseButton.LeftButton)
    dialogs = [w for w in QApplication.topLevelWidgets() if isinstance(w, FigureDialog)]
    assert len(dialogs) == 1 and dialogs[0].isVisible()
    target = tmp_path / "saved" / "entropy"
    target.parent.mkdir()
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    qtbot.mouseClick(dialogs[0].save_button, Qt.MouseButton.LeftButton)
    assert target.with_suffix(".png").read_bytes() == thumb.figure.data
    dialogs[0].close()
    check()


def test_in_place_processing_leaves_the_npy_byte_identical(qtbot, tab, logits_npy, unchanged):  # noqa: ANN001
    check = unchanged(logits_npy)
    before = np.load(logits_npy)
    result = _run(qtbot, tab, "tensor *= 0\nfloat(np.abs(tensor).sum())")
    assert result.status == "ok", result.error
    assert result.result_value == 0.0  # the script's private copy really was zeroed
    assert tab.result_line.text() == "Result (float): 0.0"
    check()
    np.testing.assert_array_equal(np.load(logits_npy), before)


# -- limits, stop and close -------------------------------------------------------------------


def test_timeout_stops_a_busy_loop_and_the_widget_stays_responsive(qtbot, tab):  # noqa: ANN001
    ticks: list[float] = []
    heartbeat = QTimer()
    heartbeat.setInterval(20)
    heartbeat.timeout.connect(lambda: ticks.append(time.monotonic()))
    tab.timeout_spin.setValue(1)
    tab.set_script("while True: pass")
    heartbeat.start()
    qtbot.mouseClick(tab.run_button, Qt.MouseButton.LeftButton)
    pid = tab.driver.process.pid
    qtbot.waitUntil(lambda: tab.status_label.text().startswith("Running…"), timeout=60_000)
    qtbot.waitUntil(lambda: tab.status == "timeout", timeout=RUN_TIMEOUT_MS)
    heartbeat.stop()

    gaps = np.diff(ticks)
    assert len(ticks) > 20 and gaps.max() < 0.5, f"event loop stalled for {gaps.max():.2f} s"
    assert tab.status_label.text().startswith("Timeout · ")
    assert "The script did not finish within the 1 s timeout and was stopped." in (
        tab.output.toPlainText()
    )
    assert _gone(pid)
    result = _run(qtbot, tab, "1 + 1")  # a button click works afterwards
    assert result.status == "ok" and tab.result_line.text() == "Result (int): 2"


@pytest.mark.skipif(not POSIX, reason="RLIMIT_AS is POSIX only")
def test_allocation_beyond_the_ram_limit_is_a_memory_status(qtbot, tab):  # noqa: ANN001
    tab.ram_spin.setValue(256)
    result = _run(qtbot, tab, "x = 1\na = np.ones(480 * 2**20 // 8)\n")
    assert result.status == "memory"
    assert tab.status == "memory"
    assert tab.status_label.text().startswith("Out of memory (RAM limit 256 MB) · ")
    assert "The script exceeded the RAM limit of 256 MB (line 2)." in tab.output.toPlainText()
    marked = tab.editor.extraSelections()
    assert len(marked) == 1 and marked[0].cursor.blockNumber() == 1
    assert tab.run_button.isEnabled()


def test_stop_ends_a_running_script(qtbot, tab):  # noqa: ANN001
    tab.set_script(SLEEPER)
    qtbot.mouseClick(tab.run_button, Qt.MouseButton.LeftButton)
    pid = tab.driver.process.pid
    _wait_running_with_output(qtbot, tab, "started\n")  # streamed while it runs
    assert tab.stop_button.isEnabled()
    t0 = time.monotonic()
    with qtbot.waitSignal(tab.runFinished, timeout=10_000) as finished:
        qtbot.mouseClick(tab.stop_button, Qt.MouseButton.LeftButton)
    assert time.monotonic() - t0 < 5
    assert finished.args[0].status == "stopped"
    assert tab.status == "stopped" and tab.status_label.text().startswith("Stopped · ")
    assert tab.output.toPlainText() == ("started\nThe script was stopped before it finished.\n")
    assert _gone(pid)
    assert tab.run_button.isEnabled() and not tab.stop_button.isEnabled()


def test_closing_the_widget_mid_run_leaves_no_process(qtbot, tab):  # noqa: ANN001
    tab.set_script(SLEEPER)
    assert tab.run()
    process = tab.driver.process
    _wait_running_with_output(qtbot, tab, "started")
    assert _alive(process.pid)
    tab.close()
    assert _gone(process.pid)
    assert process.result is not None and process.result.status == "stopped"
    assert not process.run_dir.exists()


def test_destroying_the_host_mid_run_leaves_no_process(qtbot, tmp_path, logits_npy):  # noqa: ANN001
    import shiboken6
    from PySide6.QtWidgets import QWidget

    host = QWidget()
    tab = PythonTab(host)  # its own temporary work folder
    tab.set_tensor(logits_npy, {}, "logits")
    tab.set_script(SLEEPER)
    assert tab.run()
    process = tab.driver.process
    workdir = process.run_dir.parent
    _wait_running_with_output(qtbot, tab, "started")
    shiboken6.delete(host)  # no close event reaches the tab
    assert _gone(process.pid)
    assert not workdir.exists()


# -- errors and output handling ---------------------------------------------------------------


def test_error_shows_the_script_traceback_and_marks_the_line(qtbot, tab):  # noqa: ANN001
    result = _run(qtbot, tab, "def f(a):\n    return a.reshape(5, 5)\nprint('before')\nf(tensor)\n")
    assert result.status == "error"
    text = tab.output.toPlainText()
    assert text.startswith("before\nTraceback (most recent call last):\n")
    assert 'File "<script>", line 2, in f' in text
    assert "ValueError: cannot reshape array of size 96 into shape (5,5)" in text
    assert "worker.py" not in text and "cell.py" not in text
    assert tab.status_label.text().startswith("Error at line 2 · ")
    assert tab.editor.extraSelections()[0].cursor.blockNumber() == 1
    assert not tab.result_line.isVisible()


def test_each_run_clears_the_previous_output_figures_and_folder(qtbot, tab):  # noqa: ANN001
    pytest.importorskip("matplotlib")
    first = _run(qtbot, tab, "print('first')\nplt.plot([1, 2])\nresult = np.arange(3)")
    assert first.status == "ok" and len(tab.figure_strip.thumbs) == 1
    assert tab.result_line.text() == "Result (numpy.ndarray, shape (3,), int64): array([0, 1, 2])"
    second = _run(qtbot, tab, "import sys\nprint('second')\nprint('oops', file=sys.stderr)")
    assert second.status == "ok"
    assert tab.output.toPlainText() == "second\noops\n"
    stderr_colour = tab.output.document().findBlockByNumber(1).begin().fragment().charFormat()
    stdout_colour = tab.output.document().findBlockByNumber(0).begin().fragment().charFormat()
    assert stderr_colour.foreground().color() != stdout_colour.foreground().color()
    assert tab.result_line.text() == (
        "No result: end the script with an expression or assign `result`."
    )
    assert tab.figure_strip.thumbs == [] and not tab.figure_strip.isVisible()
    assert not first.run_dir.exists() and second.run_dir.exists()


def test_a_run_that_cannot_start_is_reported(qtbot, tab, logits_npy):  # noqa: ANN001
    tab.set_tensor(logits_npy, {"bad": object()}, "logits")
    assert tab.run() is False
    assert tab.status == "error"
    assert tab.output.toPlainText().startswith(
        "The script could not be started: metadata cannot be passed to the script"
    )
    assert tab.run_button.isEnabled() and not tab.is_running


def test_a_flood_of_output_keeps_the_gui_responsive(qtbot, tab):  # noqa: ANN001
    ticks: list[float] = []
    heartbeat = QTimer()
    heartbeat.setInterval(20)
    heartbeat.timeout.connect(lambda: ticks.append(time.monotonic()))
    heartbeat.start()
    code = "print('x' * 600_000)\nfor i in range(50_000): print(i)"
    result = _run(qtbot, tab, code)
    heartbeat.stop()
    assert result.status == "ok", result.error
    expected = "x" * 600_000 + "\n" + "".join(f"{i}\n" for i in range(50_000))
    assert result.stdout == expected
    # the pane breaks the 600,000-character line into paragraphs of at most 2,000
    shown = tab.output.toPlainText()
    assert shown.replace("\n", "") == expected.replace("\n", "")
    assert max(len(line) for line in shown.splitlines()) == 2000
    gaps = np.diff(ticks)
    assert gaps.max() < 1.0, f"event loop stalled for {gaps.max():.2f} s"
