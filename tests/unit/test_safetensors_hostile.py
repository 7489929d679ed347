"""Hostile safetensors files: every refusal is an ArtifactError sentence, never a crash or a
large allocation."""

from __future__ import annotations

import json
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from nneditor.artifacts import safetensors as st
from nneditor.errors import ArtifactError


def _write(path: Path, header: bytes | dict, data: bytes = b"", length: int | None = None) -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(text) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + text + data)
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(ArtifactError) as exc:
        st.open_document(path)
    return str(exc.value)


def _f32(shape: object, begin: int = 0, end: int = 16, dtype: str = "F32") -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def test_header_claiming_a_gigabyte_is_refused_before_reading(tmp_path):
    path = _write(tmp_path / "big.safetensors", b"{}", length=1_000_000_000)
    tracemalloc.start()
    message = _refusal(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (
        "byte 0: the header claims 1,000,000,000 bytes, more than the 100,000,000-byte limit"
        in message
    )
    assert "the file is corrupt or not a safetensors file" in message
    assert peak < 1_000_000


def test_header_longer_than_the_file(tmp_path):
    path = _write(tmp_path / "short.safetensors", b'{"a": 1}', length=50_000_000)
    tracemalloc.start()
    message = _refusal(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "the header claims 50,000,000 bytes but only 8 bytes follow the length field" in message
    assert peak < 1_000_000


def test_file_shorter_than_the_length_field(tmp_path):
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(b"\x05\x00")
    assert "the file is 2 bytes, too short for the 8-byte header length" in _refusal(path)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (b'{"a": ', "byte 14: the header is not valid JSON (Expecting value)"),
        (b"[1, 2]", "the header is a JSON array, not the JSON object a safetensors header is"),
        (b'"text"', "the header is a JSON string, not the JSON object"),
        (b"\xff\xfe{}", "byte 8: the header is not valid UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "the header nests JSON too deeply to be read"),
        (b'{"a": 1, "a": 2}', "the header names 'a' twice"),
        (b'{"a": ' + b"9" * 5000 + b"}", "the header is not valid JSON (Exceeds the limit"),
    ],
)
def test_malformed_header_json(tmp_path, header, expected):
    assert expected in _refusal(_write(tmp_path / "h.safetensors", header))


def test_overlapping_offsets(tmp_path):
    header = {"a": _f32([4], 0, 16), "b": _f32([2], 8, 16)}
    message = _refusal(_write(tmp_path / "o.safetensors", header, b"\x00" * 16))
    assert "tensors 'a' and 'b' overlap: data_offsets [0, 16] and [8, 16] share bytes" in message


def test_offsets_past_the_end(tmp_path):
    header = {"a": _f32([4], 0, 16)}
    message = _refusal(_write(tmp_path / "p.safetensors", header, b"\x00" * 12))
    assert "tensor 'a': data_offsets [0, 16] run past the end of the 12-byte data area" in message


def test_size_does_not_match_shape(tmp_path):
    header = {"a": _f32([2, 3], 0, 16)}
    message = _refusal(_write(tmp_path / "m.safetensors", header, b"\x00" * 16))
    assert (
        "tensor 'a': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 16] hold 16" in message
    )


def test_negative_dimension(tmp_path):
    header = {"a": _f32([4, -1], 0, 16)}
    message = _refusal(_write(tmp_path / "n.safetensors", header, b"\x00" * 16))
    assert "tensor 'a': shape [4, -1] has a negative dimension" in message


def test_unknown_dtype(tmp_path):
    header = {"a": _f32([4], 0, 16, dtype="Q4_K")}
    message = _refusal(_write(tmp_path / "d.safetensors", header, b"\x00" * 16))
    assert "tensor 'a': dtype \"Q4_K\" is not a safetensors dtype (known: F64, F32" in message


def test_huge_shape_is_refused_without_allocating(tmp_path):
    header = {"a": _f32([1_000_000, 1_000_000], 0, 16)}
    path = _write(tmp_path / "huge.safetensors", header, b"\x00" * 16)
    tracemalloc.start()
    message = _refusal(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (
        "tensor 'a': shape [1000000, 1000000] has more elements than the whole 16-byte data "
        "area could hold"
    ) in message
    assert peak < 1_000_000


def test_thousands_of_dimensions_are_cheap(tmp_path):
    header = {"a": _f32([2] * 5000, 0, 16)}
    message = _refusal(_write(tmp_path / "dims.safetensors", header, b"\x00" * 16))
    assert "shape [2, 2, 2, 2, 2, 2, 2, 2, … (5000 dimensions)] has more elements" in message


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            7,
            "tensor 'a': the entry is a JSON number, not an object with dtype, shape and data_offsets",
        ),
        ({"dtype": "F32"}, "tensor 'a': the entry has no shape, data_offsets"),
        (_f32("4"), "tensor 'a': shape \"4\" is not a list of integers"),
        (_f32([True, 4]), "tensor 'a': shape [true, 4] is not a list of integers"),
        (_f32([4.0]), "tensor 'a': shape [4.0] is not a list of integers"),
        (
            {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]},
            "data_offsets [16, 0] is not a pair",
        ),
        ({"dtype": "F32", "shape": [4], "data_offsets": [0]}, "data_offsets [0] is not a pair"),
        (
            {"dtype": "F32", "shape": [4], "data_offsets": [-4, 12]},
            "data_offsets [-4, 12] is not a pair",
        ),
        ({"dtype": 3, "shape": [4], "data_offsets": [0, 16]}, "dtype 3 is not a safetensors dtype"),
        (_f32([3], 0, 2, dtype="F4"), "3 elements of F4 fill a fractional number of bytes"),
    ],
)
def test_malformed_entries(tmp_path, entry, expected):
    message = _refusal(_write(tmp_path / "e.safetensors", {"a": entry}, b"\x00" * 16))
    assert expected in message
    assert message.startswith("SAFETENSORS ")


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ([1], "__metadata__ is a JSON array; it must be an object of strings"),
        (
            {"format": 1},
            "__metadata__ entry 'format' is a JSON number; every value must be a string",
        ),
    ],
)
def test_bad_metadata(tmp_path, meta, expected):
    assert expected in _refusal(_write(tmp_path / "md.safetensors", {"__metadata__": meta}))


def test_long_names_are_shortened_in_messages(tmp_path):
    name = "x" * 100_000
    message = _refusal(_write(tmp_path / "l.safetensors", {name: _f32([-1])}))
    assert len(message) < 500 and "has a negative dimension" in message


def test_truncated_at_many_offsets(tmp_path):
    rng = np.random.default_rng(1)
    good = tmp_path / "good.safetensors"
    save_file(
        {"a": rng.standard_normal((8, 8)).astype("<f4"), "b": np.arange(10, dtype="<i8")}, good
    )
    raw = good.read_bytes()
    header_end = 8 + struct.unpack("<Q", raw[:8])[0]
    cut_points = sorted({*range(0, len(raw), 7), header_end, header_end + 1, len(raw) - 1})
    for cut in cut_points:
        path = tmp_path / f"cut{cut}.safetensors"
        path.write_bytes(raw[:cut])
        message = _refusal(path)
        if cut < 8:
            assert f"the file is {cut} bytes, too short" in message
        elif cut < header_end:
            assert "bytes follow the length field; the file is truncated" in message
        else:
            assert "run past the end of the" in message, (cut, message)


def test_shard_outside_the_index_folder_is_refused(tmp_path):
    outside = tmp_path / "outside.safetensors"
    save_file({"a": np.zeros(2, dtype="<f4")}, outside)  # exists, and is still refused
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for shard in ["../outside.safetensors", str(outside), "sub/../../outside.safetensors"]:
        index = folder / "model.safetensors.index.json"
        index.write_text(json.dumps({"weight_map": {"a": shard}}))
        message = _refusal(index)
        assert f"the index names shard {shard!r}, which lies outside the index's folder" in message
        assert f"shards must be files inside {folder}" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"weight_map": [1]}', 'the index is not a JSON object with a "weight_map" object'),
        ("[]", 'the index is not a JSON object with a "weight_map" object'),
        (
            '{"weight_map": {"a": 3}}',
            "weight_map sends tensor 'a' to a JSON number; shard names are strings",
        ),
        ('{"weight_map": {"a": "x"', "the index is not valid JSON"),
    ],
)
def test_malformed_index(tmp_path, text, expected):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(text)
    assert expected in _refusal(index)


def test_oversized_index_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(st, "MAX_INDEX_BYTES", 10)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"weight_map": {}}')
    assert "the index is 18 bytes, more than the 10-byte limit for a shard index" in _refusal(index)
