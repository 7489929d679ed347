"""The Statistics tab: an on-demand, cancellable statistics job and its result table.

Invariants:
- Statistics run only when the user asks (``compute()``), as one job on the shared
  :class:`QtJobRunner`; a new tensor or a new request cancels the running one.
- A cancelled run shows the statistics of the processed prefix, labelled partial, and is
  never cached; complete results are cached by the panel (``statsReady``).
- The percentile method and its error bound are always shown next to the percentiles.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from nneditor.analysis.stats import TensorStats, tensor_stats
from nneditor.jobs.protocol import JobHandle, JobResult
from nneditor.model.tensor import TensorRef
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.tensor.fmt import stat_text
from nneditor.ui.tensor.hist_bars import HistogramBars

PROGRESS_STEPS = 1000

_ROWS: tuple[tuple[str, str], ...] = (
    ("count", "Count"),
    ("finite", "Finite values"),
    ("min", "Min"),
    ("max", "Max"),
    ("mean", "Mean"),
    ("std", "Std (population)"),
    ("zeros", "Zeros"),
    ("nan", "NaN"),
    ("pos_inf", "+Inf"),
    ("neg_inf", "−Inf"),
    ("sparsity", "Sparsity (zeros / count)"),
    ("l2_norm", "L2 norm"),
)


def stats_job(ref: TensorRef) -> Any:
    """The job: statistics of ``ref``; a cancelled run hands back its prefix as partial."""

    def run(handle: JobHandle) -> TensorStats:
        st = tensor_stats(ref, handle)
        if st.partial:
            handle.set_partial(st)
        return st

    return run


class StatsTab(QWidget):
    statsReady = Signal(object)  # noqa: N815 - TensorStats (complete or partial)

    def __init__(self, runner: QtJobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.ref: TensorRef | None = None
        self.stats: TensorStats | None = None
        self._rid: int | None = None
        self.compute_button = QPushButton("Compute statistics", self)
        self.compute_button.clicked.connect(self.compute)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        for b in (self.compute_button, self.cancel_button):
            b.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, PROGRESS_STEPS)
        self.progress.setTextVisible(True)
        self.status = QLabel(self)
        self.status.setObjectName("Muted")
        self.status.setWordWrap(True)
        self.table = _table(self, ("Quantity", "Value"))
        self.pct_table = _table(self, ("Percentile", "Value"))
        self.method = QLabel(self)
        self.method.setWordWrap(True)
        self.method.setObjectName("Muted")
        self.hist = HistogramBars(self)
        self.hist_label = QLabel(self)
        self.hist_label.setObjectName("Muted")
        self._layout()
        self._idle()

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.compute_button)
        top.addWidget(self.cancel_button)
        top.addWidget(self.progress, 1)
        top.addStretch(1)
        tables = QHBoxLayout()
        tables.addWidget(self.table, 3)
        right = QVBoxLayout()
        right.addWidget(self.pct_table)
        right.addWidget(self.method)
        right.addWidget(self.hist_label)
        right.addWidget(self.hist, 1)
        tables.addLayout(right, 2)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addLayout(tables, 1)

    # ------------------------------------------------------------------ state

    def set_tensor(self, ref: TensorRef | None, cached: TensorStats | None = None) -> None:
        self.cancel()
        self._rid = None
        self.ref = ref
        self.stats = None
        self._fill(None)
        if cached is not None:
            self.show_stats(cached, cached=True)
        else:
            self._idle()

    @property
    def running(self) -> bool:
        return self._rid is not None

    def compute(self) -> None:
        if self.ref is None or self.running:
            return
        ref = self.ref
        self.progress.setValue(0)
        self.status.setText(f"Computing statistics of {ref.size:,} values…")
        self.compute_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setVisible(True)
        self._rid = self.runner.submit(
            stats_job(ref),
            lambda result: self._done(ref, result),
            channel=f"tensor-stats:{id(self)}",
            on_progress=self._on_progress,
            label=f"Statistics of {ref.name}",
        )

    def cancel(self) -> None:
        if self._rid is not None:
            self.runner.cancel(self._rid)
            self.status.setText("Cancelling…")

    def _on_progress(self, done: int, total: int, message: str) -> None:
        if total > 0:
            self.progress.setValue(int(PROGRESS_STEPS * min(done, total) / total))
        if message:
            self.progress.setFormat(f"{message} %p%")

    def _done(self, ref: TensorRef, result: JobResult[Any]) -> None:
        if not isValid(self):  # the panel was closed while a shared runner finished the job
            return
        self._rid = None
        if ref is not self.ref:
            return
        if result.error is not None:
            self._idle()
            self.status.setText(f"Statistics failed: {result.error}")
            return
        st = result.value
        if st is None:
            self._idle()
            self.status.setText("Statistics were cancelled before any value was processed.")
            return
        self.show_stats(st)

    def show_stats(self, st: TensorStats, cached: bool = False) -> None:
        self.stats = st
        self._idle()
        self._fill(st)
        if st.partial:
            self.status.setText(
                f"PARTIAL — {st.note or 'the run was cancelled'}. "
                "Compute again for the whole tensor."
            )
        else:
            origin = "cached result" if cached else "computed"
            self.status.setText(f"All {st.processed:,} values ({origin}).")
        self.status.setStyleSheet("color: #c2410c; font-weight: 600;" if st.partial else "")
        self.statsReady.emit(st)

    def _idle(self) -> None:
        self.compute_button.setEnabled(self.ref is not None)
        self.cancel_button.setEnabled(False)
        self.progress.setVisible(False)
        if self.stats is None:
            self.status.setStyleSheet("")
            self.status.setText(
                "Statistics read every value once or twice; they run in the background and can "
                "be cancelled."
                if self.ref is not None
                else ""
            )

    def _fill(self, st: TensorStats | None) -> None:
        d = st.as_dict() if st is not None else {}
        rows = [(label, _stat(key, d.get(key))) for key, label in _ROWS] if st else []
        _set_rows(self.table, rows)
        pct = [(f"p{k}", stat_text(v)) for k, v in (st.percentiles.items() if st else ())]
        _set_rows(self.pct_table, pct)
        counts = st.histogram.get("counts", []) if st is not None else []
        self.hist.setVisible(bool(counts))
        self.hist_label.setVisible(bool(counts))
        if st is not None and counts:
            self.hist.set_histogram(st.histogram["edges"], counts)
            self.hist_label.setText(
                f"Histogram of the finite values ({len(counts)} bins)"
                + (" — partial" if st.partial else "")
            )
        if st is None or not st.percentiles:
            self.method.setText("")
        elif st.percentile_method == "exact":
            self.method.setText("Percentiles: exact (linear interpolation over all values).")
        else:
            self.method.setText(
                f"Percentiles: {st.percentile_method}; each is within "
                f"±{st.percentile_error_bound:.3g} of the true value."
            )


def _stat(key: str, value: Any) -> str:
    if key == "sparsity" and value is not None:
        return f"{float(value):.4%}"
    return stat_text(value)


def _table(parent: QWidget, headers: tuple[str, str]) -> QTableWidget:
    t = QTableWidget(0, 2, parent)
    t.setHorizontalHeaderLabels(list(headers))
    t.verticalHeader().setVisible(False)
    t.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
    t.horizontalHeader().setStretchLastSection(True)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setAlternatingRowColors(True)
    t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 8)
    t.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)
    return t


def _set_rows(table: QTableWidget, rows: list[tuple[str, str]]) -> None:
    table.setRowCount(len(rows))
    for i, (label, value) in enumerate(rows):
        table.setItem(i, 0, QTableWidgetItem(label))
        item = QTableWidgetItem(value)
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        table.setItem(i, 1, item)
