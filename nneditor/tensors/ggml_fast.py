"""Lean block decoders for the ggml types real GGUF files use most (Q4_0, Q4_1, Q5_0, Q5_1,
Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS).

Why hand-written: gguf-py's ``dequantize`` decodes these correctly but through generic
grouping and several full-size temporaries; a trace dequantizes every weight of a model on
each run, where gguf-py's path took 0.72 s of a 1.03 s SmolLM2-135M forward. These write into
one float32 output with in-place integer ops (3-4x faster). The arithmetic is the same float32
operations in the same order, so values are bit-identical to gguf-py's
(tests/unit/test_ggml_fast.py checks every type against it).

Each decoder maps (n, type_size) uint8 blocks to (n, block_size) float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nneditor.tensors.loaders import AffineMatrix

F32 = np.float32


def _f16(b: np.ndarray, start: int, count: int = 1) -> np.ndarray:
    """The ``count`` float16s from byte ``start`` of every block, as float32 [n, count].

    Blocks of an even size are read through one uint16 view (no strided byte copy); the
    scale and the minimum of a block come back together from one conversion."""
    if b.flags.c_contiguous and b.shape[-1] % 2 == 0 and start % 2 == 0 and b.size:
        halves = b.view(np.uint16)[:, start // 2 : start // 2 + count]
        return halves.view(np.float16).astype(F32)
    return b[:, start : start + 2 * count].copy().view(np.float16).astype(F32)


def _nibbles(qs: np.ndarray, out: np.ndarray) -> None:
    """Low nibbles of each 16-byte group to out[..., :16], high ones to out[..., 16:]."""
    half = out.shape[-1] // 2
    np.bitwise_and(qs, 15, out=out[..., :half], casting="unsafe")
    np.right_shift(qs, 4, out=out[..., half:], casting="unsafe")


def _q4_0(b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    out = np.empty((b.shape[0], 32), F32) if out is None else out
    _nibbles(b[:, 2:], out)
    out -= F32(8)
    out *= _f16(b, 0)
    return out


def _q4_0_parts(b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Q4_0 as ``d * q`` into ``out`` and the block's offset ``-8 d`` returned ([n, 1])."""
    _nibbles(b[:, 2:], out)
    d = _f16(b, 0)
    out *= d
    return d * F32(-8)


def _q4_1(b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    out = np.empty((b.shape[0], 32), F32) if out is None else out
    _nibbles(b[:, 4:], out)
    dm = _f16(b, 0, 2)
    out *= dm[:, :1]
    out += dm[:, 1:]
    return out


def _q4_1_parts(b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Q4_1 as ``d * q`` into ``out`` and the block's minimum ``m`` returned ([n, 1])."""
    _nibbles(b[:, 4:], out)
    dm = _f16(b, 0, 2)
    out *= dm[:, :1]
    return dm[:, 1:]


def _high_bits(qh: np.ndarray) -> np.ndarray:
    """Bit j of each block's 32-bit word, j = 0..31, as uint8 [n, 32] shifted to bit 4."""
    word = qh.copy().view(np.uint32)  # [n, 1]
    bits = (word >> np.arange(32, dtype=np.uint32)) & np.uint32(1)
    return bits.astype(np.uint8) << np.uint8(4)


def _q5_0(b: np.ndarray) -> np.ndarray:
    q = np.empty((b.shape[0], 32), np.uint8)
    _nibbles(b[:, 6:], q)
    q |= _high_bits(b[:, 2:6])
    out = q.astype(np.int8).astype(F32)
    out -= F32(16)
    out *= _f16(b, 0)
    return out


def _q5_1(b: np.ndarray) -> np.ndarray:
    q = np.empty((b.shape[0], 32), np.uint8)
    _nibbles(b[:, 8:], q)
    q |= _high_bits(b[:, 4:8])
    out = q.astype(F32)
    dm = _f16(b, 0, 2)
    out *= dm[:, :1]
    out += dm[:, 1:]
    return out


def _q8_0(b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    if out is None:
        out = b[:, 2:].view(np.int8).astype(F32)
    else:
        np.copyto(out, b[:, 2:].view(np.int8), casting="unsafe")
    out *= _f16(b, 0)
    return out


def _scale_min_k4(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The eight 6-bit scales and mins of a Q4_K/Q5_K block (llama.cpp's get_scale_min_k4)."""
    s = scales.reshape(-1, 3, 4)
    d, m, md = s[:, 0], s[:, 1], s[:, 2]
    sc = np.concatenate([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
    mn = np.concatenate([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], axis=-1)
    return sc.astype(F32), mn.astype(F32)


def _q4_k_parts(b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Q4_K as ``d sc * q`` into ``out`` and each sub-block's ``-dmin mn`` returned
    ([n, 8]; adding ``-x`` is subtracting ``x``, so the sum equals llama.cpp's)."""
    n = b.shape[0]
    sc, mn = _scale_min_k4(b[:, 4:16])
    d = (_f16(b, 0) * sc)[:, :, None]  # [n, 8, 1]
    pairs = out.reshape(n, 4, 2, 32)
    qs = b[:, 16:].reshape(n, 4, 32)
    np.bitwise_and(qs, 15, out=pairs[:, :, 0], casting="unsafe")
    np.right_shift(qs, 4, out=pairs[:, :, 1], casting="unsafe")
    out.reshape(n, 8, 32)[...] *= d
    return -(_f16(b, 2) * mn)


def _q5_k_parts(b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Q5_K: Q4_K's scales and nibbles, plus a fifth bit per value: bit k of qh[l] belongs
    to value l of sub-block k (llama.cpp's dequantize_row_q5_K). ``d sc * q`` goes into
    ``out``; each sub-block's ``-dmin mn`` is returned ([n, 8])."""
    n = b.shape[0]
    sc, mn = _scale_min_k4(b[:, 4:16])
    d = (_f16(b, 0) * sc)[:, :, None]  # [n, 8, 1]
    qs = b[:, 48:].reshape(n, 4, 32)
    q = np.empty((n, 4, 2, 32), np.uint8)
    np.bitwise_and(qs, 15, out=q[:, :, 0])
    np.right_shift(qs, 4, out=q[:, :, 1])
    q8 = q.reshape(n, 8, 32)
    high = np.unpackbits(b[:, 16:48], axis=-1, bitorder="little").reshape(n, 32, 8)
    high <<= np.uint8(4)
    q8 |= high.transpose(0, 2, 1)  # a nibble is < 16, so adding 16 is setting bit 4
    scaled = out.reshape(n, 8, 32)
    np.copyto(scaled, q8, casting="unsafe")
    scaled *= d
    return -(_f16(b, 2) * mn)


def _joined(parts: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    """The whole-value decoder of a K-quant decoded as scaled values plus sub-block offsets
    (32 values each): the two parts added as AffineMatrix.dense adds them."""

    def decode(b: np.ndarray) -> np.ndarray:
        out = np.empty((b.shape[0], 256), F32)
        return AffineMatrix(out, parts(b, out), 32).dense()

    return decode


_q4_k = _joined(_q4_k_parts)
_q5_k = _joined(_q5_k_parts)


def _q6_k(b: np.ndarray) -> np.ndarray:
    n = b.shape[0]
    ql = b[:, :128].reshape(n, 2, 1, 64)
    qh = b[:, 128:192].reshape(n, 2, 1, 32)
    scales = b[:, 192:208].view(np.int8).astype(F32)
    d = (_f16(b, 208) * scales).reshape(n, 16, 1)
    low = np.empty((n, 2, 2, 64), np.uint8)
    np.bitwise_and(ql[:, :, 0], 15, out=low[:, :, 0])
    np.right_shift(ql[:, :, 0], 4, out=low[:, :, 1])
    high = (qh >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & np.uint8(3)
    q = low.reshape(n, 8, 32) | (high.reshape(n, 8, 32) << np.uint8(4))
    out = q.view(np.int8).astype(F32)
    out -= F32(32)
    out = out.reshape(n, 16, 16)
    out *= d
    return out.reshape(n, 256)


#: IQ4_NL / IQ4_XS: the 16 non-uniform levels a nibble selects (llama.cpp's kvalues_iq4nl),
#: as float32 tables indexed by a whole byte: its low nibble's level, its high nibble's level
_IQ4_LEVELS = np.array(
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], F32
)
_IQ4_LOW = _IQ4_LEVELS[np.arange(256) & 15]
_IQ4_HIGH = _IQ4_LEVELS[np.arange(256) >> 4]


def _iq4_levels(qs: np.ndarray, out: np.ndarray) -> None:
    """Each byte's low-nibble level to out[..., :16], its high-nibble level to out[..., 16:]."""
    np.take(_IQ4_LOW, qs, out=out[..., :16], mode="clip")  # "clip": no buffered copy
    np.take(_IQ4_HIGH, qs, out=out[..., 16:], mode="clip")


def _iq4_nl(b: np.ndarray) -> np.ndarray:
    out = np.empty((b.shape[0], 32), F32)
    _iq4_levels(b[:, 2:], out)
    out *= _f16(b, 0)
    return out


def _iq4_xs(b: np.ndarray) -> np.ndarray:
    """IQ4_XS: IQ4_NL's levels in 256-value blocks, each 32-value part with a 6-bit scale
    (low 4 bits in scales_l, high 2 bits in the 16-bit scales_h)."""
    n = b.shape[0]
    low = np.empty((n, 8), np.uint8)
    np.bitwise_and(b[:, 4:8], 15, out=low[:, 0::2])
    np.right_shift(b[:, 4:8], 4, out=low[:, 1::2])
    high = (b[:, 2:4].copy().view(np.uint16) >> _IQ4XS_SHIFTS) & np.uint16(3)
    scales = (low | (high.astype(np.uint8) << np.uint8(4))).astype(np.int8) - np.int8(32)
    dl = (_f16(b, 0) * scales.astype(F32))[:, :, None]  # [n, 8, 1]
    out = np.empty((n, 8, 32), F32)
    _iq4_levels(b[:, 8:].reshape(n, 8, 16), out)
    out *= dl
    return out.reshape(n, 256)


_IQ4XS_SHIFTS = 2 * np.arange(8, dtype=np.uint16)

#: ggml type id -> (columns per offset, decoder): the decoder writes a block's scaled values
#: (n, block_size) into the array it is given and returns the offsets each group of columns
#: adds (n, block_size // group). The NumPy decoder multiplies the two parts separately (the
#: offsets' share of a product is the per-group sums of the input times the offsets, a tiny
#: product), which saves a full pass over every decoded weight; scaled + offset is the
#: decoder's value (bit for bit, but that Q4_0's zeros come out +0.0 where gguf-py's are -0.0).
PARTS_DECODERS: dict[int, tuple[int, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    2: (32, _q4_0_parts),
    3: (32, _q4_1_parts),
    12: (32, _q4_k_parts),
    13: (32, _q5_k_parts),
}

#: ggml type id -> decoder that can write into a given (n, block_size) float32 array (saves a
#: copy of every decoded weight when a whole tensor is read, as the NumPy decoder does)
INTO_DECODERS: dict[int, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    2: _q4_0,
    3: _q4_1,
    8: _q8_0,
}

#: ggml type id -> decoder
FAST_DECODERS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    2: _q4_0,
    3: _q4_1,
    6: _q5_0,
    7: _q5_1,
    8: _q8_0,
    12: _q4_k,
    13: _q5_k,
    14: _q6_k,
    20: _iq4_nl,
    23: _iq4_xs,
}
