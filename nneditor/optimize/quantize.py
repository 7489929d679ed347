"""Quantization previews over a model's weights, streamed in bounded blocks.

Invariants:

- Only main-graph stored float tensors (initializers or Constant nodes) read as
  MatMul/Gemm/Conv weights are candidates
  (:func:`nneditor.optimize.weights.find_weights`); 1-D tensors never are, and tensors under
  ``min_elements`` are skipped unless named explicitly.
- Each tensor is read twice, one block at a time (:func:`~nneditor.optimize.weights.iter_blocks`):
  pass 1 gathers per-channel (or global) min/max, pass 2 quantizes, dequantizes and accumulates
  errors and histograms. Extra memory is a few copies of one block whatever the model size.
- Numbers are those of :mod:`nneditor.optimize.qmath` (equal to onnxruntime.quantization's).
- A preview states what it is: a mathematical conversion; a storage reduction only in weight
  conversion mode (int8 + scales stored instead of floats); runtime acceleration is never
  claimed because nothing here measures it.
- Cancelled previews return the tensors finished so far with ``partial=True``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nneditor.jobs import JobHandle
from nneditor.model.document import Document
from nneditor.optimize.qmath import (
    ErrorAccumulator,
    QuantResult,
    QuantSettings,
    compute_params,
    dequantize_values,
    quantize_tensor,
    quantize_values,
    scale_dtype,
)
from nneditor.optimize.weights import (
    BLOCK_ELEMS,
    FLOAT_DTYPES,
    OptimizeError,
    WeightInfo,
    channel_shape,
    find_weights,
    iter_blocks,
    read_block,
    reduce_except,
    require_graph,
)

__all__ = [
    "MODES",
    "QuantPreview",
    "QuantResult",
    "QuantSettings",
    "TensorQuantPreview",
    "Target",
    "preview_quantization",
    "quantize_tensor",
    "select_targets",
]

HIST_BINS = 64
MIN_ELEMENTS = 1024
MODES = ("weights", "qdq")


@dataclass
class Target:
    """A weight chosen for quantization, with the channel axis used (None: per tensor)."""

    info: WeightInfo
    axis: int | None


@dataclass
class TensorQuantPreview:
    name: str
    shape: tuple[int, ...]
    dtype: str
    axis: int | None
    consumers: list[str]
    scale: np.ndarray
    zero_point: np.ndarray
    count: int
    mse: float
    max_abs_error: float
    sqnr_db: float
    clipped_fraction: float
    hist_edges: list[float]
    hist_before: list[int]
    hist_after: list[int]
    bytes_before: int
    bytes_after: int
    signal: float = 0.0
    noise: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "axis": self.axis,
            "consumers": list(self.consumers),
            "scale": _summary(self.scale),
            "zero_point": _summary(self.zero_point),
            "mse": self.mse,
            "max_abs_error": self.max_abs_error,
            "sqnr_db": _finite_or_none(self.sqnr_db),
            "exact": self.noise == 0.0,
            "clipped_fraction": self.clipped_fraction,
            "hist_edges": self.hist_edges,
            "hist_before": self.hist_before,
            "hist_after": self.hist_after,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_change": self.bytes_after - self.bytes_before,
        }


@dataclass
class QuantPreview:
    settings: QuantSettings
    mode: str
    tensors: list[TensorQuantPreview] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    partial: bool = True
    processed_elements: int = 0
    total_elements: int = 0

    def totals(self) -> dict[str, Any]:
        count = sum(t.count for t in self.tensors)
        signal = sum(t.signal for t in self.tensors)
        noise = sum(t.noise for t in self.tensors)
        before = sum(t.bytes_before for t in self.tensors)
        after = sum(t.bytes_after for t in self.tensors)
        clipped = sum(t.clipped_fraction * t.count for t in self.tensors)
        return {
            "tensors": len(self.tensors),
            "elements": count,
            "mse": noise / count if count else 0.0,
            "max_abs_error": max((t.max_abs_error for t in self.tensors), default=0.0),
            "sqnr_db": _finite_or_none(_sqnr(signal, noise)),
            "clipped_fraction": clipped / count if count else 0.0,
            "bytes_before": before,
            "bytes_after": after,
            "bytes_change": after - before,
        }

    def claims(self) -> dict[str, Any]:
        totals = self.totals()
        reduction = -totals["bytes_change"] if self.mode == "weights" else None
        note = (
            "Weight conversion stores int8/uint8 values plus scales and zero points instead of "
            "floats; DequantizeLinear restores float weights at run time."
            if self.mode == "weights"
            else "QDQ insertion keeps the float weights and adds Quantize/DequantizeLinear "
            "pairs: the stored model does not get smaller."
        )
        return {
            "mathematical_conversion": True,
            "storage_reduction": reduction,
            "runtime_acceleration": "not measured",
            "note": note
            + " Whether a runtime executes it faster depends on the runtime and was not measured.",
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": {
                "signed": self.settings.signed,
                "symmetric": self.settings.symmetric,
                "per_channel": self.settings.per_channel,
                "axis": self.settings.axis,
                "description": self.settings.describe(),
            },
            "mode": self.mode,
            "partial": self.partial,
            "processed_elements": self.processed_elements,
            "total_elements": self.total_elements,
            "tensors": [t.as_dict() for t in self.tensors],
            "skipped": list(self.skipped),
            "totals": self.totals(),
            "claims": self.claims(),
        }


# -- selection -----------------------------------------------------------------------------


def select_targets(
    doc: Document,
    settings: QuantSettings,
    tensor_names: Sequence[str] | None = None,
    min_elements: int = MIN_ELEMENTS,
) -> tuple[list[Target], list[dict[str, str]]]:
    """The weights to quantize and, for the others, why they are skipped."""
    graph = require_graph(doc)
    weights = find_weights(doc)
    graph_inputs = {vi.name for vi in graph.inputs}
    if tensor_names is not None:
        _check_names(doc, weights, tensor_names)
        chosen = [weights[n] for n in dict.fromkeys(tensor_names)]
    else:
        chosen = list(weights.values())
    targets: list[Target] = []
    skipped: list[dict[str, str]] = []
    for info in chosen:
        reason = _skip_reason(info, graph_inputs, min_elements, explicit=tensor_names is not None)
        axis: int | None = None
        if reason is None and settings.per_channel:
            axis, reason = _channel_axis(info, settings)
        if reason is not None:
            skipped.append({"name": info.name, "reason": reason})
        else:
            targets.append(Target(info, axis))
    return targets, skipped


def _check_names(doc: Document, weights: dict[str, WeightInfo], names: Sequence[str]) -> None:
    for name in names:
        if name in weights:
            continue
        listed = ", ".join(list(weights)[:8]) + (", …" if len(weights) > 8 else "")
        why = (
            "is not read as the weight of a MatMul, Gemm or Conv"
            if name in doc.tensors
            else "is not a tensor of this model"
        )
        raise OptimizeError(
            f"tensor {name!r} {why}; quantization applies to stored weights "
            f"({len(weights)} in this graph: {listed or 'none'})"
        )


def _skip_reason(
    info: WeightInfo, graph_inputs: set[str], min_elements: int, explicit: bool
) -> str | None:
    ref = info.ref
    if ref.dtype not in FLOAT_DTYPES:
        return f"dtype {ref.dtype} is not quantized (float32, float16 and bfloat16 are)"
    if info.name in graph_inputs:
        return "it is also a graph input, so a caller may replace it at run time"
    if not explicit and ref.size < min_elements:
        return f"tiny tensor ({ref.size} elements < {min_elements}); name it to include it"
    if 0 in ref.shape:
        return "it has no elements"
    return None


def _channel_axis(info: WeightInfo, settings: QuantSettings) -> tuple[int | None, str | None]:
    rank = len(info.shape)
    if settings.axis is not None:
        if not -rank <= settings.axis < rank:
            raise OptimizeError(
                f"axis {settings.axis} is out of range for {info.name!r} of shape "
                f"{list(info.shape)} (rank {rank})"
            )
        return settings.axis % rank, None
    axis = info.axis("output")
    if axis is None:
        ops = ", ".join(f"{u.op_type} {u.node_name!r}" for u in info.uses)
        return None, (
            f"its consumers ({ops}) disagree on the output-channel axis; give an explicit axis"
        )
    return axis, None


# -- streaming -----------------------------------------------------------------------------


def tensor_ranges(
    info: WeightInfo,
    axis: int | None,
    handle: JobHandle,
    progress: list[int],
    block_elems: int = BLOCK_ELEMS,
) -> tuple[np.ndarray, np.ndarray, float, float] | str:
    """Pass 1: (channel mins, channel maxs, global min, global max), or why it cannot be done."""
    ref = info.ref
    n_ch = info.shape[axis] if axis is not None else 1
    lo = np.full(n_ch, np.inf, dtype=np.float32)
    hi = np.full(n_ch, -np.inf, dtype=np.float32)
    for block in iter_blocks(ref.shape, block_elems):
        handle.check_cancelled()
        x = read_block(ref, block)
        if not np.isfinite(x).all():
            bad = int(x.size - np.count_nonzero(np.isfinite(x)))
            return f"it holds NaN or infinite values ({bad} in one block); quantizing them is undefined"
        if axis is None:
            lo[0] = min(lo[0], x.min())
            hi[0] = max(hi[0], x.max())
        else:
            sl = block.channel_slice(axis)
            lo[sl] = np.minimum(lo[sl], reduce_except(x, axis, "min"))
            hi[sl] = np.maximum(hi[sl], reduce_except(x, axis, "max"))
        progress[0] += x.size
        handle.progress(progress[0], progress[1], f"ranges of {info.name}")
    return lo, hi, float(lo.min()), float(hi.max())


def _preview_tensor(
    target: Target,
    settings: QuantSettings,
    mode: str,
    handle: JobHandle,
    progress: list[int],
    block_elems: int,
) -> TensorQuantPreview | str:
    info, axis = target.info, target.axis
    ref = info.ref
    ranges = tensor_ranges(info, axis, handle, progress, block_elems)
    if isinstance(ranges, str):
        progress[0] += ref.size  # pass 2 is skipped
        return ranges
    lo, hi, gmin, gmax = ranges
    scale, zp = compute_params(lo, hi, settings, ref.dtype)
    if axis is None:
        scale, zp = scale.reshape(()), zp.reshape(())
    pad = float(np.asarray(scale, dtype=np.float32).max()) / 2
    edges = _edges(gmin - pad, gmax + pad)
    acc = ErrorAccumulator()
    before = np.zeros(HIST_BINS, dtype=np.int64)
    after = np.zeros(HIST_BINS, dtype=np.int64)
    for block in iter_blocks(ref.shape, block_elems):
        handle.check_cancelled()
        x = read_block(ref, block)
        if axis is None:
            s_b, z_b = scale, zp
        else:
            sl, shp = block.channel_slice(axis), channel_shape(x.ndim, axis)
            s_b, z_b = scale[sl].reshape(shp), zp[sl].reshape(shp)
        q, clipped = quantize_values(x, s_b, z_b, settings)
        dq = dequantize_values(q, s_b, z_b, ref.dtype)
        acc.add(x, dq, clipped)
        before += _hist(x, edges)
        after += _hist(dq, edges)
        progress[0] += x.size
        handle.progress(progress[0], progress[1], f"quantizing {info.name}")
    n_params = int(np.asarray(scale).size)
    params_bytes = n_params * (scale_dtype(ref.dtype).itemsize + 1)
    bytes_after = (ref.size + params_bytes) if mode == "weights" else (ref.nbytes + params_bytes)
    return TensorQuantPreview(
        name=info.name,
        shape=ref.shape,
        dtype=ref.dtype,
        axis=axis,
        consumers=[f"{u.op_type} {u.node_name or '#' + str(u.node_index)}" for u in info.uses],
        scale=np.asarray(scale),
        zero_point=np.asarray(zp),
        count=acc.count,
        mse=acc.mse,
        max_abs_error=acc.max_abs,
        sqnr_db=acc.sqnr_db,
        clipped_fraction=acc.clipped_fraction,
        hist_edges=[float(e) for e in edges],
        hist_before=[int(c) for c in before],
        hist_after=[int(c) for c in after],
        bytes_before=ref.nbytes,
        bytes_after=bytes_after,
        signal=acc.signal,
        noise=acc.noise,
    )


def preview_quantization(
    doc: Document,
    settings: QuantSettings,
    tensor_names: Sequence[str] | None = None,
    handle: JobHandle | None = None,
    *,
    mode: str = "weights",
    min_elements: int = MIN_ELEMENTS,
    block_elems: int = BLOCK_ELEMS,
) -> QuantPreview:
    """Preview ``settings`` on the model's weights (see module docstring).

    ``mode`` is ``"weights"`` (int8 storage + DequantizeLinear) or ``"qdq"`` (float weights
    kept, Quantize/DequantizeLinear inserted); it only changes the stored-size figures.
    """
    if mode not in MODES:
        raise OptimizeError(f"unknown quantization mode {mode!r}; use one of {', '.join(MODES)}")
    handle = handle or JobHandle()
    targets, skipped = select_targets(doc, settings, tensor_names, min_elements)
    preview = QuantPreview(settings, mode, skipped=skipped)
    preview.total_elements = sum(t.info.ref.size for t in targets)
    handle.set_partial(preview)
    progress = [0, 2 * preview.total_elements]
    for target in targets:
        result = _preview_tensor(target, settings, mode, handle, progress, block_elems)
        if isinstance(result, str):
            preview.skipped.append({"name": target.info.name, "reason": result})
        else:
            preview.tensors.append(result)
            preview.processed_elements += result.count
    preview.partial = False
    handle.progress(progress[1], progress[1], "done")
    return preview


# -- helpers -------------------------------------------------------------------------------


def _edges(lo: float, hi: float) -> np.ndarray:
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, HIST_BINS + 1)


def _hist(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts per bin of uniform ``edges``; values outside are clamped into the end bins."""
    lo, hi = float(edges[0]), float(edges[-1])
    flat = values.reshape(-1)
    if flat.size and (flat.min() < lo or flat.max() > hi):
        flat = np.clip(flat, lo, hi)
    counts, _ = np.histogram(flat, bins=len(edges) - 1, range=(lo, hi))
    return counts


def _sqnr(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _finite_or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _summary(arr: np.ndarray) -> dict[str, Any]:
    a = np.asarray(arr)
    flat = a.reshape(-1).astype(np.float64)
    out: dict[str, Any] = {
        "count": int(flat.size),
        "dtype": str(a.dtype),
        "min": float(flat.min()) if flat.size else None,
        "max": float(flat.max()) if flat.size else None,
        "mean": float(flat.mean()) if flat.size else None,
    }
    if flat.size <= 8:
        out["values"] = [int(v) if a.dtype.kind in "iu" else float(v) for v in flat]
    return out
