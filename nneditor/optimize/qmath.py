"""8-bit linear quantization arithmetic, written to match onnxruntime.quantization bit for bit.

Relation: ``real = scale * (q - zero_point)``. For a range ``[rmin, rmax]`` (one per tensor or
one per channel):

1. the range is widened to include 0 (``rmin <= 0 <= rmax``) so 0 is exactly representable;
2. symmetric: ``[rmin, rmax] -> [-m, m]`` with ``m = max(|rmin|, |rmax|)``; signed symmetric
   uses the restricted range [-127, 127] (zero point 0), unsigned symmetric uses [0, 255]
   with zero point 128;
3. ``scale = (rmax - rmin) / (qmax - qmin)`` computed in float64, then stored in the weight's
   dtype (float32/float16/bfloat16); asymmetric ``zero_point = round(qmin - rmin / scale)``
   (float64 scale, round half to even);
4. a scale below the dtype's smallest normal (all-zero channel) becomes 1 with zero point 0;
5. ``q = clip(round(x_f32 / scale_f32) + zero_point, type_min, type_max)`` in float32 with
   round half to even, clipped to the full type range (as QuantizeLinear saturates);
6. dequantized values are ``(q - zero_point) * scale`` in float32, then cast to the weight's
   dtype, as DequantizeLinear produces them.

These are the formulas of ``quant_utils.compute_scale_zp`` / ``quantize_nparray`` in ORT
1.17-1.2x; the tests compare against ORT itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nneditor.tensors.dtypes import numpy_dtype


@dataclass(frozen=True)
class QuantSettings:
    """What to quantize to.

    Attributes:
        signed: int8 (True) or uint8 (False).
        symmetric: symmetric range around 0 (True) or the data's min/max (False).
        per_channel: one scale/zero point per output channel (True) or one per tensor.
        axis: the channel axis, overriding the one the consuming op implies (per-channel only).
    """

    signed: bool = True
    symmetric: bool = True
    per_channel: bool = False
    axis: int | None = None

    @property
    def qdtype(self) -> np.dtype:
        return np.dtype(np.int8 if self.signed else np.uint8)

    @property
    def qdtype_name(self) -> str:
        return "int8" if self.signed else "uint8"

    @property
    def type_range(self) -> tuple[int, int]:
        """Saturation range of the stored type."""
        return (-128, 127) if self.signed else (0, 255)

    @property
    def param_range(self) -> tuple[int, int]:
        """Range used to derive scale and zero point (restricted for signed symmetric)."""
        if self.signed and self.symmetric:
            return (-127, 127)
        return self.type_range

    def describe(self) -> str:
        kind = "symmetric" if self.symmetric else "asymmetric"
        gran = "per-channel" if self.per_channel else "per-tensor"
        return f"{self.qdtype_name} {kind} {gran}"


def scale_dtype(weight_dtype: str) -> np.dtype:
    """dtype the scale is stored in (the weight's float type, as DequantizeLinear requires)."""
    return (
        numpy_dtype(weight_dtype)
        if weight_dtype in ("float16", "bfloat16")
        else np.dtype(np.float32)
    )


def compute_params(
    rmin: np.ndarray, rmax: np.ndarray, settings: QuantSettings, weight_dtype: str = "float32"
) -> tuple[np.ndarray, np.ndarray]:
    """(scale, zero_point) for each range; arrays of the ranges' shape.

    ``scale`` is returned in :func:`scale_dtype` (what gets stored), ``zero_point`` in the
    quantized dtype. ``rmin``/``rmax`` are the data's min/max (any float dtype).
    """
    qmin, qmax = settings.param_range
    sdt = scale_dtype(weight_dtype)
    lo = np.minimum(np.asarray(rmin, dtype=np.float64), 0.0)
    hi = np.maximum(np.asarray(rmax, dtype=np.float64), 0.0)
    if settings.symmetric:
        m = np.maximum(np.abs(lo), np.abs(hi))
        lo, hi = -m, m
    scale64 = (hi - lo) / float(qmax - qmin)
    stored = scale64.astype(sdt)
    if sdt == np.float16:
        degenerate = np.asarray(stored, dtype=np.float32) < float(
            np.finfo(np.float16).smallest_subnormal
        )
    else:
        degenerate = scale64 < float(
            np.finfo(np.float32).tiny if sdt == np.float32 else _bf16_tiny()
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        if settings.symmetric:
            zp = np.full(scale64.shape, np.round((qmin + qmax) / 2.0))
        else:
            zp = np.round(qmin - lo / scale64)
    zp = np.where(degenerate, 0.0, zp)
    scale = np.where(degenerate, np.asarray(1.0, dtype=sdt), stored).astype(sdt)
    return scale, zp.astype(settings.qdtype)


def _bf16_tiny() -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(ml_dtypes.bfloat16).tiny)


def quantize_values(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, settings: QuantSettings
) -> tuple[np.ndarray, int]:
    """Quantize ``x`` (broadcastable scale/zero point); returns (q, number of clipped values)."""
    tmin, tmax = settings.type_range
    x32 = np.asarray(x, dtype=np.float32)
    s32 = np.asarray(scale, dtype=np.float32)
    y = np.round(x32 / s32) + np.asarray(zero_point, dtype=np.float32)
    clipped = int(np.count_nonzero((y < tmin) | (y > tmax)))
    np.clip(y, tmin, tmax, out=y)
    return y.astype(settings.qdtype), clipped


def dequantize_values(
    q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, weight_dtype: str = "float32"
) -> np.ndarray:
    """``(q - zero_point) * scale`` as DequantizeLinear computes it, in the weight's dtype."""
    diff = q.astype(np.float32) - np.asarray(zero_point, dtype=np.float32)
    out = diff * np.asarray(scale, dtype=np.float32)
    if weight_dtype in ("float16", "bfloat16"):
        out = out.astype(numpy_dtype(weight_dtype)).astype(np.float32)
    return out


class ErrorAccumulator:
    """Streaming error statistics between original and dequantized values (float64 sums)."""

    def __init__(self) -> None:
        self.count = 0
        self.signal = 0.0
        self.noise = 0.0
        self.max_abs = 0.0
        self.clipped = 0

    def add(self, x: np.ndarray, dq: np.ndarray, clipped: int) -> None:
        """Fold a block in. The difference is taken in float32 (exact for unclipped values:
        ``x`` and its dequantized value are within a factor of two or one of them is 0) and
        summed in float64."""
        xf = np.asarray(x, dtype=np.float32).reshape(-1)
        err = np.asarray(dq, dtype=np.float32).reshape(-1) - xf
        self.count += xf.size
        self.signal += float(np.einsum("i,i->", xf, xf, dtype=np.float64))
        self.noise += float(np.einsum("i,i->", err, err, dtype=np.float64))
        if err.size:
            self.max_abs = max(self.max_abs, float(err.max()), -float(err.min()))
        self.clipped += clipped

    @property
    def mse(self) -> float:
        return self.noise / self.count if self.count else 0.0

    @property
    def sqnr_db(self) -> float:
        """10·log10(signal power / noise power); +inf when the conversion is exact."""
        if self.noise == 0.0:
            return float("inf")
        if self.signal == 0.0:
            return float("-inf")
        return float(10.0 * np.log10(self.signal / self.noise))

    @property
    def clipped_fraction(self) -> float:
        return self.clipped / self.count if self.count else 0.0


@dataclass
class QuantResult:
    """An in-memory tensor quantized with :func:`quantize_tensor`.

    ``scale``/``zero_point`` are 0-d (per tensor) or 1-D along ``axis`` (per channel).
    """

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None
    dequantized: np.ndarray
    mse: float
    max_abs_error: float
    sqnr_db: float
    clipped_fraction: float


def quantize_tensor(
    values: np.ndarray, settings: QuantSettings, axis: int | None = None
) -> QuantResult:
    """Quantize an in-memory float array (per channel along ``axis`` if settings.per_channel).

    ``axis`` defaults to ``settings.axis``; per-channel needs one of them.
    """
    values = np.asarray(values)
    dtype = _float_name(values.dtype)
    x = values.astype(np.float32)
    if not np.isfinite(x).all():
        raise ValueError("the values contain NaN or infinity; quantizing them is undefined")
    if settings.per_channel:
        axis = settings.axis if axis is None else axis
        if axis is None:
            raise ValueError("per-channel quantization needs an axis")
        axis = _normal_axis(axis, x.ndim)
        others = tuple(i for i in range(x.ndim) if i != axis)
        rmin, rmax = x.min(axis=others), x.max(axis=others)
        shape = tuple(-1 if i == axis else 1 for i in range(x.ndim))
    else:
        axis = None
        rmin, rmax = (np.float32(x.min()), np.float32(x.max())) if x.size else (0.0, 0.0)
        shape = ()
    scale, zp = compute_params(np.asarray(rmin), np.asarray(rmax), settings, dtype)
    q, clipped = quantize_values(x, scale.reshape(shape), zp.reshape(shape), settings)
    dq = dequantize_values(q, scale.reshape(shape), zp.reshape(shape), dtype)
    acc = ErrorAccumulator()
    acc.add(x, dq, clipped)
    return QuantResult(
        q, scale, zp, axis, dq, acc.mse, acc.max_abs, acc.sqnr_db, acc.clipped_fraction
    )


def _float_name(dt: np.dtype) -> str:
    name = str(dt)
    if name in ("float32", "float16", "bfloat16"):
        return name
    if dt.kind == "f":
        return "float32"
    raise ValueError(f"quantization needs float values, got {name}")


def _normal_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim
