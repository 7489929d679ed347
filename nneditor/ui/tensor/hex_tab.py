"""The Hex tab: paged hexadecimal + ASCII rows of the stored bytes, with absolute offsets.

Invariants:
- One page (``PAGE`` = 4 KiB) is read at a time through :func:`hex_rows`; pages start on a
  16-byte row boundary so the same byte always sits in the same column.
- Offsets shown are absolute in the outermost file (a :class:`SubSource` is translated).
- Bytes inside the tensor's stored byte range are tinted; without a byte source the tab
  says why instead of showing anything.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from nneditor.analysis.hexview import PAGE, HexRow, hex_rows
from nneditor.io.source import ByteSource, SubSource
from nneditor.model.tensor import TensorRef
from nneditor.tensors.loaders import ArrayLoader
from nneditor.ui import theme

WIDTH = 16
#: Columns: the row's offset, one per byte, then the ASCII rendering.
COLUMNS = ("Offset", *(f"{i:02x}" for i in range(WIDTH)), "ASCII")
ASCII_COL = WIDTH + 1
Index = QModelIndex | QPersistentModelIndex


def parse_offset(text: str) -> int:
    """``"0x1f40"``, ``"8000"`` or ``"8_000"`` -> 8000; raises ValueError with a sentence."""
    t = text.strip().replace("_", "").replace(",", "").lower()
    if not t:
        raise ValueError("type an offset, e.g. 4096 or 0x1000")
    try:
        value = int(t, 16) if t.startswith("0x") else int(t)
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not an offset; use decimal or 0x-hex") from None
    if value < 0:
        raise ValueError("offsets start at 0")
    return value


def resolve_hex(
    ref: TensorRef, source: ByteSource | None
) -> tuple[ByteSource | None, tuple[int, int] | None, str]:
    """(source to show, the tensor's byte range in it, a note or why nothing is shown).

    The loader's own byte source wins when its offset is the ref's (it is where the values are
    really read from: the right shard or external-data file); ``source`` (the artifact file)
    serves tensors whose loader has none, such as typed protobuf fields.
    """
    own = getattr(ref.loader, "source", None)
    if not isinstance(own, ByteSource) or getattr(ref.loader, "offset", None) != ref.offset:
        own = None
    if own is not None and ref.offset is not None and ref.offset + ref.nbytes <= own.size:
        return own, (ref.offset, ref.offset + ref.nbytes), ""
    if ref.location:
        return source, None, f"the tensor's bytes are in {ref.location}, not in this file"
    if source is None:
        if ref.offset is None and isinstance(ref.loader, ArrayLoader):
            return (
                None,
                None,
                (
                    "This tensor is held in memory (a captured activation or a decoded constant); "
                    "it has no stored bytes in a file to show."
                ),
            )
        return None, None, "The file's bytes were not given to this panel, so no hex is shown."
    if ref.offset is None:
        return source, None, f"this tensor is not one byte range ({ref.encoding}); showing the file"
    if ref.offset + ref.nbytes > source.size:
        return source, None, "the tensor's byte range lies outside this file"
    return source, (ref.offset, ref.offset + ref.nbytes), ""


def absolute(source: ByteSource, offset: int) -> int:
    return source.absolute_offset(offset) if isinstance(source, SubSource) else offset


class HexModel(QAbstractTableModel):
    """The rows of one page; ``highlight`` is the tensor's [start, end) in source offsets."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.source: ByteSource | None = None
        self.rows: list[HexRow] = []
        self.start = 0
        self.highlight: tuple[int, int] | None = None
        self._tint = QBrush(QColor(0, 0, 0, 0))

    def load(
        self, source: ByteSource | None, start: int, highlight: tuple[int, int] | None
    ) -> None:
        self.beginResetModel()
        self.source = source
        self.start = start
        self.highlight = highlight
        self.rows = hex_rows(source, start, PAGE, WIDTH) if source is not None else []
        accent = QColor(theme.current().accent)
        accent.setAlpha(40)
        self._tint = QBrush(accent)
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(  # noqa: N802
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or self.source is None:
            return None
        row, col = self.rows[index.row()], index.column()
        byte = col - 1 if 1 <= col <= WIDTH else None
        if byte is not None and byte >= len(row.data):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return f"{absolute(self.source, row.offset):010x}"
            if col == ASCII_COL:
                return row.ascii
            assert byte is not None
            return f"{row.data[byte]:02x}"
        if role == Qt.ItemDataRole.ToolTipRole and col <= WIDTH:
            at = absolute(self.source, row.offset + (byte or 0))
            return f"byte {at:,} (0x{at:x}) of the file"
        in_tensor = byte is not None and self._in_tensor(row.offset + byte)
        if role == Qt.ItemDataRole.BackgroundRole and in_tensor:
            return self._tint
        return None

    def byte_at(self, row: int, byte: int) -> tuple[int, int]:
        """(absolute offset, value) of a shown byte."""
        assert self.source is not None
        r = self.rows[row]
        return absolute(self.source, r.offset + byte), r.data[byte]

    def _in_tensor(self, offset: int) -> bool:
        if self.highlight is None:
            return False
        a, b = self.highlight
        return a <= offset < b


class HexTab(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = HexModel(self)
        self.source: ByteSource | None = None
        self.tensor_range: tuple[int, int] | None = None
        self._note = ""
        self.view = QTableView(self)
        self.view.setModel(self.model)
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.view.setFont(mono)
        self.view.verticalHeader().setVisible(False)
        self.view.verticalHeader().setDefaultSectionSize(self.view.fontMetrics().height() + 4)
        header = self.view.horizontalHeader()
        header.setMinimumSectionSize(8)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        fm = self.view.fontMetrics()
        header.resizeSection(0, fm.horizontalAdvance("0" * 10) + 16)
        for col in range(1, WIDTH + 1):
            header.resizeSection(col, fm.horizontalAdvance("00") + 10)
        header.resizeSection(ASCII_COL, fm.horizontalAdvance("M" * WIDTH) + 16)
        header.setStretchLastSection(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setAlternatingRowColors(False)
        self.view.setShowGrid(False)
        self.jump = QLineEdit(self)
        self.jump.setPlaceholderText("Jump to offset (decimal or 0x…)")
        self.jump.returnPressed.connect(self._on_jump)
        self.prev_button = QPushButton("◀ Page", self)
        self.prev_button.clicked.connect(lambda: self.go_to(self.model.start - PAGE))
        self.next_button = QPushButton("Page ▶", self)
        self.next_button.clicked.connect(lambda: self.go_to(self.model.start + PAGE))
        self.tensor_button = QPushButton("Tensor bytes", self)
        self.tensor_button.clicked.connect(self.go_to_tensor)
        self.header_button = QPushButton("File header", self)
        self.header_button.clicked.connect(lambda: self.go_to(0))
        self.where = QLabel(self)
        self.where.setObjectName("Muted")
        self.reason = QLabel(self)
        self.reason.setWordWrap(True)
        self.reason.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.reason.setObjectName("Muted")
        self._layout()

    def _layout(self) -> None:
        bar = QHBoxLayout()
        for w in (self.tensor_button, self.header_button, self.prev_button, self.next_button):
            bar.addWidget(w)
        bar.addWidget(self.jump, 1)
        page = QWidget(self)
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.where)
        lay.addWidget(self.view, 1)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(page)
        self.stack.addWidget(self.reason)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.stack)

    def set_source(
        self, source: ByteSource | None, tensor_range: tuple[int, int] | None, reason: str = ""
    ) -> None:
        """Show ``source`` at the tensor's first byte (or the file start); ``reason`` explains
        a missing source or byte range."""
        self.source = source
        self.tensor_range = tensor_range
        if source is None:
            self.model.load(None, 0, None)
            self.reason.setText(reason or "There are no stored bytes to show for this tensor.")
            self.stack.setCurrentIndex(1)
            return
        self.stack.setCurrentIndex(0)
        self.tensor_button.setEnabled(tensor_range is not None)
        self._note = reason
        if tensor_range is not None:
            self.go_to_tensor()
        else:
            self.go_to(0)

    def go_to_tensor(self) -> None:
        if self.tensor_range is not None:
            self.go_to(self.tensor_range[0])

    def go_to(self, offset: int) -> None:
        """Show the page holding ``offset`` (clamped to the source)."""
        src = self.source
        if src is None:
            return
        offset = max(0, min(offset, max(0, src.size - 1)))
        start = offset - offset % WIDTH
        self.model.load(src, start, self.tensor_range)
        end = start + sum(len(r.data) for r in self.model.rows)
        self.prev_button.setEnabled(start > 0)
        self.next_button.setEnabled(end < src.size)
        self._describe(start, end)
        self.view.scrollToTop()

    def _describe(self, start: int, end: int) -> None:
        assert self.source is not None
        a, b = absolute(self.source, start), absolute(self.source, end)
        text = f"Bytes {a:,}–{b:,} (0x{a:x}–0x{b:x}) of {self.source.size:,}"
        if self.tensor_range is not None:
            t0, t1 = (absolute(self.source, x) for x in self.tensor_range)
            text += f" · tensor bytes {t0:,}–{t1:,} (end exclusive) are tinted"
        elif self._note:
            text += f" · {self._note}"
        self.where.setText(text)

    def _on_jump(self) -> None:
        try:
            offset = parse_offset(self.jump.text())
        except ValueError as exc:
            self.where.setText(str(exc))
            return
        if self.source is not None:  # typed offsets are absolute in the file
            offset -= absolute(self.source, 0)
        self.go_to(offset)
