"""Streaming tensor statistics with bounded memory.

Two passes over chunks of ≤ CHUNK decoded elements, so extra memory stays within ~64 MiB
whatever the tensor size: pass 1 gathers count, min, max, sum, sum of squares (Chan's parallel
merge in float64), zeros, NaN and ±Inf; pass 2 fills a fine histogram of 65,536 bins between
min and max. Percentiles are exact (numpy, linear) for tensors of up to EXACT_LIMIT finite
values; above that they come from the fine histogram and the reported error bound is one fine
bin width. NaN and ±Inf are counted, never mixed into min/max/mean.

Speed and memory: numpy-native chunks (float16/32/64, integers) are reduced as they are, not
converted up front; float64, index and mask intermediates live in scratch buffers reused across
chunks; no BLAS call (its threads stall on busy CPUs); and the mapped file pages a pass has
consumed are released as it goes (:class:`~nneditor.analysis.chunks.PageReleaser`), so resident
memory stays bounded too, not just allocations.

A cancelled run returns the statistics of the processed prefix with ``partial=True``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from nneditor.analysis.chunks import PageReleaser, iter_chunks
from nneditor.errors import NNEditorError
from nneditor.jobs import JobHandle
from nneditor.model.tensor import TensorRef

CHUNK = 1 << 20  # 1 Mi elements: 8 MiB per float64 scratch buffer
EXACT_LIMIT = 1 << 22
FINE_BINS = 1 << 16
DISPLAY_BINS = 64
PERCENTILES = (0.1, 1, 5, 25, 50, 75, 95, 99, 99.9)


@dataclass
class TensorStats:
    count: int = 0
    finite: int = 0
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    zeros: int = 0
    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    sparsity: float = 0.0
    l2_norm: float = 0.0
    percentiles: dict[str, float] = field(default_factory=dict)
    percentile_method: str = "exact"
    percentile_error_bound: float = 0.0
    histogram: dict[str, list[float]] = field(default_factory=lambda: {"edges": [], "counts": []})
    partial: bool = False
    processed: int = 0
    total: int = 0
    note: str = ""

    @property
    def inf(self) -> int:
        return self.pos_inf + self.neg_inf

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["inf"] = self.inf
        return d


class _Scratch:
    """Reusable float64, index and mask buffers (grown on demand, never per chunk)."""

    def __init__(self) -> None:
        self.f = np.empty(0, np.float64)
        self.i = np.empty(0, np.intp)
        self.b = np.empty(0, np.bool_)

    def floats(self, n: int) -> np.ndarray:
        if self.f.size < n:
            self.f = np.empty(n, np.float64)
        return self.f[:n]

    def indices(self, n: int) -> np.ndarray:
        if self.i.size < n:
            self.i = np.empty(n, np.intp)
        return self.i[:n]

    def mask(self, n: int) -> np.ndarray:
        if self.b.size < n:
            self.b = np.empty(n, np.bool_)
        return self.b[:n]


class _Moments:
    """Mergeable count/mean/M2 (Chan et al.) plus min/max and special counts."""

    def __init__(self, scratch: _Scratch) -> None:
        self.scratch = scratch
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.sumsq = 0.0
        self.lo = np.inf
        self.hi = -np.inf
        self.zeros = self.nan = self.pinf = self.ninf = self.count = 0

    @property
    def nonfinite(self) -> int:
        return self.nan + self.pinf + self.ninf

    def add(self, x: np.ndarray, keep: list[np.ndarray] | None = None) -> None:
        """Fold a flat numeric chunk in; appends its finite values (float64) to ``keep``."""
        self.count += x.size
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, overflow: checked next
            total = float(np.add.reduce(x, dtype=np.float64))
        if not math.isfinite(total):  # a NaN/Inf in the chunk (or a float64 overflow)
            finite_mask = np.isfinite(x)
            if not finite_mask.all():
                self.nan += int(np.count_nonzero(np.isnan(x)))
                self.pinf += int(np.count_nonzero(x == np.inf))
                self.ninf += int(np.count_nonzero(x == -np.inf))
                x = x[finite_mask]
                total = float(np.add.reduce(x, dtype=np.float64))
        self.zeros += int(np.count_nonzero(np.equal(x, 0, out=self.scratch.mask(x.size))))
        if x.size == 0:
            return
        if keep is not None:
            keep.append(np.array(x, dtype=np.float64))
        n_b = x.size
        mean_b = total / n_b
        d = self.scratch.floats(n_b)
        np.subtract(x, mean_b, out=d, dtype=np.float64)
        m2_b = float(np.einsum("i,i->", d, d))  # not np.dot: BLAS threads stall on busy CPUs
        self.sumsq += m2_b + n_b * mean_b * mean_b  # = sum(x*x), without cancellation
        self.lo = min(self.lo, float(x.min()))
        self.hi = max(self.hi, float(x.max()))
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.n = n


def _flat(arr: np.ndarray) -> np.ndarray:
    """The chunk as a flat array numpy reduces natively (float64 for extension dtypes)."""
    if arr.dtype.kind == "c":
        arr = np.abs(arr)
    elif arr.dtype.kind in "OUS":
        raise NNEditorError("statistics need numeric values; this tensor holds strings")
    if arr.dtype.isbuiltin != 1 or arr.dtype.kind not in "fiu" or arr.dtype.byteorder == ">":
        arr = np.asarray(arr, dtype=np.float64)
    return arr.reshape(-1)


def _read(ref: TensorRef, key: tuple) -> np.ndarray:
    return _flat(ref.loader.read(ref.shape, key) if key else ref.read())


def tensor_stats(
    ref: TensorRef, handle: JobHandle | None = None, chunk: int = CHUNK
) -> TensorStats:
    """Statistics of ``ref``'s decoded values (see module docstring)."""
    handle = handle or JobHandle()
    total = ref.size
    st = TensorStats(total=total)
    if ref.dtype == "string":
        raise NNEditorError("statistics need numeric values; this tensor holds strings")
    scratch = _Scratch()
    mom = _Moments(scratch)
    exact_parts: list[np.ndarray] | None = [] if total <= EXACT_LIMIT else None
    done = 0
    keys = list(iter_chunks(ref.shape, chunk))
    steps = 2 * total if exact_parts is None else total
    pages = PageReleaser(ref)
    try:
        for key, n in keys:
            handle.check_cancelled()
            mom.add(_read(ref, key), exact_parts)
            done += n
            pages.advance(done, total)
            handle.progress(done, steps, "statistics")
        _fill_moments(st, mom, done)
        if exact_parts is not None:
            values = np.concatenate(exact_parts) if exact_parts else np.empty(0)
            _exact_percentiles(st, values)
        else:
            _sketch_percentiles(st, ref, mom, keys, handle, done, steps)
    except Exception as exc:
        from nneditor.errors import CancelledError

        if not isinstance(exc, CancelledError):
            raise
        _fill_moments(st, mom, done)
        st.partial = True
        st.note = f"cancelled after {done:,} of {total:,} values; statistics cover that prefix"
        if exact_parts:
            _exact_percentiles(st, np.concatenate(exact_parts))
    return st


def _fill_moments(st: TensorStats, mom: _Moments, done: int) -> None:
    st.count = mom.count
    st.processed = done
    st.finite = mom.n
    st.zeros = mom.zeros
    st.nan = mom.nan
    st.pos_inf = mom.pinf
    st.neg_inf = mom.ninf
    st.sparsity = mom.zeros / mom.count if mom.count else 0.0
    st.l2_norm = float(np.sqrt(mom.sumsq))
    if mom.n:
        st.min, st.max = mom.lo, mom.hi
        st.mean = mom.mean
        st.std = float(np.sqrt(mom.m2 / mom.n))


def _exact_percentiles(st: TensorStats, values: np.ndarray) -> None:
    st.percentile_method = "exact"
    st.percentile_error_bound = 0.0
    if values.size:
        qs = np.percentile(values, PERCENTILES)
        st.percentiles = {_pkey(p): float(q) for p, q in zip(PERCENTILES, qs, strict=True)}
        counts, edges = np.histogram(values, bins=DISPLAY_BINS, range=_range(st))
        st.histogram = {"edges": edges.tolist(), "counts": counts.astype(int).tolist()}


def _range(st: TensorStats) -> tuple[float, float]:
    lo, hi = float(st.min or 0.0), float(st.max or 0.0)
    if hi <= lo:
        hi = lo + 1.0 if lo == 0 else lo + abs(lo) * 1e-6 + 1e-12
    return lo, hi


def _sketch_percentiles(st, ref, mom, keys, handle, done, steps) -> None:  # noqa: ANN001
    lo, hi = _range(st)
    fine = np.zeros(FINE_BINS, dtype=np.int64)
    scale = FINE_BINS / (hi - lo)
    pages = PageReleaser(ref)
    for key, n in keys:
        handle.check_cancelled()
        _add_fine(fine, _read(ref, key), lo, scale, mom.scratch, mom.nonfinite > 0)
        done += n
        pages.advance(done - ref.size, ref.size)
        handle.progress(done, steps, "percentiles")
    width = (hi - lo) / FINE_BINS
    cum = np.cumsum(fine)
    total = int(cum[-1])
    out = {}

    def value_at(k: int) -> float:
        # the k-th smallest finite value lies in the first bin whose cumulative count exceeds k
        b = min(int(np.searchsorted(cum, k, side="right")), FINE_BINS - 1)
        return min(hi, max(lo, lo + (b + 0.5) * width))

    for p in PERCENTILES:
        rank = p / 100 * (total - 1)
        k = int(np.floor(rank))
        frac = rank - k
        a = value_at(k)
        b = value_at(min(k + 1, total - 1))
        out[_pkey(p)] = float(a + frac * (b - a))
    st.percentiles = out
    st.percentile_method = f"histogram sketch ({FINE_BINS} bins)"
    # each order statistic is estimated by its bin centre (error <= width / 2); linear
    # interpolation between two such estimates keeps that bound; we state a full bin width.
    st.percentile_error_bound = float(width)
    coarse = fine.reshape(DISPLAY_BINS, -1).sum(axis=1)
    edges = np.linspace(lo, hi, DISPLAY_BINS + 1)
    st.histogram = {"edges": edges.tolist(), "counts": coarse.astype(int).tolist()}


def _add_fine(
    fine: np.ndarray, x: np.ndarray, lo: float, scale: float, scratch: _Scratch, filter_: bool
) -> None:
    """Count the chunk's finite values into the fine bins: floor((x - lo) * scale), clipped."""
    if filter_:
        x = x[np.isfinite(x)]
    f = scratch.floats(x.size)
    np.subtract(x, lo, out=f, dtype=np.float64)
    np.multiply(f, scale, out=f)
    idx = scratch.indices(x.size)
    np.copyto(idx, f, casting="unsafe")  # truncation, as astype(int)
    np.clip(idx, 0, FINE_BINS - 1, out=idx)
    np.add.at(fine, idx, 1)


def _pkey(p: float) -> str:
    return f"{p:g}"
