"""The tensor panel in its own window, opened from the inspector, the tensor list or search."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDialog, QVBoxLayout, QWidget

from nneditor.model.document import Document
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.tensor.panel import TensorPanel


def tensor_usage(doc: Document, name: str, limit: int = 50) -> list[str]:
    """Names of the entry-graph nodes that read tensor ``name`` (bounded)."""
    out: list[str] = []
    if doc.graph is None:
        return out
    for node in doc.graph.nodes:
        if name in node.inputs:
            out.append(f"{node.name or node.op_type} ({node.op_type})")
            if len(out) >= limit:
                break
    return out


class TensorPanelDialog(QDialog):
    def __init__(
        self, doc: Document, name: str, runner: QtJobRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.setWindowTitle(f"Tensor — {name}")
        self.resize(980, 700)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        self.panel = TensorPanel(self, runner=runner)
        layout.addWidget(self.panel)
        source = doc.sources[0] if doc.sources else None
        self.panel.set_tensor(doc.tensors[name], source=source, usage=tensor_usage(doc, name))

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.panel.shutdown()
        super().closeEvent(event)
