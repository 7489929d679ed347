"""A small painted histogram for the Statistics tab (no pyqtgraph, so the tab stays light).

Invariant: paints only what :meth:`set_histogram` was given (edges n+1, counts n); the x axis
is labelled with the first and last edge, the y axis with the largest count.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from nneditor.ui import theme


class HistogramBars(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edges: list[float] = []
        self.counts: list[float] = []
        self.setMinimumHeight(120)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(320, 180)

    def set_histogram(self, edges: Sequence[float], counts: Sequence[float]) -> None:
        self.edges, self.counts = [float(e) for e in edges], [float(c) for c in counts]
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        if not self.counts:
            return
        t = theme.current()
        p = QPainter(self)
        fm = p.fontMetrics()
        pad = fm.height() + 4
        plot = QRectF(6, pad, self.width() - 12, self.height() - 2 * pad)
        top = max(self.counts) or 1.0
        width = plot.width() / len(self.counts)
        fill = QColor(t.accent)
        fill.setAlpha(150)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(fill)
        for i, c in enumerate(self.counts):
            h = plot.height() * c / top
            p.drawRect(QRectF(plot.left() + i * width, plot.bottom() - h, max(1.0, width - 1), h))
        p.setPen(t.border)
        p.drawLine(plot.bottomLeft(), plot.bottomRight())
        p.setPen(t.muted)
        base = plot.bottom() + fm.ascent() + 3
        p.drawText(int(plot.left()), int(base), f"{self.edges[0]:.4g}")
        right = f"{self.edges[-1]:.4g}"
        p.drawText(int(plot.right() - fm.horizontalAdvance(right)), int(base), right)
        p.drawText(int(plot.left()), fm.ascent(), f"{int(top):,} per bin (max)")
        p.end()
