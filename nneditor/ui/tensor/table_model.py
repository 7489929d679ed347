"""A paged table of decoded tensor values over one 2-D plane of the tensor.

Invariants:
- The model never reads more than one page (``PAGE_ROWS`` × ``PAGE_COLS`` values) per
  ``data()`` miss, through ``TensorRef.read(key)``; at most ``MAX_PAGES`` pages stay cached.
- Row/column counts come from the shape alone; nothing is read to answer them.
- A read that fails (an undecodable type, a truncated file) never raises out of ``data()``:
  the cell shows an empty string, the reason is kept in :attr:`error` and ``readFailed`` is
  emitted once per view.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from nneditor.model.tensor import TensorRef
from nneditor.ui.tensor.fmt import format_value
from nneditor.ui.tensor.view_spec import ViewSpec

PAGE_ROWS = 256
PAGE_COLS = 64
MAX_PAGES = 24
#: Qt item models count rows and columns in a C int.
QT_MAX = 2**31 - 1

Index = QModelIndex | QPersistentModelIndex
_NUMERIC_ALIGN = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


class TensorTableModel(QAbstractTableModel):
    """Values of ``spec``'s plane of ``ref``; headers are indices along the two axes."""

    readFailed = Signal(str)  # noqa: N815 - Qt signal naming
    viewChanged = Signal()  # noqa: N815

    def __init__(self, ref: TensorRef | None = None, parent: Any = None) -> None:
        super().__init__(parent)
        self.ref: TensorRef | None = None
        self.spec = ViewSpec.default(())
        self.error = ""
        self.reads = 0  # page reads performed (for tests and diagnostics)
        self._pages: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._numeric = True
        if ref is not None:
            self.set_tensor(ref)

    # ------------------------------------------------------------------ configuration

    def set_tensor(self, ref: TensorRef | None, spec: ViewSpec | None = None) -> None:
        self.beginResetModel()
        self.ref = ref
        shape = tuple(ref.shape) if ref is not None else ()
        self.spec = spec if spec is not None else ViewSpec.default(shape)
        self._numeric = ref is not None and ref.dtype != "string"
        self._reset_pages()
        self.endResetModel()
        self.viewChanged.emit()

    def set_spec(self, spec: ViewSpec) -> None:
        """Show another plane (axes or fixed indices changed)."""
        if spec == self.spec:
            return
        same_size = (spec.rows, spec.cols) == (self.spec.rows, self.spec.cols)
        if same_size:  # only the values change: keep the views' scroll position
            self.spec = spec
            self._reset_pages()
            if self.rowCount() and self.columnCount():
                last = self.index(self.rowCount() - 1, self.columnCount() - 1)
                self.dataChanged.emit(self.index(0, 0), last)
            self.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, self.columnCount() - 1)
            self.headerDataChanged.emit(Qt.Orientation.Vertical, 0, self.rowCount() - 1)
        else:
            self.beginResetModel()
            self.spec = spec
            self._reset_pages()
            self.endResetModel()
        self.viewChanged.emit()

    def _reset_pages(self) -> None:
        self._pages.clear()
        self.error = ""

    # ------------------------------------------------------------------ Qt model API

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        if parent.isValid() or self.ref is None:
            return 0
        return min(self.spec.rows, QT_MAX)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        if parent.isValid() or self.ref is None:
            return 0
        return min(self.spec.cols, QT_MAX)

    def headerData(  # noqa: N802
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            return str(section)
        if role == Qt.ItemDataRole.ToolTipRole:
            axis = self.spec.row_axis if orientation == Qt.Orientation.Vertical else None
            if orientation == Qt.Orientation.Horizontal:
                axis = self.spec.col_axis
            return f"index {section} on axis {axis}" if axis is not None else None
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or self.ref is None:
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(_NUMERIC_ALIGN.value) if self._numeric else None
        if role not in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return None
        value = self.value(index.row(), index.column())
        if value is None:
            return "" if role == Qt.ItemDataRole.DisplayRole else self.error
        text = format_value(value)
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{self.element_label(index.row(), index.column())} = {_full(value)}"
        return text

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    # ------------------------------------------------------------------ values

    def value(self, row: int, col: int) -> Any:
        """The decoded value at (row, col) of the plane, or None when it cannot be read."""
        page = self._page(row // PAGE_ROWS, col // PAGE_COLS)
        if page is None:
            return None
        return page[row % PAGE_ROWS, col % PAGE_COLS]

    def element_label(self, row: int, col: int) -> str:
        """numpy index of a cell in the full tensor, e.g. ``[1, 4, 2, 0]``."""
        spec = self.spec
        idx = list(spec.index)
        if spec.row_axis is not None:
            idx[spec.row_axis] = row
        if spec.col_axis is not None:
            idx[spec.col_axis] = col
        return "[" + ", ".join(str(i) for i in idx) + "]"

    def _page(self, pr: int, pc: int) -> np.ndarray | None:
        key = (pr, pc)
        page = self._pages.get(key)
        if page is not None:
            self._pages.move_to_end(key)
            return page
        if self.error or self.ref is None:
            return None
        r0, c0 = pr * PAGE_ROWS, pc * PAGE_COLS
        r1, c1 = min(self.spec.rows, r0 + PAGE_ROWS), min(self.spec.cols, c0 + PAGE_COLS)
        try:
            page = self.spec.read(self.ref, slice(r0, r1), slice(c0, c1))
        except Exception as exc:  # shown to the user, never raised into Qt's paint loop
            self.error = f"values cannot be shown: {exc}"
            self.readFailed.emit(self.error)
            return None
        self.reads += 1
        self._pages[key] = page
        while len(self._pages) > MAX_PAGES:
            self._pages.popitem(last=False)
        return page


def _full(value: Any) -> str:
    if isinstance(value, (np.floating, float)) and not isinstance(value, np.float64):
        return repr(float(value))
    return repr(value.item() if isinstance(value, np.generic) else value)
