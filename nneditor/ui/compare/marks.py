"""What the side-by-side view draws on top of the shared canvas boxes: an outline for operator
changes, a badge with the block's worst weight change, an "only in A/B" tag, and the legend.

Invariants:
- A mark is a child of its :class:`~nneditor.ui.canvas.items.NodeItem`, so it lives and dies
  with the level on display; it takes no mouse buttons (clicks reach the box).
- The weight colour is the trace drift scale (:func:`~nneditor.ui.trace.ports.drift_color`,
  green 0 through red at a relative L2 of 0.1), shown as the box's heat strip and the badge.
- Outline colours are not on that green-to-red scale, so the two never read as one another.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from nneditor.ui import theme
from nneditor.ui.canvas.items import NodeItem, guarded_paint
from nneditor.ui.compare.alignment import Slot
from nneditor.ui.trace.ports import drift_color

REMOVED = "#e11d48"  # operators only in A / a block only in A
ADDED = "#0d9488"  # operators only in B / a block only in B (not the selection blue)
CHANGED = "#9333ea"  # operators whose type, attributes or arity changed
REGROUPED = "#6b7280"  # its operators are inside a block the other side groups differently
UNCOMPARED = "#6b7280"
SCALE = (0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


def weight_color(slot: Slot) -> QColor | None:
    return drift_color(slot.worst) if slot.worst is not None else None


def outline_of(slot: Slot, side: str) -> tuple[str, str]:
    """(colour, what it means) of the outline of ``side``'s item, ("", "") for none."""
    if not slot.matched and slot.within:
        return REGROUPED, f"its operators are inside the other side's {slot.within}"
    if not slot.matched:
        return (REMOVED, "only in A") if side == "a" else (ADDED, "only in B")
    if side == "a" and slot.removed_ops:
        return REMOVED, f"{slot.removed_ops} operators only in A"
    if side == "b" and slot.added_ops:
        return ADDED, f"{slot.added_ops} operators only in B"
    if slot.changed_ops:
        return CHANGED, f"{slot.changed_ops} operators changed"
    return "", ""


def badge_text(slot: Slot) -> str:
    if slot.worst is not None:
        text = "weights equal" if slot.worst == 0.0 else f"ΔL2 {slot.worst:.2g}"
        return text + (f" · {slot.uncompared} not compared" if slot.uncompared else "")
    return f"{slot.uncompared} not compared" if slot.uncompared else ""


class DiffMark(QGraphicsItem):
    """The compare decorations of one box (drawn over it)."""

    def __init__(self, box: NodeItem, slot: Slot, side: str) -> None:
        super().__init__(box)
        self.box = box
        self.slot = slot
        self.outline, self.outline_text = outline_of(slot, side)
        self.badge = badge_text(slot)
        self.color = weight_color(slot)
        other = "B" if side == "a" else "A"
        if slot.matched:
            self.tag = ""
        elif slot.within:
            self.tag = f"inside {other}'s {slot.within}"
        else:
            self.tag = f"only in {side.upper()}"
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        box.set_heat(self.color)
        r = box.boundingRect()
        self._rect = r.adjusted(-4, -20, 4, 16)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._rect

    @guarded_paint
    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        t = theme.current()
        r = QRectF(0, 0, self.box.spec.width, self.box.spec.height)
        if self.outline:
            pen = QPen(QColor(self.outline), 2.6)
            pen.setCosmetic(True)
            if not self.slot.matched:
                pen.setStyle(Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            radius = 6.0 if self.box.spec.kind == "node" else 8.0
            painter.drawRoundedRect(r.adjusted(-2, -2, 2, 2), radius + 2, radius + 2)
        if self.tag:  # elided to leave room for a ×N badge at the top right
            tag = QFontMetricsF(t.tag_font).elidedText(
                self.tag, Qt.TextElideMode.ElideRight, max(40.0, r.width() - 80)
            )
            self._pill(painter, t, tag, QColor(self.outline), r.left() + 8, r.top() - 9)
        if self.badge:
            fill = self.color if self.color is not None else QColor(UNCOMPARED)
            width = QFontMetricsF(t.tag_font).horizontalAdvance(self.badge) + 12
            # mostly below the box: an operator's detail line sits in its lower half
            self._pill(painter, t, self.badge, fill, r.right() - width - 8, r.bottom() - 4)

    @staticmethod
    def _pill(
        painter: QPainter, t: theme.Theme, text: str, fill: QColor, x: float, y: float
    ) -> None:
        painter.setFont(t.tag_font)
        width = QFontMetricsF(t.tag_font).horizontalAdvance(text) + 12
        rect = QRectF(x, y, width, 16)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(fill)
        painter.drawRoundedRect(rect, 8, 8)
        painter.setPen(QColor("#111827") if fill.lightnessF() > 0.55 else QColor("#ffffff"))
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)


class CompareLegend(QWidget):
    """Two lines: the weight colour scale, and what each outline colour means."""

    PAD = 6
    SWATCH = 14

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scale = [(drift_color(v), "0" if v == 0 else f"{v:g}") for v in SCALE]
        self.outlines = [
            (REMOVED, "only in A"),
            (ADDED, "only in B"),
            (CHANGED, "changed operators"),
            (REGROUPED, "grouped differently"),
        ]
        self.outline_note = "solid: some of the block's operators; dashed: the whole block"
        line = self.fontMetrics().height() + 6
        self.setMinimumHeight(2 * line + self.PAD)
        self.setMaximumHeight(2 * line + self.PAD)

    def texts(self) -> list[str]:
        """Everything the legend says (for tests and accessibility)."""
        return (
            [WEIGHTS_TITLE, *(t for _, t in self.scale), NO_WEIGHTS, OUTLINE_TITLE]
            + [t for _, t in self.outlines]
            + [self.outline_note]
        )

    def paintEvent(self, event: object) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        t = theme.current()
        fm = self.fontMetrics()
        line = fm.height() + 6
        x = self._title(p, WEIGHTS_TITLE, self.PAD, 0, line)
        for color, text in self.scale:
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(color)
            p.drawRoundedRect(QRectF(x, (line - self.SWATCH) / 2, self.SWATCH, self.SWATCH), 3, 3)
            x = self._text(p, t.text, text, x + self.SWATCH + 4, 0, line) + 10
        self._text(p, t.muted, NO_WEIGHTS, x + 6, 0, line)
        x = self._title(p, OUTLINE_TITLE, self.PAD, line, line)
        for outline, text in self.outlines:
            pen = QPen(QColor(outline), 2.2)
            p.setPen(pen)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRoundedRect(QRectF(x, line + (line - self.SWATCH) / 2, 22, self.SWATCH), 4, 4)
            x = self._text(p, t.text, text, x + 28, line, line) + 16
        self._text(p, t.muted, self.outline_note, x, line, line)
        p.end()

    def _title(self, p: QPainter, text: str, x: float, y: float, h: float) -> float:
        font = self.font()
        font.setBold(True)
        p.setFont(font)
        p.setPen(theme.current().text)
        w = QFontMetricsF(font).horizontalAdvance(text)
        p.drawText(QRectF(x, y, w + 2, h), Qt.AlignmentFlag.AlignVCenter, text)
        p.setFont(self.font())
        return x + w + 10

    def _text(self, p: QPainter, color: QColor, text: str, x: float, y: float, h: float) -> float:
        p.setPen(color)
        w = self.fontMetrics().horizontalAdvance(text)
        p.drawText(QRectF(x, y, w + 2, h), Qt.AlignmentFlag.AlignVCenter, text)
        return x + w


WEIGHTS_TITLE = "Worst weight change (relative L2; strip and badge):"
NO_WEIGHTS = "no badge: no stored weights"
OUTLINE_TITLE = "Outline:"
