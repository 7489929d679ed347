"""An overview of the whole level with the visible rectangle; click or drag to move there.

Invariants:
- The level is rendered once into a pixmap when it changes (boxes only, coloured by
  category); moving the view only repaints the viewport rectangle.
- It floats over the graph view's bottom-right corner and never takes keyboard focus.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QWidget

from nneditor.ui import theme
from nneditor.ui.canvas.view import GraphView

WIDTH, HEIGHT = 200, 130


class Minimap(QWidget):
    def __init__(self, view: GraphView) -> None:
        super().__init__(view)
        self.view = view
        self.setFixedSize(WIDTH, HEIGHT)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Overview: click or drag to move the view")
        self._pixmap: QPixmap | None = None
        self._scale = 1.0
        self._offset = QPointF(0, 0)
        view.viewChanged.connect(self.update)
        view.graph_scene.sceneRectChanged.connect(lambda _r: self.rebuild())

    def place(self) -> None:
        vp = self.view.viewport().geometry()
        self.move(vp.right() - WIDTH - 12, vp.bottom() - HEIGHT - 12)
        self.raise_()

    def rebuild(self) -> None:
        """Render the current level's boxes into the cached overview pixmap."""
        scene = self.view.graph_scene
        rect = scene.sceneRect()
        self._pixmap = None
        if rect.isEmpty() or not scene.items_by_key:
            self.update()
            return
        inner_w, inner_h = WIDTH - 12, HEIGHT - 12
        self._scale = min(inner_w / rect.width(), inner_h / rect.height())
        drawn_w, drawn_h = rect.width() * self._scale, rect.height() * self._scale
        self._offset = QPointF(6 + (inner_w - drawn_w) / 2, 6 + (inner_h - drawn_h) / 2)
        t = theme.current()
        pm = QPixmap(WIDTH, HEIGHT)
        pm.fill(Qt.GlobalColor.transparent)
        p = QPainter(pm)
        p.setPen(Qt.PenStyle.NoPen)
        for item in scene.items_by_key.values():
            r = self._to_map(item.sceneBoundingRect())
            if r.width() < 1:
                r.setWidth(1)
            if r.height() < 1:
                r.setHeight(1)
            p.fillRect(r, t.accent_of(item.spec.category))
        p.end()
        self._pixmap = pm
        self.update()

    def _to_map(self, r: QRectF) -> QRectF:
        origin = self.view.graph_scene.sceneRect().topLeft()
        return QRectF(
            self._offset.x() + (r.x() - origin.x()) * self._scale,
            self._offset.y() + (r.y() - origin.y()) * self._scale,
            r.width() * self._scale,
            r.height() * self._scale,
        )

    def _to_scene(self, p: QPointF) -> QPointF:
        origin = self.view.graph_scene.sceneRect().topLeft()
        s = self._scale or 1.0
        return QPointF(
            origin.x() + (p.x() - self._offset.x()) / s, origin.y() + (p.y() - self._offset.y()) / s
        )

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        t = theme.current()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        bg = QColor(t.surface)
        bg.setAlphaF(0.92)
        p.setPen(QPen(t.border, 1))
        p.setBrush(bg)
        p.drawRoundedRect(QRectF(0.5, 0.5, WIDTH - 1, HEIGHT - 1), 8, 8)
        if self._pixmap is not None:
            p.drawPixmap(0, 0, self._pixmap)
            visible = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
            r = self._to_map(visible).intersected(QRectF(2, 2, WIDTH - 4, HEIGHT - 4))
            fill = QColor(t.accent)
            fill.setAlphaF(0.12)
            p.setBrush(fill)
            p.setPen(QPen(t.accent, 1.5))
            p.drawRect(r)
        p.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        self._jump(event.position())

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._jump(event.position())

    def _jump(self, pos: QPointF) -> None:
        if self._pixmap is not None:
            self.view.centerOn(self._to_scene(pos))
            self.view.viewChanged.emit()
