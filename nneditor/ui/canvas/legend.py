"""The legend: the categories present on the level, and what the coloured band means.

Invariant: it lists only categories of the items on display, in the fixed legend order.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from nneditor.ui import theme
from nneditor.ui.model_index import CATEGORIES
from nneditor.ui.theme import CATEGORY_STYLE

ROW = 17
PAD = 9


class Legend(QWidget):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.categories: list[str] = []
        font = self.font()
        font.setPointSizeF(font.pointSizeF() * 0.9)
        self.setFont(font)
        self.hide()

    def set_categories(self, present: set[str]) -> None:
        self.categories = [c for c in CATEGORIES if c in present]
        fm = QFontMetrics(self.font())
        labels = [CATEGORY_STYLE[c][1] for c in self.categories] + ["band: detected pattern"]
        width = max((fm.horizontalAdvance(t) for t in labels), default=80) + 2 * PAD + 20
        self.setFixedSize(width, PAD * 2 + ROW * (len(self.categories) + 1))
        self.setVisible(bool(self.categories))
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        t = theme.current()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        bg = QColor(t.surface)
        bg.setAlphaF(0.92)
        p.setPen(QPen(t.border, 1))
        p.setBrush(bg)
        p.drawRoundedRect(QRectF(0.5, 0.5, self.width() - 1, self.height() - 1), 8, 8)
        y = PAD
        for cat in self.categories:
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(t.accent_of(cat))
            p.drawRoundedRect(QRectF(PAD, y + 4, 10, 10), 3, 3)
            p.setPen(t.text)
            p.drawText(
                QRectF(PAD + 18, y, self.width() - PAD - 18, ROW),
                Qt.AlignmentFlag.AlignVCenter,
                CATEGORY_STYLE[cat][1],
            )
            y += ROW
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(t.accents["attention"])
        p.drawRoundedRect(QRectF(PAD + 3, y + 3, 4, 12), 2, 2)
        p.setPen(t.muted)
        p.drawText(
            QRectF(PAD + 18, y, self.width() - PAD - 18, ROW),
            Qt.AlignmentFlag.AlignVCenter,
            "band: detected pattern",
        )
        p.end()
