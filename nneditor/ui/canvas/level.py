"""What one canvas level shows: items (groups, operators, aggregates, scope I/O) and edges.

Qt-free, so it runs on a worker thread and is unit-testable. A level is a *scope* (the opened
group, the root for the whole model) seen at a *depth* (1 architecture, 2 blocks, 3 layers,
4 operators): the scope is always opened one step; inside it, a group is opened further while
its children are at or above the requested depth.

Invariants:
- Every operator of the scope is represented by exactly one item (itself, its group, a ×N run
  of identical siblings containing it, a chunk of a very long operator list, or, for a
  folded constant operator, the item of its first consumer).
- Item keys are unique and stable: ``g:<group id>``, ``r:<first group id>``, ``n:<index>``,
  ``c:<group id>:<start>``, ``i:<value>`` (scope input), ``o:<value>`` (scope output).
- Edges join distinct items and carry the value names crossing between them; initializers
  never make edges (constant operators are items, so their outputs do). Items stay under ``hard_limit`` where the
  hierarchy allows it: runs of identical siblings collapse past ``soft_limit``, and the depth
  is reduced (noted in ``notes``) when that is not enough.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nneditor.semantic.hierarchy import Group
from nneditor.ui.model_index import ModelIndex, style_category
from nneditor.ui.targets import Target

ARCHITECTURE, BLOCKS, LAYERS, OPERATORS = 1, 2, 3, 4
LEVEL_NAMES = {
    ARCHITECTURE: "architecture",
    BLOCKS: "blocks",
    LAYERS: "layers",
    OPERATORS: "operators",
}
DEPTH_BY_NAME = {v: k for k, v in LEVEL_NAMES.items()}

SOFT_LIMIT = 300
HARD_LIMIT = 2500
CHUNK = 1000
MAX_IO = 24
_CHAR_W = 7.2


@dataclass
class LevelItem:
    key: str
    kind: str  # group | repeat | node | chunk | input | output
    label: str
    detail: str
    category: str
    width: float
    height: float
    group: Group | None = None
    node: int = -1
    count: int = 1
    nodes: list[int] = field(default_factory=list)  # chunk members
    members: list[Group] = field(default_factory=list)  # repeat members
    marked: bool = False  # a detected pattern (structural evidence) backs the category
    anchor: bool = False  # the operator a detected pattern was anchored on (labelled)
    name_only: bool = False
    value: str = ""

    @property
    def target(self) -> Target:
        if self.kind == "group" and self.group is not None:
            return Target.group(self.group.id)
        if self.kind == "repeat" and self.group is not None:
            return Target("repeat", self.group.id)
        if self.kind == "node":
            return Target.node(self.node)
        if self.kind in ("input", "output"):
            return Target.value(self.value)
        return Target("chunk", self.key)

    @property
    def openable(self) -> bool:
        return self.kind in ("group", "repeat", "chunk")


@dataclass
class LevelEdge:
    src: str
    dst: str
    values: list[str]


@dataclass
class LevelView:
    scope: Group
    depth: int
    requested_depth: int
    items: list[LevelItem]
    edges: list[LevelEdge]
    by_key: dict[str, LevelItem]
    notes: list[str] = field(default_factory=list)
    aggregated: bool = False
    node_key: dict[int, str] = field(default_factory=dict)
    group_key: dict[int, str] = field(default_factory=dict)

    def item_of_node(self, index: ModelIndex, i: int) -> str | None:
        """Key of the item representing operator ``i`` here (None if outside the scope)."""
        return _item_of_node(index, self.scope, self.node_key, self.group_key, i)

    def item_of_group(self, index: ModelIndex, g: Group) -> str | None:
        """Key of the item that is or contains group ``g`` (None if outside the scope)."""
        while g is not None:
            key = self.group_key.get(id(g))
            if key is not None:
                return key
            if g is self.scope:
                return None
            g = g.parent  # type: ignore[assignment]
        return None

    def key_for(self, target: Target) -> str | None:
        """The key of the item that *is* ``target`` on this level (not one containing it)."""
        if target.kind == "group":
            key = f"g:{target.ref}"
        elif target.kind == "repeat":
            key = f"r:{target.ref}"
        elif target.kind == "node":
            key = f"n:{target.ref}"
        elif target.kind == "value":
            key = f"i:{target.ref}" if f"i:{target.ref}" in self.by_key else f"o:{target.ref}"
        elif target.kind == "chunk":
            key = str(target.ref)
        else:
            return None
        return key if key in self.by_key else None


#: ``measure(text, title)`` -> width in pixels of ``text`` in the title (or detail) font.
Measure = Callable[[str, bool], float]


def estimate(text: str, title: bool) -> float:
    """A font-free width estimate (used off the GUI, e.g. in tests and benchmarks)."""
    return len(text) * (_CHAR_W if title else _CHAR_W * 0.8)


class _Builder:
    def __init__(
        self,
        index: ModelIndex,
        scope: Group,
        depth: int,
        aggregate: bool,
        measure: Measure,
        fold_constants: bool = True,
    ) -> None:
        self.measure = measure
        self.fold = fold_constants
        self.deferred: list[int] = []
        self.folded_nodes: set[int] = set()
        self.folded = 0
        self.ix = index
        self.scope = scope
        self.depth = depth
        self.aggregate = aggregate
        self.items: list[LevelItem] = []
        self.group_key: dict[int, str] = {}
        self.node_key: dict[int, str] = {}
        self.memo: dict[int, str | None] = {}
        self.more: set[str] = set()

    def width(self, title: str, detail: str, lo: float, hi: float, pad: float = 34) -> float:
        w = max(self.measure(title, True), self.measure(detail, False) if detail else 0.0)
        return max(lo, min(hi, w + pad))

    # ------------------------------------------------------------------ items

    def expands(self, g: Group) -> bool:
        if g.level >= self.depth:
            return False
        if self.depth >= OPERATORS:
            return bool(g.children or g.nodes)
        return any(c.level <= self.depth for c in g.children)

    def expand(self, g: Group, limit: int) -> bool:
        """Add ``g``'s contents; False as soon as more than ``limit`` items were produced."""
        members = self.ix.ordered_members(g)
        chunked = len(g.nodes) > HARD_LIMIT
        k = 0
        pending_nodes: list[int] = []
        while k < len(members):
            m = members[k]
            if m.group is None:
                if chunked:
                    pending_nodes.append(m.node)
                    if len(pending_nodes) == CHUNK:
                        self.add_chunk(g, pending_nodes)
                        pending_nodes = []
                elif self.fold and self.ix.is_constant_op(m.node):
                    self.deferred.append(m.node)
                else:
                    self.add_node(m.node)
                k += 1
            else:
                run = self.run_length(members, k) if self.aggregate else 1
                if run > 1:
                    self.add_repeat([mm.group for mm in members[k : k + run] if mm.group])
                elif self.expands(m.group):
                    if not self.expand(m.group, limit):
                        return False
                else:
                    self.add_group(m.group)
                k += run
            if len(self.items) > limit:
                return False
        if pending_nodes:
            self.add_chunk(g, pending_nodes)
        return len(self.items) <= limit

    @staticmethod
    def run_length(members: list, k: int) -> int:
        g = members[k].group
        if not g.signature or not (g.children or g.nodes):
            return 1
        n = 1
        while k + n < len(members):
            other = members[k + n].group
            if other is None or other.signature != g.signature:
                break
            n += 1
        return n

    def add(self, item: LevelItem) -> None:
        self.items.append(item)

    def add_node(self, i: int) -> None:
        node = self.ix.node(i)
        label = node.op_type or "?"
        short = (node.name or "").rstrip("/").rsplit("/", 1)[-1]
        detail = short if short and short != label else ""
        item = LevelItem(
            f"n:{i}",
            "node",
            label,
            detail,
            self.ix.node_category(i),
            self.width(label, detail, 96, 240),
            40,
            node=i,
            marked=self.ix.node_in_pattern(i),
            anchor=i in self.ix.anchors,
        )
        self.node_key[i] = item.key
        self.add(item)

    def fold_constants(self) -> None:
        """Constant operators join the item of their first consumer (drawn like weights)."""
        for i in reversed(self.deferred):  # consumers first: a weight's Q -> DQ -> Conv
            key = None
            for v in self.ix.node(i).outputs:
                for c in self.ix.consumers.get(v, ()):
                    key = self.item_of_node(c)
                    if key is not None:
                        break
                if key is not None:
                    break
            if key is None:
                self.add_node(i)
            else:
                self.node_key[i] = key
                self.folded_nodes.add(i)
                self.folded += 1

    def add_group(self, g: Group) -> None:
        cat = style_category(g.category)
        what = (g.category or g.kind).replace("+", " + ")
        detail = f"{what} · {g.node_count:,} op{'' if g.node_count == 1 else 's'}"
        item = LevelItem(
            f"g:{g.id}",
            "group",
            g.name or g.kind,
            detail,
            cat,
            self.width(g.name or g.kind, detail, 150, 320),
            56,
            group=g,
            marked=bool(g.patterns) and not g.name_only,
            name_only=g.name_only,
        )
        self.group_key[id(g)] = item.key
        self.add(item)

    def add_repeat(self, run: list[Group]) -> None:
        first, last = run[0], run[-1]
        label = f"{first.name} … {last.name}"
        what = (first.category or first.kind).replace("+", " + ")
        detail = f"{len(run)} identical {first.kind}s · {what}"
        item = LevelItem(
            f"r:{first.id}",
            "repeat",
            label,
            detail,
            style_category(first.category),
            self.width(label, detail, 180, 340, 60),
            64,
            group=first,
            count=len(run),
            members=run,
            marked=bool(first.patterns),
        )
        for g in run:
            self.group_key[id(g)] = item.key
        self.add(item)

    def add_chunk(self, g: Group, nodes: list[int]) -> None:
        key = f"c:{g.id}:{nodes[0]}"
        label = f"operators {nodes[0]}–{nodes[-1]}"
        detail = f"{len(nodes):,} of {len(g.nodes):,} in {g.name or g.kind}"
        item = LevelItem(key, "chunk", label, detail, "other", 220, 56, group=g, nodes=list(nodes))
        for i in nodes:
            self.node_key[i] = key
        self.add(item)

    # ------------------------------------------------------------------ edges

    def item_of_node(self, i: int) -> str | None:
        key = self.node_key.get(i)
        if key is not None:
            return key
        g = self.ix.innermost(i)
        if g is None:
            return None
        gid = id(g)
        if gid not in self.memo:
            self.memo[gid] = _item_of_group(self.scope, self.group_key, g)
        return self.memo[gid]

    def folds(self, p: int | None) -> bool:
        """True when values from operator ``p`` are drawn like weights, not as edges: it was
        folded here, or (constants folded) it is a constant operator of another group, such
        as the DequantizeLinear of a QDQ weight that lives beside its first consumer."""
        if p is None or p < 0:
            return False
        return p in self.folded_nodes or (self.fold and self.ix.is_constant_op(p))

    def member_inputs(self, nodes: list[int]) -> list[tuple[int | None, str]]:
        out = []
        for i in nodes:
            for v in self.ix.node(i).inputs:
                if v and not self.ix.is_initializer(v):
                    out.append((self.ix.producer.get(v), v))
        return out

    def edges(self) -> list[LevelEdge]:
        """Edges into operator and chunk items from their own inputs; edges into group items
        from the index's cross-group value uses (so no group's operators are walked)."""
        pairs: dict[tuple[str, str], list[str]] = {}
        inputs: dict[str, str] = {}

        def link(src: str | None, dst: str, v: str) -> None:
            if src is None:
                src = inputs.get(v) or self.add_io("input", v, inputs)
            if src != dst:
                values = pairs.setdefault((src, dst), [])
                if v not in values:
                    values.append(v)

        for item in list(self.items):
            if item.kind == "node":
                members = [item.node]
            elif item.kind == "chunk":
                members = item.nodes
            else:
                continue
            for p, v in self.member_inputs(members):
                if not self.folds(p):
                    link(self.item_of_node(p) if p is not None else None, item.key, v)
        self.ix.prepare()
        for p, c, v in self.ix.cross or ():
            dst = self.item_of_node(c)
            if dst is None or dst[0] in "nc" or self.folds(p):
                continue
            link(self.item_of_node(p) if p >= 0 else None, dst, v)
        outputs: dict[str, str] = {}
        for v in self.ix.boundary(self.scope)[1]:
            p = self.ix.producer.get(v)
            src = self.item_of_node(p) if p is not None else None
            if src is not None:
                pairs.setdefault((src, self.add_io("output", v, outputs)), []).append(v)
        return [LevelEdge(s, d, vals) for (s, d), vals in pairs.items()]

    def add_io(self, kind: str, value: str, seen: dict[str, str]) -> str:
        prefix = "i" if kind == "input" else "o"
        if len(seen) >= MAX_IO:
            key = f"{prefix}:*"
            if key not in self.more:
                self.more.add(key)
                self.add(LevelItem(key, kind, f"more {kind}s", "", "io", 140, 30, value="*"))
            seen[value] = key
            return key
        vi = self.ix.value_info(value)
        detail = (vi.type_text or _describe(vi.dtype, vi.shape)) if vi is not None else ""
        key = f"{prefix}:{value}"
        label = value.rstrip("/").rsplit("/", 1)[-1] or value  # exporter paths: keep the tail
        width = self.width(label, detail, 110, 280, 40)
        self.add(LevelItem(key, kind, label, detail, "io", width, 42, value=value))
        seen[value] = key
        return key


def _item_of_node(
    ix: ModelIndex, scope: Group, node_key: dict[int, str], group_key: dict[int, str], i: int
) -> str | None:
    key = node_key.get(i)
    if key is not None:
        return key
    g = ix.innermost(i)
    return _item_of_group(scope, group_key, g) if g is not None else None


def _item_of_group(scope: Group, group_key: dict[int, str], g: Group | None) -> str | None:
    """The item showing group ``g`` (itself or an ancestor), None when outside the scope."""
    while g is not None:
        key = group_key.get(id(g))
        if key is not None:
            return key
        if g is scope:
            return None
        g = g.parent
    return None


def _describe(dtype: str | None, shape: tuple | None) -> str:
    if shape is None:
        return dtype or ""
    dims = "×".join(_dim_text(d) for d in shape) or "scalar"
    return f"{dtype or '?'} [{dims}]"


def _dim_text(d: object, limit: int = 10) -> str:
    """A dimension for a node's one-line detail. Long symbolic names are shortened at their
    middle ('p2o.DynamicDimension.0' -> 'p2o…on.0') so that the whole shape stays readable
    instead of the line being elided across its fixed extents."""
    if d is None:
        return "?"
    text = str(d)
    if isinstance(d, int) or len(text) <= limit:
        return text
    return f"{text[:3]}…{text[-4:]}"


def build_level(
    index: ModelIndex,
    scope: Group,
    depth: int,
    measure: Measure = estimate,
    fold_constants: bool = True,
) -> LevelView:
    """Items and edges of ``scope`` at ``depth`` (see the module docstring).

    With ``fold_constants`` a constant operator (Constant, ConstantOfShape without inputs)
    is represented by the item of its first consumer instead of a box of its own.
    """
    requested = depth
    depth = max(depth, min(OPERATORS, scope.level + 1))
    notes: list[str] = []
    aggregated = False
    while True:
        b = _Builder(index, scope, depth, False, measure, fold_constants)
        if b.expand(scope, SOFT_LIMIT):
            break
        b = _Builder(index, scope, depth, True, measure, fold_constants)
        aggregated = True
        if b.expand(scope, HARD_LIMIT):
            break
        if depth <= scope.level + 1:  # the scope's own contents: show them all
            b = _Builder(index, scope, depth, True, measure, fold_constants)
            b.expand(scope, 1 << 62)
            break
        depth -= 1
        notes.append(
            f"Too many items for the {LEVEL_NAMES[depth + 1]} level here; "
            f"showing {LEVEL_NAMES[depth]}. Open a group to see more."
        )
    if aggregated and any(it.kind == "repeat" for it in b.items):
        notes.append("Runs of identical consecutive groups are shown once with ×N.")
    b.fold_constants()
    if b.folded:
        notes.append(f"{b.folded:,} constant operators are drawn inside their consumers.")
    edges = b.edges()
    by_key = {it.key: it for it in b.items}
    return LevelView(
        scope, depth, requested, b.items, edges, by_key, notes, aggregated, b.node_key, b.group_key
    )


def chunk_scope(index: ModelIndex, item: LevelItem) -> Group:
    """A synthetic group for a chunk item, so a long operator list can be opened in parts."""
    parent = item.group
    assert parent is not None
    g = Group(item.key, item.label, "chunk", parent.level, nodes=list(item.nodes), parent=parent)
    g.category = parent.category
    return g
