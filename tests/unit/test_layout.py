"""Layered layout: rank order, overlap, edge ends, determinism, crossings, robustness, cache.

Geometry is checked on the returned Layout with independent helpers (box sides, segment
intersection); acyclicity with the standard library's graphlib.
"""

from __future__ import annotations

import graphlib
import json
import random
import subprocess
import sys
import textwrap
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import pytest

from nneditor.layout import Layout, LayoutCache, LayoutNode, content_key, layered_layout
from nneditor.layout.ordering import (
    CrossingCounter,
    build_proper,
    count_inversions,
    initial_order,
)
from nneditor.layout.placement import _place_layer

Edge = tuple[Hashable, Hashable]
EPS = 1e-6
ROOT = Path(__file__).resolve().parents[2]


def make_nodes(ids: Sequence[Hashable], seed: int = 0) -> list[LayoutNode]:
    rng = random.Random(seed)
    return [LayoutNode(i, float(rng.choice([40, 64, 90, 130])), 28.0) for i in ids]


def random_dag(n: int, m: int, seed: int) -> list[Edge]:
    rng = random.Random(seed)
    edges: list[Edge] = []
    while len(edges) < m:
        a, b = sorted(rng.sample(range(n), 2))
        edges.append((a, b))
    return edges


def residual_blocks(blocks: int, branches: int) -> tuple[list[LayoutNode], list[Edge]]:
    ids: list[str] = []
    edges: list[Edge] = []

    def op(*inputs: str) -> str:
        ids.append(f"n{len(ids)}")
        edges.extend((i, ids[-1]) for i in inputs)
        return ids[-1]

    x = op()
    for _ in range(blocks):
        ends = []
        for b in range(branches):
            h = op(x)
            for _ in range(b % 4 + 2):
                h = op(h)
            ends.append(h)
        x = op(x, op(*ends))
    return make_nodes(ids), edges


def boxes(layout: Layout) -> dict[Hashable, tuple[float, float, float, float]]:
    out = {}
    for key, (x, y) in layout.positions.items():
        w, h = layout.sizes[key]
        out[key] = (x, y, x + w, y + h)
    return out


def on_side(point: tuple[float, float], box: tuple[float, ...], side: str) -> bool:
    x, y = point
    x0, y0, x1, y1 = box
    within_x = x0 - EPS <= x <= x1 + EPS
    within_y = y0 - EPS <= y <= y1 + EPS
    return {
        "top": abs(y - y0) < EPS and within_x,
        "bottom": abs(y - y1) < EPS and within_x,
        "left": abs(x - x0) < EPS and within_y,
        "right": abs(x - x1) < EPS and within_y,
    }[side]


def segments(layout: Layout) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Distinct drawn segments (edges sharing a trunk draw the same segment once)."""
    unique = {
        (p, q)
        for route in layout.edges
        if route.src != route.dst
        for p, q in zip(route.points, route.points[1:], strict=False)
    }
    return sorted(unique)


def geometric_crossings(layout: Layout) -> int:
    """Proper crossings between drawn segments (touching at an end does not count)."""

    def orient(a, b, c):  # type: ignore[no-untyped-def]
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return (v > EPS) - (v < -EPS)

    segs = segments(layout)
    count = 0
    for i, (a1, a2) in enumerate(segs):
        for b1, b2 in segs[i + 1 :]:
            if (
                orient(a1, a2, b1) * orient(a1, a2, b2) < 0
                and orient(b1, b2, a1) * orient(b1, b2, a2) < 0
            ):
                count += 1
    return count


def check_layout(
    layout: Layout, nodes: Sequence[LayoutNode], edges: Sequence[Edge], gap: float = 24
) -> None:
    """Every invariant the canvas relies on."""
    lr = layout.direction == "LR"
    box = boxes(layout)
    assert set(box) == {n.id for n in nodes}
    assert len(layout.edges) == len(edges)
    # edge direction and route ends
    reversed_edges = []
    for route, (src, dst) in zip(layout.edges, edges, strict=True):
        assert (route.src, route.dst) == (src, dst)
        first, last = route.points[0], route.points[-1]
        if src == dst:
            side = "bottom" if lr else "right"
            assert on_side(first, box[src], side) and on_side(last, box[src], side)
            continue
        out_side, in_side = ("right", "left") if lr else ("bottom", "top")
        if route.reversed:
            reversed_edges.append((src, dst))
            out_side, in_side = in_side, out_side
            assert layout.ranks[src] > layout.ranks[dst]
        else:
            assert layout.ranks[src] < layout.ranks[dst]
        assert on_side(first, box[src], out_side), (route, box[src])
        assert on_side(last, box[dst], in_side), (route, box[dst])
    # reversing the flagged edges leaves a DAG (checked by graphlib, not by our code)
    sorter: graphlib.TopologicalSorter[Hashable] = graphlib.TopologicalSorter()
    for n in nodes:
        sorter.add(n.id)
    for src, dst in edges:
        if src != dst:
            if (src, dst) in reversed_edges:
                sorter.add(src, dst)
            else:
                sorter.add(dst, src)
    list(sorter.static_order())
    # no overlap inside a rank: neighbours at least `gap` apart along the rank
    by_rank: dict[tuple[float, int], list[tuple[float, float]]] = {}
    for key, (x0, y0, x1, y1) in box.items():
        lo, hi, band = (y0, y1, x0) if lr else (x0, x1, y0)
        by_rank.setdefault((round(band), layout.ranks[key]), []).append((lo, hi))
    for spans in by_rank.values():
        spans.sort()
        for (_, hi), (lo, _) in zip(spans, spans[1:], strict=False):
            assert hi + gap <= lo + EPS
    # everything inside the bounding box
    xs = [c for b in box.values() for c in (b[0], b[2])]
    ys = [c for b in box.values() for c in (b[1], b[3])]
    for route in layout.edges:
        xs += [p[0] for p in route.points]
        ys += [p[1] for p in route.points]
    if xs:
        assert min(xs) >= -EPS and min(ys) >= -EPS
        assert max(xs) <= layout.width + EPS and max(ys) <= layout.height + EPS


# ranks, overlap, route ends


@pytest.mark.parametrize("direction", ["TB", "LR"])
def test_random_dag_layout_is_valid(direction: str) -> None:
    edges = random_dag(120, 200, seed=1)
    nodes = make_nodes(range(120))
    layout = layered_layout(nodes, edges, direction=direction)
    check_layout(layout, nodes, edges)
    assert not any(route.reversed for route in layout.edges)


def test_ranks_start_at_zero_and_sources_move_next_to_their_consumer() -> None:
    # a long chain; a constant feeding only its end must sit right above it, not at rank 0
    ids = [f"c{i}" for i in range(8)] + ["const"]
    edges: list[Edge] = [(f"c{i}", f"c{i + 1}") for i in range(7)]
    edges.append(("const", "c7"))
    layout = layered_layout(make_nodes(ids), edges)
    assert [layout.ranks[f"c{i}"] for i in range(8)] == list(range(8))
    assert layout.ranks["const"] == 6


def test_custom_gaps_are_respected() -> None:
    edges = random_dag(40, 70, seed=3)
    nodes = make_nodes(range(40), seed=3)
    layout = layered_layout(nodes, edges, node_gap=7, rank_gap=11)
    check_layout(layout, nodes, edges, gap=7)
    tops = sorted({y for _, y in layout.positions.values()})
    assert min(b - a for a, b in zip(tops, tops[1:], strict=False)) >= 28 + 11 - EPS


def test_lr_is_tb_with_axes_swapped() -> None:
    edges = random_dag(30, 45, seed=4)
    nodes = make_nodes(range(30), seed=4)
    swapped = [LayoutNode(n.id, n.height, n.width) for n in nodes]
    lr = layered_layout(nodes, edges, direction="LR")
    tb = layered_layout(swapped, edges, direction="TB")
    assert lr.positions == {k: (y, x) for k, (x, y) in tb.positions.items()}
    assert [r.points for r in lr.edges] == [[(y, x) for x, y in r.points] for r in tb.edges]
    assert (lr.width, lr.height) == (tb.height, tb.width)
    check_layout(lr, nodes, edges)


def test_chain_is_straight_and_fan_out_is_centred() -> None:
    nodes = [LayoutNode(k, 60, 20) for k in ("a", "b", "c", "d", "e")]
    layout = layered_layout(nodes, [("a", "b"), ("b", "c"), ("c", "d"), ("c", "e")])
    centre = {k: x + 30 for k, (x, _) in layout.positions.items()}
    assert centre["a"] == centre["b"] == centre["c"]
    assert centre["c"] == pytest.approx((centre["d"] + centre["e"]) / 2)


# determinism


def test_two_runs_are_identical() -> None:
    nodes, edges = residual_blocks(3, 5)
    assert layered_layout(nodes, edges) == layered_layout(nodes, edges)


def test_layout_does_not_depend_on_string_hashing() -> None:
    script = textwrap.dedent(
        """
        import json, sys
        from nneditor.layout import LayoutNode, layered_layout, content_key
        ids = [f"op/{i}" for i in range(60)]
        nodes = [LayoutNode(i, 40 + len(i) * 3, 20) for i in ids]
        edges = [(ids[i], ids[j]) for i in range(60) for j in (i + 1, i + 7, i * 3) if j < 60]
        layout = layered_layout(nodes, edges)
        print(json.dumps([layout.positions, [e.points for e in layout.edges],
                          content_key(nodes, edges)]))
        """
    )
    outputs = []
    for seed in ("1", "2"):
        env = {"PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(json.loads(proc.stdout))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shuffled_input_still_gives_a_valid_layout(seed: int) -> None:
    nodes, edges = residual_blocks(2, 4)
    rng = random.Random(seed)
    rng.shuffle(nodes)
    rng.shuffle(edges)
    check_layout(layered_layout(nodes, edges), nodes, edges)


# crossings


def test_count_inversions_matches_brute_force() -> None:
    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 3, 17, 64, 100):
        a = rng.integers(0, 12, size=n)
        brute = sum(int(a[i] > a[j]) for i in range(n) for j in range(i + 1, n))
        assert count_inversions(a) == brute


ZERO_CROSSING_CASES = {
    # DFS order puts c left of d, which crosses a->d with b->c; the reduction must swap them
    "shared_child": (["a", "b", "c", "d"], [("a", "c"), ("a", "d"), ("b", "c")]),
    # the path t0-b0-t1-b1-t2-b2-t3-b3, given in an order whose first layering crosses
    "zigzag": (
        ["t2", "t0", "t3", "t1", "b1", "b3", "b0", "b2"],
        [
            ("t2", "b2"),
            ("t3", "b2"),
            ("t0", "b0"),
            ("t2", "b1"),
            ("t1", "b1"),
            ("t3", "b3"),
            ("t1", "b0"),
        ],
    ),
}


def _proper_initial_crossings(
    nodes: Sequence[LayoutNode], edges: Sequence[Edge], layout: Layout
) -> int:
    index = {n.id: i for i, n in enumerate(nodes)}
    g = build_proper(
        len(nodes), [layout.ranks[n.id] for n in nodes], [(index[s], index[d], 1) for s, d in edges]
    )
    pos = initial_order(g)
    return CrossingCounter(g).count(pos)


@pytest.mark.parametrize("case", ["shared_child", "zigzag"])
def test_crossing_free_graphs_end_without_crossings(case: str) -> None:
    ids, edges = ZERO_CROSSING_CASES[case]
    nodes = make_nodes(ids)
    layout = layered_layout(nodes, edges)
    check_layout(layout, nodes, edges)
    assert _proper_initial_crossings(nodes, edges, layout) > 0  # the case needs the reduction
    assert geometric_crossings(layout) == 0
    assert layout.crossings == 0


def test_residual_blocks_have_no_crossings() -> None:
    nodes, edges = residual_blocks(2, 3)
    layout = layered_layout(nodes, edges)
    assert geometric_crossings(layout) == 0


def test_reported_crossings_match_the_drawing() -> None:
    edges = sorted(set(random_dag(40, 60, seed=6)))
    nodes = make_nodes(range(40), seed=6)
    layout = layered_layout(nodes, edges)
    assert layout.crossings > 0
    assert geometric_crossings(layout) == layout.crossings


# coordinate assignment: each layer step is an exact L1 optimum (scipy as the reference)


def test_layer_placement_is_optimal() -> None:
    optimize = pytest.importorskip("scipy.optimize")
    rng = random.Random(7)
    for _ in range(200):
        k = rng.randint(1, 7)
        s = [0.0]
        for _ in range(1, k):
            s.append(s[-1] + rng.choice([10.0, 20.0, 35.5]))
        terms = [
            [
                (float(rng.randint(-50, 150)), rng.choice([1, 2, 8]), rng.randint(0, 1))
                for _ in range(rng.randint(1, 4))
            ]
            for _ in range(k)
        ]
        current = [float(rng.randint(-50, 150)) for _ in range(k)]
        xs = _place_layer(current, s, terms)
        n_terms = sum(len(t) for t in terms)
        c = np.concatenate([np.zeros(k), [w for ts in terms for _, w, _ in ts]])
        a_ub, b_ub, j = [], [], k
        for i, ts in enumerate(terms):
            for t, _, _ in ts:
                for sign in (1, -1):
                    row = np.zeros(k + n_terms)
                    row[i], row[j] = sign, -1
                    a_ub.append(row)
                    b_ub.append(sign * t)
                j += 1
        for i in range(1, k):
            row = np.zeros(k + n_terms)
            row[i - 1], row[i] = 1, -1
            a_ub.append(row)
            b_ub.append(s[i - 1] - s[i])
        best = optimize.linprog(c, A_ub=np.array(a_ub), b_ub=b_ub, bounds=(None, None)).fun
        ours = sum(w * abs(x - t) for x, ts in zip(xs, terms, strict=True) for t, w, _ in ts)
        assert ours == pytest.approx(best, abs=1e-6)
        assert all(xs[i] - xs[i - 1] >= s[i] - s[i - 1] - EPS for i in range(1, k))


# awkward inputs


def test_cycles_are_broken_by_reversing_and_flagging_edges() -> None:
    ids = list("abcde")
    edges: list[Edge] = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "c")]
    nodes = make_nodes(ids)
    layout = layered_layout(nodes, edges)
    check_layout(layout, nodes, edges)
    assert [(r.src, r.dst) for r in layout.edges if r.reversed] == [("c", "a"), ("e", "c")]


def test_dense_cycles_and_self_loops_finish() -> None:
    ids = list(range(40))
    edges: list[Edge] = [(i, j) for i in ids for j in ids if (i * 7 + j * 3) % 5 == 0]
    nodes = make_nodes(ids)
    layout = layered_layout(nodes, edges)
    check_layout(layout, nodes, edges)
    assert any(r.src == r.dst for r in layout.edges)


def test_parallel_edges_and_self_loops_get_distinct_routes() -> None:
    nodes = make_nodes(["a", "b", "c"])
    edges: list[Edge] = [("a", "b"), ("a", "b"), ("a", "b"), ("b", "b"), ("b", "b"), ("a", "c")]
    layout = layered_layout(nodes, edges)
    check_layout(layout, nodes, edges)
    parallel = [tuple(r.points) for r in layout.edges[:3]]
    loops = [tuple(r.points) for r in layout.edges[3:5]]
    assert len(set(parallel)) == 3 and len(set(loops)) == 2


def _on_polyline(point: tuple[float, float], points: list[tuple[float, float]]) -> bool:
    for (x1, y1), (x2, y2) in zip(points, points[1:], strict=False):
        cross = (x2 - x1) * (point[1] - y1) - (y2 - y1) * (point[0] - x1)
        inside = min(x1, x2) - EPS <= point[0] <= max(x1, x2) + EPS
        if abs(cross) < 1e-6 and inside and min(y1, y2) - EPS <= point[1] <= max(y1, y2) + EPS:
            return True
    return False


def test_long_edges_from_one_source_share_one_trunk() -> None:
    ids = [f"c{i}" for i in range(12)] + ["mask"]
    edges: list[Edge] = [(f"c{i}", f"c{i + 1}") for i in range(11)]
    edges += [("mask", "c3"), ("mask", "c7"), ("mask", "c11")]
    nodes = make_nodes(ids)
    layout = layered_layout(nodes, edges)
    check_layout(layout, nodes, edges)
    assert layout.ranks["mask"] == 2  # a source moves down next to its first consumer
    to7, to11 = layout.edges[-2].points, layout.edges[-1].points
    assert all(_on_polyline(p, to11) for p in to7[:-1])  # same line until it branches off


def test_virtual_node_budget_falls_back_to_straight_edges(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("nneditor.layout.layered.VIRTUAL_BUDGET", 30)
    ids = list(range(30))
    edges: list[Edge] = [(i, i + 1) for i in range(29)]
    edges += [(i, i + 20) for i in range(10)]
    nodes = make_nodes(ids)
    layout = layered_layout(nodes, edges)
    check_layout(layout, nodes, edges)
    straight = [r for r in layout.edges if layout.ranks[r.dst] - layout.ranks[r.src] > 1]
    assert sorted(len(r.points) > 2 for r in straight) == [False] * 9 + [True]


def test_isolated_nodes_and_components_sit_side_by_side_in_input_order() -> None:
    nodes = make_nodes(["lonely", "a", "b", "x", "y", "z", "solo"])
    edges: list[Edge] = [("x", "y"), ("a", "b"), ("y", "z")]
    layout = layered_layout(nodes, edges)
    check_layout(layout, nodes, edges)
    box = boxes(layout)

    def span(ids: list[str]) -> tuple[float, float]:
        return min(box[i][0] for i in ids), max(box[i][2] for i in ids)

    groups = [span(["lonely"]), span(["a", "b"]), span(["x", "y", "z"]), span(["solo"])]
    for (_, right), (left, _) in zip(groups, groups[1:], strict=False):
        assert right + 24 <= left + EPS
    assert layout.ranks == {"lonely": 0, "a": 0, "b": 1, "x": 0, "y": 1, "z": 2, "solo": 0}


def test_empty_and_single_node_levels() -> None:
    empty = layered_layout([], [])
    assert (empty.width, empty.height, empty.positions, empty.edges) == (0.0, 0.0, {}, [])
    one = layered_layout([LayoutNode("n", 50, 20)], [])
    assert one.positions == {"n": (0.0, 0.0)} and (one.width, one.height) == (50.0, 20.0)


def test_two_thousand_nodes_finish() -> None:
    nodes, edges = residual_blocks(52, 8)
    assert 1900 <= len(nodes) <= 2200
    check_layout(layered_layout(nodes, edges), nodes, edges)


@pytest.mark.parametrize(
    ("nodes", "edges", "kwargs", "message"),
    [
        (
            [LayoutNode("a", 1, 1)],
            [],
            {"direction": "BT"},
            "Layout direction 'BT' is not supported; use 'TB' or 'LR'.",
        ),
        (
            [LayoutNode("a", 1, 1)],
            [],
            {"node_gap": -1},
            "Layout node_gap must be a finite number >= 0, not -1.",
        ),
        (
            [LayoutNode("a", 1, 1)],
            [],
            {"rank_gap": float("nan")},
            "Layout rank_gap must be a finite number >= 0, not nan.",
        ),
        (
            [LayoutNode("a", 1, 1), LayoutNode("a", 2, 2)],
            [],
            {},
            "Layout node id 'a' appears more than once.",
        ),
        (
            [LayoutNode("a", float("inf"), 1)],
            [],
            {},
            "Layout node 'a' has width inf; sizes must be finite and >= 0.",
        ),
        (
            [LayoutNode("a", 1, -2)],
            [],
            {},
            "Layout node 'a' has height -2; sizes must be finite and >= 0.",
        ),
        (
            [LayoutNode("a", 1, 1)],
            [("a", "ghost")],
            {},
            "Layout edge 'a' -> 'ghost' names unknown node 'ghost'.",
        ),
    ],
)
def test_bad_input_is_rejected_with_a_sentence(nodes, edges, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as info:
        layered_layout(nodes, edges, **kwargs)
    assert str(info.value) == message


# cache


def test_cache_returns_the_stored_layout_until_content_changes() -> None:
    nodes, edges = residual_blocks(1, 3)
    cache = LayoutCache(max_entries=2)
    first = cache.layout("block/0", nodes, edges)
    assert cache.layout("block/0", list(nodes), list(edges)) is first
    assert (cache.hits, cache.misses) == (1, 1)
    resized = [LayoutNode(nodes[0].id, nodes[0].width + 1, nodes[0].height), *nodes[1:]]
    assert cache.layout("block/0", resized, edges) is not first
    assert cache.layout("block/0", nodes, edges, direction="LR") is not first
    assert cache.misses == 3 and len(cache) == 2  # bounded: the oldest entry was evicted
    assert cache.layout("block/0", nodes, edges) is not first
    cache.invalidate("block/0")
    assert len(cache) == 0


def test_content_key_covers_order_sizes_and_options() -> None:
    nodes = make_nodes(["a", "b"])
    key = content_key(nodes, [("a", "b")])
    assert key == content_key(list(nodes), [("a", "b")])
    assert key != content_key(nodes[::-1], [("a", "b")])
    assert key != content_key(nodes, [("b", "a")])
    assert key != content_key(nodes, [("a", "b")], node_gap=3)
    assert content_key([LayoutNode(1, 1, 1)], []) != content_key([LayoutNode("1", 1, 1)], [])


def test_cache_rejects_zero_capacity() -> None:
    with pytest.raises(ValueError, match="LayoutCache needs room for at least one layout, not 0."):
        LayoutCache(0)
