"""Deterministic value generators: automatic presets, generic patterns, masks and time series.

Invariants:

- Every generator is a pure function of its arguments: the same spec, pattern and seed give the
  same bytes on every platform (numpy's PCG64 via ``default_rng``).
- Results always have exactly the requested shape and dtype; integer values are clipped into
  the dtype's range rather than wrapped.
- The automatic source derives a per-input seed from the input name, so two inputs of the same
  shape do not receive identical data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from nneditor.inputs.spec import (
    DEFAULT_SAMPLE_RATE,
    SDXL_TIME_IDS,
    TIMESTEP_RANGE,
    InputSpec,
    InputSpecError,
)
from nneditor.inputs.text import text_values

PATTERNS = ("zeros", "ones", "ramp", "normal", "uniform")
SERIES = ("sine", "noise", "steps")
DEFAULT_TOKEN_RANGE = 10
DEFAULT_INT_RANGE = 10


def input_seed(name: str, seed: int = 0) -> int:
    """A stable 63-bit seed for one input name (independent of Python's hash randomisation)."""
    digest = hashlib.sha256(f"{seed}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def automatic(spec: InputSpec, seed: int = 0) -> np.ndarray:
    """Values for ``spec`` chosen from its preset: masks are ones, token ids valid, rest random."""
    if spec.problem:
        raise InputSpecError(spec.problem)
    assert spec.shape is not None  # a spec without a problem has a shape
    dtype = spec.numpy_dtype
    rng = np.random.default_rng(input_seed(spec.name, seed))
    if spec.role in ("words", "sentences"):
        return text_values(spec.shape, spec.words, spec.role == "sentences")
    if spec.role == "mask":
        return np.ones(spec.shape, dtype)
    if spec.role == "positions":
        last = spec.shape[-1] if spec.shape else 1
        return np.broadcast_to(np.arange(last), spec.shape).astype(dtype)
    if spec.role in ("keep_all", "off", "segments"):
        return np.zeros(spec.shape, dtype)
    if spec.role == "sample_rate":
        return np.full(spec.shape, DEFAULT_SAMPLE_RATE, dtype)
    if spec.role == "timestep":
        return _ints(rng, spec.shape, np.dtype(np.int64), 0, TIMESTEP_RANGE).astype(dtype)
    if spec.role == "grid_thw" and spec.values is not None:
        return np.asarray(spec.values).reshape(spec.shape).astype(dtype)
    if spec.role == "time_ids":
        return np.broadcast_to(np.array(SDXL_TIME_IDS), spec.shape).astype(dtype)
    if spec.role == "tokens":
        high = spec.vocab_size or DEFAULT_TOKEN_RANGE
        ids = _ints(rng, spec.shape, dtype, 0, high)
        if spec.first_token is not None and ids.size:
            ids[..., 0] = spec.first_token
        if spec.last_token is not None and ids.size:
            ids[..., -1] = spec.last_token
        if spec.image_tokens is not None:
            token, count = spec.image_tokens
            ids[ids == token] = (token + 1) % high  # placeholders only where they belong
            ids[..., :count] = token
        return ids
    return random_values(rng, spec.shape, dtype)


def random_values(rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """Deterministic random data of any supported dtype: floats ~ N(0, 1), ints small >= 0."""
    shape = tuple(shape)
    if dtype.kind == "f":
        return rng.standard_normal(shape, dtype=np.float64).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == np.uint8:
        return _ints(rng, shape, dtype, 0, 256)
    return _ints(rng, shape, dtype, 0, DEFAULT_INT_RANGE)


def _ints(
    rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype, low: int, high: int
) -> np.ndarray:
    info = np.iinfo(dtype)
    low, high = max(low, int(info.min)), min(high, int(info.max) + 1)
    return rng.integers(low, high, tuple(shape), dtype=np.int64).astype(dtype)


def pattern(
    kind: str,
    shape: Sequence[int],
    dtype: str | np.dtype,
    seed: int = 0,
    low: float = 0.0,
    high: float = 1.0,
    mean: float = 0.0,
    std: float = 1.0,
) -> np.ndarray:
    """A generic pattern: zeros, ones, ramp (0..1 for floats, 0,1,2,... for ints), normal,
    uniform (``low`` <= x < ``high``)."""
    dt = _numeric(dtype)
    shape = tuple(int(d) for d in shape)
    rng = np.random.default_rng(seed)
    if kind == "zeros":
        return np.zeros(shape, dt)
    if kind == "ones":
        return np.ones(shape, dt)
    if kind == "ramp":
        n = int(np.prod(shape, dtype=np.int64))
        if dt.kind == "f":
            return np.linspace(0.0, 1.0, n).astype(dt).reshape(shape)
        if dt.kind == "b":
            return (np.arange(n) % 2 == 1).reshape(shape)
        return _cast(np.arange(n, dtype=np.float64), dt).reshape(shape)
    if kind == "normal":
        return _cast(rng.normal(mean, std, shape), dt)
    if kind == "uniform":
        if not high > low:
            raise InputSpecError(f"uniform pattern needs low < high, got {low} and {high}")
        return _cast(rng.uniform(low, high, shape), dt)
    raise InputSpecError(f"unknown pattern {kind!r}; choose one of {', '.join(PATTERNS)}")


def _cast(values: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.rint(values), info.min, info.max).astype(dt)
    if dt.kind == "b":
        return values > 0.5
    return values.astype(dt)


def mask(
    shape: Sequence[int], dtype: str | np.dtype = "int64", valid: int | None = None
) -> np.ndarray:
    """An attention-style mask: ones for the first ``valid`` positions of the last axis (all
    positions when ``valid`` is None), zeros after."""
    dt = _numeric(dtype)
    shape = tuple(int(d) for d in shape)
    out = np.ones(shape, dt)
    if valid is not None:
        if not shape:
            raise InputSpecError("a mask with a valid length needs at least one axis")
        if not 0 <= valid <= shape[-1]:
            raise InputSpecError(
                f"mask valid length {valid} is outside 0..{shape[-1]} (the last axis)"
            )
        out[..., valid:] = 0
    return out


def _numeric(dtype: str | np.dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind in "US":
        raise InputSpecError(
            "patterns, series and masks make numbers, and this input holds text: use its "
            "automatic words, or text saved with numpy.savez (an array of str)"
        )
    return dt


def time_series(
    kind: str,
    shape: Sequence[int],
    dtype: str | np.dtype = "float32",
    sample_rate: float = DEFAULT_SAMPLE_RATE,
    frequency: float = 440.0,
    amplitude: float = 0.5,
    seed: int = 0,
    step_length: int | None = None,
    levels: Sequence[float] = (0.0, 1.0),
) -> np.ndarray:
    """A synthetic signal along the last axis, repeated over leading axes.

    ``sine``: amplitude * sin(2*pi*frequency*t); ``noise``: N(0, amplitude) (independent per
    row); ``steps``: cycles through ``levels``, each held for ``step_length`` samples
    (default: a quarter of the length).
    """
    dt = _numeric(dtype)
    shape = tuple(int(d) for d in shape)
    if not shape:
        raise InputSpecError("a time series needs at least one axis")
    n = shape[-1]
    if kind == "sine":
        if sample_rate <= 0:
            raise InputSpecError(f"sample rate must be positive, got {sample_rate}")
        t = np.arange(n, dtype=np.float64) / float(sample_rate)
        row = amplitude * np.sin(2.0 * np.pi * frequency * t)
    elif kind == "noise":
        return _cast(np.random.default_rng(seed).normal(0.0, amplitude, shape), dt)
    elif kind == "steps":
        if not levels:
            raise InputSpecError("a step series needs at least one level")
        hold = step_length or max(1, n // 4)
        if hold <= 0:
            raise InputSpecError(f"step length must be positive, got {hold}")
        row = np.asarray(levels, np.float64)[(np.arange(n) // hold) % len(levels)]
    else:
        raise InputSpecError(f"unknown time series {kind!r}; choose one of {', '.join(SERIES)}")
    return _cast(np.broadcast_to(row, shape).copy(), dt)
