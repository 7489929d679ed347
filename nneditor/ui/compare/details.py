"""The tensor pairs of a comparison as a table, and the panel beside the side-by-side canvas
that describes the chosen block and lists its pairs.

Invariant: a row of :class:`PairTable` is a row of the diff's ``tensors`` list, unchanged;
activating it (double-click, Enter, or Open) emits that row.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nneditor.ui.compare.alignment import Slot, slot_summary
from nneditor.ui.trace.ports import drift_color

HEADERS = ["Tensor in A", "In B", "Status", "Rel. L2", "Max abs"]
#: beside the canvas: one name (A's, else B's; both in the tooltip), the change, the status
COMPACT = ["Tensor", "Rel. L2", "Status"]


def _status(t: dict[str, Any]) -> str:
    return t["status"] + (f": {t['reason']}" if t.get("reason") else "")


class PairTable(QTableWidget):
    pairActivated = Signal(object)  # noqa: N815 - a diff tensor row (dict)

    def __init__(self, parent: QWidget | None = None, compact: bool = False) -> None:
        headers = COMPACT if compact else HEADERS
        super().__init__(0, len(headers), parent)
        self.compact = compact
        self.rows: list[dict[str, Any]] = []
        self.setHorizontalHeaderLabels(headers)
        self.verticalHeader().hide()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.horizontalHeader().setStretchLastSection(True)
        self.cellDoubleClicked.connect(lambda r, _c: self.activate(r))

    def _cells(self, t: dict[str, Any]) -> list[str]:
        delta = t.get("delta")
        rel, big = (f"{delta['rel_l2']:.3g}", f"{delta['max_abs']:.3g}") if delta else ("", "")
        if self.compact:
            return [t["a"] or t["b"], rel, _status(t)]
        return [t["a"] or "—", t["b"] or "—", _status(t), rel, big]

    def set_rows(self, rows: list[dict[str, Any]]) -> None:
        """Show ``rows``, the most changed first (pairs that could not be compared on top)."""

        def order(t: dict[str, Any]) -> float:
            if "delta" in t:
                return -float(t["delta"]["rel_l2"])
            return -2.0 if t["status"] in ("shape changed", "not compared") else 1.0

        self.rows = sorted(rows, key=order)
        self.setRowCount(len(self.rows))
        rel_col = 1 if self.compact else 3
        for r, t in enumerate(self.rows):
            names = f"A: {t['a'] or '—'}\nB: {t['b'] or '—'}"
            for c, text in enumerate(self._cells(t)):
                item = QTableWidgetItem(text)
                item.setToolTip(names if c == 0 else text)
                if c == rel_col or (not self.compact and c == 4):
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.setItem(r, c, item)
            cell = self.item(r, rel_col)
            if "delta" in t and cell is not None:
                cell.setBackground(drift_color(float(t["delta"]["rel_l2"])).lighter(150))
        self.resizeColumnsToContents()
        if self.rows:
            self.selectRow(0)

    def activate(self, row: int = -1) -> None:
        row = self.currentRow() if row < 0 else row
        if 0 <= row < len(self.rows):
            self.pairActivated.emit(self.rows[row])

    def keyPressEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.activate()
            return
        super().keyPressEvent(event)


class DetailsPanel(QWidget):
    """What the chosen block is, how it was matched, what changed, and its weight pairs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("", self)
        self.title.setObjectName("DocTitle")
        self.title.setWordWrap(True)
        self.text = QLabel("Click a block to see how it was matched and its weight pairs.", self)
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = PairTable(self, compact=True)
        self.open_button = QPushButton("Open A | B | A − B", self)
        self.open_button.setToolTip("Show the selected pair and its difference (or double-click)")
        self.open_button.clicked.connect(lambda: self.table.activate())
        self.open_button.setEnabled(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.addWidget(self.title)
        lay.addWidget(self.text)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.open_button)

    def show_slot(self, slot: Slot | None, rows: list[dict[str, Any]], by_name: bool) -> None:
        if slot is None:
            self.title.setText("")
            self.text.setText("Click a block to see how it was matched and its weight pairs.")
            self.table.set_rows([])
            self.open_button.setEnabled(False)
            return
        self.title.setText(slot.label)
        lines = slot_summary(slot, by_name)
        if slot.matched and slot.a is not None and slot.a.openable:
            lines.append("Double-click the block to open it on both sides.")
        self.text.setText("\n".join(lines))
        self.table.set_rows([rows[k] for k in slot.rows])
        self.open_button.setEnabled(bool(slot.rows))
