"""Tracing in the main window: the Trace page (Generate test input + Trace), the Traced model
pane, the tensor overlay, the view switcher in the top bar and the device indicator.

``TraceFeature(window)`` installs everything through public hooks: two pages of the central
stack, a switcher widget in the top bar, and the window's documentOpened/documentClosed
signals. Invariants:
- The Trace and Traced model pages follow the open document; after an edit the Trace page
  plans the current revision (a private copy, see revision_trace.py), never silently the
  source. Closing the model clears them and cancels a running trace.
- The device indicator shows the provider that completed the latest published trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QScrollArea,
    QSplitter,
    QToolButton,
    QWidget,
)

from nneditor.errors import NNEditorError
from nneditor.tracing.plan import CHECKPOINT_FORMATS
from nneditor.ui.trace.inputs_panel import InputsPanel
from nneditor.ui.trace.overlay import TensorOverlay
from nneditor.ui.trace.revision_trace import RevisionTracing
from nneditor.ui.trace.store import TraceRun, load_run
from nneditor.ui.trace.trace_panel import TracePanel
from nneditor.ui.trace.traced_pane import TracedPane

if TYPE_CHECKING:
    from nneditor.ui.host import WindowHost

VIEWS = ("Model graph", "Trace", "Traced model")


class _Columns(QSplitter):
    """The Trace page's two panels side by side, or stacked when the page is narrower than
    both panels need (a 1400-pixel window with the explorer and inspector open): clipped
    columns with horizontal scroll bars hid the plan's right edge and the source combos."""

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt)
        need = 0
        for k in range(self.count()):
            scroll = self.widget(k)
            inner = scroll.widget() if isinstance(scroll, QScrollArea) else None
            if inner is not None:
                need += inner.minimumSizeHint().width() + 16
        want = Qt.Orientation.Horizontal if self.width() >= need else Qt.Orientation.Vertical
        if want != self.orientation():
            self.setOrientation(want)
        super().resizeEvent(event)


class TraceFeature(QObject):
    def __init__(self, window: WindowHost) -> None:
        super().__init__(window.as_widget())
        self.window = window
        self.inputs = InputsPanel()
        self.panel = TracePanel()
        self.page = _Columns(Qt.Orientation.Horizontal)
        for w in (self.inputs, self.panel):
            scroll = QScrollArea(self.page)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setWidget(w)
            self.page.addWidget(scroll)
        self.page.setStretchFactor(0, 1)
        self.page.setStretchFactor(1, 1)
        self.traced = TracedPane(window.runner)
        window.central.addWidget(self.page)
        window.central.addWidget(self.traced)
        self.overlays: list[TensorOverlay] = []
        self.switcher = QWidget(window.top_bar)
        row = QHBoxLayout(self.switcher)
        row.setContentsMargins(12, 0, 0, 0)
        row.setSpacing(0)
        self.buttons = QButtonGroup(self.switcher)
        for k, name in enumerate(VIEWS):
            b = QToolButton(self.switcher)
            b.setText(name)
            b.setCheckable(True)
            b.setObjectName("Level")
            b.setStyleSheet("padding: 3px 8px;")
            self.buttons.addButton(b, k)
            row.addWidget(b)
        self.buttons.idClicked.connect(self.show_view)
        window.top_bar.add_view_switcher(self.switcher)
        self.switcher.hide()
        window.central.currentChanged.connect(self._sync_switcher)
        window.central.currentChanged.connect(self._plan_if_shown)
        self._unplanned: tuple[Any] | None = None  # the opened document, not planned yet
        self.revisions = RevisionTracing(window, self.inputs, self.panel, self._replan)
        self.traced.index_for = self.revisions.index_for
        window.documentOpened.connect(self._opened)
        window.documentClosed.connect(self._closed)
        self.inputs.assigned.connect(
            lambda arrays, text: self.panel.set_inputs(arrays, text, self.inputs.token_notes)
        )
        self.panel.traceFinished.connect(self.show_run)
        self.panel.idle.connect(self._plan_if_shown)
        self.panel.planChanged.connect(self._apply_pick)
        window.workbench.view.pickerClicked.connect(self.pick_input_file)
        self._pick: tuple[str, str] | None = None  # a picked tensor waiting for the input plan
        self.traced.portClicked.connect(self.open_overlay)
        window.installEventFilter(self)

    # ------------------------------------------------------------------ views

    def show_view(self, which: int | str) -> None:
        k = VIEWS.index(which) if isinstance(which, str) else int(which)
        page = (self.window.workbench, self.page, self.traced)[k]
        if self.window.index is None:
            return
        self.window.central.setCurrentWidget(page)

    def _sync_switcher(self) -> None:
        cur = self.window.central.currentWidget()
        pages = (self.window.workbench, self.page, self.traced)
        self.switcher.setVisible(cur in pages)
        if cur in pages:
            button = self.buttons.button(pages.index(cur))
            if button is not None:
                button.setChecked(True)

    # ------------------------------------------------------------------ document

    def _opened(self) -> None:
        """Detecting inputs and planning walk the whole graph (about 0.4 s for 100k operators),
        so they wait until the Trace view is shown instead of delaying the first frame."""
        index = self.window.source_index
        self.revisions.reset()
        self._pick = None
        doc = index.doc if index is not None else None
        traceable = doc is not None and doc.format in ("onnx", *CHECKPOINT_FORMATS)
        graph = doc.graph if doc is not None else None
        self.window.workbench.scene.set_pickers(
            frozenset(vi.name for vi in graph.inputs if vi.name not in graph.initializers)
            if traceable and graph is not None
            else frozenset()
        )
        self._unplanned = (index.doc if index is not None else None,)
        self.inputs.set_document(None)
        self.panel.set_document(None)
        self.traced.set_index(index)
        self._sync_switcher()
        self._plan_if_shown()

    def _plan_if_shown(self, *_: object) -> None:
        if self._unplanned is None or self.window.central.currentWidget() is not self.page:
            return
        if self.panel.running:  # an edit during a run: plan the new revision when it ends
            return
        (doc,) = self._unplanned
        self._unplanned = None
        # every document is planned: the built-in tracers run ONNX models and checkpoints, a
        # tracer plugin may run any other kind, and otherwise the plan says why not
        self.revisions.plan(doc, doc is not None)

    def _replan(self) -> None:
        """The current revision changed (an edit, undo or redo): plan it when shown."""
        index = self.window.source_index
        if index is None:
            return
        self._unplanned = (index.doc,)
        self._plan_if_shown()

    def pick_input_file(self, name: str, path: str | None = None) -> None:
        """The tensor-picker button of input ``name``: assign a .npy/.npz to it for the next
        trace and show the Trace page with the assignment (the plan is made if it was not)."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(
                self.window.as_widget(), f"Tensor for input {name}", "", "NumPy (*.npy *.npz)"
            )
            if not path:
                return
        self._pick = (name, path)
        self.show_view("Trace")  # plans the inputs when they were not planned yet
        self._apply_pick()

    def _apply_pick(self) -> None:
        pick, plan = self._pick, self.inputs.plan
        if pick is None or plan is None:
            return  # the plan (an edited revision's copy) is still being made
        self._pick = None
        name, path = pick
        if name not in plan.names():
            self.window.status_label.setText(f"{name} is not an input of the traced model.")
            return
        self.inputs.set_source(name, "tensor", path)
        if self.inputs.generate_and_assign():
            self.window.status_label.setText(f"Assigned {Path(path).name} to input {name}.")

    def _closed(self) -> None:
        self._unplanned = None
        self._pick = None
        self.window.workbench.scene.set_pickers(frozenset())
        self.revisions.reset()
        self.panel.set_document(None)
        self.inputs.set_document(None)
        self.traced.set_index(None)
        self._close_overlays()

    # ------------------------------------------------------------------ runs and overlays

    def show_run(self, run: TraceRun) -> None:
        """Show a published run in the Traced model pane and switch to it."""
        self.traced.show_run(run)
        self.window.top_bar.set_device(run.provider_name)
        self.window.top_bar.device.setToolTip(
            f"Provider that completed the latest trace: {run.provider} ({run.path.name})"
        )
        self.show_view("Traced model")

    def open_trace_folder(self, path: str | Path) -> TraceRun:
        run = load_run(path)
        self.show_run(run)
        return run

    def open_overlay(self, name: str) -> TensorOverlay | None:
        run = self.traced.run
        if run is None:
            return None
        try:
            compared = self.traced.compared
            other = Path(compared["b"]) if compared is not None else None
            overlay = TensorOverlay(run, name, self.window.as_widget(), other)
        except NNEditorError as exc:
            self.window.status_label.setText(str(exc))
            return None
        overlay.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        overlay.finished.connect(lambda _r, o=overlay: self._forget(o))
        self.overlays.append(overlay)
        overlay.show()
        return overlay

    def _forget(self, overlay: TensorOverlay) -> None:
        overlay.shutdown()
        if overlay in self.overlays:
            self.overlays.remove(overlay)

    def _close_overlays(self) -> None:
        for o in list(self.overlays):
            o.close()
        self.overlays = []

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if obj is self.window and event.type() == QEvent.Type.Close:
            edit: Any = getattr(self.window, "edit", None)
            if edit is None or not edit.dirty or self.window._quit_confirmed:
                self._close_overlays()
                self.panel.shutdown()
        return False
