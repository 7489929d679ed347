"""The graph view: pan by dragging, zoom with the wheel or Ctrl+= / Ctrl+-, keyboard navigation.

Invariants:
- A press followed by a release within ``CLICK_SLOP`` pixels is a click (selects the item or
  edge under the cursor, or clears); anything longer is a pan and changes no selection.
- The zoom stays within [``MIN_ZOOM``, ``MAX_ZOOM``]; ``zoom`` reports the current scale
  (1.0 = 100 %, one scene unit per pixel).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRectF, Qt, Signal
from PySide6.QtGui import QKeyEvent, QMouseEvent, QPainter, QWheelEvent
from PySide6.QtWidgets import QFrame, QGraphicsView

from nneditor.ui.canvas.items import NodeItem
from nneditor.ui.canvas.scene import GraphScene

MIN_ZOOM = 0.01
MAX_ZOOM = 4.0
CLICK_SLOP = 4
READABLE = 1.0
_KEYS = {
    Qt.Key.Key_Down: "down",
    Qt.Key.Key_Up: "up",
    Qt.Key.Key_Left: "left",
    Qt.Key.Key_Right: "right",
}


class GraphView(QGraphicsView):
    itemClicked = Signal(str)  # item key ("" = background)
    edgeClicked = Signal(int)  # index into the level's edges
    pickerClicked = Signal(str)  # a graph input's tensor-picker button (the input's name)
    itemActivated = Signal(str)  # double-click / Enter on an item
    navigate = Signal(str)  # up | down | left | right
    goUp = Signal()  # Backspace / Alt+Up
    viewChanged = Signal()  # pan or zoom changed the visible rect

    def __init__(self, scene: GraphScene, parent=None) -> None:  # noqa: ANN001
        super().__init__(scene, parent)
        self.graph_scene = scene
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, True)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing, True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.viewport().setCursor(Qt.CursorShape.ArrowCursor)
        self._press: QPoint | None = None
        self.horizontalScrollBar().valueChanged.connect(self.viewChanged)
        self.verticalScrollBar().valueChanged.connect(self.viewChanged)

    # ------------------------------------------------------------------ zoom

    @property
    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, z: float, anchor_mouse: bool = False) -> None:
        z = max(MIN_ZOOM, min(MAX_ZOOM, z))
        old = self.transformationAnchor()
        if not anchor_mouse:
            self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        factor = z / self.zoom
        self.scale(factor, factor)
        self.setTransformationAnchor(old)
        self.viewChanged.emit()

    def zoom_in(self) -> None:
        self.set_zoom(self.zoom * 1.25)

    def zoom_out(self) -> None:
        self.set_zoom(self.zoom / 1.25)

    def fit(self) -> None:
        """Show the whole level (never enlarged beyond 100 %)."""
        rect = self.graph_scene.sceneRect()
        if rect.isEmpty():
            return
        self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom > READABLE:
            self.set_zoom(READABLE)
        self.centerOn(rect.center())
        self.viewChanged.emit()

    def fit_scale(self) -> float:
        rect = self.graph_scene.sceneRect()
        vp = self.viewport().rect()
        if rect.isEmpty() or vp.isEmpty():
            return 1.0
        return min(vp.width() / rect.width(), vp.height() / rect.height())

    def readable(self, rect: QRectF | None) -> None:
        """100 % zoom centred on ``rect`` (the selection), else on the current centre."""
        centre = (
            rect.center() if rect is not None else self.mapToScene(self.viewport().rect().center())
        )
        self.set_zoom(READABLE)
        self.centerOn(centre)
        self.viewChanged.emit()

    def bring_into_view(self, rect: QRectF) -> None:
        """Centre on ``rect`` unless it already lies well inside the visible area."""
        visible = self.mapToScene(self.viewport().rect()).boundingRect()
        dx, dy = visible.width() * 0.15, visible.height() * 0.15
        if not visible.adjusted(dx, dy, -dx, -dy).contains(rect):
            self.centerOn(rect.center())
            self.viewChanged.emit()

    def default_view(self, first: QRectF | None) -> None:
        """Fit when that stays legible; otherwise readable zoom at the top of the graph."""
        if self.fit_scale() >= 0.45 or first is None:
            self.fit()
            return
        self.set_zoom(0.8)
        vp = self.viewport().rect()
        half_h = vp.height() / 2 / self.zoom
        self.centerOn(first.center().x(), first.top() - 64 / self.zoom + half_h)
        self.viewChanged.emit()

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt override
        delta = event.angleDelta().y()
        if delta == 0:
            return super().wheelEvent(event)
        self.set_zoom(self.zoom * (1.0015**delta), anchor_mouse=True)
        event.accept()

    # ------------------------------------------------------------------ mouse

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.button() == Qt.MouseButton.LeftButton:
            self._press = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        super().mouseReleaseEvent(event)
        self.viewport().setCursor(Qt.CursorShape.ArrowCursor)
        if event.button() != Qt.MouseButton.LeftButton or self._press is None:
            return
        pos = event.position().toPoint()
        moved = (pos - self._press).manhattanLength()
        self._press = None
        if moved <= CLICK_SLOP:
            self.click_at(pos)

    def click_at(self, pos: QPoint) -> None:
        for item in self.items(pos):
            if isinstance(item, NodeItem) and item.picker:
                if item.picker_rect().contains(item.mapFromScene(self.mapToScene(pos))):
                    self.pickerClicked.emit(item.spec.value)
                    return
                break
        key = self.key_at(pos)
        if key:
            self.itemClicked.emit(key)
            return
        edges = self.graph_scene.edges_item
        if edges is not None:
            sp = self.mapToScene(pos)
            k = edges.pick(sp.x(), sp.y(), 5.0 / max(self.zoom, 1e-6))
            if k is not None:
                self.edgeClicked.emit(k)
                return
        self.itemClicked.emit("")

    def key_at(self, pos: QPoint) -> str:
        for item in self.items(pos):
            if isinstance(item, NodeItem):
                return item.key
        return ""

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        key = self.key_at(event.position().toPoint())
        if key:
            self.itemActivated.emit(key)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    # ------------------------------------------------------------------ keyboard

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        key = Qt.Key(event.key())
        mods = event.modifiers()
        if (
            key == Qt.Key.Key_Up
            and mods & Qt.KeyboardModifier.AltModifier
            or key == Qt.Key.Key_Backspace
        ):
            self.goUp.emit()
        elif key in _KEYS:
            self.navigate.emit(_KEYS[key])
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.itemActivated.emit("")
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_in()
        elif key == Qt.Key.Key_Minus:
            self.zoom_out()
        else:
            super().keyPressEvent(event)
            return
        event.accept()
