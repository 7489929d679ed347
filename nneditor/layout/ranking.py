"""Cycle breaking, ranking and connected components for the layered layout.

Everything here works on integer node indices ``0..n-1`` in input order.

Invariants:
- Deterministic: every loop walks lists in input order; sets and dicts are only used for
  membership tests or are keyed by ints/int tuples and iterated in insertion order.
- :func:`break_cycles` reverses exactly the back edges of one depth-first search that starts
  from the sources (then from the remaining nodes) in input order; the result is acyclic.
- :func:`assign_ranks` returns ranks with ``rank[u] < rank[v]`` for every edge of the DAG it is
  given, and the smallest rank of every weakly connected component is 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

Pair = tuple[int, int]


def unique_pairs(edges: Sequence[Pair]) -> list[Pair]:
    """Distinct ``(u, v)`` pairs with ``u != v``, in order of first occurrence."""
    seen: dict[Pair, None] = {}
    for u, v in edges:
        if u != v:
            seen.setdefault((u, v), None)
    return list(seen)


def _successors(n: int, pairs: Sequence[Pair]) -> list[list[int]]:
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in pairs:
        succ[u].append(v)
    return succ


def break_cycles(n: int, pairs: Sequence[Pair]) -> set[Pair]:
    """Return the pairs that must be reversed to make ``pairs`` acyclic.

    The DFS roots are the nodes without predecessors (in input order) followed by every other
    node in input order, so a graph that is already a DAG never has an edge reversed.
    """
    succ = _successors(n, pairs)
    has_pred = [False] * n
    for _, v in pairs:
        has_pred[v] = True
    state = [0] * n  # 0 = unseen, 1 = on the DFS stack, 2 = finished
    back: set[Pair] = set()
    roots = [v for v in range(n) if not has_pred[v]] + list(range(n))
    for root in roots:
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            v, i = stack[-1]
            if i == len(succ[v]):
                state[v] = 2
                stack.pop()
                continue
            stack[-1] = (v, i + 1)
            w = succ[v][i]
            if state[w] == 1:
                back.add((v, w))
            elif state[w] == 0:
                state[w] = 1
                stack.append((w, 0))
    return back


def topological_order(n: int, pairs: Sequence[Pair]) -> list[int]:
    """Kahn's algorithm with a FIFO seeded in input order (``pairs`` must be acyclic)."""
    succ = _successors(n, pairs)
    indeg = [0] * n
    for _, v in pairs:
        indeg[v] += 1
    queue = deque(v for v in range(n) if indeg[v] == 0)
    order: list[int] = []
    while queue:
        v = queue.popleft()
        order.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                queue.append(w)
    if len(order) != n:
        raise AssertionError("topological_order() was given a cyclic graph")
    return order


def assign_ranks(n: int, dag: Sequence[Pair]) -> list[int]:
    """Longest-path ranks followed by a cheap balancing pass.

    The balancing pass first moves every node whose outputs outnumber (or equal) its inputs
    as far down as its successors allow (reverse topological order, so chains of such nodes
    follow each other), then pulls every node whose inputs outnumber (or equal) its outputs
    back up as far as its predecessors allow. Neither step lengthens the total edge length,
    and a node whose move gained nothing returns next to its inputs.
    """
    order = topological_order(n, dag)
    preds: list[list[int]] = [[] for _ in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in dag:
        preds[v].append(u)
        succ[u].append(v)
    rank = [0] * n
    for v in order:
        for u in preds[v]:
            if rank[u] + 1 > rank[v]:
                rank[v] = rank[u] + 1
    for v in reversed(order):
        if succ[v] and len(succ[v]) >= len(preds[v]):
            rank[v] = min(rank[w] for w in succ[v]) - 1
    for v in order:
        if preds[v] and len(preds[v]) >= len(succ[v]):
            rank[v] = max(rank[u] for u in preds[v]) + 1
    return rank


def components(n: int, pairs: Sequence[Pair]) -> list[list[int]]:
    """Weakly connected components, each sorted, ordered by their smallest node index."""
    parent = list(range(n))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for u, v in pairs:
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    groups: dict[int, list[int]] = {}
    for v in range(n):
        groups.setdefault(find(v), []).append(v)
    return list(groups.values())


def normalize_ranks(rank: list[int], groups: Sequence[Sequence[int]]) -> None:
    """Shift ranks in place so that every group's smallest rank is 0."""
    for group in groups:
        low = min(rank[v] for v in group)
        if low:
            for v in group:
                rank[v] -= low
