"""The model workbench: canvas header (breadcrumbs, level, view controls, search) and the canvas.

Invariants:
- The scene shows the session's current level once its layout is ready; layouts of large
  levels are computed on the job runner (channel "level"), so a newer navigation drops an
  older, slower one. ``levelShown`` fires after the scene holds the new level, and
  ``framePainted`` after the viewport painted it.
- Canvas selection marks always come from the session's selection (``canvas_keys``).
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QEvent, QObject, QRectF, Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from nneditor.errors import error_sentence
from nneditor.jobs.protocol import JobResult
from nneditor.semantic.hierarchy import Group
from nneditor.ui.canvas.legend import Legend
from nneditor.ui.canvas.level import LEVEL_NAMES, LevelView
from nneditor.ui.canvas.minimap import Minimap
from nneditor.ui.canvas.scene import NODE_GAP, RANK_GAP, GraphScene, ShownLevel, layout_input
from nneditor.ui.canvas.view import GraphView
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.panels.search import SearchBar
from nneditor.ui.session import ModelSession
from nneditor.ui.targets import Target

SYNC_LAYOUT_ITEMS = 120
_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


class Workbench(QWidget):
    levelShown = Signal()
    levelFailed = Signal(str)  # the sentence shown instead of the canvas
    framePainted = Signal(float)  # perf_counter() of the paint
    status = Signal(str)

    def __init__(self, runner: QtJobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.session: ModelSession | None = None
        self.scene = GraphScene(self)
        self.scene.paintFailed.connect(self._paint_failed)
        self.view = GraphView(self.scene, self)
        self.minimap = Minimap(self.view)
        self.legend = Legend(self.view)
        self.search = SearchBar(self)
        self._awaiting_paint = False
        self._pending_level: LevelView | None = None
        self._trail: tuple[str, str, str] | None = None
        self._build_ui()
        self.view.viewport().installEventFilter(self)
        self.view.itemClicked.connect(self._on_item_clicked)
        self.view.edgeClicked.connect(self._on_edge_clicked)
        self.view.itemActivated.connect(self._on_item_activated)
        self.view.navigate.connect(self._on_navigate)
        self.view.goUp.connect(self.go_up)
        self.search.matchRequested.connect(
            lambda t: self.session and self.session.select(t, reveal=True)
        )
        self.search.matchesChanged.connect(lambda _m: self._mark_matches())

    # ------------------------------------------------------------------ widgets

    def _build_ui(self) -> None:
        header = QWidget(self)
        header.setObjectName("CanvasBar")
        rows = QVBoxLayout(header)
        rows.setContentsMargins(10, 6, 10, 6)
        rows.setSpacing(6)
        top = QHBoxLayout()
        top.setSpacing(4)
        self.up_button = QToolButton(header)
        self.up_button.setText("↑ Parent block")
        self.up_button.setToolTip("Go up one level (Backspace)")
        self.up_button.clicked.connect(self.go_up)
        top.addWidget(self.up_button)
        crumb_box = QWidget(header)
        crumb_box.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.crumbs = QHBoxLayout(crumb_box)
        self.crumbs.setContentsMargins(0, 0, 0, 0)
        self.crumbs.setSpacing(0)
        self.crumbs.addStretch(1)
        top.addWidget(crumb_box, 1)
        rows.addLayout(top)
        bottom = QHBoxLayout()
        bottom.setSpacing(4)
        self.levels = QButtonGroup(header)
        self.levels.setExclusive(True)
        for depth, name in LEVEL_NAMES.items():
            b = QToolButton(header)
            b.setText(name.capitalize())
            b.setObjectName("Level")
            b.setCheckable(True)
            b.setToolTip(f"Detail level: {name}")
            self.levels.addButton(b, depth)
            bottom.addWidget(b)
        self.levels.idClicked.connect(self._on_level_clicked)
        bottom.addSpacing(10)
        bottom.addStretch(1)
        bottom.addWidget(self.search, 4)
        rows.addLayout(bottom)
        self.note = QLabel("", self.view)
        self.note.setObjectName("CanvasNote")
        self.note.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.controls = QFrame(self.view)
        self.controls.setObjectName("CanvasControls")
        bar = QHBoxLayout(self.controls)
        bar.setContentsMargins(4, 2, 4, 2)
        bar.setSpacing(2)
        for text, tip, slot in (
            ("Fit graph", "Show the whole level (Ctrl+0)", self.view.fit),
            ("Readable view", "100% zoom centred on the selection (Ctrl+1)", self.readable_view),
            ("−", "Zoom out (Ctrl+-)", self.view.zoom_out),
            ("+", "Zoom in (Ctrl+=)", self.view.zoom_in),
        ):
            b = QToolButton(self.controls)
            b.setText(text)
            b.setToolTip(tip)
            b.clicked.connect(slot)
            bar.addWidget(b)
        self.constants = QToolButton(self.controls)
        self.constants.setText("Constants")
        self.constants.setCheckable(True)
        self.constants.setToolTip("Show constant operators as boxes of their own")
        self.constants.toggled.connect(self._on_constants)
        bar.addWidget(self.constants)

        self.empty = QLabel("", self)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setObjectName("Muted")
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.view)
        self.stack.addWidget(self.empty)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(header)
        layout.addWidget(self.stack, 1)
        self.header = header

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._place_overlays()

    def _place_overlays(self) -> None:
        """Minimap bottom-right, legend bottom-left, controls top-right, counts top-left;
        the legend hides and the counts move below the controls when the canvas is narrow."""
        self.minimap.place()
        vp = self.view.viewport().geometry()
        self.controls.adjustSize()
        self.controls.move(vp.width() - self.controls.width() - 12, 10)
        self.note.adjustSize()
        crowded = self.note.width() + self.controls.width() + 36 > vp.width()
        self.note.move(12, 10 + (self.controls.height() + 8 if crowded else 0))
        roomy = vp.width() >= self.legend.width() + 200 + 48 and vp.height() >= 420
        self.legend.setVisible(roomy and bool(self.legend.categories))
        self.legend.move(vp.left() + 12, vp.bottom() - self.legend.height() - 12)
        self.legend.raise_()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.Paint and self._awaiting_paint:
            self._awaiting_paint = False
            # report after this paint completes
            stamp = time.perf_counter()
            self.framePainted.emit(stamp)
        elif event.type() == QEvent.Type.Resize:
            self._place_overlays()
        return False

    # ------------------------------------------------------------------ session

    def set_session(self, session: ModelSession | None, reason: str = "") -> None:
        if self.session is not None:
            self.session.navigationChanged.disconnect(self._render_level)
            self.session.selectionChanged.disconnect(self._apply_selection)
        self.session = session
        self.scene.clear_level()
        self.search.set_index(session.index if session is not None else None)
        self.header.setVisible(session is not None)
        if session is None:
            self.empty.setText(reason or "")
            self.stack.setCurrentWidget(self.empty)
            self.legend.hide()
            self.minimap.rebuild()
            return
        self.stack.setCurrentWidget(self.view)
        session.navigationChanged.connect(self._render_level)
        session.selectionChanged.connect(self._apply_selection)
        self._render_level()

    def _render_level(self) -> None:
        s = self.session
        if s is None:
            return
        level = s.level
        self._pending_level = level
        self._update_header(level)
        if s.level_error:
            self._fail(s.level_error)
            return
        nodes, edges = layout_input(level)
        key = (level.scope.id, level.depth)

        def job(handle: Any) -> Any:
            return s.layouts.layout(key, nodes, edges, node_gap=NODE_GAP, rank_gap=RANK_GAP)

        if len(nodes) <= SYNC_LAYOUT_ITEMS:
            try:
                result: JobResult[Any] = JobResult(job(None))
            except Exception as exc:  # same path as a failed background layout
                result = JobResult(None, error=exc)
            self._show(level, result)
            return
        self.status.emit(f"Laying out {len(nodes):,} items…")
        # one channel per canvas: the Traced model pane's canvas shares this runner, and a
        # shared channel made its layout supersede (silently drop) the model graph's
        channel = f"level:{id(self)}"
        self.runner.submit(job, lambda r: self._show(level, r), channel=channel, label="Layout")

    def _show(self, level: LevelView, result: JobResult[Any]) -> None:
        if self.session is None or level is not self.session.level:
            return
        if result.error is not None:
            self._fail(f"This level could not be laid out: {error_sentence(result.error)}")
            return
        if result.value is None:
            return
        try:
            self.scene.show_level(ShownLevel(level, result.value))
        except Exception as exc:
            self.scene.clear_level()
            self._fail(f"This level could not be drawn: {error_sentence(exc)}")
            return
        self.stack.setCurrentWidget(self.view)
        self.legend.set_categories({it.category for it in level.items})
        self._place_overlays()
        self.view.default_view(self._entry_rect(level))
        self._awaiting_paint = True
        self._apply_selection(self.session.selection, center=True)
        self._mark_matches()
        self.status.emit("")
        self.view.viewport().update()
        self.levelShown.emit()

    def _paint_failed(self, text: str) -> None:
        if self.scene.shown is not None:
            self.scene.clear_level()
            self._fail(f"This level could not be drawn: {text}")

    def _fail(self, text: str) -> None:
        """Show why the level is not drawn, in place of the canvas; everything else works."""
        self.empty.setText(text)
        self.stack.setCurrentWidget(self.empty)
        self.legend.hide()
        self.status.emit(text)
        self.levelFailed.emit(text)

    def _entry_rect(self, level: LevelView) -> QRectF | None:
        """Where a long level is entered: the top rank, nearest the first item's column."""
        rects = [r for it in level.items if (r := self.scene.item_rect(it.key)) is not None]
        if not rects:
            return None
        anchor = rects[0].center().x()
        top = min(r.top() for r in rects)
        return min(
            (r for r in rects if r.top() <= top + 1), key=lambda r: abs(r.center().x() - anchor)
        )

    def _update_header(self, level: LevelView) -> None:
        while self.crumbs.count() > 1:
            item = self.crumbs.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.hide()  # deletion is deferred; never let an old crumb paint meanwhile
                w.deleteLater()
        path = level.scope.path()
        for k, g in enumerate(path):
            last = k == len(path) - 1
            b = QToolButton(self.header)
            b.setText(
                ("model" if g.kind == "model" else g.name or g.kind)
                if not last or g.kind != "model"
                else "model"
            )
            b.setObjectName("CrumbCurrent" if last else "Crumb")
            b.setAutoRaise(True)
            if not last:
                b.clicked.connect(lambda _c=False, grp=g: self.go_to(grp))
            self.crumbs.insertWidget(self.crumbs.count() - 1, b)
            if not last:
                sep = QLabel("›", self.header)
                sep.setObjectName("Muted")
                self.crumbs.insertWidget(self.crumbs.count() - 1, sep)
        self.up_button.setEnabled(level.scope.parent is not None)
        button = self.levels.button(level.depth)
        if button is not None:
            button.setChecked(True)
        counts = f"{len(level.items):,} items · {len(level.edges):,} edges"
        self.note.setText("\n".join([counts, *level.notes]))
        self._place_overlays()

    # ------------------------------------------------------------------ interaction

    def _on_constants(self, shown: bool) -> None:
        if self.session is not None:
            self.session.set_fold_constants(not shown)

    def go_to(self, group: Group) -> None:
        if self.session is not None:
            self.session.go_to(group)

    def _on_level_clicked(self, depth: int) -> None:
        if self.session is not None:
            self.session.set_depth(depth)

    def go_up(self) -> None:
        if self.session is not None:
            self.session.go_up()

    def readable_view(self) -> None:
        keys = self.session.canvas_keys(self.session.selection) if self.session else []
        self.view.readable(self.scene.item_rect(keys[0]) if keys else None)

    def _on_item_clicked(self, key: str) -> None:
        s = self.session
        if s is None:
            return
        if not key:
            s.select(None)
            return
        item = s.level.by_key.get(key)
        if item is not None:
            s.select(item.target)

    def _on_edge_clicked(self, index: int) -> None:
        if self.session is None:
            return
        src, dst, values = self.scene.edge_values(index)
        self.session.select(Target("edge", (src, dst), tuple(values)))

    def _on_item_activated(self, key: str) -> None:
        s = self.session
        if s is None:
            return
        if not key:
            keys = s.canvas_keys(s.selection)
            key = keys[0] if keys else ""
        item = s.level.by_key.get(key)
        if item is not None and not s.open_item(item):
            self.view.readable(self.scene.item_rect(key))

    def _on_navigate(self, direction: str) -> None:
        s = self.session
        if s is None or self.scene.shown is None:
            return
        keys = s.canvas_keys(s.selection)
        if not keys:
            nxt = s.level.items[0].key if s.level.items else None
        else:
            nxt = self.scene.neighbour(keys[0], direction)
            back = self._trail
            if back is not None and back[1] == keys[0] and back[2] == _OPPOSITE[direction]:
                nxt = back[0]  # retrace the step just taken
        if nxt is None:
            return
        self._trail = (keys[0], nxt, direction) if keys else None
        s.select(s.level.by_key[nxt].target)
        rect = self.scene.item_rect(nxt)
        if rect is not None:
            self.view.ensureVisible(rect, 60, 60)

    def _apply_selection(self, target: Target | None, center: bool = False) -> None:
        s = self.session
        if s is None or self.scene.shown is None or self.scene.shown.level is not s.level:
            return
        if target is not None and target.kind == "edge":
            src, dst = target.ends
            for k, e in enumerate(s.level.edges):
                if e.src == src and e.dst == dst:
                    self.scene.select_edge(k)
                    return
            self.scene.select_keys([])
            return
        keys = s.canvas_keys(target)
        self.scene.select_keys(keys)
        if keys and (center or s.reveal_requested):
            rect = self.scene.item_rect(keys[0])
            if rect is not None:
                if s.reveal_requested and self.view.zoom < 0.5:
                    self.view.readable(rect)
                elif s.reveal_requested:
                    self.view.bring_into_view(rect)
                else:
                    self.view.ensureVisible(rect, 80, 80)

    def _mark_matches(self) -> None:
        s = self.session
        if s is None or self.scene.shown is None:
            return
        keys = set()
        for t in self.search.matches[:5000]:
            k = s.level.key_for(t)
            if k is not None:
                keys.add(k)
        self.scene.mark_matches(keys)

    def item_count(self) -> int:
        return self.scene.item_count
