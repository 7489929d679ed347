"""Proper layering (virtual nodes) and crossing reduction for one connected component.

Invariants:
- After :func:`build_proper`, every edge joins two adjacent ranks: a DAG edge spanning ``k``
  ranks runs through ``k - 1`` virtual nodes (ids after the real ones) of its source's trunk,
  except edges left straight because the virtual-node budget ran out.
- ``layers[r]`` lists the nodes of rank ``r`` left to right; ``pos[v]`` is ``v``'s index in
  its layer. Every function keeps the two consistent.
- Work is bounded by iteration counts and a deterministic work budget, never by wall-clock
  time, so the same input always gives the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Barycenter sweeps (one down + one up each) without improvement before giving up.
PATIENCE = 3
#: Upper bound on barycenter sweep rounds.
MAX_ROUNDS = 16
#: Upper bound on neighbour-pair comparisons spent in the transposition heuristic.
TRANSPOSE_BUDGET = 400_000
#: Upper bound on virtual nodes per layout (see :func:`build_proper`).
VIRTUAL_BUDGET = 40_000


@dataclass
class ProperGraph:
    """A layered graph whose edges all join adjacent ranks."""

    n_real: int
    rank: list[int]
    up: list[list[int]]
    down: list[list[int]]
    up_w: list[list[int]]
    down_w: list[list[int]]
    trunks: dict[int, list[int]]  # source -> its virtual nodes, one per rank below it
    used: list[int]  # per layout edge: trunk nodes it runs through (-1: drawn straight)
    layers: list[list[int]]

    @property
    def size(self) -> int:
        return len(self.rank)

    def is_virtual(self, v: int) -> bool:
        return v >= self.n_real


def build_proper(
    n_real: int,
    rank: Sequence[int],
    edges: Sequence[tuple[int, int, int]],
    budget: int = VIRTUAL_BUDGET,
) -> ProperGraph:
    """Split every edge ``(u, v, multiplicity)`` with ``rank[u] < rank[v]`` into unit steps.

    Long edges leaving the same node share one trunk of virtual nodes (one per rank) and
    branch off right above their targets, so a tensor feeding many distant consumers costs
    one line, not one per consumer. Virtual nodes go to the shortest edges first; an edge
    that would take the total past ``budget`` keeps the chain ``[u, v]``, is left out of
    ordering and placement, and is drawn straight (a safeguard for pathological levels).
    """
    g = ProperGraph(n_real, list(rank), [], [], [], [], {}, [], [])
    for _ in range(n_real):
        _add_node(g, -1)
    g.used = [0] * len(edges)
    for i in sorted(range(len(edges)), key=lambda i: (rank[edges[i][1]] - rank[edges[i][0]], i)):
        u, v, _ = edges[i]
        trunk = g.trunks.setdefault(u, [])
        span = rank[v] - rank[u]
        missing = span - 1 - len(trunk)
        if missing > budget:
            g.used[i] = -1
            continue
        for r in range(rank[u] + 1 + len(trunk), rank[v]):
            trunk.append(_add_node(g, r))
        budget -= max(missing, 0)
        g.used[i] = span - 1
    _connect(g, edges)
    g.layers = [[] for _ in range(max(g.rank) + 1 if g.rank else 0)]
    return g


def _connect(g: ProperGraph, edges: Sequence[tuple[int, int, int]]) -> None:
    """Adjacency in edge input order; trunk steps weigh as much as the edges they carry."""
    through: dict[int, list[int]] = {}  # source -> multiplicity passing each trunk node
    for (u, _, mult), used in zip(edges, g.used, strict=True):
        if used > 0:
            counts = through.setdefault(u, [0] * len(g.trunks[u]))
            counts[used - 1] += mult
    for counts in through.values():
        for j in range(len(counts) - 2, -1, -1):
            counts[j] += counts[j + 1]
    steps: dict[tuple[int, int], int] = {}
    for (u, v, mult), used in zip(edges, g.used, strict=True):
        if used == 0:
            steps[(u, v)] = steps.get((u, v), 0) + mult
        elif used > 0:
            trunk = g.trunks[u]
            if (u, trunk[0]) not in steps:
                steps[(u, trunk[0])] = through[u][0]
                for j in range(1, len(trunk)):
                    steps[(trunk[j - 1], trunk[j])] = through[u][j]
            steps[(trunk[used - 1], v)] = steps.get((trunk[used - 1], v), 0) + mult
    for (a, b), mult in steps.items():
        g.down[a].append(b)
        g.down_w[a].append(mult)
        g.up[b].append(a)
        g.up_w[b].append(mult)


def _add_node(g: ProperGraph, r: int) -> int:
    """Append an empty node (rank ``r``, or keep the given rank for real nodes) and return it."""
    v = len(g.up)
    if v >= len(g.rank):
        g.rank.append(r)
    g.up.append([])
    g.down.append([])
    g.up_w.append([])
    g.down_w.append([])
    return v


def initial_order(g: ProperGraph) -> list[int]:
    """Fill ``g.layers`` in depth-first preorder from the sources; return ``pos``."""
    seen = [False] * g.size
    for root in range(g.size):
        if seen[root] or g.up[root]:
            continue
        seen[root] = True
        stack = [root]
        while stack:
            v = stack.pop()
            g.layers[g.rank[v]].append(v)
            for w in reversed(g.down[v]):
                if not seen[w]:
                    seen[w] = True
                    stack.append(w)
    return positions(g)


def positions(g: ProperGraph) -> list[int]:
    pos = [0] * g.size
    for layer in g.layers:
        for i, v in enumerate(layer):
            pos[v] = i
    return pos


class CrossingCounter:
    """Counts straight-line crossings between adjacent layers with a numpy merge sort."""

    def __init__(self, g: ProperGraph) -> None:
        src = [u for u in range(g.size) for _ in g.down[u]]
        dst = [w for u in range(g.size) for w in g.down[u]]
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        self.layer = np.asarray([g.rank[u] for u in src], dtype=np.int64)
        self.width = max((len(layer) for layer in g.layers), default=0) + 1

    def count(self, pos: Sequence[int]) -> int:
        if len(self.src) < 2:
            return 0
        p = np.asarray(pos, dtype=np.int64)
        pu, pv = p[self.src], p[self.dst]
        order = np.lexsort((pv, pu, self.layer))
        return count_inversions(self.layer[order] * self.width + pv[order])


def count_inversions(values: np.ndarray) -> int:
    """Number of pairs ``i < j`` with ``values[i] > values[j]`` (values >= 0), O(n log^2 n)."""
    a = np.asarray(values, dtype=np.int64)
    n = len(a)
    if n < 2:
        return 0
    scale = int(a.max()) + 1
    idx = np.arange(n, dtype=np.int64)
    total = 0
    width = 1
    while width < n:
        pair = idx // (2 * width)
        right = (idx // width) % 2 == 1
        key = pair * scale + a
        left_keys = key[~right]
        right_keys = key[right]
        right_pair = pair[right]
        left_end = np.searchsorted(left_keys, (right_pair + 1) * scale, side="left")
        not_greater = np.searchsorted(left_keys, right_keys, side="right")
        total += int((left_end - not_greater).sum())
        a = np.sort(key) - pair * scale
        width *= 2
    return total


def _sweep(g: ProperGraph, pos: list[int], downward: bool, flip_ties: bool) -> None:
    """One barycenter pass; nodes without neighbours on the fixed side keep their slots.

    Equal barycenters keep their current order, or reverse it when ``flip_ties`` is set;
    alternating the two lets the sweeps leave plateaus (a zigzag path, for example).
    """
    tie = -1 if flip_ties else 1
    ranks = range(1, len(g.layers)) if downward else range(len(g.layers) - 2, -1, -1)
    nbrs = g.up if downward else g.down
    for r in ranks:
        layer = g.layers[r]
        if len(layer) < 2:
            continue
        movable: list[tuple[float, int, int]] = []
        for i, v in enumerate(layer):
            ns = nbrs[v]
            if ns:
                movable.append((sum(pos[u] for u in ns) / len(ns), tie * i, v))
        if not movable:
            continue
        movable.sort()
        fixed = {i for i, v in enumerate(layer) if not nbrs[v]}
        it = iter(movable)
        new = [layer[i] if i in fixed else next(it)[2] for i in range(len(layer))]
        g.layers[r] = new
        for i, v in enumerate(new):
            pos[v] = i


def _snapshot(g: ProperGraph) -> list[list[int]]:
    return [list(layer) for layer in g.layers]


def reduce_crossings(g: ProperGraph) -> int:
    """Order ``g.layers`` to reduce crossings; return the crossing count of the result."""
    pos = initial_order(g)
    counter = CrossingCounter(g)
    best = counter.count(pos)
    best_layers = _snapshot(g)
    stale = 0
    for round_no in range(MAX_ROUNDS):
        if best == 0 or stale >= PATIENCE:
            break
        improved = False
        for downward in (True, False):
            _sweep(g, pos, downward, flip_ties=round_no % 2 == 1)
            crossings = counter.count(pos)
            if crossings < best:
                best, best_layers, improved = crossings, _snapshot(g), True
        stale = 0 if improved else stale + 1
    g.layers = best_layers
    pos = positions(g)
    if best:
        best -= transpose(g, pos)
    return best


def _pair_crossings(a: list[int], b: list[int], pos: list[int]) -> tuple[int, int]:
    """Crossings between the edges of two neighbours ``(a left of b, b left of a)``."""
    ab = ba = 0
    for x in a:
        px = pos[x]
        for y in b:
            py = pos[y]
            if px > py:
                ab += 1
            elif px < py:
                ba += 1
    return ab, ba


def transpose(g: ProperGraph, pos: list[int], budget: int = TRANSPOSE_BUDGET) -> int:
    """Swap adjacent nodes while that strictly removes crossings; return crossings removed."""
    removed = 0
    improved = True
    while improved and budget > 0:
        improved = False
        for layer in g.layers:
            for i in range(len(layer) - 1):
                v, w = layer[i], layer[i + 1]
                up_vw, up_wv = _pair_crossings(g.up[v], g.up[w], pos)
                dn_vw, dn_wv = _pair_crossings(g.down[v], g.down[w], pos)
                budget -= 1 + len(g.up[v]) * len(g.up[w]) + len(g.down[v]) * len(g.down[w])
                gain = (up_vw + dn_vw) - (up_wv + dn_wv)
                if gain > 0:
                    layer[i], layer[i + 1] = w, v
                    pos[v], pos[w] = i + 1, i
                    removed += gain
                    improved = True
            if budget <= 0:
                break
    return removed
