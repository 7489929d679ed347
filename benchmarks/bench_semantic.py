#!/usr/bin/env python3
"""Hierarchy + pattern detection + per-level layout on a generated 100k-node transformer.

Targets: < 2 s for hierarchy + detection, < 200 ms for one level's layout. Anchor in the same
run: the time nneditor.open needs to index the same model (the cost a user already pays), and
Netron's documented behaviour for reference (dagre layout warns after 2.5 s and gives up beyond a
few thousand nodes; it lays out the whole flat graph, we lay out one level at a time).

    python benchmarks/bench_semantic.py [--blocks 48] [--nodes-per-block 2080]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synthetic_models import make_transformer  # noqa: E402

import nneditor  # noqa: E402
from nneditor.layout import LayoutNode, layered_layout  # noqa: E402
from nneditor.semantic.hierarchy import build_hierarchy  # noqa: E402
from nneditor.semantic.levels import group_view  # noqa: E402

CACHE = Path(os.environ.get("NNEDITOR_BENCH_DIR", Path.home() / ".cache" / "nneditor" / "bench"))


def layout_view(h, group):
    view = group_view(h, group)
    nodes = [LayoutNode(it.key, 160.0, 44.0) for it in view.items]
    edges = [(a, b) for a, b, _ in view.edges]
    t = time.perf_counter()
    lay = layered_layout(nodes, edges)
    return time.perf_counter() - t, len(nodes), len(edges), lay


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=48)
    ap.add_argument("--nodes-per-block", type=int, default=2080)
    ap.add_argument("--anonymous", action="store_true")
    args = ap.parse_args()
    path = (
        CACHE
        / f"semantic_b{args.blocks}_n{args.nodes_per_block}{'_anon' if args.anonymous else ''}.onnx"
    )
    if not path.exists():
        print(f"generating {path} …", flush=True)
        make_transformer(
            path,
            blocks=args.blocks,
            dim=16,
            ffn=32,
            heads=2,
            nodes_per_block=args.nodes_per_block,
            anonymous=args.anonymous,
        )
    t = time.perf_counter()
    doc = nneditor.open(path)
    t_open = time.perf_counter() - t
    print(f"model: {doc.graph.node_count:,} nodes; nneditor.open (index) {t_open:.2f} s")
    t = time.perf_counter()
    h = build_hierarchy(doc.graph, doc.tensors)
    t_h = time.perf_counter() - t
    s = h.summary()
    print(
        f"hierarchy + detection: {t_h:.2f} s (target < 2 s); mode {s['mode']}; levels {s['levels']}; "
        f"patterns {s['patterns']}"
    )
    dt, n, e, _ = layout_view(h, h.root)
    print(f"layout architecture level: {dt * 1000:.1f} ms ({n} items, {e} edges)")
    block = max(h.groups("block"), key=lambda g: g.node_count)
    dt, n, e, _ = layout_view(h, block)
    print(
        f"layout one block ({block.name}): {dt * 1000:.1f} ms ({n} items, {e} edges) (target < 200 ms)"
    )
    big = max(
        (g for g in h.root.walk() if g.children or g.nodes),
        key=lambda g: len(g.nodes) + len(g.children),
    )
    dt, n, e, _ = layout_view(h, big)
    print(f"layout largest view ({big.name}): {dt * 1000:.1f} ms ({n} items, {e} edges)")
    print(f"ratio hierarchy/open: {t_h / t_open:.2f}")


if __name__ == "__main__":
    main()
