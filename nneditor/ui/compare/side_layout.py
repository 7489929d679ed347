"""Where each side's items go in the side-by-side view (Qt-free).

One layered layout (:mod:`nneditor.layout`) of the *merged* graph: a matched slot is one node,
an unmatched item a node of its own, the edges of both levels together. Each side then shows
its own items at their slot's place and draws only its own edges along the merged routes.

Invariants:
- A matched slot's two items get the same position and size (the larger of the two), so
  matched blocks sit on the same row and column in both views.
- Only-in-A and only-in-B items never share a rank (row): where they would, the B-only item
  is pushed below by a separating edge that neither side draws, so each stands in a gap row
  of the other side.
- Both layouts have the same width and height, so the two scenes scroll together.
"""

from __future__ import annotations

from dataclasses import replace

from nneditor.layout import EdgeRoute, Layout, LayoutNode, layered_layout
from nneditor.ui.canvas.level import LevelView
from nneditor.ui.compare.alignment import LevelPair

#: layout passes that may add separating edges (each pass is one more layout)
SEPARATION_PASSES = 3


def _separators(pair: LevelPair, lay: Layout) -> list[tuple[int, int]]:
    by_rank: dict[int, tuple[list[int], list[int]]] = {}
    for k, s in enumerate(pair.slots):
        if not s.matched:
            sides = by_rank.setdefault(lay.ranks[k], ([], []))
            sides[0 if s.a is not None else 1].append(k)
    return [(only_a[0], v) for only_a, only_b in by_rank.values() if only_a for v in only_b]


def merged_layout(pair: LevelPair, node_gap: float, rank_gap: float) -> Layout:
    """The layout of the merged graph; node ids are slot indices."""
    nodes = []
    for k, s in enumerate(pair.slots):
        items = [it for it in (s.a, s.b) if it is not None]
        nodes.append(LayoutNode(k, max(i.width for i in items), max(i.height for i in items)))
    edges = [(pair.slot_of_a[e.src], pair.slot_of_a[e.dst]) for e in pair.a.edges]
    edges += [(pair.slot_of_b[e.src], pair.slot_of_b[e.dst]) for e in pair.b.edges]
    edges = list(dict.fromkeys(edges))
    lay = layered_layout(nodes, edges, node_gap=node_gap, rank_gap=rank_gap)
    for _ in range(SEPARATION_PASSES):
        extra = [e for e in _separators(pair, lay) if e not in edges]
        if not extra:
            break
        edges += extra
        lay = layered_layout(nodes, edges, node_gap=node_gap, rank_gap=rank_gap)
    return lay


def side_layouts(
    pair: LevelPair, node_gap: float, rank_gap: float
) -> tuple[tuple[LevelView, Layout], tuple[LevelView, Layout]]:
    """(level, layout) for A and for B, ready for ``GraphScene.show_level``."""
    lay = merged_layout(pair, node_gap, rank_gap)
    routes = {(r.src, r.dst): r.points for r in lay.edges}

    def side(level: LevelView, slot_of: dict[str, int]) -> tuple[LevelView, Layout]:
        items = [
            replace(it, width=lay.sizes[slot_of[it.key]][0], height=lay.sizes[slot_of[it.key]][1])
            for it in level.items
        ]
        edges = [
            EdgeRoute(e.src, e.dst, routes.get((slot_of[e.src], slot_of[e.dst]), []))
            for e in level.edges
        ]
        shown = replace(level, items=items, by_key={it.key: it for it in items})
        return shown, Layout(
            positions={it.key: lay.positions[slot_of[it.key]] for it in items},
            sizes={it.key: (it.width, it.height) for it in items},
            edges=edges,
            width=lay.width,
            height=lay.height,
            ranks={it.key: lay.ranks[slot_of[it.key]] for it in items},
        )

    return side(pair.a, pair.slot_of_a), side(pair.b, pair.slot_of_b)
