"""Split a tensor into C-order chunks of bounded size, expressed as slice keys; release the
mapped pages a streaming pass has consumed."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from nneditor.io.source import ByteSource
from nneditor.model.tensor import TensorRef

Key = tuple[slice | int, ...]

#: Consumed bytes are released in steps of at least this much.
RELEASE_STEP = 4 * 2**20


def iter_chunks(shape: tuple[int, ...], max_elems: int) -> Iterator[tuple[Key, int]]:
    """Yield ``(key, n_elements)`` covering the tensor in C order, each ≤ ``max_elems``
    elements unless a single innermost-axis run is longer (then it is split too).

    Keys are normalised like :func:`~nneditor.tensors.slicing.parse_slice` output: one entry
    per axis, slices with explicit bounds and step, so every loader accepts them."""
    if not shape:
        yield (), 1
        return
    n = shape[0]
    row = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    if n == 0 or row == 0:
        return
    if row <= max_elems:
        per = max(1, max_elems // row)
        rest = tuple(slice(0, d, 1) for d in shape[1:])
        for r in range(0, n, per):
            stop = min(n, r + per)
            yield (slice(r, stop, 1), *rest), (stop - r) * row
        return
    for i in range(n):
        for sub, count in iter_chunks(shape[1:], max_elems):
            yield (i, *sub), count


class PageReleaser:
    """Drops this process's mapping of tensor bytes a C-order pass has already consumed.

    Chunks come in storage order, so after ``done`` of ``total`` elements the leading
    ``nbytes * done // total`` stored bytes are no longer needed by the pass. Releasing them
    only unmaps pages (the page cache keeps them, a later read faults them back in), so resident
    memory stays bounded on multi-GiB tensors. A no-op for loaders without a mapped byte range.
    """

    def __init__(self, ref: TensorRef) -> None:
        source = getattr(ref.loader, "source", None)
        offset = getattr(ref.loader, "offset", None)
        ok = isinstance(source, ByteSource) and isinstance(offset, int)
        self.source: ByteSource | None = source if ok else None
        self.offset: int = offset if ok else 0  # type: ignore[assignment]
        self.nbytes = ref.nbytes
        self.released = 0

    def advance(self, done: int, total: int) -> None:
        if self.source is None or total <= 0:
            return
        upto = self.nbytes * min(done, total) // total
        if upto - self.released >= RELEASE_STEP or (done >= total and upto > self.released):
            self.source.release(self.offset + self.released, upto - self.released)
            self.released = upto
