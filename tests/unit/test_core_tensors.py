"""Slicing, loaders and the decoded-array cache."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from nneditor.errors import ArtifactError, SliceError
from nneditor.io.source import MemorySource
from nneditor.tensors.cache import ByteLRU
from nneditor.tensors.loaders import PackedLoader, RawLoader
from nneditor.tensors.slicing import key_shape, parse_slice


def test_parse_slice_normalises_and_expands_ellipsis():
    key = parse_slice("0:2,...,-1", (4, 5, 6, 7))
    assert key == (slice(0, 2, 1), slice(0, 5, 1), slice(0, 6, 1), 6)
    assert key_shape(key, (4, 5, 6, 7)) == (2, 5, 6)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0,0,0,0", "has 4 axes but the tensor has shape [2, 3, 4]"),
        ("5", "index 5 is out of range for axis 0 of size 2"),
        ("a:b", "cannot read 'a:b' (axis 0)"),
        ("::0", "slice step cannot be zero"),
        ("...,...", "only once"),
    ],
)
def test_parse_slice_errors_are_sentences(text, message):
    with pytest.raises(
        SliceError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
    ):
        parse_slice(text, (2, 3, 4))


@pytest.mark.parametrize("dtype", ["<f4", "<f2", "<i8", "u1", "<c8", "?"])
def test_raw_loader_slices_match_numpy(dtype):
    rng = np.random.default_rng(0)
    ref = (rng.standard_normal((5, 4, 3)) * 10).astype(dtype)
    src = MemorySource(b"\x00" * 7 + ref.tobytes())
    loader = RawLoader(src, 7, _name(ref.dtype))
    for text in ["", "1:3", "4", "1:5:2,2", "...,0", "0:0"]:
        key = parse_slice(text, ref.shape) if text else None
        got = loader.read(ref.shape, key)
        want = ref if key is None else ref[key]
        np.testing.assert_array_equal(got, want)
        assert got.flags.writeable


def test_raw_loader_big_endian_and_bounds():
    ref = np.arange(6, dtype=">i4")
    loader = RawLoader(MemorySource(ref.tobytes()), 0, "int32", big_endian=True)
    got = loader.read((6,), None)
    assert got.dtype == np.dtype("<i4")
    np.testing.assert_array_equal(got, np.arange(6))
    short = RawLoader(MemorySource(b"\x00" * 8), 0, "float32")
    with pytest.raises(ArtifactError, match="runs past the end"):
        short.read((4,), None)


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 3)])
def test_packed_loader_matches_onnx_reference(dtype, shape):
    rng = np.random.default_rng(1)
    lo, hi = (-8, 8) if dtype == "int4" else (0, 16)
    values = rng.integers(lo, hi, size=shape)
    import onnx

    elem = onnx.TensorProto.INT4 if dtype == "int4" else onnx.TensorProto.UINT4
    proto = onnx.helper.make_tensor("t", elem, shape, values.reshape(-1).tolist())
    packed = bytes(proto.raw_data) if proto.raw_data else _pack4(values)
    ref = numpy_helper.to_array(proto).astype(np.int16)
    loader = PackedLoader(MemorySource(packed), 0, len(packed), dtype)
    np.testing.assert_array_equal(loader.read(shape, None).astype(np.int16), ref)
    key = parse_slice("1:", shape)
    np.testing.assert_array_equal(loader.read(shape, key).astype(np.int16), ref[key])


def _pack4(values: np.ndarray) -> bytes:
    codes = (values.reshape(-1) & 0xF).astype(np.uint8)
    if codes.size % 2:
        codes = np.append(codes, 0)
    return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).tobytes()


def _name(dt: np.dtype) -> str:
    from nneditor.tensors.dtypes import dtype_name

    return dtype_name(dt.newbyteorder("<") if dt.byteorder == ">" else dt)


def test_byte_lru_evicts_by_bytes():
    cache = ByteLRU(budget_bytes=4000)
    for i in range(10):
        cache.get_or_make(i, lambda: np.zeros(100, np.float32))  # 400 bytes each
    assert cache.used <= 4000
    made = []
    cache.get_or_make(9, lambda: made.append(1) or np.zeros(100, np.float32))
    assert not made, "most recent entry should still be cached"
    big = cache.get_or_make("big", lambda: np.zeros(2000, np.float32))
    assert big.nbytes == 8000 and "big" not in cache._items
