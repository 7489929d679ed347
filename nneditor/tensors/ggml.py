"""ggml tensor types and a loader that decodes only the blocks a slice needs.

A ggml tensor with dimensions ``ne`` (innermost first) has numpy shape ``reversed(ne)``. Its
bytes are rows of ``ne0`` elements (the last numpy axis); each row is ``ne0 / block_size``
blocks of ``type_size`` bytes. Plain types (F32, F16, BF16, I8...) are blocks of one element.

Invariants:
- The type table is gguf-py's (``GGMLQuantizationType`` and ``GGML_QUANT_SIZES``) plus the few
  ids gguf-py does not know (Prism's PQ2_0/PTQ1_0, Q1_0 and Q2_0 on older gguf-py releases).
- :class:`GGMLLoader` maps the tensor's bytes (zero-copy), selects the leading-axis rows and the
  column blocks a key touches, copies and decodes only those, in bounded chunks.
- Values come from :mod:`nneditor.tensors.ggml_fast` for the common types (bit-identical to
  gguf-py, several times faster), from ``gguf.quants.dequantize`` for every other type gguf-py
  implements, otherwise from :mod:`nneditor.tensors.ggml_ternary`; a type nobody decodes gets an
  :class:`~nneditor.tensors.loaders.UnavailableLoader` whose reason names it. Nothing is guessed.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from nneditor.io.source import ByteSource
from nneditor.tensors.dtypes import numpy_dtype
from nneditor.tensors.ggml_fast import FAST_DECODERS, INTO_DECODERS, PARTS_DECODERS
from nneditor.tensors.ggml_ternary import DECODERS as OWN_DECODERS
from nneditor.tensors.loaders import AffineMatrix, TensorLoader, UnavailableLoader
from nneditor.tensors.slicing import Key, key_shape

#: Raw bytes decoded per step; bounds the temporaries of a large read.
CHUNK_BYTES = 2 * 1024 * 1024

#: Plain (unquantized) ggml types -> logical dtype of their values.
PLAIN_DTYPES: dict[int, str] = {
    0: "float32",
    1: "float16",
    24: "int8",
    25: "int16",
    26: "int32",
    27: "int64",
    28: "float64",
    30: "bfloat16",
}

# ids gguf-py may lack: id -> (name, block_size, type_size).
_EXTRA_TYPES: dict[int, tuple[str, int, int]] = {
    41: ("Q1_0", 128, 18),
    42: ("Q2_0", 64, 18),
    142: ("PQ2_0", 128, 34),
    143: ("PTQ1_0", 128, 28),
}

#: Q2_0 has two incompatible layouts; the legacy one (pre prism-v7) is told apart by byte size.
Q2_0_LEGACY = (128, 34)

_UNDECODABLE: dict[int, str] = {
    9: "Q8_1 is ggml's internal activation format and its block layout differs between "
    "ggml versions (40 or 36 bytes), so NNEditor does not decode it",
    42: "Q2_0 has two incompatible block layouts (group 64 and the legacy group 128) and "
    "NNEditor does not decode it yet",
}


@dataclass(frozen=True, slots=True)
class GGMLType:
    """One ggml tensor type: id, name, values per block and bytes per block."""

    id: int
    name: str
    block_size: int
    type_size: int

    @property
    def plain_dtype(self) -> str | None:
        """The numpy-level dtype for unquantized types, None for block-quantized ones."""
        return PLAIN_DTYPES.get(self.id)

    @property
    def dtype(self) -> str:
        """Logical dtype of decoded values (float32 for every quantized type)."""
        return self.plain_dtype or "float32"

    def row_bytes(self, ne0: int) -> int:
        return ne0 // self.block_size * self.type_size


def _build_table() -> dict[int, GGMLType]:
    import gguf

    table: dict[int, GGMLType] = {}
    for qtype, (bs, ts) in gguf.GGML_QUANT_SIZES.items():
        table[int(qtype)] = GGMLType(int(qtype), qtype.name, bs, ts)
    for tid, (name, bs, ts) in _EXTRA_TYPES.items():
        table.setdefault(tid, GGMLType(tid, name, bs, ts))
    return table


_TABLE = _build_table()


def ggml_type(type_id: int) -> GGMLType | None:
    """The type with this id, or None when neither gguf-py nor NNEditor knows it."""
    return _TABLE.get(type_id)


def _gguf_decoder(t: GGMLType) -> Callable[[np.ndarray], np.ndarray] | None:
    """Block decoder backed by ``gguf.quants.dequantize``, or None if gguf-py lacks the type."""
    import gguf
    from gguf import quants

    try:
        qtype = gguf.GGMLQuantizationType(t.id)
    except ValueError:
        return None
    if qtype not in quants._type_traits:  # the registry of types gguf-py decodes
        return None

    def decode(blocks: np.ndarray) -> np.ndarray:
        # gguf-py loops in Python over groups of 16 rows, so hand it few, long rows: blocks
        # are independent, any regrouping of whole blocks decodes to the same values.
        n = len(blocks)
        per_row = max(1, n // 16)
        main = n // per_row * per_row
        parts = [quants.dequantize(blocks[:main].reshape(main // per_row, -1), qtype)]
        if main < n:
            parts.append(quants.dequantize(blocks[main:].reshape(1, -1), qtype))
        values = parts[0] if len(parts) == 1 else np.concatenate([p.reshape(-1) for p in parts])
        return np.asarray(values, dtype=np.float32).reshape(n, t.block_size)

    return decode


@functools.cache
def _block_decoder(t: GGMLType) -> Callable[[np.ndarray], np.ndarray] | None:
    """(n, type_size) uint8 -> (n, block_size) float32 for a quantized type, if anyone can."""
    if t.id in _UNDECODABLE:
        return None
    return FAST_DECODERS.get(t.id) or _gguf_decoder(t) or OWN_DECODERS.get(t.id)


def unavailable_reason(t: GGMLType) -> str | None:
    """Why values of type ``t`` cannot be decoded, or None when they can."""
    if t.plain_dtype is not None:
        return None
    if t.id in _UNDECODABLE:
        return _UNDECODABLE[t.id]
    if _block_decoder(t) is None:
        return f"ggml type {t.name} (id {t.id}) has no decoder in NNEditor or gguf-py"
    return None


def make_loader(
    source: ByteSource, offset: int, type_id: int, shape: tuple[int, ...]
) -> TensorLoader:
    """The loader for a ggml tensor: GGMLLoader, or UnavailableLoader with the reason."""
    t = ggml_type(type_id)
    if t is None:
        return UnavailableLoader(
            f"unknown ggml tensor type {type_id}; NNEditor cannot decode it "
            "(the file may come from a newer or forked llama.cpp)"
        )
    reason = unavailable_reason(t)
    if reason is not None:
        return UnavailableLoader(reason)
    return GGMLLoader(source, offset, type_id, shape)


class GGMLLoader(TensorLoader):
    """Decodes a ggml tensor stored at ``offset`` of ``source``, touching only needed blocks."""

    def __init__(
        self, source: ByteSource, offset: int, ggml_type: int, shape: tuple[int, ...]
    ) -> None:
        t = _TABLE.get(ggml_type)
        if t is None:
            raise ValueError(f"unknown ggml type {ggml_type}")
        self.source = source
        self.offset = offset
        self.type = t
        self.shape = shape
        self._decode = self._pick_decoder()
        f32 = numpy_dtype(t.dtype) == np.float32
        self._into = INTO_DECODERS.get(ggml_type) if f32 else None

    def _pick_decoder(self) -> Callable[[np.ndarray], np.ndarray]:
        """(..., row_bytes) uint8 rows -> (..., ne0) values."""
        t = self.type
        plain = t.plain_dtype
        if plain is not None:
            dt = numpy_dtype(plain)

            def view(rows: np.ndarray) -> np.ndarray:
                return rows.view(dt)

            return view
        blocks_fn = _block_decoder(t)
        if blocks_fn is None:
            raise ValueError(f"no decoder for ggml type {t.name}")

        def decode(rows: np.ndarray) -> np.ndarray:
            values = blocks_fn(rows.reshape(-1, t.type_size))
            return values.reshape(*rows.shape[:-1], rows.shape[-1] // t.type_size * t.block_size)

        return decode

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        shape = tuple(shape) or (1,)
        scalar = not self.shape
        if key is None:
            key = tuple(slice(0, d, 1) for d in shape)
        elif scalar:
            key = (0,)
        t = self.type
        ne0 = shape[-1]
        n_blocks = ne0 // t.block_size
        nbytes = int(np.prod(shape[:-1], dtype=np.int64)) * n_blocks * t.type_size
        raw = np.frombuffer(self.source.view(self.offset, nbytes), dtype=np.uint8)
        raw = raw.reshape(*shape[:-1], n_blocks, t.type_size)
        b0, b1, col = _column_blocks(key[-1], t.block_size)
        sub = raw[(*key[:-1], slice(b0, b1))]
        out = np.empty(key_shape(key, shape), dtype=numpy_dtype(t.dtype))
        if out.size:
            self._fill(sub, out, col)
        return out.reshape(()) if scalar else out

    def _fill(self, sub: np.ndarray, out: np.ndarray, col: slice | int) -> None:
        """Decode ``sub`` (lead..., blocks, type_size) into ``out`` (lead..., cols) chunkwise."""
        lead = sub.shape[:-2]
        if not lead:
            out[...] = self._decode_rows(sub[None])[0][col]
            return
        per_index = max(1, sub[0].size)
        if per_index > CHUNK_BYTES and len(lead) > 1:
            for i in range(lead[0]):
                self._fill(sub[i], out[i], col)
            return
        step = max(1, CHUNK_BYTES // per_index)
        starts = range(0, lead[0], step)

        covered = sub.shape[-2] * self.type.block_size  # the columns the blocks decode to
        into = self._into if covered == out.shape[-1] and _whole(col, covered) else None

        def one(i: int) -> None:
            dest = out[i : i + step]
            if into is not None and dest.flags.c_contiguous and sub[i : i + step].size:
                blocks = np.ascontiguousarray(sub[i : i + step])
                into(
                    blocks.reshape(-1, self.type.type_size), dest.reshape(-1, self.type.block_size)
                )
                return
            dest[...] = self._decode_rows(sub[i : i + step])[..., col]

        _each_chunk(one, starts)

    def read_affine(self, shape: tuple[int, ...]) -> AffineMatrix | None:
        parts = PARTS_DECODERS.get(self.type.id)
        if parts is None or len(shape) != 2 or shape[-1] % self.type.block_size:
            return None
        group, decode = parts
        t = self.type
        rows, cols = (int(n) for n in shape)
        per_row = cols // t.block_size  # blocks
        raw = np.frombuffer(self.source.view(self.offset, rows * per_row * t.type_size), np.uint8)
        blocks = raw.reshape(rows * per_row, t.type_size)
        scaled = np.empty((rows * per_row, t.block_size), np.float32)
        offsets = np.empty((rows * per_row, t.block_size // group), np.float32)
        step = max(1, CHUNK_BYTES // t.type_size)  # blocks per chunk

        def one(i: int) -> None:
            offsets[i : i + step] = decode(blocks[i : i + step], scaled[i : i + step])

        _each_chunk(one, range(0, blocks.shape[0], step))
        return AffineMatrix(scaled.reshape(rows, cols), offsets.reshape(rows, -1), group)

    def _decode_rows(self, blocks: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(blocks).reshape(*blocks.shape[:-2], -1)
        return self._decode(rows)


def _each_chunk(one: Callable[[int], None], starts: range) -> None:
    """``one(start)`` for every chunk: on the decode pool when there are several."""
    pool = _decode_pool() if len(starts) > 1 else None
    if pool is None:
        for i in starts:
            one(i)
    else:  # numpy releases the GIL inside the decode's array operations
        list(pool.map(one, starts))


_POOL_LOCK = threading.Lock()


@functools.cache
def _pool() -> ThreadPoolExecutor | None:
    n = min(4, os.cpu_count() or 1)
    return ThreadPoolExecutor(n, thread_name_prefix="ggml-decode") if n > 1 else None


def _decode_pool() -> ThreadPoolExecutor | None:
    """Threads that decode chunks of one large tensor side by side (None on one core); one
    pool for the process, whichever thread asks first (the decoder reads on two)."""
    with _POOL_LOCK:
        return _pool()


def _whole(col: slice | int, width: int) -> bool:
    """Whether ``col`` (relative to the first block) selects every column of a ``width`` row."""
    return (
        isinstance(col, slice)
        and (col.start or 0) == 0
        and col.stop == width
        and (col.step or 1) == 1
    )


def _column_blocks(k: slice | int, block_size: int) -> tuple[int, int, slice | int]:
    """Blocks [b0, b1) covering the column selection, and the selection relative to b0."""
    if isinstance(k, int):
        b0 = k // block_size
        return b0, b0 + 1, k - b0 * block_size
    start, stop, step = k.start or 0, k.stop, k.step or 1
    if stop is None or stop <= start:
        return 0, 0, slice(0, 0)
    last = start + (stop - 1 - start) // step * step
    b0 = start // block_size
    b1 = last // block_size + 1
    base = b0 * block_size
    return b0, b1, slice(start - base, last - base + 1, step)
