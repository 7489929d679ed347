"""One weight pair of a model comparison: A, B and A − B, each in a tensor panel (View,
Statistics, Visualization), side by side.

Invariants:
- The three panels read through :mod:`nneditor.diff.pairs` loaders: only what is on screen
  (and the statistics' chunks) is ever read; the difference is computed per slice.
- Switching the tab, or the View tab's slice, of one panel does the same in the others, so
  the three always show the same place.
- When there is no difference (one side only, shapes or dtypes that cannot be subtracted)
  its column says why instead of showing a panel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent, QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from nneditor.diff.pairs import TensorPair, resolve_pair
from nneditor.model.document import Document
from nneditor.ui.tensor import TensorPanel
from nneditor.ui.tensor.dialog import tensor_usage
from nneditor.ui.tensor.panel import TABS


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def delta_text(row: dict[str, Any]) -> str:
    delta = row.get("delta")
    if delta is None:
        reason = f": {row['reason']}" if row.get("reason") else ""
        return f"{row.get('status', '?')}{reason}"
    return (
        f"{row['status']} · relative L2 {delta['rel_l2']:.3g} · max |A − B| "
        f"{delta['max_abs']:.3g} · cosine {delta['cosine']:.6f}"
    )


class TensorTripleDialog(QDialog):
    """A's tensor, B's tensor and their difference, in three columns."""

    def __init__(
        self, doc_a: Document, doc_b: Document, row: dict[str, Any], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.pair: TensorPair = resolve_pair(doc_a, doc_b, row)
        name = row.get("a") or row.get("b") or "?"
        self.setWindowTitle(f"Compare tensor — {name}")
        self.resize(1800, 820)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        head = QLabel(
            f"<b>{_esc(row.get('a') or '—')}</b> in A ↔ <b>{_esc(row.get('b') or '—')}</b> in B"
            f" · {_esc(delta_text(row))}",
            self,
        )
        head.setWordWrap(True)
        head.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(head)
        self.notes = QLabel("\n".join(self.pair.notes), self)
        self.notes.setObjectName("Muted")
        self.notes.setWordWrap(True)
        self.notes.setVisible(bool(self.pair.notes))
        lay.addWidget(self.notes)
        columns = QSplitter(Qt.Orientation.Horizontal, self)
        columns.setChildrenCollapsible(False)
        lay.addWidget(columns, 1)
        self.panels: list[TensorPanel] = []
        self.panel_a = self._column(columns, doc_a, "a")
        self.panel_b = self._column(columns, doc_b, "b")
        self.difference_panel = self._difference(columns)
        self.columns = columns
        self._evened = False
        self.why = self.pair.why
        self._syncing = False
        for panel in self.panels:
            panel.tabs.currentChanged.connect(lambda i, p=panel: self._same_tab(p, i))
            panel.view_tab.specChanged.connect(lambda spec, p=panel: self._same_spec(p, spec))
            bar = panel.view_tab.table.verticalScrollBar()
            bar.valueChanged.connect(lambda v, p=panel: self._same_scroll(p, v))
            panel.stats_tab.compute_button.clicked.connect(self.compute_statistics)
        self.show_tab("View")

    def _caption(self, columns: QSplitter, text: str, name: str) -> QVBoxLayout:
        column = QWidget(columns)
        box = QVBoxLayout(column)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(QLabel(f"<b>{_esc(text)}</b>", column))
        label = QLabel(name, column)
        label.setToolTip(name)
        label.setObjectName("Muted")
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # three columns share the width: a long name is cut, it never widens its column
        label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        box.addWidget(label)
        columns.addWidget(column)
        return box

    def _column(self, columns: QSplitter, doc: Document, side: str) -> TensorPanel | None:
        ref = self.pair.a if side == "a" else self.pair.b
        text = f"{side.upper()} · {Path(str(doc.path)).name}"
        box = self._caption(columns, text, ref.name if ref is not None else "")
        if ref is None:
            box.addWidget(self._missing(f"This tensor does not exist in {side.upper()}."), 1)
            return None
        panel = TensorPanel(self)
        panel.set_tensor(ref, usage=tensor_usage(doc, ref.name), title=ref.name)
        self._add(box, panel)
        return panel

    def _add(self, box: QVBoxLayout, panel: TensorPanel) -> None:
        """The panel in a scroll area: its widest tab (Visualization's controls) may need
        more than a third of the dialog, and then scrolls instead of stretching the dialog."""
        panel.title.hide()  # the column caption names the tensor
        # values are compared here; raw bytes (the widest tab) stay in the single-tensor panel,
        # and a dequantized B or the difference has no bytes of its own anyway
        panel.tabs.setTabVisible(TABS.index("Hex"), False)
        panel.hex_tab.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(panel)
        box.addWidget(scroll, 1)
        self.panels.append(panel)

    def _difference(self, columns: QSplitter) -> TensorPanel | None:
        ref = self.pair.difference
        box = self._caption(columns, "A − B", "element by element, computed for what is shown")
        if ref is None:
            box.addWidget(self._missing(self.pair.why), 1)
            return None
        panel = TensorPanel(self)
        panel.set_tensor(
            ref,
            usage=["A − B, element by element, of the two tensors on the left"],
            title="A − B",
        )
        self._add(box, panel)
        return panel

    def _missing(self, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setWordWrap(True)
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        label.setObjectName("Muted")
        return label

    # ------------------------------------------------------------------ keep the three together

    def _same_tab(self, source: TensorPanel, index: int) -> None:
        if self._syncing:
            return
        self._syncing = True
        for p in self.panels:
            if p is not source and p.tabs.isTabVisible(index):
                p.tabs.setCurrentIndex(index)
        self._syncing = False

    def _same_spec(self, source: TensorPanel, spec: Any) -> None:
        if self._syncing:
            return
        self._syncing = True
        for p in self.panels:
            if p is not source and tuple(p.view_tab.controls.spec.shape) == tuple(spec.shape):
                p.view_tab.controls.set_spec(spec)
        self._syncing = False

    def _same_scroll(self, source: TensorPanel, value: int) -> None:
        if self._syncing:
            return
        self._syncing = True
        for p in self.panels:
            if p is not source:
                p.view_tab.table.verticalScrollBar().setValue(value)
        self._syncing = False

    def compute_statistics(self) -> None:
        """Statistics of all three (each streams its tensor once or twice on the runner)."""
        for p in self.panels:
            p.stats_tab.compute()

    def show_tab(self, name: str) -> None:
        """Show tab ``name`` ("View", "Statistics", "Visualization", ...) in every panel."""
        for p in self.panels:
            p.show_tab(name)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._evened:  # equal thirds once the splitter knows its width
            self._evened = True
            n = self.columns.count()
            self.columns.setSizes([max(1, self.columns.width() // n)] * n)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        for p in self.panels:
            p.shutdown()
