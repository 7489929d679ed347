"""The lean ggml block decoders give gguf-py's values bit for bit, for every type they cover,
and the loader uses them (including for multi-chunk tensors decoded on several threads)."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from nneditor.tensors import ggml
from nneditor.tensors.ggml_fast import FAST_DECODERS, PARTS_DECODERS

TYPES = sorted(FAST_DECODERS)


def _blocks(type_id: int, rows: int = 64, cols: int = 1024) -> np.ndarray:
    """Quantized rows: from gguf-py's quantizer where it has one, else random bytes whose
    float16 scale fields are finite (any bit pattern is a valid block otherwise)."""
    qt = gguf.GGMLQuantizationType(type_id)
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rng = np.random.default_rng(type_id)
    x = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 4, (rows, 1))).astype(np.float32)
    try:
        return gguf.quants.quantize(x, qt)
    except NotImplementedError:
        raw = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
        scales = rng.uniform(-2, 2, (raw.shape[0], 2)).astype(np.float16).view(np.uint8)
        where = {12: [0, 2], 13: [0, 2], 14: [208]}.get(type_id, [0])
        for off in where:
            raw[:, off : off + 2] = scales[:, :2]
        return raw.reshape(rows, -1)


def _gguf_with(tmp_path, q: np.ndarray, qt: gguf.GGMLQuantizationType):  # noqa: ANN001, ANN202
    w = gguf.GGUFWriter(str(tmp_path / "q.gguf"), "llama")
    w.add_tensor("w", q, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tmp_path / "q.gguf"


@pytest.mark.parametrize("type_id", TYPES)
def test_bit_identical_to_gguf_py(type_id: int) -> None:
    qt = gguf.GGMLQuantizationType(type_id)
    q = _blocks(type_id)
    want = gguf.quants.dequantize(q, qt)
    block, size = gguf.GGML_QUANT_SIZES[qt]
    got = FAST_DECODERS[type_id](q.reshape(-1, size)).reshape(want.shape)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), np.asarray(want, np.float32).view(np.uint32))


@pytest.mark.parametrize("type_id", [2, 3, 8, 12])  # decoding in place (Q4_0/Q4_1/Q8_0) or not
def test_the_loader_uses_them_across_threads(tmp_path, type_id: int) -> None:  # noqa: ANN001
    import nneditor

    qt = gguf.GGMLQuantizationType(type_id)
    q = _blocks(int(qt), rows=2048, cols=2048)  # 2.3 MB: more than one decode chunk
    assert q.nbytes > ggml.CHUNK_BYTES
    _gguf_with(tmp_path, q, qt)
    assert ggml._block_decoder(ggml.ggml_type(int(qt))) is FAST_DECODERS[int(qt)]
    with nneditor.open(tmp_path / "q.gguf") as doc:
        got = doc.tensors["w"].read()
        rows = doc.tensors["w"].read("100:1900, 7:2000:3")
    want = gguf.quants.dequantize(q, qt)
    assert np.array_equal(got.view(np.uint32), np.asarray(want, np.float32).view(np.uint32))
    assert np.array_equal(rows, want[100:1900, 7:2000:3])
    with nneditor.open(tmp_path / "q.gguf") as doc:  # whole rows of a block-aligned range
        assert np.array_equal(doc.tensors["w"].read("5:2000, :"), want[5:2000])
        # columns inside whole blocks but not all of them, and block-aligned column ranges
        assert np.array_equal(doc.tensors["w"].read("3:9, 64:200"), want[3:9, 64:200])
        assert np.array_equal(doc.tensors["w"].read("3:9, 256:512"), want[3:9, 256:512])


def test_in_place_decoders_equal_the_allocating_ones() -> None:
    from nneditor.tensors.ggml_fast import INTO_DECODERS

    for type_id, into in INTO_DECODERS.items():
        q = _blocks(type_id, rows=8, cols=256)
        size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)][1]
        want = FAST_DECODERS[type_id](q.reshape(-1, size))
        out = np.full(want.shape, np.nan, np.float32)
        assert into(q.reshape(-1, size), out) is out
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), type_id


@pytest.mark.parametrize("type_id", TYPES)
def test_strided_blocks_decode_like_contiguous_ones(type_id: int) -> None:
    """The block scales are read through a uint16 view when the blocks are contiguous and
    through a byte copy otherwise; both give the same values."""
    qt = gguf.GGMLQuantizationType(type_id)
    size = gguf.GGML_QUANT_SIZES[qt][1]
    blocks = _blocks(type_id).reshape(-1, size)
    padded = np.zeros((blocks.shape[0], size + 1), np.uint8)
    padded[:, :size] = blocks
    strided = padded[:, :size]  # same bytes, rows size + 1 apart
    assert not strided.flags.c_contiguous
    want = FAST_DECODERS[type_id](blocks)
    np.testing.assert_array_equal(FAST_DECODERS[type_id](strided), want)


@pytest.mark.parametrize("type_id", sorted(PARTS_DECODERS))
@pytest.mark.parametrize("rows", [16, 2048])  # one decode chunk; several, on the pool's threads
def test_affine_parts_are_gguf_py_values_and_products(tmp_path, type_id: int, rows: int) -> None:  # noqa: ANN001
    """A matrix read as scaled values + per-group offsets: joined, gguf-py's values; multiplied separately, the product with gguf-py's values (float64 reference)."""
    import nneditor

    qt = gguf.GGMLQuantizationType(type_id)
    q = _blocks(type_id, rows=rows, cols=1024)
    want = np.asarray(gguf.quants.dequantize(q, qt), np.float32)
    x = np.random.default_rng(1).standard_normal((5, 1024)).astype(np.float32)
    with nneditor.open(_gguf_with(tmp_path, q, qt)) as doc:
        parts = doc.tensors["w"].read_affine()
        assert parts is not None
        assert parts.offsets.shape == (rows, 1024 // parts.group)
        assert np.abs(parts.offsets).max() > 0  # the offsets carry part of every value
        product = parts.product(x)
        dense = parts.dense()
    exact = x.astype(np.float64) @ want.T.astype(np.float64)
    assert np.abs(product - exact).max() < 1e-5 * np.abs(exact).max()
    # bit for bit, but for the sign of a zero: Q4_0's (8 - 8) * d is -0.0 where d < 0, and
    # 8d + (-8d) is +0.0
    assert np.array_equal(dense, want) and not np.isnan(dense).any()
    same = dense.view(np.uint32) == want.view(np.uint32)
    assert (dense[~same] == 0).all() and (same.mean() > 0.9)


def test_types_without_offsets_are_read_whole(tmp_path) -> None:  # noqa: ANN001
    import nneditor

    q = _blocks(8, rows=4, cols=256)  # Q8_0: scale only
    with nneditor.open(_gguf_with(tmp_path, q, gguf.GGMLQuantizationType.Q8_0)) as doc:
        assert doc.tensors["w"].read_affine() is None
