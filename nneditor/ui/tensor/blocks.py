"""Raw fields of ggml quantization blocks, read straight from the stored bytes (Qt-free).

Layouts (ggml's ``block_q*`` structs, little-endian, sizes as in gguf's GGML_QUANT_SIZES):

- Q4_0 (32 values, 18 B): ``d:f16, qs[16]``; value j = (code_j − 8)·d.
- Q4_1 (32, 20 B): ``d:f16, m:f16, qs[16]``; value = code·d + m.
- Q5_0 (32, 22 B): ``d:f16, qh:u32, qs[16]``; 5-bit code = nibble | qh bit << 4; (code − 16)·d.
- Q5_1 (32, 24 B): ``d:f16, m:f16, qh:u32, qs[16]``; value = code·d + m.
- Q8_0 (32, 34 B): ``d:f16, qs:i8[32]``; value = q·d.
  For the 4/5-bit types element j < 16 is the low nibble of ``qs[j]`` and element j + 16 its
  high nibble; codes are listed in element order.
- K-quants (256 values): the super-block scale ``d`` (and ``dmin``) are shown, the rest as hex.
- Any other type: the block's bytes as hex.

Invariants: at most ``max_blocks`` blocks are read, each through a bounds-checked
``ByteSource.view`` of exactly one block; nothing else of the tensor is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nneditor.io.source import ByteSource
from nneditor.model.tensor import TensorRef

# ggml type ids
Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 2, 3, 6, 7, 8
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K = 10, 11, 12, 13, 14

#: ggml type id -> (name of each f16 field, its byte offset) for the K-quant super-blocks.
_K_SCALES: dict[int, tuple[tuple[str, int], ...]] = {
    Q2_K: (("d", 80), ("dmin", 82)),
    Q3_K: (("d", 108),),
    Q4_K: (("d", 0), ("dmin", 2)),
    Q5_K: (("d", 0), ("dmin", 2)),
    Q6_K: (("d", 208),),
}
DECODED_TYPES = (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)


@dataclass
class BlockRecord:
    row: int  # flat row (all axes but the last)
    block: int  # block index within the row
    offset: int  # byte offset of the block in the source
    fields: dict[str, float] = field(default_factory=dict)
    codes: list[int] | None = None
    raw: bytes = b""

    def values(self, ggml_type: int) -> np.ndarray | None:
        """Decoded values of the block from its fields (None when the type is not decoded)."""
        if self.codes is None:
            return None
        q = np.asarray(self.codes, dtype=np.float64)
        d = self.fields.get("d", 0.0)
        if ggml_type == Q4_0:
            return (q - 8) * d
        if ggml_type == Q5_0:
            return (q - 16) * d
        if ggml_type in (Q4_1, Q5_1):
            return q * d + self.fields["m"]
        return q * d


@dataclass
class BlockListing:
    ggml_type: int
    type_name: str
    block_size: int
    type_size: int
    records: list[BlockRecord]
    rows_total: int
    blocks_per_row: int
    note: str = ""


def is_block_quantized(ref: TensorRef) -> bool:
    info = ref.info or {}
    return isinstance(info.get("ggml_type"), int) and (info.get("block_size") or 1) > 1


def list_blocks(
    ref: TensorRef, source: ByteSource, first_row: int = 0, rows: int = 4, max_blocks: int = 256
) -> BlockListing:
    """The blocks of ``rows`` rows from ``first_row``, at most ``max_blocks`` of them."""
    info = ref.info
    t, bs, ts = int(info["ggml_type"]), int(info["block_size"]), int(info["type_size"])
    if ref.offset is None:
        raise ValueError("the tensor has no byte range in the file")
    ne0 = ref.shape[-1] if ref.shape else 1
    per_row = max(1, ne0 // bs)
    rows_total = max(1, ref.size // max(1, ne0))
    first_row = max(0, min(first_row, rows_total - 1))
    records: list[BlockRecord] = []
    for row in range(first_row, min(rows_total, first_row + rows)):
        for b in range(per_row):
            if len(records) >= max_blocks:
                break
            off = ref.offset + (row * per_row + b) * ts
            raw = bytes(source.view(off, ts))
            records.append(_record(t, row, b, off, raw))
    shown = len(records)
    wanted = min(rows, rows_total - first_row) * per_row
    note = "" if shown >= wanted else f"first {shown:,} of {wanted:,} blocks of these rows"
    return BlockListing(t, str(ref.encoding), bs, ts, records, rows_total, per_row, note)


def _f16(raw: bytes, at: int) -> float:
    return float(np.frombuffer(raw, dtype="<f2", count=1, offset=at)[0])


def _nibbles(qs: np.ndarray) -> np.ndarray:
    return np.concatenate([qs & 0x0F, qs >> 4])


def _high_bits(qh: int, n: int) -> np.ndarray:
    return ((qh >> np.arange(n, dtype=np.uint64)) & 1).astype(np.uint8)


def _record(t: int, row: int, block: int, off: int, raw: bytes) -> BlockRecord:
    rec = BlockRecord(row, block, off, raw=raw)
    u8 = np.frombuffer(raw, dtype=np.uint8)
    if t == Q4_0:
        rec.fields = {"d": _f16(raw, 0)}
        rec.codes = _nibbles(u8[2:18]).tolist()
    elif t == Q4_1:
        rec.fields = {"d": _f16(raw, 0), "m": _f16(raw, 2)}
        rec.codes = _nibbles(u8[4:20]).tolist()
    elif t in (Q5_0, Q5_1):
        base = 2 if t == Q5_0 else 4
        rec.fields = {"d": _f16(raw, 0)} if t == Q5_0 else {"d": _f16(raw, 0), "m": _f16(raw, 2)}
        qh = int(np.frombuffer(raw, dtype="<u4", count=1, offset=base)[0])
        low = _nibbles(u8[base + 4 : base + 20])
        rec.codes = (low | (_high_bits(qh, 32) << 4)).tolist()
    elif t == Q8_0:
        rec.fields = {"d": _f16(raw, 0)}
        rec.codes = np.frombuffer(raw, dtype=np.int8, count=32, offset=2).tolist()
    elif t in _K_SCALES:
        rec.fields = {name: _f16(raw, at) for name, at in _K_SCALES[t]}
    return rec
