"""A simple tensor dialog: metadata plus the first values (the full tensor panel comes later).

Invariants: values are read through ``TensorRef.read(slice)`` on a background job and bounded
to the first ``PREVIEW`` elements of the first row; the dialog deletes itself on close.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from nneditor.jobs.protocol import JobHandle, JobResult
from nneditor.model.tensor import TensorRef
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.panels.inspector_html import esc, human_size, shape_text

PREVIEW = 64


def preview_key(shape: tuple[int, ...]) -> str | None:
    """Slice text for the first ``PREVIEW`` values of the first row (None for scalars)."""
    if not shape:
        return None
    if any(d == 0 for d in shape):
        return ",".join("0:0" for _ in shape)
    lead = ["0"] * (len(shape) - 1)
    return ",".join([*lead, f"0:{min(PREVIEW, shape[-1])}"])


def read_preview(ref: TensorRef) -> np.ndarray:
    key = preview_key(tuple(ref.shape))
    return ref.read(key) if key is not None else ref.read()


class TensorDialog(QDialog):
    def __init__(self, ref: TensorRef, runner: QtJobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.setWindowTitle(f"Tensor — {ref.name}")
        self.resize(560, 420)
        self.ref = ref
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 12)
        layout.setSpacing(10)
        info = QLabel(self._meta_html(ref))
        info.setTextFormat(Qt.TextFormat.RichText)
        info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        info.setWordWrap(True)
        layout.addWidget(info)
        self.values = QPlainTextEdit(self)
        self.values.setReadOnly(True)
        self.values.setPlainText("Reading the first values…")
        layout.addWidget(self.values, 1)
        note = QLabel("The full tensor panel (statistics, heatmaps, hex) comes in a later version.")
        note.setObjectName("Muted")
        note.setWordWrap(True)
        layout.addWidget(note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self._closed = False
        self._runner = runner
        self.request = runner.submit(
            lambda h: self._read(h), self._show, label=f"Reading {ref.name}"
        )

    def closeEvent(self, event) -> None:  # noqa: ANN001, N802 - Qt override
        self._closed = True
        self._runner.cancel(self.request)
        super().closeEvent(event)

    def _read(self, handle: JobHandle) -> Any:
        handle.check_cancelled()
        return read_preview(self.ref)

    @staticmethod
    def _meta_html(ref: TensorRef) -> str:
        rows = [
            ("dtype", ref.dtype),
            ("shape", shape_text(ref.shape)),
            ("elements", f"{ref.size:,}"),
            ("stored size", human_size(ref.nbytes)),
            ("encoding", ref.encoding),
        ]
        if ref.offset is not None:
            rows.append(("byte offset", f"{ref.offset:,}"))
        if ref.location:
            rows.append(("file", ref.location))
        body = "".join(
            f"<tr><td style='color:gray;padding-right:12px'>{esc(k)}</td><td>{esc(v)}</td></tr>"
            for k, v in rows
        )
        return f"<b>{esc(ref.name)}</b><table>{body}</table>"

    def _show(self, result: JobResult[Any]) -> None:
        if self._closed:
            return
        if result.error is not None:
            self.values.setPlainText(f"The values could not be read: {result.error}")
            return
        arr = result.value
        if arr is None:
            self.values.setPlainText("Cancelled.")
            return
        flat = np.asarray(arr).reshape(-1)
        key = preview_key(tuple(self.ref.shape))
        head = f"First {flat.size} value(s){' (slice ' + key + ')' if key else ''}:\n\n"
        with np.printoptions(precision=6, suppress=True, linewidth=72, threshold=PREVIEW + 1):
            self.values.setPlainText(head + np.array2string(flat))
