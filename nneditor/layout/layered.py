"""Deterministic Sugiyama-style layered layout of one hierarchy level.

Pipeline: index nodes in input order -> reverse DFS back edges (cycles) -> longest-path ranks
plus a balancing pass -> per weakly connected component: virtual nodes for long edges (the
long edges leaving one node share one trunk), barycenter sweeps and transpositions to reduce
crossings, L1 coordinate assignment -> edge routes through the virtual nodes -> components
side by side in order of their first node.

Multiple edges between the same pair are laid out as one and drawn a few units apart; self
loops are small loops on the node's right side (below it for LR) and do not affect ranks.

Invariants:
- Same input (order included) -> identical :class:`Layout`. Node ids are only ever used as
  dict keys for lookups; every loop runs over input order or integer indices.
- Positions are top-left corners; the drawing's bounding box starts at (0, 0) and has size
  (``width``, ``height``), routes (self loops included) inside it.
- ``ranks[u] < ranks[v]`` for every edge except self loops and edges reversed to break a
  cycle (flagged ``EdgeRoute.reversed``); each component's smallest rank is 0.
- In one rank no two boxes overlap: neighbours are at least ``node_gap`` apart.
- ``direction="TB"`` routes run from the bottom centre of the source to the top centre of
  the target; ``"LR"`` from the right centre to the left centre (same layout, axes swapped).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from nneditor.layout.ordering import VIRTUAL_BUDGET, build_proper, reduce_crossings
from nneditor.layout.placement import assign_x
from nneditor.layout.ranking import (
    Pair,
    assign_ranks,
    break_cycles,
    components,
    normalize_ranks,
    unique_pairs,
)
from nneditor.layout.routing import Box, Point, Trunk, downward_route, self_loop, spread

DIRECTIONS = ("TB", "LR")


@dataclass(frozen=True)
class LayoutNode:
    """An item to place; ``width`` and ``height`` are its size on the canvas."""

    id: Hashable
    width: float
    height: float


@dataclass
class EdgeRoute:
    """Polyline of one input edge, from the source box's boundary to the target box's."""

    src: Hashable
    dst: Hashable
    points: list[tuple[float, float]]
    reversed: bool = False  # drawn against the rank direction to break a cycle


@dataclass
class Layout:
    """Top-left positions, sizes, ranks and edge routes (in input edge order) of one level."""

    positions: dict[Hashable, tuple[float, float]]
    sizes: dict[Hashable, tuple[float, float]]
    edges: list[EdgeRoute]
    width: float
    height: float
    ranks: dict[Hashable, int]
    crossings: int = 0  # crossings left between adjacent ranks (diagnostic)
    direction: str = "TB"


@dataclass
class _Component:
    """One laid-out component in canonical (TB) coordinates before it is shifted into place."""

    nodes: list[int]
    cx: dict[int, float]
    top: dict[int, float]
    trunks: dict[int, Trunk] = field(default_factory=dict)  # by source node
    used: dict[Pair, int] = field(default_factory=dict)  # trunk nodes per layout edge
    low: float = 0.0
    high: float = 0.0
    bottom: float = 0.0
    crossings: int = 0
    virtual: int = 0


@dataclass
class _Options:
    node_gap: float
    rank_gap: float
    breadth: list[float]
    depth: list[float]

    @property
    def loop_size(self) -> float:
        return max(4.0, min(12.0, self.node_gap / 2))

    @property
    def parallel_step(self) -> float:
        return max(2.0, min(6.0, self.node_gap / 4))


def layered_layout(
    nodes: Sequence[LayoutNode],
    edges: Sequence[tuple[Hashable, Hashable]],
    *,
    direction: str = "TB",
    node_gap: float = 24,
    rank_gap: float = 56,
) -> Layout:
    """Lay out one level: ``nodes`` with sizes, ``edges`` as (source id, target id) pairs.

    Raises ``ValueError`` for an unknown direction, negative gaps, bad sizes, duplicate node
    ids or edges naming unknown nodes.
    """
    _check_options(direction, node_gap, rank_gap)
    index = _index_nodes(nodes)
    links = _index_edges(edges, index)
    lr = direction == "LR"
    opts = _Options(
        float(node_gap),
        float(rank_gap),
        [float(n.height if lr else n.width) for n in nodes],
        [float(n.width if lr else n.height) for n in nodes],
    )
    n = len(nodes)
    back = break_cycles(n, unique_pairs(links))
    mult: dict[Pair, int] = {}
    for u, v in links:
        if u != v:
            key = (v, u) if (u, v) in back else (u, v)
            mult[key] = mult.get(key, 0) + 1
    rank = assign_ranks(n, list(mult))
    groups = components(n, list(mult))
    normalize_ranks(rank, groups)
    parts = _layout_components(groups, rank, mult, links, opts)
    return _assemble(nodes, links, back, rank, parts, opts, direction)


def _check_options(direction: str, node_gap: float, rank_gap: float) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"Layout direction {direction!r} is not supported; use 'TB' or 'LR'.")
    for name, value in (("node_gap", node_gap), ("rank_gap", rank_gap)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"Layout {name} must be a finite number >= 0, not {value!r}.")


def _index_nodes(nodes: Sequence[LayoutNode]) -> dict[Hashable, int]:
    index: dict[Hashable, int] = {}
    for i, node in enumerate(nodes):
        if node.id in index:
            raise ValueError(f"Layout node id {node.id!r} appears more than once.")
        for name, value in (("width", node.width), ("height", node.height)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"Layout node {node.id!r} has {name} {value!r}; sizes must be finite and >= 0."
                )
        index[node.id] = i
    return index


def _index_edges(
    edges: Sequence[tuple[Hashable, Hashable]], index: dict[Hashable, int]
) -> list[Pair]:
    links: list[Pair] = []
    for src, dst in edges:
        for end in (src, dst):
            if end not in index:
                raise ValueError(f"Layout edge {src!r} -> {dst!r} names unknown node {end!r}.")
        links.append((index[src], index[dst]))
    return links


def _layout_components(
    groups: list[list[int]],
    rank: list[int],
    mult: dict[Pair, int],
    links: list[Pair],
    opts: _Options,
) -> list[_Component]:
    """Lay out every component and shift it right of the previous one."""
    group_of = [0] * len(rank)
    for gi, group in enumerate(groups):
        for v in group:
            group_of[v] = gi
    per_group: list[list[tuple[int, int, int]]] = [[] for _ in groups]
    for (u, v), m in mult.items():
        per_group[group_of[u]].append((u, v, m))
    loop_reach = [0.0] * len(rank)
    loops = [0] * len(rank)
    for u, v in links:
        if u == v:
            loops[u] += 1
            loop_reach[u] = loops[u] * opts.loop_size
    parts: list[_Component] = []
    cursor = 0.0
    budget = VIRTUAL_BUDGET
    for group, group_edges in zip(groups, per_group, strict=True):
        part = _layout_component(group, rank, group_edges, opts, budget)
        budget -= part.virtual
        reach = [part.cx[v] + opts.breadth[v] / 2 + loop_reach[v] for v in group]
        part.high = max([part.high, *reach])
        shift = cursor - part.low
        part.cx = {v: x + shift for v, x in part.cx.items()}
        part.trunks = {u: trunk.shifted(shift) for u, trunk in part.trunks.items()}
        cursor += part.high - part.low + opts.node_gap
        parts.append(part)
    return parts


def _layout_component(
    group: list[int],
    rank: list[int],
    edges: list[tuple[int, int, int]],
    opts: _Options,
    budget: int,
) -> _Component:
    local = {v: i for i, v in enumerate(group)}
    g = build_proper(
        len(group),
        [rank[v] for v in group],
        [(local[u], local[v], m) for u, v, m in edges],
        budget,
    )
    crossings = reduce_crossings(g)
    virtual = g.size - len(group)
    breadth = [opts.breadth[v] for v in group] + [0.0] * virtual
    gaps = [opts.node_gap] * len(group) + [opts.node_gap / 2] * virtual
    x = assign_x(g, breadth, gaps)
    band = [0.0] * len(g.layers)
    for v in group:
        band[rank[v]] = max(band[rank[v]], opts.depth[v])
    band_top = [0.0] * len(band)
    for r in range(1, len(band)):
        band_top[r] = band_top[r - 1] + band[r - 1] + opts.rank_gap
    part = _Component(
        nodes=group,
        cx={v: x[local[v]] for v in group},
        top={v: band_top[rank[v]] + (band[rank[v]] - opts.depth[v]) / 2 for v in group},
        crossings=crossings,
        virtual=virtual,
    )
    for (u, v, _), used in zip(edges, g.used, strict=True):
        part.used[(u, v)] = used
    for u, trunk in g.trunks.items():
        if trunk:
            via = [
                (x[w], band_top[g.rank[w]], band_top[g.rank[w]] + band[g.rank[w]]) for w in trunk
            ]
            part.trunks[group[u]] = Trunk.build(via)
    extents = [(x[i] - breadth[i] / 2, x[i] + breadth[i] / 2) for i in range(g.size)]
    part.low = min(lo for lo, _ in extents)
    part.high = max(hi for _, hi in extents)
    part.bottom = band_top[-1] + band[-1] if band else 0.0
    return part


def _routes(
    links: list[Pair], back: set[Pair], boxes: list[Box], parts: list[_Component], opts: _Options
) -> list[tuple[list[Point], bool]]:
    trunks: dict[int, Trunk] = {}
    used: dict[Pair, int] = {}
    for part in parts:
        trunks.update(part.trunks)
        used.update(part.used)
    keys = [(v, u) if (u, v) in back else (u, v) for u, v in links]
    count: dict[Pair, int] = {}
    for key in keys:
        count[key] = count.get(key, 0) + 1
    seen: dict[Pair, int] = {}
    routes: list[tuple[list[Point], bool]] = []
    for (u, v), key in zip(links, keys, strict=True):
        k = seen.get(key, 0)
        seen[key] = k + 1
        if u == v:
            routes.append((self_loop(boxes[u], k, opts.loop_size), False))
            continue
        offset = spread(k, count[key], opts.parallel_step)
        via = trunks[key[0]].prefix(used[key], offset) if used[key] > 0 else []
        points = downward_route(boxes[key[0]], boxes[key[1]], via, offset)
        flipped = key != (u, v)
        routes.append((points[::-1] if flipped else points, flipped))
    return routes


def _assemble(
    nodes: Sequence[LayoutNode],
    links: list[Pair],
    back: set[Pair],
    rank: list[int],
    parts: list[_Component],
    opts: _Options,
    direction: str,
) -> Layout:
    boxes = [Box(0.0, 0.0, 0.0, 0.0)] * len(nodes)
    for part in parts:
        for v in part.nodes:
            boxes[v] = Box(part.cx[v], part.top[v], opts.breadth[v], opts.depth[v])
    routes = _routes(links, back, boxes, parts, opts)
    xs = [b.cx - b.breadth / 2 for b in boxes] + [b.cx + b.breadth / 2 for b in boxes]
    ys = [b.top for b in boxes] + [b.bottom for b in boxes]
    for pts, _ in routes:
        xs.extend(p[0] for p in pts)
        ys.extend(p[1] for p in pts)
    dx, dy = (min(xs), min(ys)) if xs else (0.0, 0.0)
    lr = direction == "LR"

    def place(x: float, y: float) -> Point:
        x, y = x - dx, y - dy
        return (y, x) if lr else (x, y)

    positions: dict[Hashable, tuple[float, float]] = {}
    sizes: dict[Hashable, tuple[float, float]] = {}
    ranks: dict[Hashable, int] = {}
    for i, node in enumerate(nodes):
        box = boxes[i]
        positions[node.id] = place(box.cx - box.breadth / 2, box.top)
        sizes[node.id] = (float(node.width), float(node.height))
        ranks[node.id] = rank[i]
    edge_routes = [
        EdgeRoute(nodes[u].id, nodes[v].id, [place(*p) for p in pts], flipped)
        for (u, v), (pts, flipped) in zip(links, routes, strict=True)
    ]
    width, height = place(max(xs), max(ys)) if xs else (0.0, 0.0)
    return Layout(
        positions,
        sizes,
        edge_routes,
        width,
        height,
        ranks,
        sum(p.crossings for p in parts),
        direction,
    )
