"""The View tab: slice controls, the paged value table and (for ggml blocks) raw block fields.

Invariants:
- The controls own a :class:`ViewSpec`; every change goes to the table model as a new spec
  (the model reads only the pages that become visible) and is re-emitted as ``specChanged``
  so the Visualization tab follows the same plane.
- Raw block fields are read only while the toggle is on, for a bounded number of blocks.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSpinBox,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nneditor.io.source import ByteSource
from nneditor.model.tensor import TensorRef
from nneditor.ui.tensor.blocks import BlockListing, is_block_quantized, list_blocks
from nneditor.ui.tensor.fmt import shape_text
from nneditor.ui.tensor.table_model import TensorTableModel
from nneditor.ui.tensor.view_spec import ViewSpec

BLOCK_ROWS = 4
MAX_BLOCKS = 256


class SliceControls(QWidget):
    """Row/column axis pickers and one index spin box per other axis."""

    specChanged = Signal(object)  # noqa: N815 - ViewSpec

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = ViewSpec.default(())
        self.row_combo = QComboBox(self)
        self.col_combo = QComboBox(self)
        for combo in (self.row_combo, self.col_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.row_combo.activated.connect(lambda i: self._apply(self.spec.with_row_axis(i)))
        self.col_combo.activated.connect(lambda i: self._apply(self.spec.with_col_axis(i)))
        self.spins: list[QSpinBox] = []
        self.spin_labels: list[QLabel] = []
        self._transient: list[QWidget] = []  # rebuilt for every shape
        self.plane = QLabel(self)
        self.plane.setObjectName("Muted")
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setHorizontalSpacing(8)

    def set_shape(self, shape: tuple[int, ...]) -> None:
        for w in self._transient:
            w.hide()
            w.deleteLater()
        self.spins, self.spin_labels, self._transient = [], [], []
        while self.grid.count():
            self.grid.takeAt(0)
        self.spec = ViewSpec.default(shape)
        nd = len(shape)
        axes = [f"axis {a} ({d})" for a, d in enumerate(shape)]
        for combo in (self.row_combo, self.col_combo):
            combo.clear()
            combo.addItems(axes)
            combo.setVisible(nd >= 2)
        col = 0
        if nd >= 2:
            col = self._add_pair(col, "Rows", self.row_combo)
            col = self._add_pair(col, "Columns", self.col_combo)
        for axis, dim in enumerate(shape):
            spin = QSpinBox(self)
            spin.setRange(0, max(0, dim - 1))
            spin.setToolTip(f"index on axis {axis} (size {dim})")
            spin.valueChanged.connect(lambda v, a=axis: self._apply(self.spec.with_index(a, v)))
            label = QLabel(f"axis {axis}", self)
            self.spins.append(spin)
            self.spin_labels.append(label)
            col = self._add_pair(col, "", spin, label)
        self.grid.addWidget(self.plane, 0, col)
        self.grid.setColumnStretch(col, 1)
        self._sync()

    def _add_pair(self, col: int, text: str, w: QWidget, label: QLabel | None = None) -> int:
        label = label or QLabel(text, self)
        self._transient.append(label)
        if isinstance(w, QSpinBox):
            self._transient.append(w)
        self.grid.addWidget(label, 0, col)
        self.grid.addWidget(w, 0, col + 1)
        return col + 2

    def set_spec(self, spec: ViewSpec) -> None:
        self._apply(spec)

    def _apply(self, spec: ViewSpec) -> None:
        if spec == self.spec:
            return
        self.spec = spec
        self._sync()
        self.specChanged.emit(spec)

    def _sync(self) -> None:
        spec = self.spec
        fixed = set(spec.fixed_axes) if len(spec.shape) >= 2 else set()
        for axis, (spin, label) in enumerate(zip(self.spins, self.spin_labels, strict=True)):
            shown = axis in fixed
            spin.setVisible(shown)
            label.setVisible(shown)
            spin.blockSignals(True)
            spin.setValue(spec.index[axis])
            spin.blockSignals(False)
        if spec.row_axis is not None and len(spec.shape) >= 2:
            self.row_combo.setCurrentIndex(spec.row_axis)
            self.col_combo.setCurrentIndex(spec.col_axis if spec.col_axis is not None else 0)
        shape = (spec.rows, spec.cols) if spec.col_axis is not None else (spec.rows,)
        self.plane.setText(f"showing {spec.label()} → {shape_text(shape)}")


class ViewTab(QWidget):
    specChanged = Signal(object)  # noqa: N815 - ViewSpec

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ref: TensorRef | None = None
        self.source: ByteSource | None = None
        self.model = TensorTableModel(parent=self)
        self.model.readFailed.connect(self._on_read_failed)
        self.controls = SliceControls(self)
        self.controls.specChanged.connect(self._on_spec)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        fm = self.table.fontMetrics()
        self.table.horizontalHeader().setDefaultSectionSize(
            fm.horizontalAdvance("-0.000123456") + 14
        )
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.error = QLabel(self)
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b91c1c;")
        self.error.hide()
        self.blocks_toggle = QCheckBox("Show raw block fields", self)
        self.blocks_toggle.toggled.connect(self._on_blocks_toggled)
        self.block_row = QSpinBox(self)
        self.block_row.setPrefix("from row ")
        self.block_row.valueChanged.connect(lambda _v: self._refresh_blocks())
        self.block_note = QLabel(self)
        self.block_note.setObjectName("Muted")
        self.blocks = QTableWidget(self)
        self.blocks.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.blocks.verticalHeader().setVisible(False)
        self.blocks.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.blocks.verticalHeader().setDefaultSectionSize(self.blocks.fontMetrics().height() + 6)
        self._layout()

    def _layout(self) -> None:
        block_bar = QHBoxLayout()
        block_bar.addWidget(self.blocks_toggle)
        block_bar.addWidget(self.block_row)
        block_bar.addWidget(self.block_note, 1)
        lower = QWidget(self)
        lower_lay = QVBoxLayout(lower)
        lower_lay.setContentsMargins(0, 0, 0, 0)
        lower_lay.addWidget(self.blocks)
        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(lower)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.addWidget(self.controls)
        lay.addWidget(self.error)
        lay.addWidget(self.splitter, 1)
        lay.addLayout(block_bar)
        self._lower = lower

    def set_tensor(self, ref: TensorRef | None, source: ByteSource | None) -> None:
        self.ref, self.source = ref, source
        self.error.hide()
        shape = tuple(ref.shape) if ref is not None else ()
        self.controls.set_shape(shape)
        self.model.set_tensor(ref, self.controls.spec)
        quantized = ref is not None and is_block_quantized(ref)
        for w in (self.blocks_toggle, self.block_row, self.block_note):
            w.setVisible(quantized)
        self.blocks_toggle.setChecked(False)
        self._lower.setVisible(False)
        if quantized and ref is not None:
            ne0 = ref.shape[-1] if ref.shape else 1
            self.block_row.setRange(0, max(0, ref.size // max(1, ne0) - 1))
            self.block_row.setValue(0)

    @property
    def spec(self) -> ViewSpec:
        return self.controls.spec

    def _on_spec(self, spec: ViewSpec) -> None:
        self.error.hide()
        self.model.set_spec(spec)
        self.specChanged.emit(spec)

    def _on_read_failed(self, message: str) -> None:
        self.error.setText(message)
        self.error.show()

    # ------------------------------------------------------------------ raw blocks

    def _on_blocks_toggled(self, on: bool) -> None:
        self._lower.setVisible(on)
        if on:
            self._refresh_blocks()

    def _refresh_blocks(self) -> None:
        if not self.blocks_toggle.isChecked() or self.ref is None:
            return
        if self.source is None or self.ref.offset is None:
            self.block_note.setText("The file's bytes are not available to this panel.")
            self.blocks.setRowCount(0)
            return
        try:
            listing = list_blocks(
                self.ref, self.source, self.block_row.value(), BLOCK_ROWS, MAX_BLOCKS
            )
        except Exception as exc:  # a truncated file: say so, keep the panel alive
            self.block_note.setText(f"Block fields cannot be read: {exc}")
            self.blocks.setRowCount(0)
            return
        fill_block_table(self.blocks, listing)
        note = (
            f"{listing.type_name}: blocks of {listing.block_size} values in "
            f"{listing.type_size} bytes, {listing.blocks_per_row:,} per row"
        )
        self.block_note.setText(note + (f" · {listing.note}" if listing.note else ""))


def fill_block_table(table: QTableWidget, listing: BlockListing) -> None:
    recs = listing.records
    field_names = list(recs[0].fields) if recs else []
    decoded = bool(recs) and recs[0].codes is not None
    last = "Quant codes (element order)" if decoded else "Raw bytes (hex)"
    headers = ["Row", "Block", "Offset", *field_names, last]
    table.clear()
    table.setColumnCount(len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.setRowCount(len(recs))
    for i, rec in enumerate(recs):
        cells = [str(rec.row), str(rec.block), f"0x{rec.offset:x}"]
        cells += [f"{rec.fields[n]:.6g}" for n in field_names]
        cells.append(_codes_text(rec.codes) if rec.codes is not None else rec.raw.hex(" "))
        for j, text in enumerate(cells):
            table.setItem(i, j, QTableWidgetItem(text))
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(False)  # long code lists scroll instead of being elided


def _codes_text(codes: list[int]) -> str:
    width = max(len(str(c)) for c in codes) if codes else 1
    return " ".join(f"{c:>{width}}" for c in codes)
