"""Canvas graphics items: one box per level item, one batched item for all edges.

Invariants:
- ``paint()`` allocates nothing heavy: pens, brushes and fonts come from the theme; elided
  texts are computed once per item and zoom band.
- Level of detail comes from ``levelOfDetailFromTransform``: below ``LOD_SHAPES`` a box is a
  plain filled rounded rect; titles appear at ``LOD_TITLE``; details, ports and category
  labels at ``LOD_DETAIL``.
- :class:`EdgesItem` holds every edge of the level in a few cached ``QPainterPath`` tiles and
  paints only the tiles that intersect the exposed rect.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPainterPath, QPolygonF
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from nneditor.ui import theme
from nneditor.ui.canvas.level import LevelItem
from nneditor.ui.theme import CATEGORY_STYLE

LOD_SHAPES = 0.28
LOD_TITLE = 0.45
LOD_DETAIL = 0.7
LOD_LABEL = 0.95
TILE = 1024.0
BAND = 5.0


def guarded_paint(paint: Callable[..., None]) -> Callable[..., None]:
    """An error while painting is handed to the scene (which says so on the canvas) instead of
    being printed to stderr on every repaint while the canvas shows half a level."""

    @functools.wraps(paint)
    def run(self: QGraphicsItem, *args: Any) -> None:
        try:
            paint(self, *args)
        except Exception as exc:
            scene = self.scene()
            report = getattr(scene, "paint_failed", None)
            if report is not None:
                report(exc)

    return run


class NodeItem(QGraphicsItem):
    """A level item (group, ×N run, operator, chunk or scope input/output) as a box."""

    def __init__(self, spec: LevelItem, x: float, y: float) -> None:
        super().__init__()
        self.spec = spec
        self.key = spec.key
        self._rect = QRectF(0, 0, spec.width, spec.height)
        self.setPos(x, y)
        self.selected = False
        self.matched = False
        self.heat: QColor | None = None  # a compared trace's drift (the Traced model pane)
        self.picker = False  # a graph input's tensor-picker button (assigns a trace input)
        self._texts: tuple[str, str] | None = None
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, False)
        self.setToolTip(self._tooltip())

    def _tooltip(self) -> str:
        s = self.spec
        lines = [s.value or s.label]
        if s.detail:
            lines.append(s.detail)
        if s.kind == "node" and s.marked:
            lines.append(f"Pattern: {CATEGORY_STYLE.get(s.category, ('', s.category))[1]}")
        if s.openable:
            lines.append("Double-click or Enter to open")
        return "\n".join(lines)

    # ------------------------------------------------------------------ geometry

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        if self.spec.kind == "repeat":
            return self._rect.adjusted(0, -10, 8, 8)
        if self.spec.kind == "node" and self.spec.marked:
            return self._rect.adjusted(0, -16, 0, 0)  # room for the pattern label
        if self.picker:
            return self._rect.adjusted(0, 0, 26, 0)
        return self._rect

    def picker_rect(self) -> QRectF:
        """The tensor-picker button, just right of a graph input's pill (the pill is sized for
        its text)."""
        r = self._rect
        side = min(18.0, r.height() - 4)
        return QRectF(r.width() + 4, (r.height() - side) / 2, side, side)

    def set_picker(self, on: bool) -> None:
        if on != self.picker:
            self.prepareGeometryChange()  # the bounding rect grows by the button
            self.picker = on
            self.update()

    def set_selected(self, on: bool) -> None:
        if self.selected != on:
            self.selected = on
            self.update()

    def set_matched(self, on: bool) -> None:
        if self.matched != on:
            self.matched = on
            self.update()

    def set_heat(self, color: QColor | None) -> None:
        """A drift colour shown as a strip along the box's right edge (None: no strip)."""
        if self.heat != color:
            self.heat = color
            self.update()

    # ------------------------------------------------------------------ painting

    @guarded_paint
    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        t = theme.current()
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        s = self.spec
        r = self._rect
        radius = (
            r.height() / 2 if s.kind in ("input", "output") else (8.0 if s.kind != "node" else 6.0)
        )
        if lod < LOD_SHAPES:
            painter.setPen(Qt.PenStyle.NoPen)
            color = (
                t.accent
                if self.selected
                else _blend(t.fill(s.category), t.accent_of(s.category), 0.45)
            )
            painter.setBrush(color)
            painter.drawRoundedRect(r, radius, radius)
            return
        if s.kind == "repeat":
            painter.setPen(t.border_pen)
            painter.setBrush(t.surface)
            painter.drawRoundedRect(r.translated(8, 8), radius, radius)
            painter.drawRoundedRect(r.translated(4, 4), radius, radius)
        painter.setBrush(t.fill(s.category) if s.kind != "chunk" else t.surface)
        pen = t.select_pen if self.selected else t.border_pen
        if self.matched and not self.selected:
            pen = t.select_pen
            painter.setOpacity(1.0)
        painter.setPen(pen)
        painter.drawRoundedRect(r, radius, radius)
        if s.kind not in ("input", "output"):
            self._paint_band(painter, t)
        if self.heat is not None:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(self.heat)
            painter.drawRoundedRect(QRectF(r.width() - BAND - 3, 4, BAND, r.height() - 8), 2, 2)
        if lod < LOD_TITLE:
            return
        self._paint_texts(painter, t, lod)
        if self.picker:
            self._paint_picker(painter, t)
        if lod >= LOD_DETAIL and s.kind not in ("input", "output"):
            self._paint_ports(painter, t)
        if lod >= LOD_LABEL and s.kind == "node" and s.marked and (s.anchor or self.selected):
            self._paint_category(painter, t)

    def _paint_picker(self, painter: QPainter, t: theme.Theme) -> None:
        b = self.picker_rect()
        painter.setPen(t.border_pen)
        painter.setBrush(t.surface)
        painter.drawRoundedRect(b, 3, 3)
        painter.setPen(t.accent)
        painter.setFont(t.detail_font)
        painter.drawText(b, Qt.AlignmentFlag.AlignCenter, "…")

    def _paint_band(self, painter: QPainter, t: theme.Theme) -> None:
        s = self.spec
        if s.category == "other":
            return
        color = QColor(t.accent_of(s.category))
        if not s.marked:
            color.setAlphaF(0.35)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        h = self._rect.height()
        painter.drawRoundedRect(QRectF(3, 4, BAND, h - 8), 2.5, 2.5)

    def _elided(self, lod: float) -> tuple[str, str]:
        if self._texts is None:
            s = self.spec
            room = self._rect.width() - (BAND + 16 if s.kind not in ("input", "output") else 20)
            title = theme.metrics(True).elidedText(s.label, Qt.TextElideMode.ElideMiddle, room)
            detail = theme.metrics(False).elidedText(s.detail, Qt.TextElideMode.ElideMiddle, room)
            self._texts = (title, detail)
        return self._texts

    def _paint_texts(self, painter: QPainter, t: theme.Theme, lod: float) -> None:
        s = self.spec
        title, detail = self._elided(lod)
        r = self._rect
        left = BAND + 10 if s.kind not in ("input", "output") else 10
        text_rect = QRectF(left, 0, r.width() - left - 8, r.height())
        show_detail = lod >= LOD_DETAIL and bool(detail)
        painter.setPen(t.text)
        painter.setFont(t.title_font)
        align = Qt.AlignmentFlag.AlignVCenter | (
            Qt.AlignmentFlag.AlignHCenter
            if s.kind in ("input", "output")
            else Qt.AlignmentFlag.AlignLeft
        )
        if show_detail:
            top = QRectF(text_rect.left(), 3, text_rect.width(), r.height() / 2 + 1)
            painter.drawText(top, align, title)
            painter.setFont(t.detail_font)
            painter.setPen(t.muted)
            bottom = QRectF(
                text_rect.left(), r.height() / 2 - 2, text_rect.width(), r.height() / 2 - 1
            )
            painter.drawText(bottom, align, detail)
        else:
            painter.drawText(text_rect, align, title)
        if s.kind == "repeat":
            self._paint_badge(painter, t, f"×{s.count}")

    def _paint_category(self, painter: QPainter, t: theme.Theme) -> None:
        """The detected pattern's name just above the box's top-right corner."""
        label = CATEGORY_STYLE.get(self.spec.category, ("", ""))[1].lower()
        if not label:
            return
        painter.setFont(t.tag_font)
        width = QFontMetricsF(t.tag_font).horizontalAdvance(label) + 10
        r = QRectF(0, -15, width, 13)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(t.accent_of(self.spec.category))
        painter.drawRoundedRect(r, 6.5, 6.5)
        painter.setPen(QColor("#ffffff"))
        painter.drawText(r, Qt.AlignmentFlag.AlignCenter, label)

    def _paint_badge(self, painter: QPainter, t: theme.Theme, text: str) -> None:
        fm = QFontMetricsF(t.badge_font)
        w = fm.horizontalAdvance(text) + 12
        r = QRectF(self._rect.right() - w - 6, -9, w, 18)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(t.accent_of(self.spec.category))
        painter.drawRoundedRect(r, 9, 9)
        painter.setPen(QColor("#ffffff"))
        painter.setFont(t.badge_font)
        painter.drawText(r, Qt.AlignmentFlag.AlignCenter, text)

    def _paint_ports(self, painter: QPainter, t: theme.Theme) -> None:
        r = self._rect
        painter.setPen(t.border_pen)
        painter.setBrush(t.surface)
        cx = r.center().x()
        painter.drawEllipse(QPointF(cx, r.top()), 3.0, 3.0)
        painter.drawEllipse(QPointF(cx, r.bottom()), 3.0, 3.0)


def _blend(a: QColor, b: QColor, k: float) -> QColor:
    return QColor(
        round(a.red() + (b.red() - a.red()) * k),
        round(a.green() + (b.green() - a.green()) * k),
        round(a.blue() + (b.blue() - a.blue()) * k),
    )


# ---------------------------------------------------------------------------- edges


class _Tile:
    __slots__ = ("lines", "arrows", "bounds")

    def __init__(self) -> None:
        self.lines = QPainterPath()
        self.arrows = QPainterPath()
        self.bounds = QRectF()


#: Bends wider than this (scene units) are drawn as straight lines: flattening a very long
#: cubic costs thousands of segments per frame, a line costs one.
CURVE_SPAN = 320.0


def segment_path(x0: float, y0: float, x1: float, y1: float, path: QPainterPath) -> None:
    """One route segment: a smooth S (vertical tangents) for short bends, else a line."""
    path.moveTo(x0, y0)
    dy = (y1 - y0) / 2
    if abs(x1 - x0) < 0.5 or abs(dy) < 0.5 or abs(x1 - x0) > CURVE_SPAN:
        path.lineTo(x1, y1)
    else:
        path.cubicTo(x0, y0 + dy, x1, y1 - dy, x1, y1)


def edge_path(points: list[tuple[float, float]], path: QPainterPath) -> None:
    """Append a whole route (see :func:`segment_path`) to ``path``."""
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        segment_path(x0, y0, x1, y1, path)


def arrow_head(points: list[tuple[float, float]], path: QPainterPath, size: float = 6.0) -> None:
    (xa, ya), (xb, yb) = points[-2], points[-1]
    if abs(yb - ya) >= 0.5:
        ang = math.pi / 2 if yb > ya else -math.pi / 2
    else:
        ang = math.atan2(yb - ya, xb - xa)
    tip = QPointF(xb, yb)
    left = QPointF(xb - size * math.cos(ang - 0.45), yb - size * math.sin(ang - 0.45))
    right = QPointF(xb - size * math.cos(ang + 0.45), yb - size * math.sin(ang + 0.45))
    path.addPolygon(QPolygonF([tip, left, right, tip]))


class EdgesItem(QGraphicsItem):
    """Every edge of a level, drawn from cached path tiles culled to the exposed rect."""

    def __init__(self, routes: list[tuple[str, str, list[tuple[float, float]]]]) -> None:
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)
        self.setZValue(-1)
        self.routes = routes
        self._tiles: dict[tuple[int, int], _Tile] = {}
        self._by_key: dict[str, list[int]] = {}
        self._highlight = QPainterPath()
        self._highlight_arrows = QPainterPath()
        bounds = QRectF()
        long_lines: list[tuple[float, float, float, float]] = []
        for k, (src, dst, pts) in enumerate(routes):
            if len(pts) < 2:
                continue
            self._by_key.setdefault(src, []).append(k)
            self._by_key.setdefault(dst, []).append(k)
            for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
                if abs(x1 - x0) > TILE or abs(y1 - y0) > TILE:  # always a straight line
                    long_lines.append((x0, y0, x1, y1))
                    continue
                cell = (int((x0 + x1) / 2 // TILE), int((y0 + y1) / 2 // TILE))
                segment_path(x0, y0, x1, y1, self._tiles.setdefault(cell, _Tile()).lines)
            xe, ye = pts[-1]
            arrow_head(
                pts, self._tiles.setdefault((int(xe // TILE), int(ye // TILE)), _Tile()).arrows
            )
        self._long = np.asarray(long_lines, dtype=np.float64).reshape(-1, 4)
        if len(self._long):
            lo = self._long.min(axis=0)
            hi = self._long.max(axis=0)
            x_lo, y_lo = min(lo[0], lo[2]), min(lo[1], lo[3])
            x_hi, y_hi = max(hi[0], hi[2]), max(hi[1], hi[3])
            bounds = bounds.united(QRectF(x_lo, y_lo, x_hi - x_lo, y_hi - y_lo))
        for tile in self._tiles.values():
            tile.bounds = (
                tile.lines.boundingRect().united(tile.arrows.boundingRect()).adjusted(-4, -4, 4, 4)
            )
            bounds = bounds.united(tile.bounds)
        self._bounds = bounds

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._bounds

    def edges_of(self, key: str) -> list[int]:
        return self._by_key.get(key, [])

    def set_highlight(self, keys: list[str]) -> None:
        """Highlight every edge touching one of ``keys`` (the selection)."""
        self._highlight = QPainterPath()
        self._highlight_arrows = QPainterPath()
        seen: set[int] = set()
        for key in keys:
            for k in self._by_key.get(key, []):
                if k not in seen:
                    seen.add(k)
                    edge_path(self.routes[k][2], self._highlight)
                    arrow_head(self.routes[k][2], self._highlight_arrows, 7.0)
        self.update()

    def set_highlight_edges(self, indices: list[int]) -> None:
        self._highlight = QPainterPath()
        self._highlight_arrows = QPainterPath()
        for k in indices:
            edge_path(self.routes[k][2], self._highlight)
            arrow_head(self.routes[k][2], self._highlight_arrows, 7.0)
        self.update()

    @guarded_paint
    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        t = theme.current()
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        exposed = option.exposedRect
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(t.edge_pen)
        if lod < LOD_TITLE:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        visible = [tile for tile in self._tiles.values() if tile.bounds.intersects(exposed)]
        for tile in visible:
            painter.drawPath(tile.lines)
        if len(self._long):
            painter.drawLines(clipped_lines(self._long, exposed.adjusted(-4, -4, 4, 4)))
        if lod >= LOD_TITLE:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(t.edge_brush)
            for tile in visible:
                painter.drawPath(tile.arrows)
        if lod < LOD_TITLE:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        if not self._highlight.isEmpty():
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(t.edge_highlight_pen)
            painter.drawPath(self._highlight)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(t.highlight_brush)
            painter.drawPath(self._highlight_arrows)

    def pick(self, x: float, y: float, tolerance: float) -> int | None:
        """Index of the route passing closest to (x, y) within ``tolerance``, if any."""
        best: tuple[float, int] | None = None
        probe = QRectF(x - tolerance, y - tolerance, 2 * tolerance, 2 * tolerance)
        for k, (_s, _d, pts) in enumerate(self.routes):
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            if not probe.intersects(
                QRectF(min(xs) - 1, min(ys) - 1, max(xs) - min(xs) + 2, max(ys) - min(ys) + 2)
            ):
                continue
            d = _polyline_distance(pts, x, y)
            if d <= tolerance and (best is None or d < best[0]):
                best = (d, k)
        return best[1] if best else None


def clipped_lines(lines: np.ndarray, rect: QRectF) -> list[QLineF]:
    """The parts of ``lines`` (rows x0, y0, x1, y1) inside ``rect`` (Liang–Barsky, vectorised).

    Long straight edges are clipped here so that painting cost follows what is visible, not
    how far an edge reaches (a fan-out across a 80k-unit-wide level stays cheap)."""
    x0, y0, x1, y1 = lines.T
    dx, dy = x1 - x0, y1 - y0
    t0 = np.zeros(len(lines))
    t1 = np.ones(len(lines))
    keep = np.ones(len(lines), dtype=bool)
    for p, q in (
        (-dx, x0 - rect.left()),
        (dx, rect.right() - x0),
        (-dy, y0 - rect.top()),
        (dy, rect.bottom() - y0),
    ):
        parallel = p == 0
        keep &= ~(parallel & (q < 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(parallel, 0.0, q / np.where(parallel, 1.0, p))
        t0 = np.where(~parallel & (p < 0), np.maximum(t0, r), t0)
        t1 = np.where(~parallel & (p > 0), np.minimum(t1, r), t1)
    keep &= t0 <= t1
    idx = np.nonzero(keep)[0]
    return [
        QLineF(
            x0[i] + t0[i] * dx[i],
            y0[i] + t0[i] * dy[i],
            x0[i] + t1[i] * dx[i],
            y0[i] + t1[i] * dy[i],
        )
        for i in idx
    ]


def _polyline_distance(pts: list[tuple[float, float]], x: float, y: float) -> float:
    """Distance to the route, sampling its smooth segments (matches :func:`edge_path`)."""
    best = math.inf
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        dy = (y1 - y0) / 2
        prev = (x0, y0)
        for step in range(1, 9):
            u = step / 8
            if abs(x1 - x0) < 0.5 or abs(dy) < 0.5 or abs(x1 - x0) > CURVE_SPAN:
                cur = (x0 + (x1 - x0) * u, y0 + (y1 - y0) * u)
            else:
                cur = _cubic((x0, y0), (x0, y0 + dy), (x1, y1 - dy), (x1, y1), u)
            best = min(best, _segment_distance(prev, cur, x, y))
            prev = cur
    return best


def _cubic(p0, p1, p2, p3, u: float) -> tuple[float, float]:
    v = 1 - u
    a, b, c, d = v * v * v, 3 * v * v * u, 3 * v * u * u, u * u * u
    return (
        a * p0[0] + b * p1[0] + c * p2[0] + d * p3[0],
        a * p0[1] + b * p1[1] + c * p2[1] + d * p3[1],
    )


def _segment_distance(a: tuple[float, float], b: tuple[float, float], x: float, y: float) -> float:
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy
    u = 0.0 if length2 == 0 else max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / length2))
    px, py = ax + u * dx, ay + u * dy
    return math.hypot(x - px, y - py)
