"""The hierarchy explorer: groups and operators in a lazily populated tree, synced with the canvas.

Invariants:
- Rows are created on demand: a group's rows are its child groups and direct operators in
  topological order (``ModelIndex.ordered_members``), fetched in batches of ``BATCH`` through
  ``canFetchMore``/``fetchMore``, so a 100k-operator model opens instantly.
- ``internalId`` of an index is a small integer into ``_entries``; entries are never removed
  while the model lives, so ids stay valid.
- Programmatic selection (``select_target``) never echoes back as ``targetSelected``.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeView, QVBoxLayout, QWidget

from nneditor.semantic.hierarchy import Group
from nneditor.ui import theme
from nneditor.ui.model_index import Member, ModelIndex, style_category
from nneditor.ui.targets import Target

BATCH = 500
COLUMNS = ("Name", "Ops")
Index = QModelIndex | QPersistentModelIndex


class HierarchyModel(QAbstractItemModel):
    def __init__(self, index: ModelIndex, parent: Any = None) -> None:
        super().__init__(parent)
        self.ix = index
        assert index.root is not None
        self.root = index.root
        # entry: (member, parent entry id or -1, row)
        self._entries: list[tuple[Member, int, int]] = []
        self._ids: dict[tuple[str, object], int] = {}
        self._loaded: dict[int, int] = {}  # id(group) -> rows fetched
        self._rows: dict[int, dict[tuple[str, object], int]] = {}
        self._icons: dict[str, QIcon] = {}

    # ------------------------------------------------------------------ structure

    def _group_of(self, parent: Index) -> Group | None:
        if not parent.isValid():
            return self.root
        member = self._entries[parent.internalId()][0]
        return member.group

    def _members(self, g: Group) -> list[Member]:
        return self.ix.ordered_members(g)

    def _entry_id(self, member: Member, parent_id: int, row: int) -> int:
        key = ("g", member.group.id) if member.group is not None else ("n", member.node)
        eid = self._ids.get(key)
        if eid is None:
            eid = len(self._entries)
            self._entries.append((member, parent_id, row))
            self._ids[key] = eid
        return eid

    def index(self, row: int, column: int, parent: Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        g = self._group_of(parent)
        if g is None:
            return QModelIndex()
        members = self._members(g)
        if not 0 <= row < len(members) or not 0 <= column < len(COLUMNS):
            return QModelIndex()
        pid = parent.internalId() if parent.isValid() else -1
        return self.createIndex(row, column, self._entry_id(members[row], pid, row))

    def parent(self, child: Index = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        if not child.isValid():
            return QModelIndex()
        _member, pid, _row = self._entries[child.internalId()]
        if pid < 0:
            return QModelIndex()
        return self.createIndex(self._entries[pid][2], 0, pid)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        if parent.isValid() and parent.column() != 0:
            return 0
        g = self._group_of(parent)
        if g is None:
            return 0
        return self._loaded.get(id(g), min(BATCH, len(self._members(g))))

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return len(COLUMNS)

    def hasChildren(self, parent: Index = QModelIndex()) -> bool:  # noqa: N802, B008
        g = self._group_of(parent)
        return g is not None and bool(g.children or g.nodes)

    def canFetchMore(self, parent: Index) -> bool:  # noqa: N802
        g = self._group_of(parent)
        return g is not None and self.rowCount(parent) < len(self._members(g))

    def fetchMore(self, parent: Index) -> None:  # noqa: N802
        g = self._group_of(parent)
        if g is None:
            return
        have = self.rowCount(parent)
        total = len(self._members(g))
        new = min(total, have + BATCH)
        if new <= have:
            return
        self.beginInsertRows(parent, have, new - 1)
        self._loaded[id(g)] = new
        self.endInsertRows()

    # ------------------------------------------------------------------ data

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        member = self._entries[index.internalId()][0]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(member, col)
        if role == Qt.ItemDataRole.DecorationRole and col == 0:
            return self._icon(self._category(member))
        if role == Qt.ItemDataRole.ToolTipRole:
            g = member.group
            if g is not None:
                kind = (g.category or g.kind).replace("+", " + ")
                return f"{g.name} — {kind}\n{g.explanation}".strip()
            node = self.ix.node(member.node)
            return f"{node.op_type}\n{node.name}"
        if role == Qt.ItemDataRole.TextAlignmentRole and col == 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _text(self, member: Member, col: int) -> str:
        g = member.group
        if g is not None:
            if col == 0:
                return g.name or g.kind
            return f"{g.node_count:,}"
        node = self.ix.node(member.node)
        if col == 0:
            short = (node.name or "").rstrip("/").rsplit("/", 1)[-1]
            return short if short and node.op_type in short else f"{node.op_type}  {short}".strip()
        return ""

    def _category(self, member: Member) -> str:
        if member.group is not None:
            return style_category(member.group.category)
        return self.ix.node_category(member.node)

    def _icon(self, category: str) -> QIcon:
        icon = self._icons.get(category)
        if icon is None:
            pm = QPixmap(12, 12)
            pm.fill(Qt.GlobalColor.transparent)
            p = QPainter(pm)
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(theme.current().accent_of(category)))
            p.drawRoundedRect(1, 1, 10, 10, 3, 3)
            p.end()
            icon = QIcon(pm)
            self._icons[category] = icon
        return icon

    # ------------------------------------------------------------------ lookups

    def target_of(self, index: Index) -> Target | None:
        if not index.isValid():
            return None
        member = self._entries[index.internalId()][0]
        return (
            Target.group(member.group.id) if member.group is not None else Target.node(member.node)
        )

    def _row_in(self, g: Group, key: tuple[str, object]) -> int | None:
        rows = self._rows.get(id(g))
        if rows is None:
            rows = {}
            for r, m in enumerate(self._members(g)):
                rows[("g", m.group.id) if m.group is not None else ("n", m.node)] = r
            self._rows[id(g)] = rows
        return rows.get(key)

    def index_for(self, target: Target) -> QModelIndex:
        """The tree index of a group or operator target, fetching rows as needed."""
        if target.kind in ("group", "repeat"):
            g = self.ix.group_by_id.get(str(target.ref))
            if g is None or g is self.root:
                return QModelIndex()
            chain: list[tuple[Group, tuple[str, object]]] = [(a, ("g", a.id)) for a in g.path()[1:]]
        elif target.kind == "node":
            i = int(target.ref)  # type: ignore[call-overload]
            inner = self.ix.innermost(i)
            if inner is None:
                return QModelIndex()
            chain = [(a, ("g", a.id)) for a in inner.path()[1:]]
            chain.append((inner, ("n", i)))
        else:
            return QModelIndex()
        parent = QModelIndex()
        owner = self.root
        for group, key in chain:
            row = self._row_in(owner, key)
            if row is None:
                return QModelIndex()
            while self.rowCount(parent) <= row and self.canFetchMore(parent):
                self.fetchMore(parent)
            parent = self.index(row, 0, parent)
            owner = group
        return parent


class HierarchyPanel(QWidget):
    """Tree view + model; emits ``targetSelected`` for user selections only."""

    targetSelected = Signal(object)
    targetActivated = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = QTreeView(self)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tree.activated.connect(self._on_activated)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tree)
        self.model: HierarchyModel | None = None
        self._muted = False

    def set_index(self, index: ModelIndex | None) -> None:
        old = self.model
        if index is None or index.root is None:
            self.tree.setModel(None)  # type: ignore[arg-type]
            self.model = None
        else:
            self.model = HierarchyModel(index, self)
            self.tree.setModel(self.model)
            header = self.tree.header()
            header.setStretchLastSection(False)
            header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
            header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
            self.tree.selectionModel().currentChanged.connect(self._on_current)
        if old is not None:
            old.deleteLater()

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._muted or self.model is None:
            return
        target = self.model.target_of(current)
        if target is not None:
            self.targetSelected.emit(target)

    def _on_activated(self, index: QModelIndex) -> None:
        if self.model is not None:
            target = self.model.target_of(index)
            if target is not None:
                self.targetActivated.emit(target)

    def select_target(self, target: Target | None) -> None:
        """Show ``target`` selected without emitting ``targetSelected``."""
        if self.model is None:
            return
        self._muted = True
        try:
            index = self.model.index_for(target) if target is not None else QModelIndex()
            sel = self.tree.selectionModel()
            if not index.isValid():
                sel.clearSelection()
                return
            self.tree.expand(index.parent())
            p = index.parent()
            while p.isValid():
                self.tree.expand(p)
                p = p.parent()
            sel.setCurrentIndex(
                index,
                QItemSelectionModel.SelectionFlag.ClearAndSelect
                | QItemSelectionModel.SelectionFlag.Rows,
            )
            self.tree.scrollTo(index, QAbstractItemView.ScrollHint.EnsureVisible)
        finally:
            self._muted = False

    @property
    def current_target(self) -> Target | None:
        if self.model is None:
            return None
        return self.model.target_of(self.tree.currentIndex())
