"""A diff shown in one window (nneditor/diff): for two models, a side-by-side view of both
graphs (nneditor/ui/compare), operator changes and per-tensor weight deltas (largest relative
L2 first; double-click opens A, B and A − B); for two traces, per-value drift in graph order
with where it starts.

The side-by-side view is a tab here rather than a window of its own: it, the tables and every
tensor triple opened from them share B's open document, which lives exactly as long as this
dialog (closing it closes B), and one comparison stays one window to find again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from nneditor.ui.trace.ports import drift_color

if TYPE_CHECKING:
    from nneditor.ui.compare.comparison import Comparison


def _table(parent: QWidget, headers: list[str], rows: list[list[Any]]) -> QTableWidget:
    t = QTableWidget(len(rows), len(headers), parent)
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().hide()
    t.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
            item = QTableWidgetItem(text)
            if isinstance(value, float):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            t.setItem(r, c, item)
    t.resizeColumnsToContents()
    return t


class CompareDialog(QDialog):
    def __init__(
        self,
        result: dict[str, Any],
        open_tensor: Callable[[str], None] | None = None,
        parent: QWidget | None = None,
        comparison: Comparison | None = None,
    ) -> None:
        super().__init__(parent)
        self.diff = result
        self.comparison = comparison
        self.side_by_side: Any = None
        self.pair_dialogs: list[Any] = []
        self.setWindowTitle(f"Compare {Path(result['a']).name} with {Path(result['b']).name}")
        self.summary = QLabel("", self)
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tabs = QTabWidget(self)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addWidget(self.tabs, 1)
        if result["kind"] == "traces":
            self._traces(result)
        else:
            if comparison is not None:
                self.tabs.addTab(self._side_by_side(comparison), "Side by side")
            self._models(result, open_tensor)
        if comparison is not None:
            self.resize(1400, 900)
        else:
            self.resize(900, 600)

    def _side_by_side(self, comparison: Comparison) -> QWidget:
        """Both graphs aligned; for a tensors-only artifact, the tensor pairs and why."""
        reason = comparison.no_graph_reason()
        if not reason:
            from nneditor.ui.compare.canvas import SideBySide

            self.side_by_side = SideBySide(comparison, self)
            self.side_by_side.pairRequested.connect(self.open_pair)
            return self.side_by_side
        from nneditor.ui.compare.details import PairTable

        page = QWidget(self)
        lay = QVBoxLayout(page)
        note = QLabel(
            f"No side-by-side graph: {reason}. The tensors are compared by name instead; "
            "double-click a pair to see A, B and A − B.",
            page,
        )
        note.setWordWrap(True)
        self.no_graph_note = note
        self.pair_table = PairTable(page)
        self.pair_table.set_rows(self.diff["tensors"])
        self.pair_table.pairActivated.connect(self.open_pair)
        lay.addWidget(note)
        lay.addWidget(self.pair_table, 1)
        return page

    def open_pair(self, row: dict[str, Any]) -> QDialog | None:
        """A, B and A − B of one tensor row, side by side (needs both documents open)."""
        if self.comparison is None:
            return None
        from nneditor.ui.compare.tensors import TensorTripleDialog

        dialog = TensorTripleDialog(self.comparison.doc_a, self.comparison.doc_b, row, self)
        self.pair_dialogs = [d for d in self.pair_dialogs if isValid(d)] + [dialog]
        dialog.show()
        return dialog

    def done(self, code: int) -> None:  # Qt override: closing (or Escape) releases B
        for dialog in self.pair_dialogs:
            if isValid(dialog):  # a closed triple deletes itself
                dialog.close()
        self.pair_dialogs = []
        if self.side_by_side is not None:
            self.side_by_side.shutdown()
        if self.comparison is not None:
            self.comparison.close()
            self.comparison = None
        super().done(code)

    def _models(self, r: dict[str, Any], open_tensor: Callable[[str], None] | None) -> None:
        s, ops = r["summary"], r["operators"]
        lines = [
            f"A: {r['a']} ({r['formats'][0]})    B (reference): {r['b']} ({r['formats'][1]})",
            f"Tensors: {s['tensors_compared']} compared, {s['tensors_changed']} changed, "
            f"{s['tensors_only_in_a']} only in A, {s['tensors_only_in_b']} only in B; largest "
            f"relative L2 {s['largest_rel_l2']:.3g}.",
        ]
        if ops:
            lines.append(
                f"Operators: {ops['matched']} matched by {ops['matched_by']}, "
                f"{len(ops['only_in_a'])} only in A, {len(ops['only_in_b'])} only in B, "
                f"{len(ops['changed'])} changed."
            )
        lines += [f"Note: {n}" for n in r["notes"]]
        self.summary.setText("\n".join(lines))
        tensors = sorted(
            r["tensors"], key=lambda t: -(t["delta"]["rel_l2"] if "delta" in t else -1.0)
        )
        rows = [
            [
                t["a"] or "—",
                t["b"] or "—",
                t["status"],
                t["delta"]["rel_l2"] if "delta" in t else "",
                t["delta"]["max_abs"] if "delta" in t else "",
                t["delta"]["cosine"] if "delta" in t else "",
                f"{t.get('encoding_a', '')} / {t.get('encoding_b', '')}".strip(" /"),
            ]
            for t in tensors
        ]
        headers = ["Tensor in A", "In B", "Status", "Rel. L2", "Max abs", "Cosine", "Storage"]
        self.tensor_table = _table(self, headers, rows)
        if self.comparison is not None:
            self.tensor_table.cellDoubleClicked.connect(
                lambda row, _c: self.open_pair(tensors[row])
            )
        elif open_tensor is not None:
            self.tensor_table.cellDoubleClicked.connect(
                lambda row, _c: open_tensor(tensors[row]["a"]) if tensors[row]["a"] else None
            )
        self.tabs.addTab(self.tensor_table, "Weights")
        op_rows = [[c["a"], c["b"], "; ".join(c["changes"])] for c in ops.get("changed", [])]
        op_rows += [[o["name"], "—", f"only in A ({o['op']})"] for o in ops.get("only_in_a", [])]
        op_rows += [["—", o["name"], f"only in B ({o['op']})"] for o in ops.get("only_in_b", [])]
        self.tabs.addTab(_table(self, ["In A", "In B", "Difference"], op_rows), "Operators")

    def _traces(self, r: dict[str, Any]) -> None:
        s, first = r["summary"], r["first_drift"]
        where = (
            f"Drift starts at {first['value']}"
            + (f" (block {first['block']})" if first["block"] else "")
            + f": relative L2 {first['rel_l2']:.3g}."
            if first
            else "No value drifts over the threshold."
        )
        self.summary.setText(
            f"A: {r['a']}    B (reference): {r['b']}\n{s['compared']} values compared, "
            f"{s['drifting']} over relative L2 {r['threshold']:g}. {where}"
        )
        values = r["values"]
        rows = [
            [v["name"], v["block"], v["status"], v.get("rel_l2", ""), v.get("cosine", "")]
            for v in values
        ]
        table = _table(self, ["Value", "Block", "Status", "Rel. L2", "Cosine"], rows)
        for row, v in enumerate(values):
            cell = table.item(row, 3)
            if "rel_l2" in v and cell is not None:
                cell.setBackground(drift_color(v["rel_l2"]).lighter(150))
        self.value_table = table
        self.tabs.addTab(table, "Values")
