"""The side-by-side view of a model comparison: A's graph on the left, B's on the right at the
same hierarchy level, matched blocks on the same rows; beside them, the chosen block's
weight pairs.

Invariants:
- Both canvases are the window's own :class:`GraphScene`/:class:`GraphView`/``NodeItem``;
  only the positions (:mod:`.side_layout`) and the marks (:mod:`.marks`) are the view's own.
- The two views scroll and zoom together: a change of one view's transform or scroll
  position is applied to the other. They sit in one row with equal stretch, so they always
  have the same size and the same scroll values mean the same place.
- Opening a block opens its matched block on the other side; Parent goes up on both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from nneditor.errors import error_sentence
from nneditor.jobs.protocol import JobResult
from nneditor.semantic.hierarchy import Group
from nneditor.ui import theme
from nneditor.ui.canvas.level import (
    BLOCKS,
    LEVEL_NAMES,
    OPERATORS,
    LevelItem,
    build_level,
    chunk_scope,
)
from nneditor.ui.canvas.scene import NODE_GAP, RANK_GAP, GraphScene, ShownLevel
from nneditor.ui.canvas.view import GraphView
from nneditor.ui.compare.alignment import LevelPair, Slot, align_levels, slot_summary
from nneditor.ui.compare.comparison import Comparison
from nneditor.ui.compare.details import DetailsPanel
from nneditor.ui.compare.marks import CompareLegend, DiffMark
from nneditor.ui.compare.side_layout import side_layouts
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.model_index import ModelIndex

#: levels with more slots than this are laid out on the job runner
SYNC_LAYOUT_SLOTS = 120


def _scope_of(index: ModelIndex, item: LevelItem) -> Group | None:
    if item.kind == "chunk":
        return chunk_scope(index, item)
    if item.kind in ("group", "repeat"):
        return item.group
    return None


class SideBySide(QWidget):
    levelShown = Signal()  # noqa: N815
    pairRequested = Signal(object)  # noqa: N815 - a diff tensor row to open as A | B | A − B

    def __init__(self, comparison: Comparison, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cmp = comparison
        self.rows: list[dict[str, Any]] = comparison.result["tensors"]
        self.runner = QtJobRunner(self)
        self.pair: LevelPair | None = None
        self.selected: Slot | None = None
        self.marks: list[DiffMark] = []
        assert comparison.a.root is not None and comparison.b.root is not None
        self.scope_a: Group = comparison.a.root
        self.scope_b: Group = comparison.b.root
        self.detail = BLOCKS
        self.history: list[tuple[Group, Group, int]] = []
        self._syncing = False
        self._build()
        self.show_level()

    # ------------------------------------------------------------------ widgets

    def _build(self) -> None:
        self.scene_a, self.scene_b = GraphScene(self), GraphScene(self)
        self.view_a = GraphView(self.scene_a, self)
        self.view_b = GraphView(self.scene_b, self)
        bar = QHBoxLayout()
        bar.setSpacing(4)
        self.up_button = QToolButton(self)
        self.up_button.setText("↑ Parent block")
        self.up_button.setToolTip("Go up one level on both sides (Backspace)")
        self.up_button.clicked.connect(self.go_up)
        bar.addWidget(self.up_button)
        self.crumbs = QLabel("", self)
        bar.addWidget(self.crumbs, 1)
        self.levels = QButtonGroup(self)
        for depth in (BLOCKS, BLOCKS + 1, OPERATORS):
            b = QToolButton(self)
            b.setText(LEVEL_NAMES[depth].capitalize())
            b.setObjectName("Level")
            b.setCheckable(True)
            self.levels.addButton(b, depth)
            bar.addWidget(b)
        self.levels.idClicked.connect(self.set_depth)
        fit = QToolButton(self)
        fit.setText("Fit graph")
        fit.clicked.connect(lambda: self.view_a.fit())
        bar.addWidget(fit)
        self.note = QLabel("", self)
        self.note.setObjectName("Muted")
        self.note.setWordWrap(True)
        self.legend = CompareLegend(self)
        canvases = QWidget(self)
        row = QHBoxLayout(canvases)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(6)
        names = (Path(str(self.cmp.doc_a.path)).name, Path(str(self.cmp.doc_b.path)).name)
        sides = (("a", "A", self.view_a, names[0]), ("b", "B (reference)", self.view_b, names[1]))
        for key, side, view, name in sides:
            col = QVBoxLayout()
            col.setSpacing(2)
            caption = QLabel(f"<b>{side}</b> · {name}", canvases)
            caption.setToolTip(str(self.cmp.doc_a.path if key == "a" else self.cmp.doc_b.path))
            col.addWidget(caption)
            col.addWidget(view, 1)
            row.addLayout(col, 1)
            view.itemClicked.connect(lambda k, s=key: self.select(s, k))
            view.itemActivated.connect(lambda k, s=key: self.enter(s, k))
            view.goUp.connect(self.go_up)
        self.view_a.viewChanged.connect(lambda: self._follow(self.view_a, self.view_b))
        self.view_b.viewChanged.connect(lambda: self._follow(self.view_b, self.view_a))
        self.details = DetailsPanel(self)
        self.details.table.pairActivated.connect(self.pairRequested)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(canvases)
        split.addWidget(self.details)
        split.setStretchFactor(0, 1)
        split.setSizes([1000, 380])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(self.note)
        lay.addWidget(self.legend)
        lay.addWidget(split, 1)

    # ------------------------------------------------------------------ levels

    def show_level(self) -> None:
        """Build, align and lay out both sides' current level (large ones on the runner)."""
        a, b = self.cmp.a, self.cmp.b
        try:
            la = build_level(a, self.scope_a, self.detail, theme.measure)
            lb = build_level(b, self.scope_b, self.detail, theme.measure)
            pair = align_levels(a, la, b, lb, self.cmp.match, self.rows)
        except Exception as exc:  # said in place of the canvases; the tables still work
            self.note.setText(f"This level could not be compared: {error_sentence(exc)}")
            return
        self.pair = pair

        def job(handle: Any) -> Any:
            return side_layouts(pair, NODE_GAP, RANK_GAP)

        if len(pair.slots) > SYNC_LAYOUT_SLOTS:
            self.note.setText(f"Laying out {len(pair.slots):,} blocks…")
            self.runner.submit(job, lambda r: self._show(pair, r), channel="compare-level")
            return
        try:
            result: JobResult[Any] = JobResult(job(None))
        except Exception as exc:
            result = JobResult(None, error=exc)
        self._show(pair, result)

    def _show(self, pair: LevelPair, result: JobResult[Any]) -> None:
        if pair is not self.pair:
            return
        if result.error is not None or result.value is None:
            why = error_sentence(result.error) if result.error is not None else "cancelled"
            self.note.setText(f"This level could not be laid out: {why}")
            return
        (level_a, lay_a), (level_b, lay_b) = result.value
        self.scene_a.show_level(ShownLevel(level_a, lay_a))
        self.scene_b.show_level(ShownLevel(level_b, lay_b))
        self.marks = []
        for slot in pair.slots:
            for side, item, scene in (("a", slot.a, self.scene_a), ("b", slot.b, self.scene_b)):
                box = scene.items_by_key.get(item.key) if item is not None else None
                if box is not None:
                    self.marks.append(DiffMark(box, slot, side))
                    summary = "\n".join(slot_summary(slot, self.cmp.by_name))
                    box.setToolTip(f"{box.toolTip()}\n\n{summary}")
        self.selected = None
        self.details.show_slot(None, self.rows, self.cmp.by_name)
        self._update_header(pair)
        self.view_a.default_view(self.scene_a.itemsBoundingRect())
        self._follow(self.view_a, self.view_b)
        self.levelShown.emit()

    def _update_header(self, pair: LevelPair) -> None:
        def path(g: Group) -> str:
            return " › ".join("model" if p.kind == "model" else p.name or p.kind for p in g.path())

        same = path(self.scope_a) == path(self.scope_b)
        self.crumbs.setText(
            path(self.scope_a) if same else f"A: {path(self.scope_a)}   ·   B: {path(self.scope_b)}"
        )
        self.up_button.setEnabled(bool(self.history) or self.scope_a.parent is not None)
        button = self.levels.button(self.detail)
        if button is not None:
            button.setChecked(True)
        matched = sum(1 for s in pair.slots if s.matched)
        only_a = sum(1 for s in pair.slots if s.a is not None and s.b is None and not s.within)
        only_b = sum(1 for s in pair.slots if s.b is not None and s.a is None and not s.within)
        regrouped = sum(1 for s in pair.slots if s.within)
        how = (
            "Blocks are aligned through their operators, which were paired by name."
            if self.cmp.by_name
            else "The two models name their operators differently, so operators were paired "
            "by structure (name-free hashes, then op type in graph order) and blocks through "
            "those pairs: matches are the diff's best guess, not names."
        )
        by_name_only = sum(1 for s in pair.slots if s.by == "name" and s.a and not s.a.value)
        extra = f" {by_name_only} matched by their name alone." if by_name_only else ""
        notes = [n if n in pair.b.notes else f"A: {n}" for n in pair.a.notes]
        notes += [f"B: {n}" for n in pair.b.notes if n not in pair.a.notes]
        self.note.setText(
            f"{matched} matched, {only_a} only in A, {only_b} only in B"
            + (f", {regrouped} grouped differently" if regrouped else "")
            + f" on this level. {how}"
            f"{extra}" + "".join(f"\n{n}" for n in notes)
        )

    # ------------------------------------------------------------------ interaction

    def slot_at(self, side: str, key: str) -> Slot | None:
        k = self.pair.slot_of(side, key) if self.pair is not None and key else None
        return self.pair.slots[k] if self.pair is not None and k is not None else None

    def select(self, side: str, key: str) -> None:
        slot = self.slot_at(side, key)
        self.selected = slot
        self.scene_a.select_keys([slot.a.key] if slot is not None and slot.a else [])
        self.scene_b.select_keys([slot.b.key] if slot is not None and slot.b else [])
        self.details.show_slot(slot, self.rows, self.cmp.by_name)

    def enter(self, side: str, key: str) -> bool:
        """Open the block (on both sides); an operator with weights opens its first pair."""
        slot = self.slot_at(side, key) if key else self.selected
        if slot is None:
            return False
        if key:
            self.select(side, key)
        if slot.a is None or slot.b is None:
            why = (
                f"Its operators are inside the other side's {slot.within}: open that block."
                if slot.within
                else "It is on one side only: there is nothing to open beside it."
            )
            self.details.text.setText(f"{self.details.text.text()}\n{why}")
            return False
        inner_a, inner_b = _scope_of(self.cmp.a, slot.a), _scope_of(self.cmp.b, slot.b)
        if inner_a is None or inner_b is None:  # two operators: show their weights
            if slot.rows and self.details.table.rows:
                self.pairRequested.emit(self.details.table.rows[0])
            return False
        self.history.append((self.scope_a, self.scope_b, self.detail))
        self.scope_a, self.scope_b = inner_a, inner_b
        self.detail = max(self.detail, min(OPERATORS, max(inner_a.level, inner_b.level) + 1))
        self.show_level()
        return True

    def go_up(self) -> None:
        if self.history:
            self.scope_a, self.scope_b, self.detail = self.history.pop()
        elif self.scope_a.parent is not None and self.scope_b.parent is not None:
            self.scope_a, self.scope_b = self.scope_a.parent, self.scope_b.parent
        else:
            return
        self.show_level()

    def set_depth(self, depth: int) -> None:
        """Change the detail level; a level at or above the open blocks goes back to the top."""
        if depth <= max(self.scope_a.level, self.scope_b.level):
            assert self.cmp.a.root is not None and self.cmp.b.root is not None
            self.scope_a, self.scope_b = self.cmp.a.root, self.cmp.b.root
            self.history.clear()
        self.detail = depth
        self.show_level()

    def _follow(self, source: GraphView, target: GraphView) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            if target.transform() != source.transform():
                target.setTransform(source.transform())
            target.horizontalScrollBar().setValue(source.horizontalScrollBar().value())
            target.verticalScrollBar().setValue(source.verticalScrollBar().value())
        finally:
            self._syncing = False

    def shutdown(self) -> None:
        self.runner.shutdown()
