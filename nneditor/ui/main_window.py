"""The main window: start screen or workbench, the top bar, docks, status and background jobs.

Invariants:
- At most one document is open; ``close_model`` releases it (file maps closed) and returns to
  the start screen without quitting. Opening another model closes the current one only once
  the new one opened successfully.
- Opening runs on the job runner (channel "open"); a newer open supersedes an older one, whose
  document is closed on the worker thread. Errors appear as a dialog with the error sentence
  (or on stderr in headless mode) and leave the window usable.
- ``closeEvent`` cancels every job and waits for the thread pool.
- With unsaved revisions, closing the model, opening another one or quitting first asks
  (Save… / Discard / Cancel). ``source_index`` is the opened document's index; ``index`` is
  the one shown, which is a revision view after edits (the source document stays open).
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QStackedWidget,
    QTabWidget,
    QToolButton,
    QWidget,
)

from nneditor import api
from nneditor.errors import error_sentence
from nneditor.jobs.collector import paused_collection
from nneditor.jobs.protocol import JobHandle, JobResult
from nneditor.ui import recents
from nneditor.ui.edit.controller import EditController
from nneditor.ui.edit.panel import EditPanel
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.model_index import ModelIndex, index_document
from nneditor.ui.panels.hierarchy_tree import HierarchyPanel
from nneditor.ui.panels.inspector import Inspector
from nneditor.ui.panels.name_tree import NameTreePanel
from nneditor.ui.panels.tensor_table import TensorPanel
from nneditor.ui.session import ModelSession
from nneditor.ui.start_screen import StartScreen, dropped_path
from nneditor.ui.targets import Target
from nneditor.ui.tensor.dialog import TensorPanelDialog
from nneditor.ui.top_bar import TopBar
from nneditor.ui.trace.feature import TraceFeature
from nneditor.ui.workbench import Workbench


def open_job(path: str) -> Any:
    """The open job: read the artifact, build the hierarchy and the workbench index."""

    def job(handle: JobHandle) -> ModelIndex:
        with paused_collection():  # everything built here lives as long as the document
            handle.progress(0, 3, f"Reading {Path(path).name}")
            doc = api.open(path)
            try:
                handle.check_cancelled()
                index = index_document(doc, handle)
                handle.progress(3, 3, "Ready")
                return index
            except BaseException:
                doc.close()
                raise

    return job


def remap_target(target: Target | None, old: ModelIndex, new: ModelIndex) -> Target | None:
    """The same thing in another revision: operators by their first output (edits keep
    outputs), falling back to their name; groups and values by id and name."""
    if target is None:
        return None
    if target.kind == "node":
        node = old.node(target.index)
        out = next((o for o in node.outputs if o), "")
        i = new.producer.get(out) if out else None
        if i is None and new.graph is not None:
            i = next((k for k, n in enumerate(new.graph.nodes) if n.name == node.name), None)
        return Target.node(i) if i is not None else None
    if target.kind in ("group", "repeat"):
        return target if str(target.ref) in new.group_by_id else None
    if target.kind == "value":
        return target
    return None


error_text = error_sentence  # the sentence shown for an error (kept for older imports)


class MainWindow(QMainWindow):
    documentOpened = Signal()
    documentClosed = Signal()
    openFailed = Signal(str)
    #: a level could not be built, laid out or drawn (the canvas shows the sentence)
    viewFailed = Signal(str)
    firstFrame = Signal(float)  # seconds from the index being ready to the first painted frame

    def __init__(self, interactive: bool = True) -> None:
        super().__init__()
        self.interactive = interactive
        self.instance_server: Any = None  # ui/single_instance.py, set by the app
        self.file_types_dialog: Any = None
        self.compare_dialog: Any = None
        self.setWindowTitle("NNEditor")
        self.setAcceptDrops(True)
        self.runner = QtJobRunner(self)
        self.index: ModelIndex | None = None
        self.source_index: ModelIndex | None = None
        self.session: ModelSession | None = None
        self.edit = EditController(self.runner, self, interactive)
        self._quit_confirmed = False
        self._open_rid = 0
        self._ready_at = 0.0
        self.timings: dict[str, float] = {}

        self.top_bar = TopBar(self)
        self.setMenuWidget(self.top_bar)
        self.start = StartScreen(self)
        self.workbench = Workbench(self.runner, self)
        self.central = QStackedWidget(self)
        self.central.addWidget(self.start)
        self.central.addWidget(self.workbench)
        self.setCentralWidget(self.central)
        self._build_docks()
        self._build_status()
        self._build_actions()
        self._connect()
        self.trace = TraceFeature(self)  # Trace page, Traced model pane, tensor overlays
        # the inspector's Latest trace section: opens captures, follows the shown run
        self.inspector.traceValueRequested.connect(self.trace.open_overlay)
        self.trace.traced.runChanged.connect(self._refresh_inspector)
        self.start.set_recents(recents.load())
        self._show_docks(False)

    # ------------------------------------------------------------------ construction

    def _build_docks(self) -> None:
        self.tree = HierarchyPanel(self)
        self.tensors = TensorPanel(self)
        self.left_tabs = QTabWidget(self)
        self.left_tabs.setDocumentMode(True)
        self.left_tabs.addTab(self.tree, "Structure")
        self.names = NameTreePanel(self)
        self.names.tensorRequested.connect(self.show_tensor)
        self.left_tabs.addTab(self.names, "Structure")
        self.left_tabs.setTabVisible(self.left_tabs.indexOf(self.names), False)
        self.left_tabs.addTab(self.tensors, "Tensors")
        self.edit_panel = EditPanel(self.edit, self)
        self.left_tabs.addTab(self.edit_panel, "Edit")
        self.left_tabs.setMinimumWidth(180)
        self.left_dock = QDockWidget("Explorer", self)
        self.left_dock.setObjectName("ExplorerDock")
        self.left_dock.setWidget(self.left_tabs)
        self.left_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.left_dock)
        self.inspector = Inspector(self)
        self.inspector.setMinimumWidth(240)
        self.right_dock = QDockWidget("Inspector", self)
        self.right_dock.setObjectName("InspectorDock")
        self.right_dock.setWidget(self.inspector)
        self.right_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.right_dock)
        self.resizeDocks([self.left_dock, self.right_dock], [290, 380], Qt.Orientation.Horizontal)

    def _build_status(self) -> None:
        bar = self.statusBar()
        bar.setSizeGripEnabled(False)
        self.status_label = QLabel("", self)
        self.progress = QProgressBar(self)
        self.progress.setFixedWidth(220)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        self.cancel_button = QToolButton(self)
        self.cancel_button.setText("Cancel")
        self.cancel_button.clicked.connect(self.cancel_open)
        bar.addWidget(self.status_label, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)
        self._set_busy(False)

    def _build_actions(self) -> None:
        wb = self.workbench
        for text, keys, slot in (
            ("Open model", QKeySequence.StandardKey.Open, self.choose_file),
            ("Close model", QKeySequence("Ctrl+W"), self.close_model),
            ("Find", QKeySequence.StandardKey.Find, wb.search.focus),
            ("Zoom in", QKeySequence("Ctrl+="), wb.view.zoom_in),
            ("Zoom in", QKeySequence("Ctrl++"), wb.view.zoom_in),
            ("Zoom out", QKeySequence("Ctrl+-"), wb.view.zoom_out),
            ("Fit graph", QKeySequence("Ctrl+0"), wb.view.fit),
            ("Readable view", QKeySequence("Ctrl+1"), wb.readable_view),
            ("Undo edit", QKeySequence("Ctrl+Z"), self.edit.undo),
            ("Redo edit", QKeySequence("Ctrl+Shift+Z"), self.edit.redo),
            ("Redo edit", QKeySequence("Ctrl+Y"), self.edit.redo),
        ):
            action = QAction(text, self)
            action.setShortcut(keys)
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(slot)
            self.addAction(action)

    def _connect(self) -> None:
        tb = self.top_bar
        tb.openRequested.connect(self.choose_file)
        tb.openFolderRequested.connect(self.choose_folder)
        tb.closeRequested.connect(self.close_model)
        tb.fileTypesRequested.connect(self.explain_file_types)
        tb.compareRequested.connect(self.ask_compare)
        tb.saveRequested.connect(self.edit.save)
        self.edit.chainChanged.connect(lambda: self.top_bar.set_dirty(self.edit.dirty))
        self.edit.sessionChanged.connect(lambda: self.top_bar.set_dirty(self.edit.dirty))
        self.edit.viewReady.connect(self.show_revision)
        self.edit.status.connect(self.status_label.setText)
        self.inspector.actionRequested.connect(
            lambda a: self.edit.export_weights() if a == "export_weights" else None
        )
        self.start.openRequested.connect(self.open_path)
        self.start.openFileDialog.connect(self.choose_file)
        self.start.openFolderDialog.connect(self.choose_folder)
        self.tree.targetSelected.connect(self._select_revealed)
        self.tree.targetActivated.connect(self._activate_target)
        self.inspector.targetRequested.connect(self._select_revealed)
        self.inspector.tensorRequested.connect(self.show_tensor)
        self.tensors.tensorRequested.connect(self.show_tensor)
        self.workbench.status.connect(self.status_label.setText)
        self.workbench.framePainted.connect(self._on_frame)
        self.workbench.levelFailed.connect(self.viewFailed)

    def _show_docks(self, on: bool) -> None:
        self.left_dock.setVisible(on)
        self.right_dock.setVisible(on)
        if on:
            w = self.width()
            left = int(min(320, max(180, 0.18 * w)))
            right = int(min(420, max(250, 0.25 * w)))
            self.resizeDocks(
                [self.left_dock, self.right_dock], [left, right], Qt.Orientation.Horizontal
            )

    # ------------------------------------------------------------------ opening

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open model", "", "All files (*)")
        if path:
            self.open_path(path)

    def choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open model folder")
        if path:
            self.open_path(path)

    def open_path(self, path: str) -> int:
        """Start opening ``path`` in the background; returns the job's request id."""
        self.timings = {"open_start": time.perf_counter()}
        self._set_busy(True, f"Opening {Path(path).name}…")
        self._open_rid = self.runner.submit(
            open_job(path),
            lambda r: self._opened(path, r),
            channel="open",
            on_progress=self._on_progress,
            on_discard=lambda ix: ix.doc.close(),
            label=f"Open {path}",
        )
        return self._open_rid

    def cancel_open(self) -> None:
        if self._open_rid:
            self.runner.cancel(self._open_rid)

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        if message:
            self.status_label.setText(message + "…" if done < total else message)

    def _opened(self, path: str, result: JobResult[Any]) -> None:
        self._open_rid = 0
        self._set_busy(False)
        if result.cancelled:
            self.status_label.setText("Opening cancelled.")
            return
        if result.error is not None:
            self.report_error("Cannot open this file", error_text(result.error))
            return
        index = result.value
        assert isinstance(index, ModelIndex)
        self.edit.request_close(
            lambda: self._replace(path, index), otherwise=lambda: index.doc.close()
        )

    def _replace(self, path: str, index: ModelIndex) -> None:
        if self.index is not None:
            self._close_model(emit=False)
            gc.collect()  # the closed document's cycles, before the freeze below keeps them
        self._ready_at = time.perf_counter()
        self.timings["index_ready"] = self._ready_at
        try:
            self._install(index)
        except Exception as exc:  # the model cannot be shown: say why, keep the window usable
            self._close_model(emit=False)
            self.report_error("Cannot show this model", f"{Path(path).name}: {error_text(exc)}")
            return
        # The document's objects live until it closes: frozen, they are skipped by every
        # later full collection (each walked all of them: ~0.16 s per pass at 100k operators,
        # a stall in the middle of panning). Unfrozen again when the document closes.
        gc.freeze()
        recents.add(path)
        self.documentOpened.emit()

    def _install(self, index: ModelIndex) -> None:
        doc = index.doc
        self.index = self.source_index = index
        reason = ""
        if index.root is not None:
            self.session = ModelSession(index, self)
            self.session.selectionChanged.connect(self._on_selection)
        else:
            why = doc.graph_unavailable_reason or "it stores tensors only"
            reason = f"This {doc.format} artifact has no graph to draw: {why}."
            if len(doc.tensors):
                reason += (
                    "\nIts module structure (from tensor names) is under Explorer › Structure, "
                    "its tensors under Explorer › Tensors."
                )
        self.central.setCurrentWidget(self.workbench)
        self._show_docks(True)
        self.tree.set_index(index if index.root is not None else None)
        self.tensors.set_catalog(doc.tensors)
        graph_less = index.root is None
        self.left_tabs.setTabVisible(self.left_tabs.indexOf(self.tree), not graph_less)
        self.left_tabs.setTabVisible(self.left_tabs.indexOf(self.names), graph_less)
        self.names.set_catalog(doc.tensors if graph_less else None)
        self.left_tabs.setCurrentWidget(self.tree if not graph_less else self.names)
        if index.root is None:  # the tensor list is the main view: give it room for names
            self.resizeDocks(
                [self.left_dock], [int(0.45 * self.width())], Qt.Orientation.Horizontal
            )
        self.inspector.set_index(index)
        self.top_bar.set_document(doc.path.name, doc.format)
        self.top_bar.set_dirty(False)
        self.setWindowTitle(f"{doc.path.name} — NNEditor")
        self.workbench.set_session(self.session, reason)
        self.edit.attach(index)
        self.edit_panel.set_index(index if index.root is not None else None)
        self.status_label.setText(f"Opened {doc.path.name}")
        if self.session is None:
            self._awaiting_first_frame_without_graph()

    def show_revision(self, index: ModelIndex) -> None:
        """Show another revision of the open document, keeping the place and the selection."""
        old = self.session
        if old is None or self.index is None or index is self.index or index.root is None:
            return
        selection = remap_target(old.selection, self.index, index)
        if index.doc.tensors is not self.index.doc.tensors:  # byte patches
            self.tensors.set_catalog(index.doc.tensors)
        new = ModelSession(index, self)
        new.layouts = old.layouts  # content-keyed: unchanged levels reuse their layouts
        if not old.fold_constants:
            new.set_fold_constants(False)
        scope = index.group_by_id.get(old.scope.id) if old.scope.kind != "model" else None
        if scope is not None:
            new.go_to(scope)
        if new.depth != old.depth:
            new.set_depth(old.depth)
        new.selectionChanged.connect(self._on_selection)
        self.index, self.session = index, new
        self.workbench.set_session(new)
        old.deleteLater()
        self.tree.set_index(index)
        self.inspector.set_index(index)
        self.edit_panel.set_index(index)
        new.select(selection)

    def _awaiting_first_frame_without_graph(self) -> None:
        self.timings["first_frame"] = time.perf_counter()
        self.firstFrame.emit(0.0)

    def _on_frame(self, stamp: float) -> None:
        if self._ready_at:
            delay = stamp - self._ready_at
            self._ready_at = 0.0
            self.timings["first_frame"] = stamp
            self.firstFrame.emit(delay)

    def as_widget(self) -> QWidget:
        """This window, for features typed against :class:`nneditor.ui.host.WindowHost`."""
        return self

    def report_error(self, title: str, text: str) -> None:
        self.status_label.setText(text)
        self.openFailed.emit(text)
        if self.interactive:
            QMessageBox.critical(self, title, text)

    def _set_busy(self, busy: bool, message: str = "") -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        if busy:
            self.progress.setRange(0, 0)
        if message:
            self.status_label.setText(message)

    # ------------------------------------------------------------------ closing

    def close_model(self, emit: bool = True) -> None:
        """Release the open document and go back to the start screen (asks about unsaved
        revisions first)."""
        if self.index is not None:
            self.edit.request_close(lambda: self._close_model(emit))

    def _close_model(self, emit: bool = True) -> None:
        if self.index is None or self.source_index is None:
            return
        self._close_compare()
        self.edit.detach()
        self.edit_panel.set_index(None)
        self.workbench.set_session(None)
        self.tree.set_index(None)
        self.tensors.set_catalog(None)
        self.names.set_catalog(None)
        self.inspector.set_index(None)
        if self.session is not None:
            self.session.deleteLater()
            self.session = None
        self.source_index.doc.close()
        self.index = self.source_index = None
        gc.unfreeze()  # the closed document's objects can be collected again
        self.top_bar.set_document("", "")
        self.top_bar.set_dirty(False)
        self.setWindowTitle("NNEditor")
        self._show_docks(False)
        self.central.setCurrentWidget(self.start)
        self.start.set_recents(recents.load())
        if emit:
            self.status_label.setText("Model closed.")
            self.documentClosed.emit()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if self.edit.dirty and not self._quit_confirmed:
            event.ignore()
            self.edit.request_close(self._quit)
            return
        self.runner.shutdown()
        self._close_model(emit=False)
        super().closeEvent(event)

    def _quit(self) -> None:
        self._quit_confirmed = True
        QTimer.singleShot(0, self.close)  # a close() inside closeEvent would be ignored

    # ------------------------------------------------------------------ selection plumbing

    def _select_revealed(self, target: Target) -> None:
        if self.session is not None:
            self.session.select(target, reveal=True)

    def _activate_target(self, target: Target) -> None:
        if self.session is None or target.kind != "group":
            return
        g = self.session.index.group_by_id.get(str(target.ref))
        if g is not None and (g.children or g.nodes):
            self.session.open_group(g)

    def _refresh_inspector(self, *_: object) -> None:
        """The shown trace changed: redraw the inspector only (forms and tree keep theirs)."""
        if self.session is not None:
            self._inspect(self.session.selection)

    def _on_selection(self, target: Target | None) -> None:
        if self.session is None:
            return
        self._inspect(target)
        self.edit_panel.set_selection(target)
        if target is None or target.kind in ("group", "node", "repeat"):
            self.tree.select_target(target)

    def _inspect(self, target: Target | None) -> None:
        s = self.session
        assert s is not None
        extra: dict[str, Any] = {}
        if target is not None and target.kind == "repeat":
            item = s.level.by_key.get(f"r:{target.ref}")
            extra["members"] = item.members if item is not None else None
        elif target is not None and target.kind == "edge":
            src, dst = target.ends
            extra["labels"] = tuple(
                s.level.by_key[k].label if k in s.level.by_key else k for k in (src, dst)
            )
        elif target is not None and target.kind == "chunk":
            item = s.level.by_key.get(str(target.ref))
            if item is not None:
                extra["group"] = s.chunk(item)
        trace = getattr(self, "trace", None)
        extra["run"] = trace.traced.run if trace is not None else None
        self.inspector.show_target(target, extra)

    def show_tensor(self, name: str) -> None:
        if self.index is None or name not in self.index.doc.tensors:
            return
        dialog = TensorPanelDialog(self.index.doc, name, self.runner, self)
        dialog.show()

    def ask_compare(self) -> None:
        if self.index is None:
            return
        path, _ = QFileDialog.getOpenFileName(
            self, "Compare with…", str(Path(self.index.doc.path).parent)
        )
        if path:
            self.compare_with(path)

    def compare_with(self, other: str) -> int:
        """Diff the open model (A) against ``other`` (B) in the background, then show it."""
        from nneditor.ui.compare.comparison import compare_job

        assert self.index is not None
        self._set_busy(True, f"Comparing with {Path(other).name}…")
        return self.runner.submit(
            compare_job(self.index, other),
            self._compared,
            channel="compare",
            on_discard=lambda c: c.close(),
            label="Compare",
        )

    def _compared(self, result: JobResult[Any]) -> None:
        from nneditor.ui.compare_dialog import CompareDialog

        self._set_busy(False)
        if result.cancelled:
            return
        if result.error is not None:
            self.report_error("Cannot compare these models", error_text(result.error))
            return
        comparison = result.value
        assert comparison is not None
        self.status_label.setText(f"Compared with {Path(comparison.result['b']).name}.")
        self._close_compare()
        self.compare_dialog = CompareDialog(
            comparison.result, self.show_tensor, self, comparison=comparison
        )
        self.compare_dialog.show()

    def _close_compare(self) -> None:
        """The comparison reads the open model: it closes with it (and closes its B)."""
        if self.compare_dialog is not None:
            self.compare_dialog.close()
            self.compare_dialog = None

    def explain_file_types(self) -> None:
        from nneditor.ui.file_types_dialog import FileTypesDialog

        self.file_types_dialog = FileTypesDialog(self)
        if self.interactive:
            self.file_types_dialog.show()

    # ------------------------------------------------------------------ drag and drop

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt override
        if dropped_path(event):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt override
        path = dropped_path(event)
        if path:
            event.acceptProposedAction()
            self.open_path(path)

    @property
    def central_widget(self) -> QWidget | None:
        return self.central.currentWidget()
