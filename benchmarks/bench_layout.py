"""Benchmark of nneditor.layout.layered_layout on generated hierarchy levels.

Run: ``python benchmarks/bench_layout.py [--repeat N]``.

Cases: (a) one transformer block at operator level (~400 nodes, chain heavy, with the
Shape/Gather/Unsqueeze/Concat side chains and Constant nodes a torch ONNX export has),
(b) a 2,000-node level of 24 flattened residual blocks with 8-way fan-out/fan-in,
(c) random DAGs of 1,000 nodes / 1,500 edges: uniform (edges span many ranks) and local
(edges between nearby nodes, closer to real networks).

Each case is also laid out by networkx (topological generations + ``multipartite_layout``;
a rank-only placement without crossing reduction), by grandalf's Sugiyama layout when that
package happens to be installed (it is not a dependency; nothing is installed for this), and
by a naive anchor (our ranks, rows in input order), all timed in the same run. Quality is the number of geometric crossings between
edge drawings (polylines for ours, straight centre-to-centre lines for the others).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Hashable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nneditor.layout import LayoutCache, LayoutNode, layered_layout  # noqa: E402
from nneditor.layout.ranking import assign_ranks, break_cycles, unique_pairs  # noqa: E402

Edge = tuple[Hashable, Hashable]
Level = tuple[list[LayoutNode], list[Edge]]
Segments = np.ndarray  # (k, 4): x1, y1, x2, y2


class LevelBuilder:
    """Builds an operator level: ``op(kind, *inputs)`` returns the new node's id."""

    def __init__(self) -> None:
        self.nodes: list[LayoutNode] = []
        self.edges: list[Edge] = []

    def op(self, kind: str, *inputs: str) -> str:
        nid = f"{kind}_{len(self.nodes)}"
        self.nodes.append(LayoutNode(nid, 36.0 + 7.0 * len(kind), 28.0))
        self.edges.extend((src, nid) for src in inputs)
        return nid

    def const(self, consumer_inputs: list[str]) -> str:
        c = self.op("Constant")
        consumer_inputs.append(c)
        return c


def _with_consts(b: LevelBuilder, kind: str, inputs: list[str], consts: int) -> str:
    args = list(inputs)
    for _ in range(consts):
        b.const(args)
    return b.op(kind, *args)


def _layer_norm(b: LevelBuilder, x: str) -> str:
    mean = _with_consts(b, "ReduceMean", [x], 1)
    centred = b.op("Sub", x, mean)
    sq = _with_consts(b, "Pow", [centred], 1)
    var = _with_consts(b, "ReduceMean", [sq], 1)
    std = b.op("Sqrt", _with_consts(b, "Add", [var], 1))
    return _with_consts(b, "Add", [_with_consts(b, "Mul", [b.op("Div", centred, std)], 1)], 1)


def _dynamic_shape(b: LevelBuilder, x: str, dims: int) -> str:
    """Shape -> (Gather -> Unsqueeze) per dim -> Concat, as torch exports for reshapes."""
    parts = []
    for _ in range(dims):
        shape = b.op("Shape", x)
        parts.append(_with_consts(b, "Unsqueeze", [_with_consts(b, "Gather", [shape], 1)], 1))
    return _with_consts(b, "Concat", parts, 2)


def _heads(b: LevelBuilder, x: str, transpose_twice: bool) -> str:
    reshaped = b.op("Reshape", x, _dynamic_shape(b, x, 2))
    out = b.op("Transpose", reshaped)
    return b.op("Transpose", out) if transpose_twice else out


def _attention(b: LevelBuilder, x: str) -> str:
    qkv = _with_consts(b, "Add", [_with_consts(b, "MatMul", [x], 1)], 1)
    split = _with_consts(b, "Split", [qkv], 1)
    q, k, v = (_heads(b, split, i == 1) for i in range(3))
    scores = _with_consts(b, "Div", [b.op("MatMul", q, k)], 1)
    length = _with_consts(b, "Gather", [b.op("Shape", scores)], 1)
    start = b.op("Sub", length, _with_consts(b, "Gather", [b.op("Shape", scores)], 1))
    mask = b.op("Slice", *[_with_consts(b, "Unsqueeze", [t], 1) for t in (start, length)])
    masked = _with_consts(b, "Where", [mask, scores], 1)
    ctx = b.op("Transpose", b.op("MatMul", b.op("Softmax", masked), v))
    merged = b.op("Reshape", ctx, _dynamic_shape(b, ctx, 3))
    return _with_consts(b, "Add", [_with_consts(b, "MatMul", [merged], 1)], 1)


def _mlp(b: LevelBuilder, x: str) -> str:
    h = _with_consts(b, "Add", [_with_consts(b, "MatMul", [x], 1)], 1)
    cube = _with_consts(b, "Mul", [_with_consts(b, "Pow", [h], 1)], 1)
    inner = _with_consts(b, "Mul", [b.op("Add", h, cube)], 1)
    gate = _with_consts(b, "Add", [b.op("Tanh", inner)], 1)
    act = b.op("Mul", _with_consts(b, "Mul", [h], 1), gate)
    return _with_consts(b, "Add", [_with_consts(b, "MatMul", [act], 1)], 1)


def transformer_block(blocks: int = 2) -> Level:
    """Operator level of a GPT-2-style export (``blocks`` blocks inline, ~200 nodes each)."""
    b = LevelBuilder()
    x = b.op("Input")
    for _ in range(blocks):
        x = b.op("Add", x, _attention(b, _layer_norm(b, x)))
        x = b.op("Add", x, _mlp(b, _layer_norm(b, x)))
    b.op("Output", x)
    return b.nodes, b.edges


def residual_level(blocks: int = 24, branches: int = 8) -> Level:
    """Flattened residual blocks, each fanning out to ``branches`` paths of unequal length."""
    b = LevelBuilder()
    x = b.op("Input")
    for _ in range(blocks):
        gate = b.op("Sigmoid", b.op("GlobalAveragePool", x))
        ends = []
        for i in range(branches):
            h = b.op("Conv", x)
            for _ in range(i % 4 + 2):
                h = b.op("Relu", b.op("Conv", h))
            ends.append(b.op("Mul", h, gate))
        merged = b.op("Conv", b.op("Concat", *ends))
        x = b.op("Relu", b.op("Add", x, merged))
    b.op("Output", x)
    return b.nodes, b.edges


def random_dag(n: int = 1000, m: int = 1500, local: bool = False, seed: int = 0) -> Level:
    """``m`` distinct edges i -> j (i < j); ``local`` keeps j - i small (geometric, mean 8)."""
    rng = np.random.default_rng(seed)
    pairs: dict[tuple[int, int], None] = {}
    while len(pairs) < m:
        if local:
            i = int(rng.integers(0, n - 1))
            j = min(n - 1, i + int(rng.geometric(1 / 8)))
        else:
            i, j = sorted(int(v) for v in rng.integers(0, n, size=2))
        if i != j:
            pairs.setdefault((i, j), None)
    nodes = [LayoutNode(i, 60.0 + 4.0 * (i % 7), 28.0) for i in range(n)]
    return nodes, list(pairs)


def nx_multipartite(nodes: list[LayoutNode], edges: list[Edge]) -> dict[Hashable, tuple]:
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(node.id for node in nodes)
    g.add_edges_from(edges)
    for layer, members in enumerate(nx.topological_generations(g)):
        for v in members:
            g.nodes[v]["layer"] = layer
    pos = nx.multipartite_layout(g, subset_key="layer", align="horizontal", scale=1000)
    return {v: (float(p[0]), float(p[1])) for v, p in pos.items()}


def grandalf_sugiyama(nodes: list[LayoutNode], edges: list[Edge]) -> dict[Hashable, tuple]:
    """grandalf's pure-Python Sugiyama layout, per connected component (if installed)."""
    from grandalf.graphs import Edge as GEdge
    from grandalf.graphs import Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    class View:
        def __init__(self, w: float, h: float) -> None:
            self.w, self.h, self.xy = w, h, (0.0, 0.0)

    vertices = {}
    for node in nodes:
        vertices[node.id] = Vertex(node.id)
        vertices[node.id].view = View(node.width, node.height)
    links = [GEdge(vertices[s], vertices[d]) for s, d in edges if s != d]
    graph = Graph(list(vertices.values()), links)
    offset = 0.0
    centres: dict[Hashable, tuple] = {}
    for component in graph.C:
        sugiyama = SugiyamaLayout(component)
        sugiyama.init_all()
        sugiyama.draw()
        xs = [v.view.xy[0] for v in component.sV]
        for v in component.sV:
            centres[v.data] = (v.view.xy[0] - min(xs) + offset, v.view.xy[1])
        offset += max(xs) - min(xs) + 200.0
    return centres


def naive_rank_rows(nodes: list[LayoutNode], edges: list[Edge]) -> dict[Hashable, tuple]:
    """Anchor: longest-path ranks, each rank a row in input order, no crossing reduction."""
    index = {node.id: i for i, node in enumerate(nodes)}
    links = [(index[s], index[d]) for s, d in edges]
    pairs = unique_pairs(links)
    back = break_cycles(len(nodes), pairs)
    rank = assign_ranks(len(nodes), [(v, u) if (u, v) in back else (u, v) for u, v in pairs])
    cursor: dict[int, float] = {}
    centres: dict[Hashable, tuple] = {}
    for node, r in zip(nodes, rank, strict=True):
        x = cursor.get(r, 0.0)
        centres[node.id] = (x + node.width / 2, r * 84.0 + 14.0)
        cursor[r] = x + node.width + 24.0
    return centres


def _straight_segments(centres: dict[Hashable, tuple], edges: list[Edge]) -> Segments:
    return np.array([(*centres[s], *centres[d]) for s, d in edges if s != d], dtype=float)


def _route_segments(layout) -> Segments:  # type: ignore[no-untyped-def]
    segs = [
        (*p, *q)
        for route in layout.edges
        if route.src != route.dst
        for p, q in zip(route.points, route.points[1:], strict=False)
    ]
    return np.array(segs, dtype=float).reshape(-1, 4)


def count_segment_crossings(segs: Segments, chunk: int = 512) -> int:
    """Proper intersections (interiors cross) among all segment pairs, chunked numpy."""

    def orient(ax, ay, bx, by, cx, cy):  # type: ignore[no-untyped-def]
        return np.sign((bx - ax) * (cy - ay) - (by - ay) * (cx - ax))

    segs = np.unique(segs, axis=0)  # edges sharing a trunk draw those segments once
    x1, y1, x2, y2 = (segs[:, k] for k in range(4))
    total = 0
    for start in range(0, len(segs), chunk):
        a = segs[start : start + chunk]
        ax1, ay1, ax2, ay2 = (a[:, k : k + 1] for k in range(4))
        d1 = orient(ax1, ay1, ax2, ay2, x1, y1)
        d2 = orient(ax1, ay1, ax2, ay2, x2, y2)
        d3 = orient(x1, y1, x2, y2, ax1, ay1)
        d4 = orient(x1, y1, x2, y2, ax2, ay2)
        hit = (d1 * d2 < 0) & (d3 * d4 < 0)
        total += int(hit.sum())
    return total // 2


def _time(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    times = []
    result: object = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3, statistics.median(times) * 1e3, result


def run_case(name: str, level: Level, repeat: int) -> None:
    nodes, edges = level
    best, median, layout = _time(lambda: layered_layout(nodes, edges), repeat)
    ours = count_segment_crossings(_route_segments(layout))
    ranks = max(layout.ranks.values(), default=-1) + 1  # type: ignore[attr-defined]
    print(f"\n{name}: {len(nodes)} nodes, {len(edges)} edges, {ranks} ranks")
    print(f"  layered_layout      min {best:8.1f} ms  median {median:8.1f} ms  crossings {ours}")
    others = (("networkx multipart.", nx_multipartite), ("grandalf sugiyama", grandalf_sugiyama))
    for label, layout_fn in others:
        try:
            o_best, o_median, centres = _time(lambda f=layout_fn: f(nodes, edges), repeat)  # type: ignore[misc]
        except ImportError:
            print(f"  {label:19} not installed; skipped")
            continue
        o_cross = count_segment_crossings(_straight_segments(centres, edges))  # type: ignore[arg-type]
        print(f"  {label:19} min {o_best:8.1f} ms  median {o_median:8.1f} ms  crossings {o_cross}")
    nv_best, nv_median, centres = _time(lambda: naive_rank_rows(nodes, edges), repeat)
    nv_cross = count_segment_crossings(_straight_segments(centres, edges))  # type: ignore[arg-type]
    print(
        f"  naive rank rows     min {nv_best:8.1f} ms  median {nv_median:8.1f} ms  "
        f"crossings {nv_cross}"
    )


def run_cache(level: Level) -> None:
    nodes, edges = level
    cache = LayoutCache()
    t0 = time.perf_counter()
    cache.layout("block", nodes, edges)
    t1 = time.perf_counter()
    cache.layout("block", nodes, edges)
    t2 = time.perf_counter()
    print(
        f"\nLayoutCache: miss {1e3 * (t1 - t0):.1f} ms, hit {1e3 * (t2 - t1):.2f} ms "
        "(hit = content hash of the level)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    block = transformer_block(3)
    run_case("(a) transformer operator level (3 sub-blocks)", block, args.repeat)
    run_case("(b) 24 residual blocks, 8-way fan-out", residual_level(), max(1, args.repeat // 2))
    run_case("(c1) random DAG, local edges", random_dag(local=True), max(1, args.repeat // 2))
    run_case("(c2) random DAG, uniform edges", random_dag(), max(1, args.repeat // 2))
    run_cache(block)


if __name__ == "__main__":
    main()
