"""Ports of the Traced model pane: small ellipses for the tensors entering (top) and leaving
(bottom) each level item, coloured by capture status.

Invariants:
- ``item_ports`` is Qt-free: inputs and outputs of an item are the activation values crossing
  its boundary (operators: their non-weight inputs and their outputs; groups: the hierarchy
  boundary; scope inputs/outputs: their value), in graph order, without duplicates.
- At most ``MAX_PORTS`` ellipses per side; the rest are collected into one "+" port whose
  ``values`` lists every value of that side (it opens a tensor chooser).
- Port items are children of their box, so they live and die with the level on display.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from nneditor.ui import theme
from nneditor.ui.canvas.level import LevelItem, LevelView
from nneditor.ui.model_index import ModelIndex

MAX_PORTS = 5
RADIUS_X = 6.0
RADIUS_Y = 4.5
SPACING = 18.0
STATUS_COLORS = {
    "captured": "#16a34a",
    "partial": "#ea580c",
    "preview": "#ca8a04",
    "dropped": "#9ca3af",
    "absent": "#d1d5db",
}
STATUS_TEXT = {
    "captured": "captured",
    "partial": "partial capture (flat prefix)",
    "preview": "preview only",
    "dropped": "not captured",
    "absent": "not in this trace",
}


@dataclass(frozen=True)
class Port:
    side: str  # "in" (top) | "out" (bottom)
    values: tuple[str, ...]  # one value, or every value of the side for a "+" port
    more: bool = False

    @property
    def value(self) -> str:
        return self.values[0]


def _dedupe(values: list[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def item_values(
    index: ModelIndex, level: LevelView, item: LevelItem
) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of ``item`` on ``level``."""
    if item.kind == "input":
        return [], [item.value]
    if item.kind == "output":
        return [item.value], []
    if item.kind == "node" and item.node >= 0:
        node = index.node(item.node)
        ins = [v for v in node.inputs if v and not index.is_weight(v)]
        return _dedupe(ins), _dedupe(list(node.outputs))
    if item.kind in ("group", "repeat") and item.group is not None:
        first = item.members[0] if item.members else item.group
        last = item.members[-1] if item.members else item.group
        return _dedupe(index.boundary(first)[0]), _dedupe(index.boundary(last)[1])
    ins = [v for e in level.edges if e.dst == item.key for v in e.values]
    outs = [v for e in level.edges if e.src == item.key for v in e.values]
    return _dedupe(ins), _dedupe(outs)


def side_ports(side: str, values: list[str], limit: int = MAX_PORTS) -> list[Port]:
    if len(values) <= limit:
        return [Port(side, (v,)) for v in values]
    shown = [Port(side, (v,)) for v in values[: limit - 1]]
    return [*shown, Port(side, tuple(values), more=True)]


def item_ports(index: ModelIndex, level: LevelView, item: LevelItem) -> list[Port]:
    ins, outs = item_values(index, level, item)
    return side_ports("in", ins) + side_ports("out", outs)


class PortItem(QGraphicsItem):
    """One ellipse (or "+" chooser) on the top or bottom edge of its parent box."""

    def __init__(
        self,
        port: Port,
        center: QPointF,
        status: str,
        tooltip: str,
        parent: QGraphicsItem,
    ) -> None:
        super().__init__(parent)
        self.port = port
        self.status = status
        self.drift: float | None = None  # relative L2 against a compared trace (heat colour)
        self.setPos(center)
        self.setZValue(5)
        self.setToolTip(tooltip)
        self.setAcceptHoverEvents(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self._hover = False

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        rx = RADIUS_X + 2 if not self.port.more else RADIUS_X + 4
        return QRectF(-rx, -RADIUS_Y - 2, 2 * rx, 2 * RADIUS_Y + 4)

    def hoverEnterEvent(self, event: object) -> None:  # noqa: N802 - Qt override
        self._hover = True
        self.update()

    def hoverLeaveEvent(self, event: object) -> None:  # noqa: N802 - Qt override
        self._hover = False
        self.update()

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        if lod < 0.3:
            return
        t = theme.current()
        color = QColor(STATUS_COLORS.get(self.status, STATUS_COLORS["absent"]))
        pen = QPen(t.accent if self._hover else color.darker(135), 1.6 if self._hover else 1.1)
        painter.setPen(pen)
        rx = RADIUS_X + (2 if self.port.more else 0)
        if self.port.more:
            painter.setBrush(t.surface)
            painter.drawEllipse(QPointF(0, 0), rx, RADIUS_Y + 1)
            painter.setPen(QPen(t.text, 1.4))
            painter.drawLine(QPointF(-3.5, 0), QPointF(3.5, 0))
            painter.drawLine(QPointF(0, -3.5), QPointF(0, 3.5))
            return
        if self.drift is not None:
            color = drift_color(self.drift)
            painter.setPen(QPen(t.accent if self._hover else color.darker(140), 1.4))
        painter.setBrush(color if self.status in ("captured", "partial", "preview") else t.surface)
        painter.drawEllipse(QPointF(0, 0), rx, RADIUS_Y)


#: drift heat scale: relative L2 <= 1e-6 green, 1e-3 yellow, >= 1e-1 red (log scale)
DRIFT_SCALE = (-6.0, -1.0)


def drift_color(rel_l2: float) -> QColor:
    """Green (no drift) through yellow to red (10% relative L2 and more), on a log scale."""
    import math

    lo, hi = DRIFT_SCALE
    x = 1.0 if rel_l2 == math.inf else math.log10(max(rel_l2, 1e-12))
    f = min(1.0, max(0.0, (x - lo) / (hi - lo)))
    hue = 120.0 * (1.0 - f)  # 120 green -> 0 red
    return QColor.fromHsvF(hue / 360.0, 0.85, 0.85)


def place_ports(
    box: QGraphicsItem,
    width: float,
    height: float,
    ports: list[Port],
    status_of: Callable[[str], str],
    tooltip_of: Callable[[Port], str],
) -> list[PortItem]:
    """Create the port items of one box: inputs centred on its top edge, outputs on its bottom."""
    made: list[PortItem] = []
    for side, y in (("in", 0.0), ("out", height)):
        row = [p for p in ports if p.side == side]
        if not row:
            continue
        span = SPACING * (len(row) - 1)
        x0 = width / 2 - span / 2
        for k, port in enumerate(row):
            status = "more" if port.more else status_of(port.value)
            made.append(PortItem(port, QPointF(x0 + k * SPACING, y), status, tooltip_of(port), box))
    return made
