"""The graph scene: holds exactly the items of the level on display.

Invariants:
- ``show_level`` replaces every item: one :class:`NodeItem` per level item plus one
  :class:`EdgesItem`; nothing of a previous level survives.
- ``routes[k]`` corresponds to ``level.edges[k]``; selection and search marks are keyed by
  item key and re-applied by the caller after a level change.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF, QTimer, Signal
from PySide6.QtWidgets import QGraphicsScene

from nneditor.errors import error_sentence
from nneditor.layout import Layout, LayoutNode
from nneditor.ui import theme
from nneditor.ui.canvas.items import EdgesItem, NodeItem
from nneditor.ui.canvas.level import LevelView

MARGIN = 80.0
NODE_GAP = 28
RANK_GAP = 52


def layout_input(level: LevelView) -> tuple[list[LayoutNode], list[tuple[str, str]]]:
    nodes = [LayoutNode(it.key, it.width, it.height) for it in level.items]
    edges = [(e.src, e.dst) for e in level.edges]
    return nodes, edges


@dataclass
class ShownLevel:
    """A level together with its computed layout (what the scene displays)."""

    level: LevelView
    layout: Layout


class GraphScene(QGraphicsScene):
    paintFailed = Signal(str)  # the first painting error of the level on display

    def __init__(self, parent=None) -> None:  # noqa: ANN001 - QObject parent
        super().__init__(parent)
        self._paint_error = ""
        self.shown: ShownLevel | None = None
        self.items_by_key: dict[str, NodeItem] = {}
        self.edges_item: EdgesItem | None = None
        #: graph inputs whose node shows a tensor-picker button (set by the Trace feature)
        self.pickers: frozenset[str] = frozenset()
        self._selected: list[str] = []
        self._matched: set[str] = set()
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        self.setBackgroundBrush(theme.current().canvas)

    # ------------------------------------------------------------------ content

    def set_pickers(self, names: frozenset[str]) -> None:
        """Show the tensor-picker button on the nodes of these graph inputs (now and on every
        level built later)."""
        self.pickers = names
        for item in self.items_by_key.values():
            self._set_picker(item)

    def _set_picker(self, item: NodeItem) -> None:
        on = item.spec.kind == "input" and item.spec.value in self.pickers
        if on != item.picker:
            item.set_picker(on)
            tip = "Click … to pick a .npy/.npz tensor for this input (the next trace uses it)"
            base = item.toolTip().replace("\n" + tip, "")
            item.setToolTip(base + ("\n" + tip if on else ""))

    def paint_failed(self, exc: BaseException) -> None:
        """Called by an item whose paint() raised: reported once per level, after the paint."""
        if not self._paint_error:
            self._paint_error = error_sentence(exc)
            QTimer.singleShot(0, lambda: self.paintFailed.emit(self._paint_error))

    def show_level(self, shown: ShownLevel) -> None:
        self.clear()
        self._paint_error = ""
        self.items_by_key = {}
        self.edges_item = None
        self._selected = []
        self._matched = set()
        self.shown = shown
        lay = shown.layout
        for it in shown.level.items:
            x, y = lay.positions[it.key]
            item = NodeItem(it, x, y)
            self._set_picker(item)
            self.addItem(item)
            self.items_by_key[it.key] = item
        routes = [(str(r.src), str(r.dst), r.points) for r in lay.edges]
        self.edges_item = EdgesItem(routes)
        self.addItem(self.edges_item)
        self.setSceneRect(QRectF(-MARGIN, -MARGIN, lay.width + 2 * MARGIN, lay.height + 2 * MARGIN))
        self.setBackgroundBrush(theme.current().canvas)

    def clear_level(self) -> None:
        self.clear()
        self.items_by_key = {}
        self.edges_item = None
        self.shown = None
        self._selected = []
        self._matched = set()

    @property
    def item_count(self) -> int:
        return len(self.items())

    # ------------------------------------------------------------------ selection

    def select_keys(self, keys: list[str]) -> None:
        for key in self._selected:
            item = self.items_by_key.get(key)
            if item is not None:
                item.set_selected(False)
        self._selected = [k for k in keys if k in self.items_by_key]
        for key in self._selected:
            self.items_by_key[key].set_selected(True)
        if self.edges_item is not None:
            self.edges_item.set_highlight(self._selected)

    def select_edge(self, index: int) -> None:
        self.select_keys([])
        if self.edges_item is not None:
            self.edges_item.set_highlight_edges([index])

    def mark_matches(self, keys: set[str]) -> None:
        for key in self._matched - keys:
            item = self.items_by_key.get(key)
            if item is not None:
                item.set_matched(False)
        for key in keys:
            item = self.items_by_key.get(key)
            if item is not None:
                item.set_matched(True)
        self._matched = {k for k in keys if k in self.items_by_key}

    def item_rect(self, key: str) -> QRectF | None:
        item = self.items_by_key.get(key)
        return item.sceneBoundingRect() if item is not None else None

    # ------------------------------------------------------------------ keyboard navigation

    def neighbour(self, key: str, direction: str) -> str | None:
        """Down: a consumer; Up: a producer; Left/Right: the next item in the same rank."""
        if self.shown is None or key not in self.items_by_key:
            return None
        lay = self.shown.layout
        here = self.items_by_key[key].sceneBoundingRect().center().x()
        if direction in ("down", "up"):
            ends = [
                (e.dst if direction == "down" else e.src)
                for e in self.shown.level.edges
                if (e.src if direction == "down" else e.dst) == key
            ]
            ends = [k for k in ends if k in self.items_by_key]
            if not ends:
                return None
            return min(
                ends,
                key=lambda k: abs(self.items_by_key[k].sceneBoundingRect().center().x() - here),
            )
        rank = lay.ranks.get(key)
        same = [str(k) for k, r in lay.ranks.items() if r == rank]
        same.sort(key=lambda k: lay.positions[k][0])
        i = same.index(key)
        j = i + (1 if direction == "right" else -1)
        return same[j] if 0 <= j < len(same) else None

    def edge_values(self, index: int) -> tuple[str, str, list[str]]:
        assert self.shown is not None
        e = self.shown.level.edges[index]
        return e.src, e.dst, e.values
