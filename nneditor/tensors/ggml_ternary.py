"""Block decoders for ggml types that gguf-py does not decode (ternary and 1-bit packings).

Each decoder maps a C-contiguous ``uint8`` array of whole blocks, shape ``(n, type_size)``, to
``float32`` values of shape ``(n, block_size)``. All work is vectorised numpy: one gather per stored byte from a
256-entry table of packed int8 digits; nothing loops per element. Layouts (little endian, ``d`` an IEEE half-precision scale):

- PQ2_0 (Prism, id 142), 34 B / 128: ``d | qs[32]``;
  ``w[j] = (((qs[j >> 2] >> 2 * (j & 3)) & 3) - 1) * d``.
- PTQ1_0 (Prism, id 143), 28 B / 128: ``qs[24] | qh[2] | d``; five base-3 digits per byte
  (``trit(b, n) = ((uint8)(b * 3**n) * 3) >> 8``); element ``16n + m`` is trit n of ``qs[m]``,
  ``80 + 8n + m`` trit n of ``qs[16 + m]``, ``120 + 2n + h`` trit n of ``qh[h]``; ``w = (t - 1) d``.
- TQ1_0 (id 34), 54 B / 256 and TQ2_0 (id 35), 66 B / 256: llama.cpp's ternary types (used only
  when the installed gguf-py lacks them).
- Q1_0 (id 41), 18 B / 128: ``d | bits[16]``; bit ``j % 8`` of byte ``j // 8`` set -> ``+d``
  else ``-d``.
- Q8_K (id 15), 292 B / 256: ``float32 d | int8 qs[256] | int16 bsums[16]``; ``w = d * qs``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BlockDecoder = Callable[[np.ndarray], np.ndarray]


def _packed_table(digits: np.ndarray) -> np.ndarray:
    """Pack each byte value's small int8 digits (256, k) into one integer per byte value, so
    decoding is a single gather of 4 or 8 bytes per stored byte (much faster than shifts)."""
    width = 4 if digits.shape[1] <= 4 else 8
    padded = np.zeros((256, width), dtype=np.int8)
    padded[:, : digits.shape[1]] = digits
    return padded.view(np.int32 if width == 4 else np.int64).reshape(256)


def _byte_values() -> np.ndarray:
    return np.arange(256, dtype=np.uint8)[:, None]


# trit n of byte b (fixed-point base 3), minus one: -1, 0 or +1; five per byte.
_b = _byte_values()
_TRITS = _packed_table(
    ((((_b * (3 ** np.arange(5)).astype(np.uint8)).astype(np.uint16) * 3) >> 8) - 1).astype(np.int8)
)
# the four 2-bit codes of a byte (low bits first), minus one.
_CRUMBS = _packed_table((((_b >> np.array([0, 2, 4, 6], dtype=np.uint8)) & 3) - 1).astype(np.int8))
# +1 where bit k of the byte is set, else -1.
_SIGNS = _packed_table(
    np.where(np.unpackbits(_b, axis=1, bitorder="little").astype(bool), 1, -1).astype(np.int8)
)
del _b


def _lookup(table: np.ndarray, packed: np.ndarray, per_byte: int) -> np.ndarray:
    """(n, k) bytes -> (n, k, per_byte) int8 digits through a packed table."""
    n, k = packed.shape
    digits = table[packed].view(np.int8).reshape(n, k, -1)
    return digits[:, :, :per_byte]


def _half(blocks: np.ndarray, start: int) -> np.ndarray:
    """The fp16 scale at byte ``start`` of every block, as a float32 column."""
    return blocks[:, start : start + 2].copy().view(np.float16).astype(np.float32)


def _trits(packed: np.ndarray, digits: int) -> np.ndarray:
    """Digits of fixed-point base-3 bytes minus one: (n, k) -> (n, digits * k), digit-major."""
    n, k = packed.shape
    return _lookup(_TRITS, packed, digits).transpose(0, 2, 1).reshape(n, digits * k)


def _scaled(codes: np.ndarray, d: np.ndarray) -> np.ndarray:
    values = codes.astype(np.float32)
    values *= d
    return values


def decode_pq2_0(blocks: np.ndarray) -> np.ndarray:
    codes = _lookup(_CRUMBS, blocks[:, 2:34], 4).reshape(len(blocks), 128)
    return _scaled(codes, _half(blocks, 0))


def decode_ptq1_0(blocks: np.ndarray) -> np.ndarray:
    codes = np.empty((len(blocks), 128), dtype=np.int8)
    codes[:, :80] = _trits(blocks[:, 0:16], 5)
    codes[:, 80:120] = _trits(blocks[:, 16:24], 5)
    codes[:, 120:] = _trits(blocks[:, 24:26], 4)
    return _scaled(codes, _half(blocks, 26))


def decode_tq1_0(blocks: np.ndarray) -> np.ndarray:
    codes = np.empty((len(blocks), 256), dtype=np.int8)
    codes[:, :160] = _trits(blocks[:, 0:32], 5)
    codes[:, 160:240] = _trits(blocks[:, 32:48], 5)
    codes[:, 240:] = _trits(blocks[:, 48:52], 4)
    return _scaled(codes, _half(blocks, 52))


def decode_tq2_0(blocks: np.ndarray) -> np.ndarray:
    n = len(blocks)
    codes = _lookup(_CRUMBS, blocks[:, 0:64], 4).reshape(n, 2, 32, 4)  # (half, byte, shift)
    return _scaled(codes.transpose(0, 1, 3, 2).reshape(n, 256), _half(blocks, 64))


def decode_q1_0(blocks: np.ndarray) -> np.ndarray:
    signs = _lookup(_SIGNS, blocks[:, 2:18], 8).reshape(len(blocks), 128)
    return _scaled(signs, _half(blocks, 0))


def decode_q8_k(blocks: np.ndarray) -> np.ndarray:
    d = blocks[:, 0:4].copy().view(np.float32)
    qs = blocks[:, 4:260].view(np.int8).astype(np.float32)
    return qs * d


#: ggml type id -> block decoder implemented here.
DECODERS: dict[int, BlockDecoder] = {
    15: decode_q8_k,
    34: decode_tq1_0,
    35: decode_tq2_0,
    41: decode_q1_0,
    142: decode_pq2_0,
    143: decode_ptq1_0,
}
