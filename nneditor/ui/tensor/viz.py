"""The Visualization tab (pyqtgraph): histogram, line, heatmap, feature-map grid, attention map.

Invariants:
- The only module of the app importing pyqtgraph (forced onto PySide6 before import).
- Rendering happens when the tab is visible and its inputs changed (``dirty``), or when asked
  (``redraw()``); data comes from :mod:`viz_data`'s bounded reads, and the caption always says
  when a plot shows a sample, a stride or a downsampled line.
- The histogram uses the statistics job's histogram when one exists for the tensor.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6.QtGui import QColor, QFont, QFontMetrics, QShowEvent  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from nneditor.analysis.stats import TensorStats  # noqa: E402
from nneditor.model.tensor import TensorRef  # noqa: E402
from nneditor.ui import theme  # noqa: E402
from nneditor.ui.tensor import viz_data as vd  # noqa: E402
from nneditor.ui.tensor.view_spec import (  # noqa: E402
    ViewSpec,
    as_float,
    peak_downsample,
    read_plane,
    read_sample,
)

LINE_MAX_POINTS = 100_000
LINE_READ_LIMIT = 1 << 22


class VizTab(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ref: TensorRef | None = None
        self.spec = ViewSpec.default(())
        self.stats: TensorStats | None = None
        self.kind = "histogram"
        self.dirty = False
        self.image: np.ndarray | None = None  # last image shown (tests, export)
        self.curve: tuple[np.ndarray, np.ndarray] | None = None  # last line/histogram data
        self.combo = QComboBox(self)
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.activated.connect(lambda _i: self.set_kind(self.combo.currentData()))
        self.grid_axis = QComboBox(self)
        self.grid_axis.addItems(["grid over axis 0", "grid over axis 1"])
        self.fixed = QSpinBox(self)
        self.first = QSpinBox(self)
        self.first.setSingleStep(vd.GRID_MAX)
        self.first.setPrefix("from map ")
        self.normalize = QCheckBox("normalise each map", self)
        self.batch = QSpinBox(self)
        self.batch.setPrefix("batch ")
        self.head = QSpinBox(self)
        self.head.setPrefix("head ")
        for w in (self.grid_axis,):
            w.activated.connect(lambda _i: self._changed())
        for s in (self.fixed, self.first, self.batch, self.head):
            s.valueChanged.connect(lambda _v: self._changed())
        self.normalize.toggled.connect(lambda _v: self._changed())
        self.caption = QLabel(self)
        self.caption.setObjectName("Muted")
        self.caption.setWordWrap(True)
        t = theme.current()
        self.plot_area = pg.GraphicsLayoutWidget(self)
        self.plot_area.setBackground(t.surface)
        self._layout()

    def _layout(self) -> None:
        bar = QHBoxLayout()
        bar.addWidget(QLabel("View", self))
        bar.addWidget(self.combo)
        for w in (self.grid_axis, self.fixed, self.first, self.normalize, self.batch, self.head):
            bar.addWidget(w)
        bar.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.caption)
        lay.addWidget(self.plot_area, 1)

    # ------------------------------------------------------------------ inputs

    def set_tensor(self, ref: TensorRef | None, spec: ViewSpec, hint: str | None = None) -> None:
        self.ref, self.spec, self.stats = ref, spec, None
        shape = tuple(ref.shape) if ref is not None else ()
        self.combo.clear()
        for key in vd.available_views(shape):
            self.combo.addItem(vd.VIEWS[key], key)
        if ref is not None:
            probe = vd.first_row_probe(ref) if len(shape) in (3, 4) else None
            self.kind = vd.pick_view(shape, ref.name, hint, probe)
        self._setup_controls(shape)
        self.combo.setCurrentIndex(max(0, self.combo.findData(self.kind)))
        self._changed()

    def set_spec(self, spec: ViewSpec) -> None:
        self.spec = spec
        if self.kind == "heatmap":
            self._changed()

    def set_stats(self, stats: TensorStats | None) -> None:
        self.stats = stats
        if self.kind == "histogram":
            self._changed()

    def set_kind(self, kind: str) -> None:
        if kind not in vd.available_views(tuple(self.ref.shape) if self.ref else ()):
            raise ValueError(f"view {kind!r} does not fit this tensor's shape")
        self.kind = kind
        self.combo.setCurrentIndex(self.combo.findData(kind))
        self._setup_controls(tuple(self.ref.shape) if self.ref else ())
        self._changed()

    def _setup_controls(self, shape: tuple[int, ...]) -> None:
        nd = len(shape)
        fm, att = self.kind == "feature_maps", self.kind == "attention"
        self.grid_axis.setVisible(fm and nd == 4)
        self.fixed.setVisible(fm and nd == 4)
        self.first.setVisible(fm)
        self.normalize.setVisible(fm)
        self.batch.setVisible(att and nd == 4)
        self.head.setVisible(att)
        for s in (self.fixed, self.first, self.batch, self.head):
            s.blockSignals(True)
        if nd == 4:
            if fm and self.grid_axis.property("shape") != shape:  # default per tensor
                self.grid_axis.setCurrentIndex(1 if shape[0] == 1 else 0)
                self.grid_axis.setProperty("shape", shape)
            other = 1 - self.grid_axis.currentIndex()
            self.fixed.setRange(0, shape[other] - 1)
            self.fixed.setPrefix(f"axis {other} = ")
            self.batch.setRange(0, shape[0] - 1)
        if nd in (3, 4):
            maps = shape[0] if nd == 3 else shape[self.grid_axis.currentIndex()]
            self.first.setRange(0, max(0, maps - 1))
            self.head.setRange(0, shape[-3] - 1)
        for s in (self.fixed, self.first, self.batch, self.head):
            s.blockSignals(False)

    def _changed(self) -> None:
        if self.ref is not None and self.kind == "feature_maps" and len(self.ref.shape) == 4:
            self._setup_controls(tuple(self.ref.shape))
        self.dirty = True
        if self.isVisible():
            self.redraw()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self.dirty:
            self.redraw()

    # ------------------------------------------------------------------ rendering

    def redraw(self) -> None:
        """Draw the current view now (bounded reads; errors go to the caption)."""
        self.dirty = False
        self.plot_area.clear()
        self.image, self.curve = None, None
        if self.ref is None:
            self.caption.setText("")
            return
        if self.ref.size == 0:
            self.caption.setText("This tensor has no values (a dimension is 0).")
            return
        try:
            getattr(self, f"_draw_{self.kind}")()
            if self.ref.dtype.startswith("complex"):
                self.caption.setText(self.caption.text() + " Complex values are shown as |z|.")
        except Exception as exc:  # an undecodable tensor: say why, keep the tab alive
            self.plot_area.clear()
            self.caption.setText(f"Cannot plot this tensor: {exc}")

    def _plot(self, x_label: str = "", y_label: str = "") -> pg.PlotItem:
        t = theme.current()
        plot = self.plot_area.addPlot()
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            axis.setPen(pg.mkPen(t.border))
            axis.setTextPen(pg.mkPen(t.muted))
        if x_label:
            plot.setLabel("bottom", x_label, color=t.muted.name())
        if y_label:
            plot.setLabel("left", y_label, color=t.muted.name())
        plot.showGrid(x=True, y=True, alpha=0.15)
        return plot

    def _draw_histogram(self) -> None:
        assert self.ref is not None
        st = self.stats
        if st is not None and st.histogram.get("counts"):
            edges = np.asarray(st.histogram["edges"], dtype=np.float64)
            counts = np.asarray(st.histogram["counts"], dtype=np.float64)
            origin = f"statistics of {st.processed:,} values"
            if st.partial:
                origin += f" — PARTIAL ({st.processed:,} of {st.total:,})"
        else:
            sample = read_sample(self.ref)
            edges, counts_i = vd.sample_histogram(sample.values)
            counts = counts_i.astype(np.float64)
            origin = sample.describe()
            if not sample.exhaustive:
                origin += "; compute statistics for the histogram of every value"
        self.curve = (edges, counts)
        plot = self._plot("value", "count")
        accent = QColor(theme.current().accent)
        fill = QColor(accent)
        fill.setAlpha(110)
        plot.addItem(
            pg.PlotDataItem(
                edges, counts, stepMode="center", fillLevel=0, brush=fill, pen=pg.mkPen(accent)
            )
        )
        self.caption.setText(f"Histogram ({len(counts)} bins) from {origin}.")

    def _draw_line(self) -> None:
        assert self.ref is not None
        ref = self.ref
        if len(ref.shape) == 1:
            n = ref.shape[0]
            step = max(1, -(-n // LINE_READ_LIMIT))
            y = as_float(ref.read(f"0:{n}:{step}") if step > 1 else ref.read()).reshape(-1)
            what = f"{n:,} values" + (f" ({_every(step, 'value')} read)" if step > 1 else "")
        else:
            plane, _rs, step = read_plane(ref, self.spec)
            y = plane[0].reshape(-1)
            what = f"the first row of {self.spec.label()}" + (
                f" ({_every(step, 'value')})" if step > 1 else ""
            )
        x, ys, width = _downsample(y)
        self.curve = (x * step, ys)
        plot = self._plot("index", "value")
        pen = pg.mkPen(theme.current().accent, width=1.2)
        plot.addItem(pg.PlotDataItem(self.curve[0], ys, pen=pen))
        note = (
            f"; downsampled from {y.size:,} to {ys.size:,} points (min and max of every "
            f"{width:,} values)"
            if width > 1
            else ""
        )
        self.caption.setText(f"Line of {what}{note}.")

    def _draw_heatmap(self) -> None:
        assert self.ref is not None
        spec = self.spec
        plane, rs, cs = read_plane(self.ref, spec)
        x_label, y_label = f"axis {spec.col_axis}", f"axis {spec.row_axis}"
        levels = self._image(as_float(plane), x_label, y_label, lock=False, scale=(cs, rs))
        strides = [_every(rs, "row")] if rs > 1 else []
        strides += [_every(cs, "column")] if cs > 1 else []
        stride = f", {' and '.join(strides)}" if strides else ""
        self.caption.setText(
            f"Heatmap of {spec.label()}: {plane.shape[0]:,}×{plane.shape[1]:,} shown{stride}; "
            f"{levels.describe()}. Change the plane in the View tab."
        )

    def _draw_feature_maps(self) -> None:
        assert self.ref is not None
        nd = len(self.ref.shape)
        axis = self.grid_axis.currentIndex() if nd == 4 else 0
        normalize = self.normalize.isChecked()
        m = vd.feature_mosaic(
            self.ref, axis, self.fixed.value(), self.first.value(), vd.GRID_MAX, normalize
        )
        unit = vd.ColorScale(0.0, 1.0, False, False, 0.0, 1.0) if normalize else None
        levels = self._image(m.image, "", "", lock=True, fixed=unit)
        rows, cols = m.grid
        fixed = f" at axis {1 - axis} = {self.fixed.value()}" if nd == 4 else ""
        stride = f", {_every(m.step, 'pixel')}" if m.step > 1 else ""
        norm = "each map normalised to 0 … 1" if normalize else levels.describe()
        self.caption.setText(
            f"Maps {m.first}–{m.first + m.count - 1} of {m.total} along axis {axis}{fixed}: "
            f"{rows}×{cols} grid of {m.tiles.shape[1]}×{m.tiles.shape[2]}{stride}; {norm}."
        )

    def _draw_attention(self) -> None:
        assert self.ref is not None
        arr, step = vd.attention_plane(self.ref, self.batch.value(), self.head.value())
        levels = self._image(arr, "key", "query", lock=True, scale=(step, step))
        heads = self.ref.shape[-3]
        batch = f"batch {self.batch.value()}, " if len(self.ref.shape) == 4 else ""
        stride = f", {_every(step, 'query and key')}" if step > 1 else ""
        self.caption.setText(
            f"Attention map of {batch}head {self.head.value()} of {heads}: "
            f"{arr.shape[0]:,} queries × {arr.shape[1]:,} keys{stride}; {levels.describe()}."
        )

    def _image(
        self,
        data: np.ndarray,
        x_label: str,
        y_label: str,
        lock: bool,
        scale: tuple[int, int] = (1, 1),
        fixed: vd.ColorScale | None = None,
    ) -> vd.ColorScale:
        self.image = data
        levels = fixed or vd.color_levels(data)
        plot = self._plot(x_label, y_label)
        plot.invertY(True)
        plot.setAspectLocked(lock)
        if not x_label and not y_label:
            plot.hideAxis("left")
            plot.hideAxis("bottom")
            plot.showGrid(x=False, y=False)
        img = pg.ImageItem(data, axisOrder="row-major")
        img.setRect(0, 0, data.shape[1] * scale[0], data.shape[0] * scale[1])
        plot.addItem(img)
        cmap = pg.colormap.get("CET-D1" if levels.diverging else "viridis")
        bar = pg.ColorBarItem(
            values=(levels.low, levels.high), colorMap=cmap, interactive=False, width=16
        )
        bar.setImageItem(img)
        axis = bar.getAxis("right")
        axis.setTextPen(pg.mkPen(theme.current().muted))
        ticks = vd.bar_ticks(float(levels.low), float(levels.high))
        axis.setTicks([ticks])
        # room for the longest label: pyqtgraph clips labels wider than the axis away
        metrics = QFontMetrics(axis.style.get("tickFont") or QFont())
        axis.setWidth(max(40, max(metrics.horizontalAdvance(t) for _v, t in ticks) + 20))
        self.plot_area.addItem(bar, row=0, col=1)
        return levels


def _downsample(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    if y.size <= LINE_MAX_POINTS:
        return np.arange(y.size, dtype=np.float64), y, 1
    return peak_downsample(y, LINE_MAX_POINTS // 5)


def _every(step: int, what: str) -> str:
    """``_every(2, "row")`` -> ``"every 2nd row"``."""
    suffix = "th" if 10 <= step % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(step % 10, "th")
    return f"every {step}{suffix} {what}"
