"""Structural repetition: find runs of identical blocks without relying on names.

A model whose node names are meaningless still repeats the same block N times in its
topologically ordered node list. We look for an op type whose occurrences are evenly spaced
(period P, count K), choose the block boundary where the fewest values cross (the residual
stream), and confirm that consecutive segments have identical structure hashes
(op types + internal wiring, independent of names).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence

from nneditor.model.graph import Node

#: Ops that are hoisted by exporters and do not mark structure.
IGNORED_OPS = frozenset({"Constant", "Identity"})


def segment_signature(
    nodes: Sequence[Node], segment: Sequence[int], initializers: frozenset[str] | set[str]
) -> str:
    """Name-independent hash of a segment: op types plus relative wiring."""
    # Constants/Identity are treated like weights: hoisting order must not change the hash.
    core = [i for i in segment if nodes[i].op_type not in IGNORED_OPS]
    consts = {o for i in segment if nodes[i].op_type in IGNORED_OPS for o in nodes[i].outputs}
    pos = {}
    for k, i in enumerate(core):
        for out in nodes[i].outputs:
            pos[out] = k
    h = hashlib.blake2b(digest_size=12)
    for k, i in enumerate(core):
        node = nodes[i]
        parts = [node.domain, node.op_type]
        for name in node.inputs:
            if not name:
                parts.append("-")
            elif name in pos:
                parts.append(f"i{k - pos[name]}")
            elif name in initializers or name in consts:
                parts.append("w")
            else:
                parts.append("x")
        h.update(("|".join(parts) + "\n").encode())
    return h.hexdigest()


def cut_widths(nodes: Sequence[Node], seq: Sequence[int]) -> list[int]:
    """cut[c] = number of values produced before position c and consumed at or after it."""
    n = len(seq)
    where = {}
    for p, i in enumerate(seq):
        for out in nodes[i].outputs:
            where[out] = p
    last: dict[str, int] = {}
    for q, i in enumerate(seq):
        for name in nodes[i].inputs:
            if name in where and where[name] < q:
                last[name] = q
    diff = [0] * (n + 2)
    for name, q in last.items():
        diff[where[name] + 1] += 1
        diff[q + 1] -= 1
    return list(itertools.accumulate(diff[: n + 1]))


def find_repeated_blocks(
    nodes: Sequence[Node],
    seq: Sequence[int],
    initializers: frozenset[str] | set[str],
    min_count: int = 2,
    min_period: int = 3,
) -> list[list[int]]:
    """Consecutive identical blocks within ``seq`` (node indices in topological order).

    Returns the blocks as lists of node indices (ignored ops excluded), or [] when no run of at
    least ``min_count`` identical segments exists.
    """
    core = [i for i in seq if nodes[i].op_type not in IGNORED_OPS]
    n = len(core)
    if n < min_period * min_count:
        return []
    positions: dict[tuple[str, str], list[int]] = {}
    for p, i in enumerate(core):
        positions.setdefault((nodes[i].domain, nodes[i].op_type), []).append(p)
    # (coverage, -per_block, period, first anchor, last anchor)
    candidates: list[tuple[int, int, int, int, int]] = []
    for plist in positions.values():
        for per in (1, 2, 3, 4):
            if len(plist) < per * min_count or len(plist) % per:
                continue
            sub = plist[::per]
            d = _gaps(sub)
            if d and d[0] >= min_period and all(g == d[0] for g in d):
                candidates.append((d[0] * len(sub), -per, d[0], sub[0], sub[-1]))
                break
        # evenly spaced runs inside an op type's occurrences (a stage among other stages)
        d = _gaps(plist)
        start = 0
        for k in range(1, len(d) + 1):
            if k == len(d) or d[k] != d[start]:
                run = k - start  # number of equal gaps
                if run >= min_count - 1 and d[start] >= min_period:
                    gap = d[start]
                    candidates.append((gap * (run + 1), -1, gap, plist[start], plist[k]))
                start = k
    if not candidates:
        return []
    cuts = cut_widths(nodes, core)
    ranked = sorted(set(candidates), reverse=True)
    # the main pass depends on the period only: op types proposing the same one share a run
    first = list(dict.fromkeys(c[2] for c in ranked[:6]))
    best = _longest(
        _best_run(nodes, core, period, cuts, initializers, min_count) for period in first
    )
    if best:
        return best
    # Nothing found: a short run (two transformer blocks after a conv stem) may rank below
    # many proposals of other periods, and its boundaries drown in the whole sequence's
    # average cut. Try the best proposal of each period not tried yet, starting near it.
    seen = set(first)
    rest = []
    for cand in ranked:  # descending: the first proposal of a period is its best
        if cand[2] not in seen:
            seen.add(cand[2])
            rest.append(cand)
    return _longest(
        _best_run(nodes, core, period, cuts, initializers, min_count, (lo, hi))
        for _cov, _per, period, lo, hi in rest[:6]
    )


def _gaps(positions: list[int]) -> list[int]:
    return [b - a for a, b in itertools.pairwise(positions)]


def _mean(values: list[int]) -> float:
    return sum(values) / len(values)


def _longest(runs: Iterable[list[list[int]]]) -> list[list[int]]:
    """The run covering the most nodes (the first of equals); [] when there is none."""
    return max(runs, key=lambda blocks: sum(map(len, blocks)), default=[])


def _best_run(
    nodes: Sequence[Node],
    core: list[int],
    period: int,
    cuts: list[int],
    initializers: frozenset[str] | set[str],
    min_count: int,
    anchors: tuple[int, int] | None = None,
) -> list[list[int]]:
    n = len(core)
    # Candidate starts: each residue class mod period, at its narrowest cut (over the whole
    # sequence, and near the anchor run that proposed the period: a short run's boundaries
    # are drowned in the whole sequence's average).
    best: list[list[int]] = []
    residues = range(min(period, n - period + 1))
    starts = sorted(residues, key=lambda s: (_mean(cuts[s::period]), s))[:3]
    if anchors is not None:
        lo, hi = max(anchors[0] - period + 1, 0), min(anchors[1] + 1, n)
        local = sorted(range(lo, hi), key=lambda p: (cuts[p], p))
        for p in local[:3]:
            if p % period not in starts:
                starts.append(p % period)
    for s in starts:
        sigs = []
        for b in range(s, n - period + 1, period):
            sigs.append((b, segment_signature(nodes, core[b : b + period], initializers)))
        # longest run of equal consecutive signatures
        run_start, run_len, cur_start, cur_len = 0, 0, 0, 0
        for k in range(len(sigs)):
            if k and sigs[k][1] == sigs[k - 1][1]:
                cur_len += 1
            else:
                cur_start, cur_len = k, 1
            if cur_len > run_len:
                run_start, run_len = cur_start, cur_len
        if run_len >= min_count and run_len * period > sum(map(len, best)):
            best = [
                core[sigs[k][0] : sigs[k][0] + period]
                for k in range(run_start, run_start + run_len)
            ]
    return best
