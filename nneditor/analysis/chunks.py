"""Split a tensor into C-order chunks of bounded size, expressed as slice keys."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

Key = tuple[slice | int, ...]


def iter_chunks(shape: tuple[int, ...], max_elems: int) -> Iterator[tuple[Key, int]]:
    """Yield ``(key, n_elements)`` covering the tensor in C order, each ≤ ``max_elems``
    elements unless a single innermost-axis run is longer (then it is split too)."""
    if not shape:
        yield (), 1
        return
    n = shape[0]
    row = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    if n == 0 or row == 0:
        return
    if row <= max_elems:
        per = max(1, max_elems // row)
        for r in range(0, n, per):
            stop = min(n, r + per)
            yield (slice(r, stop),), (stop - r) * row
        return
    for i in range(n):
        for sub, count in iter_chunks(shape[1:], max_elems):
            yield (i, *sub), count
