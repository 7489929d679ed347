"""Module structure of a graph-less checkpoint from its tensor-name prefixes (lazy tree).

Shown instead of the graph hierarchy when a document has no graph: ``layers.3.attn.q.weight``
nests under ``layers › 3 › attn › q``. It is a naming convention, not executable structure;
the header says so. Activating a tensor leaf emits ``tensorRequested(name)``.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nneditor.model.tensor import TensorCatalog
from nneditor.semantic.name_tree import REASON, name_trie
from nneditor.semantic.scopes import ScopeNode

_NODE = Qt.ItemDataRole.UserRole
_PENDING = "…"


class NameTreePanel(QWidget):
    tensorRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel(REASON[0].upper() + REASON[1:] + ".", self)
        self.note.setWordWrap(True)
        self.note.setContentsMargins(6, 4, 6, 4)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["Name", "Tensors"])
        self.tree.setUniformRowHeights(True)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.itemExpanded.connect(self._fill)
        self.tree.itemActivated.connect(self._activated)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.tree)
        self._names: list[str] = []

    def set_catalog(self, catalog: TensorCatalog | None) -> None:
        self.tree.clear()
        self._names = list(catalog.keys()) if catalog is not None else []
        if not self._names:
            return
        root = name_trie(self._names)
        self._add_children(self.tree.invisibleRootItem(), root)

    def _add_children(self, parent: QTreeWidgetItem, node: ScopeNode) -> None:
        for child in node.children.values():
            item = QTreeWidgetItem(parent, [child.name, str(child.count())])
            item.setData(0, _NODE, child)
            if child.children or child.nodes:
                QTreeWidgetItem(item, [_PENDING, ""])  # placeholder until expanded
        for i in node.nodes:
            leaf = QTreeWidgetItem(parent, [self._names[i].rsplit(".", 1)[-1], ""])
            leaf.setData(0, _NODE, self._names[i])
            leaf.setToolTip(0, self._names[i])

    def _fill(self, item: QTreeWidgetItem) -> None:
        node = item.data(0, _NODE)
        first = item.child(0) if item.childCount() == 1 else None
        if first is not None and first.text(0) == _PENDING and isinstance(node, ScopeNode):
            item.takeChild(0)
            self._add_children(item, node)

    def _activated(self, item: QTreeWidgetItem, _column: int) -> None:
        name = item.data(0, _NODE)
        if isinstance(name, str):
            self.tensorRequested.emit(name)
