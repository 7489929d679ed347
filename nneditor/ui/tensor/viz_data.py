"""What the Visualization tab plots, computed from bounded reads (Qt-free, no pyqtgraph).

Invariants:
- Every function reads at most ~``MAX_VALUES`` values through ``TensorRef.read(key)`` with a
  strided key, and reports the strides so the plot can say it is a sample.
- :func:`pick_view` chooses from the shape (and the name, and at most one probed row), never
  from a full read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nneditor.model.tensor import TensorRef
from nneditor.ui.tensor.view_spec import as_float

MAX_VALUES = 1 << 22
GRID_MAX = 64
HIST_BINS = 64

VIEWS: dict[str, str] = {
    "histogram": "Histogram",
    "line": "Line (1-d)",
    "heatmap": "Heatmap (current slice)",
    "feature_maps": "Feature maps (C×H×W)",
    "attention": "Attention map (heads×q×k)",
}

_ATTENTION_NAME = re.compile(r"attn|attention|score|prob|softmax", re.IGNORECASE)


def available_views(shape: tuple[int, ...]) -> list[str]:
    nd = len(shape)
    views = ["histogram"]
    if nd >= 1:
        views.append("line")
    if nd >= 2:
        views.append("heatmap")
    if nd in (3, 4):
        views += ["feature_maps", "attention"]
    return views


def looks_like_softmax(row: np.ndarray) -> bool:
    """A probability row: finite, non-negative, summing to 1 (float32 rounding allowed)."""
    r = as_float(row).reshape(-1)
    if r.size < 2 or not np.isfinite(r).all() or r.min() < 0:
        return False
    return abs(float(r.sum()) - 1.0) < 5e-3


def pick_view(
    shape: tuple[int, ...],
    name: str = "",
    hint: str | None = None,
    probe: Callable[[], np.ndarray] | None = None,
) -> str:
    """The view to open first: 0-d histogram, 1-d line, 2-d heatmap; 3/4-d attention when the
    name says so or a probed last-axis row is a probability distribution, else feature maps."""
    views = available_views(shape)
    if hint in views:
        return str(hint)
    nd = len(shape)
    if nd == 0:
        return "histogram"
    if nd == 1:
        return "line"
    if nd in (3, 4):
        if _ATTENTION_NAME.search(name):
            return "attention"
        if probe is not None and shape[-1] > 1:
            try:
                if looks_like_softmax(probe()):
                    return "attention"
            except Exception:  # an unreadable tensor still gets a view
                pass
        return "feature_maps"
    return "heatmap"


def first_row_probe(ref: TensorRef) -> Callable[[], np.ndarray]:
    """Reads the first last-axis row (index 0 on every other axis)."""
    return lambda: ref.read(",".join(["0"] * (len(ref.shape) - 1) + [":"]))


def stride_for(count: int, h: int, w: int, max_values: int = MAX_VALUES) -> int:
    """Spatial stride keeping ``count`` maps of h×w within ``max_values``."""
    n = count * h * w
    return 1 if n <= max_values else math.ceil(math.sqrt(n / max_values))


@dataclass
class Mosaic:
    image: np.ndarray  # 2-D float64, NaN between tiles
    tiles: np.ndarray  # (n, h, w)
    grid: tuple[int, int]  # rows, cols of tiles
    first: int
    total: int  # maps along the grid axis
    step: int  # spatial stride

    @property
    def count(self) -> int:
        return int(self.tiles.shape[0])


def feature_key(
    shape: tuple[int, ...], grid_axis: int, fixed: int, first: int, count: int, step: int
) -> tuple[slice | int, ...]:
    h, w = shape[-2], shape[-1]
    maps = slice(first, first + count)
    spatial = (slice(0, h, step), slice(0, w, step))
    if len(shape) == 3:
        return (maps, *spatial)
    lead: tuple[slice | int, ...] = (maps, fixed) if grid_axis == 0 else (fixed, maps)
    return (*lead, *spatial)


def feature_mosaic(
    ref: TensorRef,
    grid_axis: int = 0,
    fixed: int = 0,
    first: int = 0,
    count: int = GRID_MAX,
    normalize: bool = False,
) -> Mosaic:
    """Up to ``count`` maps along ``grid_axis`` (3-d: axis 0; 4-d: 0 or 1, the other at
    ``fixed``), tiled row-major into one image with one-pixel NaN gaps."""
    shape = tuple(ref.shape)
    total = shape[0] if len(shape) == 3 else shape[grid_axis]
    first = max(0, min(first, total - 1))
    n = max(0, min(count, total - first))
    step = stride_for(n, shape[-2], shape[-1])
    tiles = as_float(ref.read(feature_key(shape, grid_axis, fixed, first, n, step)))
    tiles = tiles.reshape(n, *tiles.shape[-2:])
    if normalize and n:
        tiles = _normalize_tiles(tiles)
    cols = max(1, math.ceil(math.sqrt(n)))
    rows = max(1, math.ceil(n / cols))
    h, w = tiles.shape[1], tiles.shape[2]
    gap = 1
    image = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap), np.nan)
    for i in range(n):
        r, c = divmod(i, cols)
        image[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = tiles[i]
    return Mosaic(image, tiles, (rows, cols), first, total, step)


def _normalize_tiles(tiles: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        lo = np.nanmin(tiles, axis=(1, 2), keepdims=True)
        hi = np.nanmax(tiles, axis=(1, 2), keepdims=True)
        span = np.where(hi > lo, hi - lo, 1.0)
        return (tiles - lo) / span


def attention_plane(
    ref: TensorRef, batch: int = 0, head: int = 0, max_side: int = 1024
) -> tuple[np.ndarray, int]:
    """The q×k map of one head (and batch item for 4-d), strided to ≤ ``max_side`` per side."""
    shape = tuple(ref.shape)
    q, k = shape[-2], shape[-1]
    step = max(1, math.ceil(max(q, k) / max_side))
    lead: tuple[int, ...] = (head,) if len(shape) == 3 else (batch, head)
    arr = as_float(ref.read((*lead, slice(0, q, step), slice(0, k, step))))
    return arr, step


def sample_histogram(values: np.ndarray, bins: int = HIST_BINS) -> tuple[np.ndarray, np.ndarray]:
    """(edges, counts) of the finite values; an empty or constant sample still gets one bin."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return np.array([0.0, 1.0]), np.array([0])
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        hi = lo + (abs(lo) * 1e-6 or 1.0)
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi))
    return edges, counts


@dataclass(frozen=True)
class ColorScale:
    low: float
    high: float
    diverging: bool  # symmetric around 0 (data has both signs)
    clipped: bool  # the range is narrower than the data's min..max
    data_min: float
    data_max: float

    def describe(self) -> str:
        if not self.clipped:
            return f"colour scale {self.low:.4g} … {self.high:.4g}"
        what = "|value|" if self.diverging else "value"
        return (
            f"colour scale clipped to {self.low:.4g} … {self.high:.4g} (the {CLIP_PCT}th "
            f"percentile of {what}; data range {self.data_min:.4g} … {self.data_max:.4g})"
        )


#: Colour scales stop at this percentile so a few outliers do not wash out the map...
CLIP_PCT = 99.5
#: ...when there are at least this many values.
CLIP_MIN_VALUES = 1000


def _full_range(lo: float, hi: float) -> ColorScale:
    if lo < 0 < hi:
        m = max(-lo, hi)
        return ColorScale(-m, m, True, False, lo, hi)
    if hi <= lo:
        return ColorScale(lo - 0.5, hi + 0.5, False, False, lo, hi)
    return ColorScale(lo, hi, False, False, lo, hi)


def color_levels(values: np.ndarray) -> ColorScale:
    """Colour range: symmetric around 0 when the data has both signs, clipped at ``CLIP_PCT``."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return ColorScale(0.0, 1.0, False, False, 0.0, 1.0)
    lo, hi = float(v.min()), float(v.max())
    if v.size < CLIP_MIN_VALUES:  # too few values for a percentile to mean anything
        return _full_range(lo, hi)
    if lo < 0 < hi:
        full = max(-lo, hi)
        m = float(np.percentile(np.abs(v), CLIP_PCT)) or full
        return ColorScale(-m, m, True, m < full * 0.999, lo, hi)
    if hi <= lo:
        return ColorScale(lo - 0.5, hi + 0.5, False, False, lo, hi)
    plo, phi = (float(x) for x in np.percentile(v, [100 - CLIP_PCT, CLIP_PCT]))
    if phi <= plo:
        plo, phi = lo, hi
    clipped = plo > lo + (hi - lo) * 1e-3 or phi < hi - (hi - lo) * 1e-3
    return ColorScale(plo, phi, False, clipped, lo, hi)


def bar_ticks(low: float, high: float, count: int = 8) -> list[tuple[float, str]]:
    """Round values inside [low, high] (a step of about a ``count``-th of it) with their labels,
    for a colour bar: pyqtgraph's own ticks leave a range like ±0.0011 with only its "0"
    labelled (the ±0.001 labels sit at the bar's ends and are clipped)."""
    span = high - low
    if not math.isfinite(span) or span <= 0:
        return [(low, f"{low:.4g}")]
    raw = span / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
    ticks = []
    for k in range(first, last + 1):
        value = float(f"{k * step:.12g}")  # 0.6, not 0.6000000000000001
        ticks.append((value, f"{value:.4g}"))
    return ticks
