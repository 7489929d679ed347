"""The tensor list: every stored tensor with dtype, shape and size; activating one opens it.

Invariant: rows are computed on demand from the catalog (names are listed once); no tensor
values are read here.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QVBoxLayout, QWidget

from nneditor.model.tensor import TensorCatalog
from nneditor.ui.panels.inspector_html import human_size, shape_text

COLUMNS = ("Name", "Type", "Size")
Index = QModelIndex | QPersistentModelIndex


class TensorTableModel(QAbstractTableModel):
    def __init__(self, catalog: TensorCatalog, parent: Any = None) -> None:
        super().__init__(parent)
        self.catalog = catalog
        self.names = list(catalog)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.names)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or role not in (
            Qt.ItemDataRole.DisplayRole,
            Qt.ItemDataRole.ToolTipRole,
        ):
            return None
        name = self.names[index.row()]
        if index.column() == 0:
            return name
        ref = self.catalog[name]
        if index.column() == 1:
            return f"{ref.dtype} {shape_text(ref.shape)}"
        return human_size(ref.nbytes)


class TensorPanel(QWidget):
    tensorRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = QTableView(self)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.activated.connect(self._on_activated)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table)
        self.model: TensorTableModel | None = None

    def set_catalog(self, catalog: TensorCatalog | None) -> None:
        old = self.model
        self.model = TensorTableModel(catalog, self) if catalog is not None else None
        self.table.setModel(self.model)  # type: ignore[arg-type]
        if self.model is not None:
            header = self.table.horizontalHeader()
            header.setResizeContentsPrecision(64)  # size columns from a sample, not every row
            header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
            for c in range(1, len(COLUMNS)):
                header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        if old is not None:
            old.deleteLater()

    def _on_activated(self, index: QModelIndex) -> None:
        if self.model is not None and index.isValid():
            self.tensorRequested.emit(self.model.names[index.row()])
