"""Polyline routes in canonical top-to-bottom coordinates (x across ranks, y down ranks).

Invariants:
- A route starts on the boundary of its source box and ends on the boundary of its target
  box: bottom side to top side for a downward edge, top to bottom for a reversed (cycle)
  edge, right side to right side for a self loop.
- Between its ends a route passes each virtual node vertically (band top, band bottom), so a
  long edge never cuts through a rank's node boxes diagonally.
- Parallel edges are spread by a fixed offset along x, clamped inside the end boxes.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """A node in canonical coordinates: centre x, top y, breadth (x extent), depth (y extent)."""

    cx: float
    top: float
    breadth: float
    depth: float

    @property
    def bottom(self) -> float:
        return self.top + self.depth

    def clamp(self, x: float) -> float:
        half = self.breadth / 2
        return min(max(x, self.cx - half), self.cx + half)


def spread(index: int, count: int, step: float) -> float:
    """Offset of the ``index``-th of ``count`` parallel edges, centred on 0."""
    return (index - (count - 1) / 2) * step


@dataclass(frozen=True)
class Trunk:
    """The virtual nodes below one source as points, shared by all its long edges.

    ``ends[j]`` indexes the last point of trunk node ``j``; ``keep`` lists the points that
    are not inside a vertical run, so a route along a prefix costs its corners, not its length.
    """

    points: list[Point]
    ends: list[int]
    keep: list[int]

    @classmethod
    def build(cls, via: Sequence[tuple[float, float, float]]) -> Trunk:
        """``via``: (x, band top, band bottom) of each trunk node, top to bottom."""
        points: list[Point] = []
        ends: list[int] = []
        for x, band_top, band_bottom in via:
            points.append((x, band_top))
            if band_bottom != band_top:
                points.append((x, band_bottom))
            ends.append(len(points) - 1)
        keep = [
            i
            for i, (x, _) in enumerate(points)
            if i == 0 or points[i - 1][0] != x or (i + 1 < len(points) and points[i + 1][0] != x)
        ]
        return cls(points, ends, keep)

    def shifted(self, dx: float) -> Trunk:
        return Trunk([(x + dx, y) for x, y in self.points], self.ends, self.keep)

    def prefix(self, nodes: int, offset: float) -> list[Point]:
        """Corner points of the first ``nodes`` trunk nodes, moved ``offset`` along x."""
        if nodes <= 0:
            return []
        last = self.ends[nodes - 1]
        picked = self.keep[: bisect.bisect_left(self.keep, last)] + [last]
        return [(self.points[i][0] + offset, self.points[i][1]) for i in picked]


def downward_route(src: Box, dst: Box, via: list[Point], offset: float) -> list[Point]:
    """Route from ``src``'s bottom through the ``via`` points to ``dst``'s top."""
    start = (src.clamp(src.cx + offset), src.bottom)
    end = (dst.clamp(dst.cx + offset), dst.top)
    return simplify([start, *via, end])


def self_loop(box: Box, index: int, size: float) -> list[Point]:
    """A small rectangular loop on the right side of ``box``; loops nest outwards."""
    right = box.cx + box.breadth / 2
    reach = right + size * (index + 1)
    y1 = box.top + box.depth * 0.3
    y2 = box.top + box.depth * 0.7
    return [(right, y1), (reach, y1), (reach, y2), (right, y2)]


def simplify(points: list[Point]) -> list[Point]:
    """Drop interior points that lie on a straight vertical run."""
    if len(points) < 3:
        return points
    out = [points[0]]
    for prev_x, cur, nxt in zip((p[0] for p in points), points[1:-1], points[2:], strict=False):
        if not (prev_x == cur[0] == nxt[0]):
            out.append(cur)
    out.append(points[-1])
    return out
