"""Cross-axis coordinates for an ordered layered graph.

The placement minimises ``sum(weight(u, v) * |x[u] - x[v]|)`` over all edges subject to the
layer order and a minimum separation between neighbours in a layer. It runs a few rounds of
exact per-layer minimisation (block coordinate descent): with the other layers fixed, one
layer's problem is an isotonic L1 regression, solved exactly by pool-adjacent-violators with
weighted medians. Edge weights favour straight virtual chains (long edges) and straight
real-to-real chains (the main path of a network) over the short ends of long edges.

Invariants:
- The result keeps every layer's order and ``x[b] - x[a] >= separation(a, b)`` for
  neighbours ``a`` left of ``b`` (exactly, up to float rounding of the offsets).
- Deterministic: no randomness, no wall-clock bounds; ties resolve to interval midpoints.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from nneditor.layout.ordering import ProperGraph

#: Weight of an edge by how many of its ends are virtual (0, 1 or 2).
EDGE_WEIGHT = (2, 1, 8)
#: Block coordinate descent rounds (alternating top-down and bottom-up).
ROUNDS = 8
#: Stop early when no node moved more than this many units in a round.
TOLERANCE = 0.5


def _weight(g: ProperGraph, a: int, b: int, mult: int) -> int:
    return EDGE_WEIGHT[g.is_virtual(a) + g.is_virtual(b)] * mult


def _offsets(layer: Sequence[int], breadth: Sequence[float], gap: Sequence[float]) -> list[float]:
    """Cumulative minimum offsets ``s`` with ``x[i] - s[i]`` nondecreasing <=> separated."""
    s = [0.0] * len(layer)
    for i in range(1, len(layer)):
        a, b = layer[i - 1], layer[i]
        s[i] = s[i - 1] + (breadth[a] + breadth[b]) / 2 + max(gap[a], gap[b])
    return s


Term = tuple[float, int, int]  # (target, weight, side: 0 = upper neighbour, 1 = lower)


class _Block:
    """Pooled nodes of one layer: their sorted terms and a pointer to the weighted median.

    ``k`` is the smallest index whose cumulative weight reaches half the total; ``below``
    is the weight before ``k``. Merging inserts the smaller block into the larger and walks
    the pointer, so a layer costs O(terms log terms) rather than quadratic time.
    """

    __slots__ = ("terms", "total", "k", "below", "count", "current")

    def __init__(self, terms: list[Term], current: float) -> None:
        self.terms = terms
        self.total = sum(term[1] for term in terms)
        self.k = 0
        self.below = 0
        self.count = 1
        self.current = current  # sum of the members' present positions
        self._settle()

    def _settle(self) -> None:
        terms, total = self.terms, self.total
        while 2 * (self.below + terms[self.k][1]) < total:
            self.below += terms[self.k][1]
            self.k += 1
        while self.k > 0 and 2 * self.below >= total:
            self.k -= 1
            self.below -= terms[self.k][1]

    @property
    def value(self) -> float:
        """A minimiser of ``sum(w * |y - t|)``.

        When a whole interval minimises, its ends are two neighbours' positions. Between two
        neighbours on the same side (a fan-out or fan-in) the node is centred; between an
        upper and a lower neighbour (a chain) it aligns with the one nearer to where it is, so
        chains stay straight and bend once instead of drifting diagonally.
        """
        t, w, side = self.terms[self.k]
        if 2 * (self.below + w) != self.total:
            return t
        t2, _, side2 = self.terms[self.k + 1]
        if side == side2:
            return (t + t2) / 2
        here = self.current / self.count
        return t if abs(here - t) <= abs(here - t2) else t2

    def absorb(self, other: _Block) -> _Block:
        """Merge ``other`` into the larger of the two blocks and return that block."""
        big, small = (self, other) if len(self.terms) >= len(other.terms) else (other, self)
        for item in small.terms:
            at = bisect.bisect_right(big.terms, item)
            big.terms.insert(at, item)
            if at <= big.k:
                big.k += 1
                big.below += item[1]
            big.total += item[1]
        big.count += small.count
        big.current += small.current
        big._settle()
        return big


def _place_layer(
    current: Sequence[float], s: Sequence[float], terms: Sequence[list[Term]]
) -> list[float]:
    """Pool-adjacent-violators for isotonic L1 regression in ``y = x - s``."""
    blocks: list[_Block] = []
    for i, x in enumerate(current):
        block = _Block(sorted((t - s[i], w, side) for t, w, side in terms[i]), x - s[i])
        value = block.value
        while blocks and blocks[-1].value > value:
            block = blocks.pop().absorb(block)
            value = block.value
        blocks.append(block)
    xs: list[float] = []
    for block in blocks:
        value = block.value
        for _ in range(block.count):
            xs.append(value + s[len(xs)])
    return xs


def _neighbours(g: ProperGraph) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """Both-side neighbours of every node and the matching (weight, side) pairs."""
    nbrs: list[list[int]] = []
    meta: list[list[tuple[int, int]]] = []
    for v in range(g.size):
        nbrs.append(g.up[v] + g.down[v])
        mult = g.up_w[v] + g.down_w[v]
        n_up = len(g.up[v])
        meta.append(
            [
                (_weight(g, v, u, m), int(i >= n_up))
                for i, (u, m) in enumerate(zip(nbrs[-1], mult, strict=True))
            ]
        )
    return nbrs, meta


def assign_x(
    g: ProperGraph, breadth: Sequence[float], gap: Sequence[float], rounds: int = ROUNDS
) -> list[float]:
    """Centre coordinates for every node of ``g`` (real and virtual).

    ``breadth[v]`` is the node's extent along the layer, ``gap[v]`` the free space it wants
    next to its neighbours (the larger of two neighbours' gaps applies).
    """
    x = [0.0] * g.size
    offsets = [_offsets(layer, breadth, gap) for layer in g.layers]
    for layer, s in zip(g.layers, offsets, strict=True):
        centre = s[-1] / 2 if s else 0.0
        for v, off in zip(layer, s, strict=True):
            x[v] = off - centre
    nbrs, meta = _neighbours(g)
    dirty = [True] * len(g.layers)  # a clean layer's neighbours have not moved since it was placed
    for round_no in range(rounds):
        order = range(len(g.layers))
        if round_no % 2:
            order = order[::-1]
        moved = 0.0
        for r in order:
            if not dirty[r]:
                continue
            dirty[r] = False
            layer = g.layers[r]
            terms = [
                [(x[u], w, side) for u, (w, side) in zip(nbrs[v], meta[v], strict=True)]
                or [(x[v], 1, 0)]
                for v in layer
            ]
            placed = _place_layer([x[v] for v in layer], offsets[r], terms)
            changed = False
            for v, new in zip(layer, placed, strict=True):
                if new != x[v]:
                    moved = max(moved, abs(new - x[v]))
                    x[v] = new
                    changed = True
            if changed:
                for q in (r - 1, r + 1):
                    if 0 <= q < len(dirty):
                        dirty[q] = True
        if moved < TOLERANCE:
            break
    return x
