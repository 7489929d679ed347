"""Ternary and 1-bit ggml packings gguf-py cannot decode (PQ2_0, PTQ1_0, Q1_0, Q8_K).

Random weights are packed here by a deliberately simple per-element pure-Python packer that
follows the layouts in GGUF-NOTES.md; decoding must give back exactly the packed values.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import quants

from nneditor.artifacts.gguf.reader import open_document
from nneditor.errors import ArtifactError
from nneditor.tensors.ggml_ternary import decode_ptq1_0, decode_tq1_0, decode_tq2_0

RNG = np.random.default_rng(7)
ROWS, COLS = 3, 256  # two 128-element blocks per row


def half_bytes(d: float) -> bytes:
    return struct.pack("<e", d)


def encode_trits(digits: list[int]) -> int:
    """Fixed-point base-3 byte: digit n has weight 3**(4 - n); q = ceil(v * 256 / 243)."""
    v = 0
    for n, t in enumerate(digits):
        v += t * 3 ** (4 - n)
    return (v * 256 + 242) // 243


def pack_pq2_0(ternary: list[int], d: float) -> bytes:
    qs = [0] * 32
    for j, t in enumerate(ternary):
        qs[j >> 2] |= (t + 1) << (2 * (j & 3))
    return half_bytes(d) + bytes(qs)


def pack_ptq1_0(ternary: list[int], d: float) -> bytes:
    digits: dict[tuple[str, int], list[int]] = {}
    for e, t in enumerate(ternary):
        if e < 80:
            slot, n = ("qs", e % 16), e // 16
        elif e < 120:
            slot, n = ("qs", 16 + (e - 80) % 8), (e - 80) // 8
        else:
            slot, n = ("qh", (e - 120) % 2), (e - 120) // 2
        digits.setdefault(slot, [0] * 5)[n] = t + 1
    qs = bytes(encode_trits(digits[("qs", m)]) for m in range(24))
    qh = bytes(encode_trits(digits[("qh", h)]) for h in range(2))
    return qs + qh + half_bytes(d)


def pack_q1_0(signs: list[int], d: float) -> bytes:
    bits = [0] * 16
    for j, s in enumerate(signs):
        if s > 0:
            bits[j // 8] |= 1 << (j % 8)
    return half_bytes(d) + bytes(bits)


def pack_q8_k(q: list[int], d: float) -> bytes:
    bsums = [sum(q[16 * i : 16 * i + 16]) for i in range(16)]
    return struct.pack("<f256b16h", d, *q, *bsums)


def pack_tensor(packer, values: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    out = bytearray()
    for r in range(values.shape[0]):
        for b in range(values.shape[1] // block):
            chunk = values[r, b * block : (b + 1) * block].tolist()
            out += packer(chunk, float(scales[r, b]))
    return np.frombuffer(bytes(out), dtype=np.int8)


def expected(values: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    d = np.repeat(scales.astype(np.float16).astype(np.float32), block, axis=1)
    return values.astype(np.float32) * d


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    ternary = RNG.integers(-1, 2, (ROWS, COLS))
    scales = RNG.uniform(0.01, 2.0, (ROWS, COLS // 128)).astype(np.float16)
    signs = np.where(RNG.integers(0, 2, (ROWS, COLS)) > 0, 1, -1)
    q8 = RNG.integers(-128, 128, (ROWS, COLS))
    d8 = RNG.uniform(0.001, 1.0, (ROWS, 1)).astype(np.float32)
    tensors = {
        "pq2": (pack_tensor(pack_pq2_0, ternary, scales, 128), 142),
        "ptq1": (pack_tensor(pack_ptq1_0, ternary, scales, 128), 143),
        "q1": (pack_tensor(pack_q1_0, signs, scales, 128), 41),
        "q8k": (pack_tensor(pack_q8_k, q8, d8, 256), 15),
    }
    want = {
        "pq2": expected(ternary, scales, 128),
        "ptq1": expected(ternary, scales, 128),
        "q1": expected(signs, scales, 128),
        "q8k": q8.astype(np.float32) * d8,
    }
    path = tmp_path_factory.mktemp("ternary") / "ternary.gguf"
    w = gguf.GGUFWriter(str(path), "qwen35")
    for name, (data, tid) in tensors.items():
        w.add_tensor(name, data, raw_shape=(ROWS, COLS), raw_dtype=tid)  # type: ignore[arg-type]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, want


@pytest.mark.parametrize(
    ("name", "encoding"), [("pq2", "PQ2_0"), ("ptq1", "PTQ1_0"), ("q1", "Q1_0"), ("q8k", "Q8_K")]
)
def test_hand_packed_values_round_trip(packed, name: str, encoding: str) -> None:
    path, want = packed
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    doc = open_document(path)
    ref = doc.tensors[name]
    assert ref.encoding == encoding and ref.dtype == "float32" and ref.shape == (ROWS, COLS)
    np.testing.assert_array_equal(ref.read(), want[name])
    np.testing.assert_array_equal(ref.read("1, 100:200"), want[name][1, 100:200])
    np.testing.assert_array_equal(ref.read(":, 127:129"), want[name][:, 127:129])
    np.testing.assert_array_equal(ref.read("2:3, ::5"), want[name][2:3, ::5])
    doc.close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_pq2_0_and_ptq1_0_agree(packed) -> None:
    path, _ = packed
    doc = open_document(path)
    a, b = doc.tensors["pq2"], doc.tensors["ptq1"]
    assert a.info["block_size"] == b.info["block_size"] == 128
    assert (a.info["type_size"], b.info["type_size"]) == (34, 28)
    np.testing.assert_array_equal(a.read(), b.read())
    doc.close()


def test_every_trit_byte_decodes() -> None:
    """All 243 five-digit values survive the PTQ1_0 fixed-point encoding."""
    values = [[(v // 3 ** (4 - n)) % 3 for n in range(5)] for v in range(243)]
    for digits in values:
        block = np.zeros((1, 28), np.uint8)
        block[0, 0] = encode_trits(digits)
        block[0, 26:28] = np.frombuffer(half_bytes(1.0), np.uint8)
        out = decode_ptq1_0(block)[0]
        assert [int(out[16 * n]) + 1 for n in range(5)] == digits


@pytest.mark.parametrize(("qtype", "decoder"), [(Q.TQ1_0, decode_tq1_0), (Q.TQ2_0, decode_tq2_0)])
def test_own_tq_decoders_match_gguf(qtype: Q, decoder) -> None:
    """The fallbacks used when gguf-py lacks TQ1_0/TQ2_0 agree with gguf-py's decoders."""
    data = RNG.standard_normal((4, 512)).astype(np.float32)
    blocks = quants.quantize(data, qtype)
    want = quants.dequantize(blocks, qtype)
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    got = decoder(np.ascontiguousarray(blocks.reshape(-1, ts))).reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def _write_raw(path: Path, name: str, tid: int, shape: tuple[int, int], nbytes: int) -> Path:
    w = gguf.GGUFWriter(str(path), "qwen35")
    data = np.zeros(nbytes, dtype=np.int8)
    w.add_tensor(name, data, raw_shape=shape, raw_dtype=tid)  # type: ignore[arg-type]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_q8_1_is_listed_but_not_decoded(tmp_path: Path) -> None:
    path = _write_raw(tmp_path / "q81.gguf", "x", 9, (2, 64), 2 * 2 * 40)
    doc = open_document(path)
    ref = doc.tensors["x"]
    assert ref.encoding == "Q8_1" and ref.nbytes == 160
    with pytest.raises(ArtifactError, match="Q8_1 is ggml's internal activation format"):
        ref.read()
    doc.close()


def test_q2_0_layouts_told_apart_by_size(tmp_path: Path) -> None:
    official = _write_raw(tmp_path / "q2.gguf", "x", 42, (2, 4096), 2 * 64 * 18)
    doc = open_document(official)
    assert doc.tensors["x"].info["block_size"] == 64 and doc.tensors["x"].nbytes == 2304
    with pytest.raises(ArtifactError, match="Q2_0 has two incompatible block layouts"):
        doc.tensors["x"].read()
    doc.close()
    legacy = _write_raw(tmp_path / "q2l.gguf", "x", 42, (2, 4096), 2 * 32 * 34)
    doc = open_document(legacy)
    assert doc.tensors["x"].info["block_size"] == 128 and doc.tensors["x"].nbytes == 2176
    assert "Q2_0 read as the legacy group-128 layout" in doc.notes[0]
    doc.close()
