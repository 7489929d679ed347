"""A diff shown as tables (nneditor/diff): for two models, operator changes and per-tensor
weight deltas (largest relative L2 first; double-click opens A's tensor); for two traces,
per-value drift in graph order with where it starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

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

from nneditor.ui.trace.ports import drift_color


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
    ) -> None:
        super().__init__(parent)
        self.diff = result
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
            self._models(result, open_tensor)
        self.resize(900, 600)

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
        if open_tensor is not None:
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
