"""TensorPanel: one tensor's metadata, values, statistics, plots and raw bytes, with export.

Usage::

    panel = TensorPanel(runner=window.runner)
    panel.set_tensor(ref, source=doc.sources[0], usage=["node MatMul_3 (input B)"])
    panel.set_array(activation, "layer1.out", {"shape": [1, 64, 56, 56], "node": "Conv_2"})

Invariants:
- ``set_tensor`` reads no values; each tab reads bounded slices when it is shown.
- Statistics are cached per tensor identity (loader id, name, offset, size, shape) for the
  panel's lifetime, bounded to ``STATS_CACHE`` entries; partial results are never cached.
- Export .npy of the whole tensor streams in chunks on the job runner; the file appears only
  when complete. Export PNG grabs the current tab as shown.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QTabWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from nneditor.analysis.stats import TensorStats
from nneditor.io.source import ByteSource
from nneditor.jobs.protocol import JobHandle, JobResult
from nneditor.model.tensor import TensorRef
from nneditor.tensors.dtypes import dtype_name
from nneditor.tensors.loaders import ArrayLoader
from nneditor.ui import theme
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.tensor.export import Exported, export_array, export_tensor
from nneditor.ui.tensor.fmt import shape_text
from nneditor.ui.tensor.hex_tab import HexTab, resolve_hex
from nneditor.ui.tensor.metadata import metadata_html, partial_text, style
from nneditor.ui.tensor.stats_tab import StatsTab
from nneditor.ui.tensor.view_spec import ViewSpec
from nneditor.ui.tensor.view_tab import ViewTab

STATS_CACHE = 32
TABS = ("Metadata", "View", "Statistics", "Visualization", "Hex")


def tensor_identity(ref: TensorRef) -> tuple[Any, ...]:
    return (id(ref.loader), ref.name, ref.offset, ref.nbytes, tuple(ref.shape))


def _file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "tensor"


class TensorPanel(QWidget):
    exported = Signal(str)  # a sentence naming the file written
    exportFailed = Signal(str)  # noqa: N815

    def __init__(self, parent: QWidget | None = None, *, runner: QtJobRunner | None = None):
        super().__init__(parent)
        self._own_runner = runner is None
        self.runner = runner or QtJobRunner(self)
        self.ref: TensorRef | None = None
        self.source: ByteSource | None = None
        self.partial_shape: tuple[int, ...] | None = None
        self._stats_cache: OrderedDict[tuple[Any, ...], tuple[TensorRef, TensorStats]] = (
            OrderedDict()
        )
        self._viz: Any = None
        self._view_hint: str | None = None
        self._build()

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.title = QLabel(self)
        self.title.setObjectName("DocTitle")
        self.chips = [QLabel(self) for _ in range(3)]
        for c in self.chips:
            c.setObjectName("Chip")
        self.partial_badge = QLabel("partial", self)
        self.partial_badge.setStyleSheet(
            "color: white; background: #c2410c; border-radius: 9px; padding: 1px 8px;"
            " font-weight: 600;"
        )
        self.partial_badge.hide()
        self.npy_button = QToolButton(self)
        self.npy_button.setText("Export .npy")
        self.npy_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.npy_button)
        menu.addAction("Whole tensor…", lambda: self._ask_npy("tensor"))
        menu.addAction("Current slice (View tab)…", lambda: self._ask_npy("slice"))
        menu.addAction("Selected cells…", lambda: self._ask_npy("selection"))
        self.npy_button.setMenu(menu)
        self.png_button = QPushButton("Export PNG", self)
        self.png_button.clicked.connect(self._ask_png)
        self.status = QLabel(self)
        self.status.setObjectName("Muted")
        self.status.setWordWrap(True)
        head = QHBoxLayout()
        head.addWidget(self.title)
        for w in (*self.chips, self.partial_badge):
            head.addWidget(w)
        head.addStretch(1)
        head.addWidget(self.npy_button)
        head.addWidget(self.png_button)
        self.meta = QTextBrowser(self)
        self.meta.setOpenLinks(False)
        self.view_tab = ViewTab(self)
        self.stats_tab = StatsTab(self.runner, self)
        self.stats_tab.statsReady.connect(self._on_stats)
        self.viz_host = QWidget(self)
        QVBoxLayout(self.viz_host).setContentsMargins(0, 0, 0, 0)
        self.hex_tab = HexTab(self)
        self.tabs = QTabWidget(self)
        pages: tuple[QWidget, ...] = (
            self.meta,
            self.view_tab,
            self.stats_tab,
            self.viz_host,
            self.hex_tab,
        )
        for page, label in zip(pages, TABS, strict=True):
            self.tabs.addTab(page, label)
        self.tabs.currentChanged.connect(self._on_tab)
        self.view_tab.specChanged.connect(self._on_spec)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.addLayout(head)
        lay.addWidget(self.status)
        lay.addWidget(self.tabs, 1)
        self._enable(False)

    def _say(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def _enable(self, on: bool) -> None:
        self.npy_button.setEnabled(on)
        self.png_button.setEnabled(on)

    # ------------------------------------------------------------------ inputs

    def set_tensor(
        self,
        ref: TensorRef,
        *,
        source: ByteSource | None = None,
        usage: Sequence[str] = (),
        title: str = "",
        partial_shape: Sequence[int] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Show ``ref``. ``source`` holds its bytes for the Hex tab; ``partial_shape`` is the
        original shape when ``ref`` holds only a captured prefix."""
        self.ref, self.source = ref, source
        full = tuple(int(d) for d in partial_shape) if partial_shape is not None else None
        self.partial_shape = full if partial_text(ref, full) else None
        meta = dict(metadata or {})
        self._view_hint = meta.pop("view", None)
        self._header(ref, title)
        src, rng, note = resolve_hex(ref, source)
        t = theme.current()
        self.meta.setHtml(
            style(t.muted.name())
            + metadata_html(
                ref,
                usage=usage,
                extra=meta or None,
                full_shape=self.partial_shape,
                source_label=src.label if src is not None and rng is not None else "",
            )
        )
        self.view_tab.set_tensor(ref, src if rng is not None else None)
        cached = self._stats_cache.get(tensor_identity(ref))
        self.stats_tab.set_tensor(ref, cached[1] if cached else None)
        self.hex_tab.set_source(src, rng, note)
        if self._viz is not None:
            self._viz.set_tensor(ref, self.view_tab.spec, self._view_hint)
            self._viz.set_stats(cached[1] if cached else None)
        self._say(partial_text(ref, self.partial_shape) if self.partial_shape else "")
        self._enable(True)

    def set_array(
        self, arr: np.ndarray, name: str, metadata: Mapping[str, Any] | None = None
    ) -> TensorRef:
        """Show an in-memory array (a captured activation). ``metadata['shape']`` is the
        original shape; a flat prefix shorter than it is shown as a partial capture."""
        arr = np.asarray(arr)
        meta = dict(metadata or {})
        full = meta.get("shape")
        partial: tuple[int, ...] | None = None
        if full is not None:
            full_t = tuple(int(d) for d in full)
            if math.prod(full_t) == arr.size:
                arr = arr.reshape(full_t)
            else:
                partial = full_t
                row = math.prod(full_t[1:]) if len(full_t) > 1 else 1
                if len(full_t) > 1 and row and arr.size % row == 0:
                    arr = arr.reshape((arr.size // row, *full_t[1:]))
                else:
                    arr = arr.reshape(-1)
        ref = TensorRef(
            name=name,
            dtype=dtype_name(arr.dtype),
            shape=tuple(arr.shape),
            nbytes=int(arr.nbytes),
            encoding="in memory (captured)",
            loader=ArrayLoader(arr),
        )
        usage = meta.pop("usage", ())
        self.set_tensor(ref, usage=usage, title=name, partial_shape=partial, metadata=meta)
        return ref

    def _header(self, ref: TensorRef, title: str) -> None:
        self.title.setText(title or ref.name)
        self.title.setToolTip(ref.name)
        texts = (ref.dtype, shape_text(tuple(ref.shape)), str(ref.encoding))
        for chip, text in zip(self.chips, texts, strict=True):
            chip.setText(text)
        self.chips[2].setVisible(ref.encoding not in ("raw", ref.dtype))
        self.partial_badge.setVisible(self.partial_shape is not None)
        if self.partial_shape is not None:
            self.partial_badge.setToolTip(partial_text(ref, self.partial_shape))

    @property
    def is_partial(self) -> bool:
        return self.partial_shape is not None

    # ------------------------------------------------------------------ tabs

    @property
    def viz(self) -> Any:
        """The Visualization tab's widget (created, and pyqtgraph imported, on first use)."""
        if self._viz is None:
            from nneditor.ui.tensor.viz import VizTab

            self._viz = VizTab(self.viz_host)
            layout = self.viz_host.layout()
            assert layout is not None
            layout.addWidget(self._viz)
            self._viz.show()
            if self.ref is not None:
                cached = self._stats_cache.get(tensor_identity(self.ref))
                self._viz.set_tensor(self.ref, self.view_tab.spec, self._view_hint)
                self._viz.set_stats(cached[1] if cached else None)
        return self._viz

    def show_tab(self, name: str) -> None:
        self.tabs.setCurrentIndex(TABS.index(name))

    def show_view(self, kind: str) -> None:
        """Open the Visualization tab on ``kind`` (histogram, line, heatmap, ...)."""
        self.show_tab("Visualization")
        self.viz.set_kind(kind)
        if self.viz.dirty:
            self.viz.redraw()

    def _on_tab(self, index: int) -> None:
        if TABS[index] == "Visualization":
            _ = self.viz

    def _on_spec(self, spec: ViewSpec) -> None:
        if self._viz is not None:
            self._viz.set_spec(spec)

    def _on_stats(self, st: TensorStats) -> None:
        ref = self.stats_tab.ref
        if ref is None:
            return
        if not st.partial:
            self._stats_cache[tensor_identity(ref)] = (ref, st)
            self._stats_cache.move_to_end(tensor_identity(ref))
            while len(self._stats_cache) > STATS_CACHE:
                self._stats_cache.popitem(last=False)
        if self._viz is not None and ref is self.ref:
            self._viz.set_stats(st)

    # ------------------------------------------------------------------ export

    def export_npy(self, path: str | Path, scope: str = "tensor") -> int | None:
        """Write values to ``path`` on the job runner: ``scope`` is "tensor" (streamed),
        "slice" (the View tab's plane) or "selection" (the selected cells' bounding box).
        Emits ``exported`` or ``exportFailed``; returns the job id (None if nothing to do)."""
        ref = self.ref
        if ref is None:
            return None
        if scope == "tensor":

            def job(handle: JobHandle) -> Exported:
                return export_tensor(ref, path, handle)
        else:
            key = self._export_key(scope)
            if key is None:
                self.exportFailed.emit("Select some cells in the View tab first.")
                return None

            def job(handle: JobHandle) -> Exported:
                return export_array(ref.read(key), path)

        self._say(f"Exporting {ref.name} to {path}…")
        return self.runner.submit(
            job,
            self._export_done,
            on_progress=lambda d, t, _m: self._say(f"Exporting… {d * 100 // max(1, t)}%"),
            label=f"Export {ref.name}",
        )

    def _export_key(self, scope: str) -> tuple[slice | int, ...] | None:
        spec = self.view_tab.spec
        if scope == "slice":
            return spec.plane_key() if spec.shape else ()
        sel = self.view_tab.table.selectionModel().selectedIndexes()
        if not sel:
            return None
        rows = [i.row() for i in sel]
        cols = [i.column() for i in sel]
        return spec.key(slice(min(rows), max(rows) + 1), slice(min(cols), max(cols) + 1))

    def _export_done(self, result: JobResult[Any]) -> None:
        if not isValid(self):  # closed while a shared runner finished the export
            return
        if result.ok and result.value is not None:
            msg = result.value.describe()
            self._say(msg)
            self.exported.emit(msg)
        else:
            msg = "Export cancelled." if result.cancelled else f"Export failed: {result.error}"
            self._say(msg)
            self.exportFailed.emit(msg)

    def export_png(self, path: str | Path) -> bool:
        """Save the current tab as shown to ``path`` (PNG)."""
        page = self.tabs.currentWidget()
        if page is self.viz_host:
            page = self.viz
        ok = bool(page.grab().save(str(path), "PNG"))
        self._say(f"Saved {path}" if ok else f"Could not write {path}")
        return ok

    def _ask_npy(self, scope: str) -> None:
        if self.ref is None:
            return
        suffix = "" if scope == "tensor" else f"_{scope}"
        default = f"{_file_stem(self.ref.name)}{suffix}.npy"
        path, _ = QFileDialog.getSaveFileName(self, "Export values", default, "NumPy (*.npy)")
        if path:
            self.export_npy(path, scope)

    def _ask_png(self) -> None:
        if self.ref is None:
            return
        tab = TABS[self.tabs.currentIndex()].lower()
        default = f"{_file_stem(self.ref.name)}_{tab}.png"
        path, _ = QFileDialog.getSaveFileName(self, "Export PNG", default, "PNG image (*.png)")
        if path:
            self.export_png(path)

    # ------------------------------------------------------------------ lifetime

    def shutdown(self) -> None:
        """Cancel this panel's jobs (and stop its own runner, if it made one)."""
        self.stats_tab.cancel()
        if self._own_runner:
            self.runner.shutdown()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.shutdown()
        super().closeEvent(event)
