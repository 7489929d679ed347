"""The Traced model pane: the model graph's blocks and connections with capture ports.

It is a second :class:`~nneditor.ui.workbench.Workbench` (breadcrumbs, Parent block, detail
levels, search with Enter-to-jump, Fit graph, Readable view) over its own
:class:`~nneditor.ui.session.ModelSession`, plus a trace picker and a ports layer.

Invariants:
- Ports are rebuilt after every level change (``levelShown``); they are children of their
  boxes, so no port of an old level survives.
- A click on a port never reaches the canvas (no selection change, no pan): it emits
  ``portClicked(value)``; a "+" port opens a chooser listing every tensor of that side.
- A single click on a block opens it; Parent block goes up through the same hierarchy.
- A click on an operator, a graph input/output or a connection opens the traced value it
  produces or carries (a chooser when there are several; the status bar says why when none
  of them was captured).
- The pane shows the trace it was given; runs of the open model are listed in the picker
  (newest first) and picking one replaces the ports' statuses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QCursor, QMouseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from nneditor.ui.canvas.view import CLICK_SLOP
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.model_index import ModelIndex
from nneditor.ui.session import ModelSession
from nneditor.ui.trace.ports import STATUS_TEXT, Port, PortItem, item_ports, place_ports
from nneditor.ui.trace.store import TraceRun, list_runs
from nneditor.ui.workbench import Workbench


class TracedPane(QWidget):
    portClicked = Signal(str)  # value name
    runChanged = Signal(object)  # TraceRun | None
    portsShown = Signal()

    def __init__(self, runner: QtJobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index: ModelIndex | None = None
        #: the graph a run is shown on, and whether it is the graph the run traced (set by
        #: the feature: a traced edited revision is shown on its own graph when it is known)
        self.index_for: Callable[[TraceRun], tuple[ModelIndex | None, bool]] | None = None
        self.on_own_graph = True
        self.counts_text = ""
        self.session: ModelSession | None = None
        self.run: TraceRun | None = None
        self.runs: list[TraceRun] = []
        self.ports: list[PortItem] = []
        self.drift: dict[str, float] = {}  # value -> relative L2 against a compared trace
        self.compared: dict[str, Any] | None = None  # the trace diff shown as heat colours
        self.drift_dialog: Any = None
        self._press: tuple[QPoint, PortItem] | None = None
        bar = QWidget(self)
        bar.setObjectName("CanvasBar")
        row = QHBoxLayout(bar)
        row.setContentsMargins(10, 6, 10, 0)
        label = QLabel("Trace run", bar)
        label.setObjectName("Muted")
        self.picker = QComboBox(bar)
        self.picker.setMinimumWidth(160)
        self.picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.picker.setMinimumContentsLength(20)
        self.picker.setToolTip("Earlier traces of this model (newest first)")
        self.picker.activated.connect(self._on_pick)
        self.summary = QLabel("", bar)
        self.summary.setObjectName("Muted")
        self.compare_button = QToolButton(bar)
        self.compare_button.setText("Compare with…")
        self.compare_button.setToolTip(
            "Colour the ports by how far this trace drifts from another one (relative L2)"
        )
        self.compare_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.compare_menu = QMenu(self.compare_button)
        self.compare_menu.aboutToShow.connect(self._fill_compare_menu)
        self.compare_button.setMenu(self.compare_menu)
        self.export_button = QToolButton(bar)
        self.export_button.setText("Export .npy files…")
        self.export_button.setToolTip(
            "Write every captured value of this trace as its own .npy file into a folder "
            "(the trace keeps its single values.safetensors)"
        )
        self.export_button.clicked.connect(self._ask_export_folder)
        self.export_note = ""
        self.drift_label = QLabel("", self)
        self.drift_label.setObjectName("Muted")
        self.drift_label.setContentsMargins(12, 2, 12, 0)
        self.drift_label.setWordWrap(True)
        self.drift_label.hide()
        row.addWidget(label)
        row.addWidget(self.picker, 1)
        row.addWidget(self.summary)
        row.addWidget(self.compare_button)
        row.addWidget(self.export_button)
        self.runner = runner
        self.workbench = Workbench(runner, self)
        self.empty = QLabel(
            "No trace yet. Open Trace, review the plan and choose Approve & run trace; the "
            "captured values then appear here as ports on every block.",
            self,
        )
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setObjectName("Muted")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(bar)
        lay.addWidget(self.drift_label)
        lay.addWidget(self.workbench, 1)
        lay.addWidget(self.empty, 1)
        self.workbench.levelShown.connect(self._rebuild_ports)
        self.workbench.view.itemClicked.connect(self._open_block)
        self.workbench.view.edgeClicked.connect(self._open_edge)
        self.workbench.view.viewport().installEventFilter(self)
        self._show_empty(True)

    # ------------------------------------------------------------------ model and runs

    def set_index(self, index: ModelIndex | None) -> None:
        """Follow the open model (None when it closes); forgets the shown trace."""
        old = self.session
        self.index, self.run = index, None
        self.session = ModelSession(index, self) if index and index.root is not None else None
        self.workbench.set_session(self.session, "This artifact has no graph to trace.")
        if old is not None:
            old.deleteLater()
        self.export_button.setEnabled(False)
        self.refresh_runs()
        self._show_empty(True)

    def refresh_runs(self) -> None:
        self.runs = list_runs(self.index.doc.path) if self.index is not None else []
        self.picker.clear()
        for r in self.runs:
            self.picker.addItem(r.summary(), str(r.path))
        if self.run is not None:
            k = self.picker.findData(str(self.run.path))
            if k < 0:
                self.picker.insertItem(0, self.run.summary(), str(self.run.path))
                k = 0
            self.picker.setCurrentIndex(k)

    def show_run(self, run: TraceRun | None) -> None:
        self.on_own_graph = True
        if run is not None and self.index_for is not None:
            index, self.on_own_graph = self.index_for(run)
            if index is not None and index is not self.index:
                self.set_index(index)
        if self.compared is not None and (run is None or str(run.path) != self.compared["a"]):
            self.compared, self.drift = None, {}  # the comparison belonged to another run
            self.drift_label.setText("")
            self.drift_label.hide()
        self.run = run
        self.export_button.setEnabled(run is not None)
        self.refresh_runs()
        self._show_empty(run is None or self.session is None)
        if run is not None:
            c = run.counts
            where = ""
            if run.edits_of:
                where = f" · edited revision {run.revision}"
                if not self.on_own_graph:
                    where += " (its graph is not open: ports shown on the graph as opened)"
            self.counts_text = (
                f"{c.get('captured', 0)} captured · {c.get('partial', 0)} partial · "
                f"{c.get('dropped', 0)} not captured"
                + (" · PARTIAL TRACE" if run.partial else "")
                + where
            )
            self.summary.setText(self.counts_text)
        self._rebuild_ports()
        self.runChanged.emit(run)

    def _on_pick(self, k: int) -> None:
        if 0 <= k < len(self.runs) and self.runs[k] is not self.run:
            self.show_run(self.runs[k])

    def _show_empty(self, on: bool) -> None:
        self.empty.setVisible(on)
        self.workbench.setVisible(not on)

    # ------------------------------------------------------------------ ports

    def _rebuild_ports(self) -> None:
        self.ports = []
        s, run, scene = self.session, self.run, self.workbench.scene
        if s is None or run is None or scene.shown is None or self.index is None:
            return
        level = scene.shown.level
        for key, box in scene.items_by_key.items():
            item = level.by_key[key]
            ports = item_ports(self.index, level, item)
            if ports:
                self.ports += place_ports(
                    box, item.width, item.height, ports, run.status, self._tooltip
                )
        for p in self.ports:
            if not p.port.more and p.port.value in self.drift:
                p.drift = self.drift[p.port.value]
        self._paint_heat()
        self.portsShown.emit()

    def _paint_heat(self) -> None:
        """The heat strip: each box coloured by the largest drift among its output values."""
        from nneditor.ui.trace.ports import drift_color

        scene, index = self.workbench.scene, self.index
        if scene.shown is None or index is None:
            return
        level = scene.shown.level
        for key, box in scene.items_by_key.items():
            worst = None
            if self.drift and level.by_key[key].kind not in ("input", "output"):
                outs = [p for p in item_ports(index, level, level.by_key[key]) if p.side == "out"]
                found = [self.drift[v] for p in outs for v in p.values if v in self.drift]
                worst = max(found) if found else None
            if hasattr(box, "set_heat"):
                box.set_heat(drift_color(worst) if worst is not None else None)

    def compare_with(self, other: Path, threshold: float = 1e-3) -> dict[str, Any]:
        """Diff the shown trace (A) against ``other`` (B) and colour the ports by drift."""
        from nneditor.diff.traces import diff_traces

        assert self.run is not None
        result = diff_traces(Path(self.run.path), Path(other), threshold)
        self.compared = result
        self.drift = {v["name"]: v["rel_l2"] for v in result["values"] if "rel_l2" in v}
        self._rebuild_ports()
        return result

    def clear_comparison(self) -> None:
        self.compared, self.drift = None, {}
        self.drift_label.setText("")
        self.drift_label.hide()
        self._rebuild_ports()

    def _ask_export_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export the captured values as .npy files")
        if folder:
            self.export_npy(Path(folder))

    def export_npy(self, dest: Path) -> int:
        """Write the shown trace's values as one .npy each into ``dest`` on the job runner;
        the result is said in the label under the bar. Returns the job id (0: no trace)."""
        from nneditor.tracing.capture import export_npy_files

        if self.run is None:
            return 0
        folder = Path(self.run.path)

        def job(handle: Any) -> list[Path]:
            return export_npy_files(folder, dest=dest, progress=lambda d, t: handle.progress(d, t))

        def done(result: Any) -> None:
            if result.error is not None:
                text = f"Not exported: {result.error}"
            elif result.cancelled:
                text = "Export cancelled; files written so far stay in the folder."
            else:
                text = f"Exported {len(result.value)} .npy files to {dest}"
            self.export_note = text
            self.drift_label.setText(text)
            self.drift_label.setVisible(True)

        return self.runner.submit(job, done, channel="trace-export", label="Export .npy files")

    def _fill_compare_menu(self) -> None:
        m = self.compare_menu
        m.clear()
        for r in self.runs:
            if self.run is not None and r.path != self.run.path:
                m.addAction(r.summary(), self._compare_action(Path(r.path)))
        m.addAction("Another trace folder…", self._ask_trace_folder)
        if self.compared is not None:
            m.addSeparator()
            m.addAction("Drift table…", self.show_drift_table)
            m.addAction("Clear comparison", self.clear_comparison)

    def _compare_action(self, path: Path) -> Callable[[], None]:
        return lambda: None if self.show_comparison(path) is None else None

    def _ask_trace_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Compare with a trace folder")
        if folder:
            self.show_comparison(Path(folder))

    def show_comparison(self, other: Path) -> str:
        """Compare with ``other`` and say where drift starts (the label beside the button)."""
        from nneditor.errors import NNEditorError

        if self.run is None:
            return ""
        try:
            r = self.compare_with(other)
        except (NNEditorError, OSError, ValueError) as exc:
            text = f"Not compared: {exc}"
        else:
            first = r["first_drift"]
            text = (
                f"vs {other.name}: drift starts at {first['value']}"
                + (f" ({first['block']})" if first["block"] else "")
                if first
                else f"vs {other.name}: no drift over relative L2 {r['threshold']:g}"
            )
        self.drift_label.setText(text)
        self.drift_label.setVisible(bool(text))
        return text

    def show_drift_table(self) -> Any:
        from nneditor.ui.compare_dialog import CompareDialog

        if self.compared is None:
            return None
        dialog = CompareDialog(self.compared, parent=self)
        dialog.show()
        self.drift_dialog = dialog
        return dialog

    def _tooltip(self, port: Port) -> str:
        assert self.run is not None
        side = "input" if port.side == "in" else "output"
        if port.more:
            return f"{len(port.values)} {side} tensors — click to choose one"
        name = port.value
        rec = self.run.record(name) or {}
        shape = rec.get("shape")
        if shape is None and self.index is not None:
            vi = self.index.value_info(name)
            shape = list(vi.shape) if vi is not None and vi.shape is not None else None
        status = STATUS_TEXT.get(self.run.status(name), "?")
        lines = [f"{name} ({side})", f"shape {shape if shape is not None else 'unknown'}"]
        lines.append(f"{rec.get('dtype') or ''} · {status}".strip(" ·"))
        if rec.get("reason"):
            lines.append(str(rec["reason"]))
        if name in self.drift and self.compared is not None:
            lines.append(f"relative L2 vs {Path(self.compared['b']).name}: {self.drift[name]:.3g}")
        if self.run.status(name) in ("captured", "partial"):
            lines.append("Click to inspect")
        return "\n".join(lines)

    def port_items(self, value: str | None = None) -> list[PortItem]:
        return [p for p in self.ports if value is None or value in p.port.values]

    def activate_port(self, item: PortItem, at: QPoint | None = None) -> None:
        if not item.port.more:
            self.portClicked.emit(item.port.value)
            return
        self._choose(
            list(item.port.values), self.workbench.view.viewport().mapToGlobal(at or QPoint(0, 0))
        )

    def _choose(self, values: list[str], where: QPoint) -> None:
        """A menu of ``values`` with their status in the shown run; the chosen one opens."""
        assert self.run is not None
        menu = QMenu(self)
        for v in values:
            act = menu.addAction(f"{v}   [{STATUS_TEXT.get(self.run.status(v), '?')}]")
            act.triggered.connect(lambda _c=False, name=v: self.portClicked.emit(name))
        menu.popup(where)
        self.chooser = menu

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        et = event.type()
        if et == QEvent.Type.MouseButtonPress and isinstance(event, QMouseEvent):
            port = self._port_at(event.position().toPoint())
            if port is not None and event.button() == Qt.MouseButton.LeftButton:
                self._press = (event.position().toPoint(), port)
                return True
        elif et == QEvent.Type.MouseButtonRelease and self._press is not None:
            assert isinstance(event, QMouseEvent)
            start, port = self._press
            self._press = None
            pos = event.position().toPoint()
            if (pos - start).manhattanLength() <= CLICK_SLOP and self._port_at(pos) is port:
                self.activate_port(port, pos)
            return True
        elif (
            et == QEvent.Type.MouseButtonDblClick
            and isinstance(event, QMouseEvent)
            and self._port_at(event.position().toPoint()) is not None
        ):
            return True
        return False

    def _port_at(self, pos: QPoint) -> PortItem | None:
        for it in self.workbench.view.items(pos):
            if isinstance(it, PortItem):
                return it
        return None

    def _open_block(self, key: str) -> None:
        s = self.session
        if s is None or not key:
            return
        item = s.level.by_key.get(key)
        if item is None:
            return
        if item.openable:
            s.open_item(item)
        elif item.kind == "node" and self.index is not None and self.index.graph is not None:
            self.open_values(list(self.index.graph.nodes[item.node].outputs))
        elif item.kind in ("input", "output") and item.value:
            self.open_values([item.value])

    def _open_edge(self, k: int) -> None:
        if self.workbench.scene.shown is not None:
            self.open_values(self.workbench.scene.edge_values(k)[2])

    def open_values(self, values: list[str]) -> None:
        """Open the traced value among ``values`` (operator outputs, a connection's values):
        at once when one was captured, through a chooser when several were."""
        run = self.run
        if run is None:
            return
        names = [v for v in values if v]
        shown = [v for v in names if run.status(v) not in ("absent", "dropped")]
        if len(shown) == 1:
            self.portClicked.emit(shown[0])
        elif shown:
            self._choose(shown, QCursor.pos())
        elif names:
            reasons = {str((run.record(v) or {}).get("reason", "")) for v in names} - {""}
            self.summary.setText(
                f"{self.counts_text} — {', '.join(names[:3])}{' …' if len(names) > 3 else ''}: "
                "not captured in this trace"
                + (f" ({'; '.join(sorted(reasons))})" if reasons else "")
            )
