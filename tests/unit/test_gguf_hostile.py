"""Hostile GGUF files: every malformed input is an ArtifactError with a sentence, quickly, and
without allocating what a header merely claims.

A small valid file is written with gguf.GGUFWriter; field positions come from gguf.GGUFReader
(the reference); each test patches bytes of a copy.
"""

from __future__ import annotations

import re
import struct
import tracemalloc
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import nneditor
from nneditor.artifacts.gguf.reader import open_document
from nneditor.errors import ArtifactError

HUGE = 1 << 60


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, gguf.GGUFReader]:
    path = tmp_path_factory.mktemp("hostile") / "base.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("general.alignment", 32)
    w.add_string("a.str", "hello")
    w.add_array("a.arr", [1, 2, 3])
    w.add_array("a.tok", ["x", "yy", "zzz"])
    w.add_uint32("a.u32", 5)
    w.add_tensor("t0", np.arange(16, dtype=np.float32).reshape(2, 8))
    w.add_tensor("t1", gguf.quants.quantize(np.ones((2, 32), np.float32), Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("t2", np.ones(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes(), gguf.GGUFReader(path)


def value_at(reader: gguf.GGUFReader, key: str) -> int:
    """Offset of the value of metadata ``key`` (after key string and u32 type)."""
    return reader.fields[key].offset + 8 + len(key.encode()) + 4


def tensor_at(reader: gguf.GGUFReader, name: str) -> dict[str, int]:
    t = next(t for t in reader.tensors if t.name == name)
    o, n = t.field.offset, len(name.encode())
    nd = len(t.shape)
    return {"name": o, "ndims": o + 8 + n, "dims": o + 12 + n, "type": o + 12 + n + 8 * nd,
            "offset": o + 16 + n + 8 * nd}  # fmt: skip


def patched(tmp_path: Path, data: bytes, *edits: tuple[int, str, int]) -> Path:
    buf = bytearray(data)
    for offset, fmt, value in edits:
        struct.pack_into("<" + fmt, buf, offset, value)
    path = tmp_path / "bad.gguf"
    path.write_bytes(bytes(buf))
    return path


def refused(path: Path, *fragments: str) -> str:
    tracemalloc.start()
    try:
        with pytest.raises(ArtifactError) as exc:
            open_document(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = str(exc.value)
    for fragment in fragments:
        assert re.search(fragment, msg), f"{fragment!r} not in {msg!r}"
    assert msg.startswith("GGUF ") and msg.endswith(".")
    assert peak < 16 * 1024 * 1024, f"opening allocated {peak} bytes"
    return msg


def test_base_file_opens(base) -> None:
    data, reader = base
    doc = nneditor.open(reader.data.filename)
    assert list(doc.tensors) == ["t0", "t1", "t2"]
    doc.close()


def test_truncated_at_every_offset(base, tmp_path: Path) -> None:
    data, reader = base
    last = reader.tensors[-1]
    end = last.data_offset + last.n_bytes
    path = tmp_path / "cut.gguf"
    for cut in range(end):
        path.write_bytes(data[:cut])
        with pytest.raises(ArtifactError) as exc:
            open_document(path)
        msg = str(exc.value)
        assert msg.startswith("GGUF ") and msg.endswith("."), (cut, msg)
        assert re.search(r"truncated|not a GGUF file|runs past the end", msg), (cut, msg)
    path.write_bytes(data[:end])  # the trailing padding is optional
    assert len(open_document(path).tensors) == 3


def test_tiny_files_are_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGU")
    refused(path, "the GGUF magic needs 4 bytes but only 3 remain")
    path.write_bytes(b"GGML" + bytes(20))
    refused(path, r"this is not a GGUF file \(it starts with b'GGML'")
    with pytest.raises(ArtifactError, match="not a model format"):
        nneditor.open(path)


def test_string_length_2_60(base, tmp_path: Path) -> None:
    data, r = base
    key_len = r.fields["a.str"].offset
    refused(patched(tmp_path, data, (key_len, "Q", HUGE)),
            "the key of metadata entry 2 claims 1152921504606846976 bytes, more than the")  # fmt: skip
    refused(patched(tmp_path, data, (value_at(r, "a.str"), "Q", HUGE)),
            "the string value of 'a.str' claims 1152921504606846976 bytes")  # fmt: skip
    item = value_at(r, "a.tok") + 12
    refused(patched(tmp_path, data, (item, "Q", HUGE)),
            "string 0 of metadata array 'a.tok' claims 1152921504606846976 bytes, more than")  # fmt: skip
    refused(patched(tmp_path, data, (tensor_at(r, "t1")["name"], "Q", HUGE)),
            "the name of tensor 1 claims 1152921504606846976 bytes")  # fmt: skip


def test_long_but_present_string_is_refused_politely(base, tmp_path: Path) -> None:
    data, r = base
    path = patched(tmp_path, data, (r.fields["a.str"].offset, "Q", 100_000))
    with open(path, "r+b") as fh:
        fh.truncate(200_000)
    refused(path, "the key of metadata entry 2 is 100000 bytes long; NNEditor reads such")


def test_array_count_2_60(base, tmp_path: Path) -> None:
    data, r = base
    refused(patched(tmp_path, data, (value_at(r, "a.arr") + 4, "Q", HUGE)),
            r"array 'a.arr' claims 1152921504606846976 items of at least 4 bytes, more than")  # fmt: skip
    refused(patched(tmp_path, data, (value_at(r, "a.tok") + 4, "Q", HUGE)),
            r"array 'a.tok' claims 1152921504606846976 items of at least 8 bytes")  # fmt: skip


def test_counts_of_2_40(base, tmp_path: Path) -> None:
    data, _ = base
    refused(patched(tmp_path, data, (8, "Q", 1 << 40)),
            "the header claims 1099511627776 tensors, more than the .*-byte file can hold")  # fmt: skip
    refused(patched(tmp_path, data, (16, "Q", 1 << 40)),
            "the header claims 1099511627776 metadata entries")  # fmt: skip


def test_tensor_offset_past_end(base, tmp_path: Path) -> None:
    data, r = base
    path = patched(tmp_path, data, (tensor_at(r, "t2")["offset"], "Q", 1 << 40))
    refused(
        path, r"tensor 't2' \(F32, 16 bytes at byte \d+\) runs past the end of the \d+-byte file"
    )


def test_overlapping_and_misaligned_offsets(base, tmp_path: Path) -> None:
    data, r = base
    t0 = r.tensors[0].data_offset - r.data_offset
    t1 = tensor_at(r, "t1")["offset"]
    refused(
        patched(tmp_path, data, (t1, "Q", t0)),
        r"tensors 't0' \(bytes \d+ to \d+\) and 't1'.* overlap",
    )
    refused(patched(tmp_path, data, (t1, "Q", t0 + 4)),
            "tensor 't1' starts at data offset 4, which is not a multiple of the file's alignment 32")  # fmt: skip


def test_element_count_overflow(base, tmp_path: Path) -> None:
    data, r = base
    dims = tensor_at(r, "t0")["dims"]
    refused(patched(tmp_path, data, (dims, "Q", 1 << 40), (dims + 8, "Q", 1 << 40)),
            r"tensor 't0' has dimensions \[1099511627776, 1099511627776\] whose element count .* does not fit in 64 bits")  # fmt: skip
    refused(patched(tmp_path, data, (dims, "Q", 1 << 31), (dims + 8, "Q", 1 << 31)),
            "tensor 't0' .* runs past the end")  # fmt: skip


def test_unknown_value_and_item_types(base, tmp_path: Path) -> None:
    data, r = base
    refused(patched(tmp_path, data, (value_at(r, "a.u32") - 4, "I", 13)),
            "metadata key 'a.u32' has unknown value type 13; GGUF defines types 0 to 12")  # fmt: skip
    refused(patched(tmp_path, data, (value_at(r, "a.arr"), "I", 77)),
            "array 'a.arr' has unknown item type 77")  # fmt: skip


def test_unknown_tensor_type_is_listed_not_guessed(base, tmp_path: Path) -> None:
    data, r = base
    path = patched(tmp_path, data, (tensor_at(r, "t2")["type"], "I", 99))
    doc = open_document(path)
    ref = doc.tensors["t2"]
    assert ref.encoding == "unknown type 99" and ref.nbytes == 0
    assert ref.info["ggml_type"] == 99 and ref.info["block_size"] is None
    with pytest.raises(
        ArtifactError, match="tensor 't2' has unknown ggml type 99; NNEditor cannot"
    ):
        ref.read()
    np.testing.assert_array_equal(doc.tensors["t0"].read(), np.arange(16).reshape(2, 8))
    doc.close()


def test_bad_dimensions_and_blocks(base, tmp_path: Path) -> None:
    data, r = base
    refused(patched(tmp_path, data, (tensor_at(r, "t0")["ndims"], "I", 5)),
            "tensor 't0' has 5 dimensions; GGUF tensors have at most 4")  # fmt: skip
    refused(patched(tmp_path, data, (tensor_at(r, "t1")["dims"], "Q", 33)),
            "tensor 't1' has rows of 33 elements, not a multiple of the Q8_0 block size 32")  # fmt: skip


def test_duplicates(base, tmp_path: Path) -> None:
    data, r = base
    key = r.fields["a.u32"].offset + 8
    path = patched(tmp_path, data)
    buf = bytearray(path.read_bytes())
    buf[key : key + 5] = b"a.str"
    path.write_bytes(bytes(buf))
    refused(path, "metadata key 'a.str' appears twice")
    buf = bytearray(data)
    name = tensor_at(r, "t1")["name"] + 8
    buf[name : name + 2] = b"t0"
    path.write_bytes(bytes(buf))
    refused(path, r"tensor name 't0' appears twice \(tensor infos 0 and 1\)")


def test_bad_alignment(base, tmp_path: Path) -> None:
    data, r = base
    refused(patched(tmp_path, data, (value_at(r, "general.alignment"), "I", 48)),
            "general.alignment is 48; it must be a positive power of two")  # fmt: skip
    refused(patched(tmp_path, data, (value_at(r, "general.alignment") - 4, "I", 6)),
            "general.alignment has type float32; it must be an integer")  # fmt: skip


def test_bad_utf8_key(base, tmp_path: Path) -> None:
    data, r = base
    buf = bytearray(data)
    buf[r.fields["a.u32"].offset + 8] = 0xFF
    path = tmp_path / "utf.gguf"
    path.write_bytes(bytes(buf))
    refused(path, r"the key of metadata entry 5 is not valid UTF-8 \(b'\\xff.u32'\)")


def _header(n_kv: int, n_tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def test_nesting_bomb(tmp_path: Path) -> None:
    body = struct.pack("<Q", 1) + b"n" + struct.pack("<I", 9)
    body += struct.pack("<IQ", 9, 1) * 20 + struct.pack("<IQ", 0, 0)
    path = tmp_path / "nest.gguf"
    path.write_bytes(_header(1) + body)
    refused(path, "array 'n' nests arrays more than 8 levels deep")


def test_string_budget_on_sparse_file(tmp_path: Path) -> None:
    count = (1 << 24) + 1
    body = struct.pack("<Q", 3) + b"big" + struct.pack("<IIQ", 9, 8, count)
    path = tmp_path / "sparse.gguf"
    path.write_bytes(_header(1) + body)
    with open(path, "r+b") as fh:
        fh.truncate(len(_header(1) + body) + 8 * count)  # zeros: empty strings, no disk
    refused(path, "array 'big' claims 16777217 strings; NNEditor reads at most 16777216")


def test_errors_through_public_open(base, tmp_path: Path) -> None:
    data, _ = base
    with pytest.raises(ArtifactError, match="the header claims 1099511627776 tensors"):
        nneditor.open(patched(tmp_path, data, (8, "Q", 1 << 40)))
