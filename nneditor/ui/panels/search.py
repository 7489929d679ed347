"""Search (Ctrl+F): groups, operator names, op types, value and tensor names.

Invariants:
- Matching is a case-insensitive substring test (an op type must match exactly), over
  strings lowered once when the first search runs; results are capped at ``MAX_MATCHES``.
- Result order: groups (hierarchy order), operators (topological order), then values and
  tensors not already reached through their producer.
- Enter moves to the next match (Shift+Enter: previous) and asks the owner to reveal it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from nneditor.ui.model_index import ModelIndex
from nneditor.ui.targets import Target

MAX_MATCHES = 5000


class SearchIndex:
    def __init__(self, index: ModelIndex) -> None:
        self.ix = index
        self._groups: list[tuple[str, str]] | None = None
        self._nodes: list[tuple[str, str]] = []
        self._values: list[str] = []

    def _build(self) -> None:
        self._groups = [
            (g.id, (g.name or "").lower()) for g in self.ix.iter_groups() if g.kind != "model"
        ]
        if self.ix.graph is not None:
            self._nodes = [(n.name.lower(), n.op_type.lower()) for n in self.ix.graph.nodes]
        names = dict.fromkeys(self.ix.graph_inputs)
        names.update(dict.fromkeys(self.ix.producer))
        names.update(dict.fromkeys(self.ix.doc.tensors))
        self._values = list(names)

    def find(self, query: str) -> list[Target]:
        q = query.strip().lower()
        if not q:
            return []
        if self._groups is None:
            self._build()
        assert self._groups is not None
        out: list[Target] = [Target.group(gid) for gid, name in self._groups if q in name]
        matched_nodes: set[int] = set()
        for i, (name, op) in enumerate(self._nodes):
            if q in name or q == op:
                out.append(Target.node(i))
                matched_nodes.add(i)
                if len(out) >= MAX_MATCHES:
                    return out
        for v in self._values:
            if q in v.lower():
                p = self.ix.producer.get(v)
                if p is not None and p in matched_nodes:
                    continue
                out.append(Target.value(v))
                if len(out) >= MAX_MATCHES:
                    break
        return out


class _Field(QLineEdit):
    previous = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if (
            event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            and event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            self.previous.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.clear()
            self.clearFocus()
            return
        super().keyPressEvent(event)


class SearchBar(QWidget):
    """Query field with a match counter and previous/next buttons."""

    matchRequested = Signal(object)  # Target to reveal
    matchesChanged = Signal(list)  # every current match (for canvas marks)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index: SearchIndex | None = None
        self.matches: list[Target] = []
        self.position = -1
        self.field = _Field(self)
        self.field.setPlaceholderText("Find block, operator, tensor (Ctrl+F)")
        self.field.setClearButtonEnabled(True)
        self.field.setMinimumWidth(110)
        self.count = QLabel("", self)
        self.count.setObjectName("Muted")

        self.setMaximumWidth(420)
        prev_b = QToolButton(self)
        prev_b.setObjectName("Compact")
        prev_b.setText("‹")
        prev_b.setToolTip("Previous match (Shift+Enter)")
        next_b = QToolButton(self)
        next_b.setObjectName("Compact")
        next_b.setText("›")
        next_b.setToolTip("Next match (Enter)")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.field, 1)
        layout.addWidget(self.count)
        layout.addWidget(prev_b)
        layout.addWidget(next_b)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(180)
        self._timer.timeout.connect(self.refresh)
        self.field.textChanged.connect(lambda _t: self._timer.start())
        self.field.returnPressed.connect(self.next)
        self.field.previous.connect(self.previous)
        next_b.clicked.connect(self.next)
        prev_b.clicked.connect(self.previous)

    def set_index(self, index: ModelIndex | None) -> None:
        self.index = SearchIndex(index) if index is not None else None
        self.field.clear()
        self.matches = []
        self.position = -1
        self.count.setText("")

    def focus(self) -> None:
        self.field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.field.selectAll()

    def refresh(self) -> None:
        self._timer.stop()
        text = self.field.text()
        self.matches = self.index.find(text) if self.index is not None else []
        self.position = -1
        self._update_count()
        self.matchesChanged.emit(self.matches)

    def _update_count(self) -> None:
        if not self.field.text().strip():
            self.count.setText("")
        elif not self.matches:
            self.count.setText("no match")
        else:
            shown = f"{len(self.matches):,}" + ("+" if len(self.matches) >= MAX_MATCHES else "")
            self.count.setText(f"{self.position + 1 if self.position >= 0 else 0} of {shown}")

    def next(self) -> None:
        self._step(1)

    def previous(self) -> None:
        self._step(-1)

    def _step(self, delta: int) -> None:
        if self._timer.isActive():
            self.refresh()
        if not self.matches:
            self._update_count()
            return
        self.position = (self.position + delta) % len(self.matches)
        self._update_count()
        self.matchRequested.emit(self.matches[self.position])
