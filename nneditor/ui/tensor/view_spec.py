"""Which 2-D plane of an N-d tensor is on screen, and bounded reads of it (Qt-free).

A :class:`ViewSpec` names a row axis, a column axis and a fixed index for every other axis.
Invariants:
- Every read goes through ``TensorRef.read(key)`` with a key that selects only the requested
  rows/columns of that plane (a page, or a strided plane of at most ``max_side``² values).
- Returned pages are 2-D, rows first, whatever the relative order of the two axes.
- Scalars are a 1×1 plane; 1-d tensors are one column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from nneditor.errors import NNEditorError
from nneditor.model.tensor import TensorRef

Key = tuple[slice | int, ...]


@dataclass(frozen=True)
class ViewSpec:
    shape: tuple[int, ...]
    row_axis: int | None
    col_axis: int | None
    index: tuple[int, ...]

    @classmethod
    def default(cls, shape: tuple[int, ...]) -> ViewSpec:
        nd = len(shape)
        if nd == 0:
            return cls(shape, None, None, ())
        if nd == 1:
            return cls(shape, 0, None, (0,))
        return cls(shape, nd - 2, nd - 1, (0,) * nd)

    @property
    def rows(self) -> int:
        return 1 if self.row_axis is None else self.shape[self.row_axis]

    @property
    def cols(self) -> int:
        return 1 if self.col_axis is None else self.shape[self.col_axis]

    @property
    def fixed_axes(self) -> list[int]:
        return [a for a in range(len(self.shape)) if a not in (self.row_axis, self.col_axis)]

    def with_axes(self, row_axis: int, col_axis: int) -> ViewSpec:
        if row_axis == col_axis or not (0 <= row_axis < len(self.shape)):
            raise ValueError(f"cannot show axis {row_axis} as rows and {col_axis} as columns")
        if not 0 <= col_axis < len(self.shape):
            raise ValueError(f"the tensor has no axis {col_axis}")
        return replace(self, row_axis=row_axis, col_axis=col_axis)

    def with_row_axis(self, axis: int) -> ViewSpec:
        """Show ``axis`` as rows; picking the column axis swaps the two."""
        if self.col_axis is None or self.row_axis is None:
            return self
        col = self.row_axis if axis == self.col_axis else self.col_axis
        return self.with_axes(axis, col)

    def with_col_axis(self, axis: int) -> ViewSpec:
        """Show ``axis`` as columns; picking the row axis swaps the two."""
        if self.col_axis is None or self.row_axis is None:
            return self
        row = self.col_axis if axis == self.row_axis else self.row_axis
        return self.with_axes(row, axis)

    def with_index(self, axis: int, value: int) -> ViewSpec:
        idx = list(self.index)
        idx[axis] = max(0, min(int(value), self.shape[axis] - 1))
        return replace(self, index=tuple(idx))

    def key(self, rows: slice, cols: slice) -> Key:
        """Key selecting ``rows`` × ``cols`` of this plane (other axes at their index)."""
        key: list[slice | int] = []
        for axis in range(len(self.shape)):
            if axis == self.row_axis:
                key.append(rows)
            elif axis == self.col_axis:
                key.append(cols)
            else:
                key.append(self.index[axis])
        return tuple(key)

    def plane_key(self) -> Key:
        return self.key(slice(0, self.rows), slice(0, self.cols))

    def label(self) -> str:
        """numpy-style text of the plane, e.g. ``[2, :, 0, :]``."""
        if not self.shape:
            return "[] (scalar)"
        parts = [
            ":" if a in (self.row_axis, self.col_axis) else str(self.index[a])
            for a in range(len(self.shape))
        ]
        return "[" + ", ".join(parts) + "]"

    def read(self, ref: TensorRef, rows: slice, cols: slice) -> np.ndarray:
        """The values of ``rows`` × ``cols`` as a 2-D array (rows first)."""
        if not self.shape:
            return np.asarray(ref.read()).reshape(1, 1)
        arr = np.asarray(ref.read(self.key(rows, cols)))
        if self.col_axis is None:
            return arr.reshape(-1, 1)
        assert self.row_axis is not None
        if self.row_axis > self.col_axis:
            arr = arr.T
        return arr


def plane_steps(rows: int, cols: int, max_side: int) -> tuple[int, int]:
    """Strides keeping each side of a plane within ``max_side``."""
    return max(1, math.ceil(rows / max_side)), max(1, math.ceil(cols / max_side))


def read_plane(ref: TensorRef, spec: ViewSpec, max_side: int = 1024) -> tuple[np.ndarray, int, int]:
    """The current plane, strided to at most ``max_side`` per side: (values, row step, col step)."""
    rs, cs = plane_steps(spec.rows, spec.cols, max_side)
    arr = spec.read(ref, slice(0, spec.rows, rs), slice(0, spec.cols, cs))
    return arr, rs, cs


def as_float(arr: np.ndarray) -> np.ndarray:
    """Numeric values as float64 for plotting (complex -> magnitude, bool -> 0/1)."""
    arr = np.asarray(arr)
    if arr.dtype.kind in "OUSV":
        raise NNEditorError("this tensor holds strings or raw records, which cannot be plotted")
    if arr.dtype.kind == "c":
        return np.abs(arr).astype(np.float64)
    return arr.astype(np.float64)


@dataclass(frozen=True)
class Sample:
    values: np.ndarray  # flat float64
    steps: tuple[int, ...]  # stride per axis
    total: int

    @property
    def exhaustive(self) -> bool:
        return all(s == 1 for s in self.steps)

    def describe(self) -> str:
        if self.exhaustive:
            return f"all {self.total:,} values"
        strides = ", ".join(f"axis {a} every {s}" for a, s in enumerate(self.steps) if s > 1)
        return f"sample of {self.values.size:,} of {self.total:,} values ({strides})"


def sample_steps(shape: tuple[int, ...], limit: int) -> tuple[int, ...]:
    """Per-axis strides (leading axes first) so the strided selection has ≤ ``limit`` values."""
    steps = [1] * len(shape)
    counts = list(shape)
    for axis in range(len(shape)):
        n = math.prod(counts)
        if n <= limit:
            break
        rest = n // max(1, counts[axis])
        want = max(1, limit // max(1, rest))  # how many indices of this axis may stay
        step = max(1, math.ceil(shape[axis] / want))
        steps[axis] = step
        counts[axis] = len(range(0, shape[axis], step))
    return tuple(steps)


def read_sample(ref: TensorRef, limit: int = 1 << 20) -> Sample:
    """A deterministic strided sample of at most ~``limit`` values (all when small enough)."""
    shape = tuple(ref.shape)
    if not shape:
        return Sample(as_float(ref.read()).reshape(-1), (), 1)
    steps = sample_steps(shape, limit)
    key = tuple(slice(0, d, s) for d, s in zip(shape, steps, strict=True))
    values = as_float(ref.read(key) if any(s > 1 for s in steps) else ref.read()).reshape(-1)
    return Sample(values, steps, ref.size)


def peak_downsample(y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Min/max envelope of ``y`` in ``max_points // 2`` bins: (x, y, bin width); exact if small.

    Every bin contributes its minimum and its maximum (in that order) at the bin's first index,
    so spikes survive the reduction.
    """
    n = y.size
    if n <= max_points:
        return np.arange(n, dtype=np.float64), y, 1
    bins = max(1, max_points // 2)
    width = math.ceil(n / bins)
    pad = bins * width - n
    padded = np.concatenate([y, np.full(pad, np.nan)]) if pad else y
    blocks = padded.reshape(bins, width)
    with np.errstate(all="ignore"):
        lo = np.nanmin(np.where(np.isnan(blocks), np.inf, blocks), axis=1)
        hi = np.nanmax(np.where(np.isnan(blocks), -np.inf, blocks), axis=1)
    x0 = np.arange(bins, dtype=np.float64) * width
    xs = np.repeat(x0, 2)
    ys = np.empty(2 * bins)
    ys[0::2], ys[1::2] = lo, hi
    return xs, ys, width
