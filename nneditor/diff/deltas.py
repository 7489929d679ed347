"""Weight and activation deltas, streamed: two arrays of one shape are compared chunk by chunk
(rows of a tensor reader, or slices of memory-mapped .npy files), so two 1 GB tensors are
never in memory at once. Everything accumulates in float64.

- ``max_abs``: the largest |a - b|;
- ``rel_l2``: ||a - b|| / ||b|| (b is the reference, the second argument), 0 when both are 0;
- ``cosine``: a . b / (||a|| ||b||), 1 when both are 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

#: values compared per chunk (16 MB of float64 per side, a few such temporaries at a time)
CHUNK_VALUES = 2 * 1024 * 1024


@dataclass
class Delta:
    max_abs: float = 0.0
    sq_diff: float = 0.0
    sq_a: float = 0.0
    sq_b: float = 0.0
    dot: float = 0.0
    count: int = 0
    nonfinite: int = 0

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        a64 = np.asarray(a, dtype=np.float64).ravel()
        b64 = np.asarray(b, dtype=np.float64).ravel()
        finite = np.isfinite(a64) & np.isfinite(b64)
        if not finite.all():
            self.nonfinite += int((~finite).sum())
            a64, b64 = a64[finite], b64[finite]
        d = a64 - b64
        if d.size:
            self.max_abs = max(self.max_abs, float(np.abs(d).max()))
        self.sq_diff += float(d @ d)
        self.sq_a += float(a64 @ a64)
        self.sq_b += float(b64 @ b64)
        self.dot += float(a64 @ b64)
        self.count += int(a64.size)

    @property
    def rel_l2(self) -> float:
        if self.sq_b == 0.0:
            return 0.0 if self.sq_diff == 0.0 else math.inf
        return math.sqrt(self.sq_diff / self.sq_b)

    @property
    def cosine(self) -> float:
        if self.sq_a == 0.0 and self.sq_b == 0.0:
            return 1.0
        if self.sq_a == 0.0 or self.sq_b == 0.0:
            return 0.0
        return self.dot / math.sqrt(self.sq_a * self.sq_b)

    def as_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "max_abs": self.max_abs,
            "rel_l2": self.rel_l2,
            "cosine": self.cosine,
            "count": self.count,
        }
        if self.nonfinite:
            out["nonfinite_skipped"] = self.nonfinite
        return out


def compare_chunks(pairs: Iterator[tuple[np.ndarray, np.ndarray]]) -> Delta:
    delta = Delta()
    for a, b in pairs:
        delta.add(a, b)
    return delta


def row_chunks(
    rows: int, row_values: int, read: Callable[[int, int], np.ndarray]
) -> Iterator[np.ndarray]:
    """``read(start, stop)`` over leading-axis row ranges of about CHUNK_VALUES values."""
    step = max(1, CHUNK_VALUES // max(row_values, 1))
    for start in range(0, rows, step):
        yield read(start, min(rows, start + step))


def flat_chunks(arr: np.ndarray) -> Iterator[np.ndarray]:
    """Slices of a (memory-mapped) array's flat view."""
    flat = arr.reshape(-1)
    for start in range(0, flat.size, CHUNK_VALUES):
        yield flat[start : start + CHUNK_VALUES]
