"""The open model's navigation and selection state, shared by canvas, tree, search and inspector.

Invariants:
- ``scope`` is a group of the hierarchy (or a synthetic chunk group kept alive here), and
  ``level`` is always ``build_level(index, scope, depth)`` for the current state.
- Views never change the state directly: they call ``open_group``/``go_up``/``set_depth``/
  ``select`` and react to ``navigationChanged`` and ``selectionChanged``.
- ``select(target, reveal=True)`` changes the navigation when needed so that the target is
  visible as its own item (opening its containing block).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from nneditor.errors import error_sentence
from nneditor.layout import LayoutCache
from nneditor.semantic.hierarchy import Group
from nneditor.ui import theme
from nneditor.ui.canvas.level import OPERATORS, LevelItem, LevelView, build_level, chunk_scope
from nneditor.ui.model_index import ModelIndex
from nneditor.ui.targets import Target


@dataclass
class _Step:
    scope: Group
    depth: int


class ModelSession(QObject):
    navigationChanged = Signal()
    selectionChanged = Signal(object)  # Target | None

    def __init__(self, index: ModelIndex, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.index = index
        self.doc = index.doc
        assert index.root is not None
        self.scope: Group = index.root
        self.depth = 1
        self.selection: Target | None = None
        self.reveal_requested = False
        self.layouts = LayoutCache(max_entries=24)
        self._levels: dict[tuple[str, int], LevelView] = {}
        self._chunks: dict[str, Group] = {}
        self._history: list[_Step] = []
        self.fold_constants = True
        #: why the current level could not be built ("" when it was); the level is then empty
        self.level_error = ""
        self.level: LevelView = self._build(self.scope, self.depth)

    # ------------------------------------------------------------------ levels

    def _build(self, scope: Group, depth: int) -> LevelView:
        key = (scope.id if scope.kind != "model" else "", depth)
        view = self._levels.get(key)
        self.level_error = ""
        if view is None:
            try:
                view = build_level(self.index, scope, depth, theme.measure, self.fold_constants)
            except Exception as exc:  # shown on the canvas; the rest of the window stays usable
                self.level_error = f"This level could not be built: {error_sentence(exc)}"
                return LevelView(scope, depth, depth, [], [], {})
            if len(self._levels) > 48:
                self._levels.clear()
            self._levels[key] = view
        return view

    def _go(self, scope: Group, depth: int, remember: bool = True) -> None:
        if remember and (scope is not self.scope):
            self._history.append(_Step(self.scope, self.depth))
        self.scope = scope
        self.depth = depth
        self.level = self._build(scope, depth)
        self.navigationChanged.emit()

    def open_group(self, g: Group) -> None:
        """Show ``g``'s contents, at least one level below it, keeping a deeper detail level."""
        self._go(g, max(self.depth, min(OPERATORS, g.level + 1)))

    def open_item(self, item: LevelItem) -> bool:
        """Open a group, a ×N run (its first member) or a chunk; False for operators."""
        if item.kind == "chunk":
            self.open_group(self.chunk(item))
            return True
        if item.kind in ("group", "repeat") and item.group is not None:
            self.open_group(item.group)
            return True
        return False

    def chunk(self, item: LevelItem) -> Group:
        g = self._chunks.get(item.key)
        if g is None:
            g = chunk_scope(self.index, item)
            self._chunks[item.key] = g
        return g

    def go_up(self) -> bool:
        parent = self.scope.parent
        if parent is None:
            return False
        self.go_to(parent)
        return True

    def go_to(self, g: Group) -> None:
        """Navigate to ancestor (or any group) ``g``, restoring its remembered detail level."""
        for k in range(len(self._history) - 1, -1, -1):
            if self._history[k].scope is g:
                step = self._history[k]
                del self._history[k:]
                self._go(g, step.depth, remember=False)
                return
        self._go(g, min(OPERATORS, g.level + 1), remember=False)

    def set_depth(self, depth: int) -> None:
        """Change the detail level; a level above the scope moves up to an ancestor."""
        scope = self.scope
        while scope.parent is not None and scope.level >= depth:
            scope = scope.parent
        self._go(scope, depth, remember=False)

    def set_fold_constants(self, on: bool) -> None:
        """Draw constant operators inside their consumers (True) or as boxes of their own."""
        if on != self.fold_constants:
            self.fold_constants = on
            self._levels.clear()
            self._go(self.scope, self.depth, remember=False)

    @property
    def breadcrumbs(self) -> list[Group]:
        return self.scope.path()

    # ------------------------------------------------------------------ selection

    def select(self, target: Target | None, reveal: bool = False) -> None:
        if reveal and target is not None:
            self._reveal(target)
        self.reveal_requested = reveal
        self.selection = target
        self.selectionChanged.emit(target)

    def canvas_keys(self, target: Target | None) -> list[str]:
        """Keys of the items that show ``target`` on the current level (itself or a container)."""
        if target is None:
            return []
        own = self.level.key_for(target)
        if own is not None:
            return [own]
        if target.kind == "node":
            key = self.level.item_of_node(self.index, int(target.ref))  # type: ignore[call-overload]
            return [key] if key else []
        if target.kind in ("group", "repeat"):
            g = self.index.group_by_id.get(str(target.ref))
            key = self.level.item_of_group(self.index, g) if g is not None else None
            return [key] if key else []
        if target.kind == "value":
            p = self.index.producer.get(str(target.ref))
            key = self.level.item_of_node(self.index, p) if p is not None else None
            return [key] if key else []
        if target.kind == "edge":
            return []
        return []

    def _reveal(self, target: Target) -> None:
        if self.level.key_for(target) is not None:
            return
        if target.kind == "node":
            self._reveal_node(int(target.ref))  # type: ignore[call-overload]
        elif target.kind in ("group", "repeat"):
            g = self.index.group_by_id.get(str(target.ref))
            if g is not None:
                self._reveal_group(g)
        elif target.kind == "value":
            self._reveal_value(str(target.ref))

    def _reveal_node(self, i: int) -> None:
        g = self.index.innermost(i) or self.index.root
        assert g is not None
        self._go(g, OPERATORS)
        if self.level.key_for(Target.node(i)) is None:
            key = self.level.item_of_node(self.index, i)
            item = self.level.by_key.get(key) if key else None
            if item is not None and item.kind == "chunk":
                self._go(self.chunk(item), OPERATORS)

    def _reveal_group(self, g: Group) -> None:
        parent = g.parent
        if parent is None:
            self._go(g, 1)
            return
        self._go(parent, max(g.level, parent.level + 1))
        if self.level.key_for(Target.group(g.id)) is None:
            self.open_group(g)

    def _reveal_value(self, name: str) -> None:
        root = self.index.root
        assert root is not None
        p = self.index.producer.get(name)
        if p is not None and not self.index.is_weight(name):
            self._reveal_node(p)
            return
        consumers = self.index.consumers.get(name, [])
        if p is None and name in self.index.graph_inputs:
            self._go(root, max(1, self.depth) if self.scope is root else 1)
            return
        if consumers:
            self._reveal_node(consumers[0])
