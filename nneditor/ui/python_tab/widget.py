"""The Python tab: a script editor over a captured tensor, run in a fresh worker per run.

Layout: a header naming the tensor, a control row (Run script, Stop, Timeout, RAM, status),
then a vertical splitter with the editor, the colour-coded output with the result line, and a
strip of figure thumbnails (shown only when a run produced figures).

Invariants:
- The GUI thread never waits for a script: runs are polled from a timer (see ``driver``).
- Each run starts a fresh process and clears the previous run's output, figures and folder.
- Closing or destroying the widget (or ``shutdown()``) kills a running worker's process tree
  and deletes the run folders; the captured ``.npy`` is only ever read, by the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from nneditor.scripting import ScriptResult
from nneditor.scripting.protocol import CRASHED, ERROR, MEMORY, OK, STOPPED, TIMEOUT
from nneditor.ui.python_tab.driver import RunGuard, ScriptDriver, close_on_quit
from nneditor.ui.python_tab.editor import ScriptEditor
from nneditor.ui.python_tab.examples import default_script, is_partial, tensor_info
from nneditor.ui.python_tab.figures import Figure, FigureStrip
from nneditor.ui.python_tab.output import ERROR as OUT_ERROR
from nneditor.ui.python_tab.output import NOTE, RESULT, OutputView, ResultLine, short_repr

IDLE, RUNNING = "idle", "running"
DEFAULT_TIMEOUT_S = 60
DEFAULT_RAM_MB = 2048
PHASE_TEXT = {
    "starting": "Starting Python",
    "loading": "Loading libraries and tensor",
    "running": "Running",
    "saving": "Saving figures and result",
}
STATUS_TEXT = {
    OK: "OK",
    ERROR: "Error",
    TIMEOUT: "Timeout",
    STOPPED: "Stopped",
    MEMORY: "Out of memory",
    CRASHED: "Crashed",
}
STATUS_COLOR = {OK: "#16a34a", TIMEOUT: "#d97706", STOPPED: "#d97706"}
FAILURE_COLOR = "#dc2626"


class PythonTab(QWidget):
    """Script editor + runner for one captured tensor (``set_tensor``)."""

    runStarted = Signal()  # noqa: N815 (Qt naming)
    runFinished = Signal(object)  # noqa: N815 (a ScriptResult)
    statusChanged = Signal(str)  # noqa: N815

    def __init__(self, parent: QWidget | None = None, *, workdir: Path | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PythonTab")
        self.tensor_path: Path | None = None
        self.tensor_location: dict[str, Any] | None = None
        self.metadata: dict[str, Any] = {}
        self.title = ""
        self.last_result: ScriptResult | None = None
        self.figures: list[Figure] = []
        self._status = IDLE
        self._default = ""
        self._guard = RunGuard(workdir)
        guard = self._guard  # not self: the slot must work while the widget is destroyed
        self.destroyed.connect(lambda *_: guard.close())  # even without a close event
        close_on_quit(guard)
        self.driver = ScriptDriver(self._guard, self)
        self.driver.output.connect(self._on_output)
        self.driver.phaseChanged.connect(lambda _phase: self._show_running())
        self.driver.finished.connect(self._on_finished)
        self._clock = QTimer(self)
        self._clock.setInterval(100)
        self._clock.timeout.connect(self._show_running)
        self._build()
        self.set_script(default_script(None, {}, ""))
        self._default = self.script()

    # -- construction ----------------------------------------------------------------------

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        self.header = QLabel(self)
        self.header.setObjectName("Muted")
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.header)
        layout.addLayout(self._controls())
        self.editor = ScriptEditor(self)
        self.editor.runRequested.connect(self.run)
        self.output = OutputView(self)
        self.result_line = ResultLine(self)
        self.result_line.hide()
        self.figure_strip = FigureStrip(self)
        self.figure_strip.hide()
        out_box = QWidget(self)
        out_layout = QVBoxLayout(out_box)
        out_layout.setContentsMargins(0, 0, 0, 0)
        out_layout.setSpacing(4)
        out_layout.addWidget(self.output, 1)
        out_layout.addWidget(self.result_line)
        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.setChildrenCollapsible(False)
        for pane in (self.editor, out_box, self.figure_strip):
            self.splitter.addWidget(pane)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setStretchFactor(2, 3)
        self.splitter.splitterMoved.connect(self._on_splitter_moved)
        self._user_sized = False
        layout.addWidget(self.splitter, 1)
        self.setFocusProxy(self.editor)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(self.run)
        self._show_tensor()
        self._set_status(IDLE, "Ready")

    def _controls(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(6)
        self.run_button = QPushButton("▶  Run script", self)
        self.run_button.setToolTip(
            "Run the script in a fresh Python process (Ctrl+Enter). Files saved with relative "
            "paths land in a temporary run folder; use absolute paths to keep them."
        )
        self.run_button.clicked.connect(self.run)
        self.stop_button = QPushButton("■  Stop", self)
        self.stop_button.setToolTip("Stop the running script (kills its process)")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.setEnabled(False)
        self.timeout_spin = _spin(0, 86_400, DEFAULT_TIMEOUT_S, " s", "no limit", 5, self)
        self.timeout_spin.setToolTip("Wall-clock limit for the script itself (0 = no limit)")
        self.ram_spin = _spin(0, 1_048_576, DEFAULT_RAM_MB, " MB", "no limit", 256, self)
        self.ram_spin.setToolTip(
            "RAM the script may use on top of Python and the preloaded libraries (0 = no limit)"
        )
        for spin in (self.timeout_spin, self.ram_spin):
            spin.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.status_label = QLabel(self)
        self.status_label.setObjectName("ScriptStatus")
        self.status_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row.addWidget(self.run_button)
        row.addWidget(self.stop_button)
        row.addSpacing(10)
        row.addWidget(QLabel("Timeout", self))
        row.addWidget(self.timeout_spin)
        row.addWidget(QLabel("RAM", self))
        row.addWidget(self.ram_spin)
        row.addSpacing(10)
        row.addWidget(self.status_label, 1)
        return row

    # -- public API ------------------------------------------------------------------------

    def set_tensor(
        self,
        npy_path: Path,
        metadata: dict[str, Any],
        title: str,
        location: dict[str, Any] | None = None,
    ) -> None:
        """Show a captured tensor; an unedited example script is replaced by this tensor's.

        ``location``: offset, dtype and shape of the values inside ``npy_path`` when it is a
        trace's capture container rather than an .npy file."""
        if self.driver.running:
            self.driver.stop()
        self.tensor_path = Path(npy_path)
        self.tensor_location = dict(location) if location else None
        self.metadata = dict(metadata or {})
        self.title = title
        example = default_script(self.tensor_path, self.metadata, title, self.tensor_location)
        if not self.script().strip() or self.script() == self._default:
            self.set_script(example)
        self._default = example
        self._clear_output()
        self._show_tensor()
        self._set_status(IDLE, "Ready")

    def script(self) -> str:
        return self.editor.toPlainText()

    def set_script(self, code: str) -> None:
        self.editor.setPlainText(code)

    @property
    def status(self) -> str:
        """``idle``, ``running``, or the last run's status (ok, error, timeout, …)."""
        return self._status

    @property
    def is_running(self) -> bool:
        return self.driver.running

    def run(self) -> bool:
        """Start the script in a fresh process; False if one is running or it cannot start."""
        if self.driver.running:
            return False
        self._clear_output()
        for spin in (self.timeout_spin, self.ram_spin):
            spin.interpretText()  # a value typed but not yet confirmed (Ctrl+Enter in the box)
        timeout = self.timeout_spin.value() or None
        try:
            self.driver.start(
                self.script(),
                self.tensor_path,
                self.metadata,
                timeout,
                self.ram_spin.value(),
                self.tensor_location,
            )
        except (ValueError, TypeError, OSError) as exc:
            self.output.append_block(OUT_ERROR, f"The script could not be started: {exc}")
            self._set_status(ERROR, "Error · the script could not be started")
            return False
        self.run_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self._status = RUNNING
        self._show_running()
        self._clock.start()
        self.statusChanged.emit(RUNNING)
        self.runStarted.emit()
        return True

    def stop(self) -> None:
        """Stop the running script (its whole process tree)."""
        self.driver.stop()

    def shutdown(self) -> None:
        """Stop a running script and delete run folders (closing the widget does this)."""
        self.driver.stop()
        self._clock.stop()
        self._guard.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self.shutdown()
        super().closeEvent(event)

    # -- run events ------------------------------------------------------------------------

    def _on_output(self, kind: str, text: str) -> None:
        self.output.append_text(kind, text)

    def _on_finished(self, result: ScriptResult) -> None:
        self._clock.stop()
        self.last_result = result
        self.run_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        if result.error:
            self.output.append_block(OUT_ERROR, result.error)
        self.editor.mark_line(result.error_line if result.status != OK else None)
        if result.result_repr is not None and short_repr(result.result_repr) != (
            result.result_repr.strip()
        ):
            self.output.append_block(RESULT, f"Out: {result.result_repr}")
        for note in result.notes:
            self.output.append_block(NOTE, f"Note: {note}")
        self.result_line.show_result(result)
        self._show_figures(result.figures)
        self._set_status(result.status, _status_text(result))
        self.runFinished.emit(result)

    def _show_figures(self, paths: list[Path]) -> None:
        self.figures = [Figure.load(p) for p in paths]
        if not self.figures:
            return
        sizes = self.splitter.sizes()
        self.figure_strip.show()
        if not self._user_sized:  # give the figures room until the user arranges the panes
            total = sum(sizes)
            self.splitter.setSizes([total * 36 // 100, total * 24 // 100, total * 40 // 100])
        for figure in self.figures:
            self.figure_strip.add(figure)

    def _on_splitter_moved(self, _pos: int, _index: int) -> None:
        self._user_sized = True

    def _show_running(self) -> None:
        if not self.driver.running:
            return
        phase = PHASE_TEXT.get(self.driver.phase, "Running")
        self._set_status(RUNNING, f"{phase}… {self.driver.elapsed_s:.1f} s")

    # -- helpers ---------------------------------------------------------------------------

    def _clear_output(self) -> None:
        self.output.clear()
        self.result_line.show_result(None)
        self.figure_strip.clear()
        self.figure_strip.hide()
        self.figures = []
        self.editor.mark_line(None)
        self.last_result = None

    def _show_tensor(self) -> None:
        if self.tensor_path is None:
            self.header.setText("No captured tensor: `tensor` is None in scripts.")
            return
        info = tensor_info(self.tensor_path, self.tensor_location)
        name = self.title or self.tensor_path.name
        if info is None:
            self.header.setText(f"tensor = {name}")
            return
        shape = "×".join(str(n) for n in info.shape) or "scalar"
        text = f"tensor = {name}  ·  {info.dtype}  ·  {shape}"
        if is_partial(info, self.metadata):
            text += f"  ·  partial capture of {self.metadata.get('shape')}"
        self.header.setText(text)
        self.header.setToolTip(str(self.tensor_path))

    def _set_status(self, status: str, text: str) -> None:
        changed = status != self._status
        self._status = status
        self.status_label.setText(text)
        color = STATUS_COLOR.get(status, FAILURE_COLOR if status in STATUS_TEXT else "")
        self.status_label.setStyleSheet(f"color: {color}; font-weight: 600;" if color else "")
        if changed:
            self.statusChanged.emit(status)


def _status_text(result: ScriptResult) -> str:
    words = STATUS_TEXT.get(result.status, result.status)
    if result.status == ERROR and result.error_line:
        words += f" at line {result.error_line}"
    elif result.status == MEMORY and result.ram_limit_mb:
        words += f" (RAM limit {result.ram_limit_mb} MB)"
    text = f"{words} · {result.duration_s:.2f} s"
    if result.script_s is not None:
        text += f" (script {result.script_s:.2f} s)"
    return text


def _spin(
    low: int, high: int, value: int, suffix: str, special: str, step: int, parent: QWidget
) -> QSpinBox:
    spin = QSpinBox(parent)
    spin.setRange(low, high)
    spin.setValue(value)
    spin.setSuffix(suffix)
    spin.setSpecialValueText(special)
    spin.setSingleStep(step)
    spin.setAccelerated(True)
    spin.setKeyboardTracking(False)
    return spin
