"""GGUF reader: files written by gguf.GGUFWriter, values checked against gguf-py (the reference).

Metadata must equal ``GGUFReader``'s field contents; tensor values must equal
``gguf.quants.dequantize`` of the same bytes, for whole tensors and for slices.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf import quants

import nneditor
from nneditor.artifacts.gguf.arrays import NumericArray, StringArray
from nneditor.artifacts.gguf.reader import GRAPH_REASON, open_document
from nneditor.errors import ArtifactError
from nneditor.model.document import LazyList

RNG = np.random.default_rng(1234)


def snapshot(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


def write_gguf(path: Path, kv=(), tensors=(), alignment: int | None = None, **kw) -> Path:
    """kv: (key, value, vtype, sub_type); tensors: (name, array, raw_dtype or None)."""
    w = gguf.GGUFWriter(str(path), "llama", **kw)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value, vtype, sub in kv:
        w.add_key_value(key, value, vtype, sub)
    for name, array, raw in tensors:
        w.add_tensor(name, array, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def as_plain(value):
    return value.tolist() if isinstance(value, (NumericArray, StringArray)) else value


# --------------------------------------------------------------------------- metadata

TOKENS = [f"tok{i}_{'Ġé中'[i % 3]}" for i in range(1000)] + ["", "a b", "\u2581x"]
KV = [
    ("t.u8", 200, V.UINT8, None),
    ("t.i8", -100, V.INT8, None),
    ("t.u16", 60000, V.UINT16, None),
    ("t.i16", -30000, V.INT16, None),
    ("t.u32", 4_000_000_000, V.UINT32, None),
    ("t.i32", -2_000_000_000, V.INT32, None),
    ("t.f32", 0.1, V.FLOAT32, None),
    ("t.bool", True, V.BOOL, None),
    ("t.str", "héllo wörld ✓", V.STRING, None),
    ("t.u64", 2**63 + 5, V.UINT64, None),
    ("t.i64", -(2**62), V.INT64, None),
    ("t.f64", 1e-300, V.FLOAT64, None),
    ("t.ints_small", [1, -2, 3], V.ARRAY, V.INT32),
    ("t.ints_big", list(range(-500, 500)), V.ARRAY, V.INT32),
    ("t.u8s_big", list(range(256)) * 3, V.ARRAY, V.UINT8),
    ("t.floats", [0.5 * i for i in range(300)], V.ARRAY, V.FLOAT32),
    ("t.f64s", [1.0 / (i + 1) for i in range(10)], V.ARRAY, V.FLOAT64),
    ("t.bools", [i % 3 == 0 for i in range(400)], V.ARRAY, V.BOOL),
    ("t.i64s", [2**40 + i for i in range(5)], V.ARRAY, V.INT64),
    ("t.strs_small", ["a", "", "ü"], V.ARRAY, V.STRING),
    ("tokenizer.ggml.tokens", TOKENS, V.ARRAY, V.STRING),
]


@pytest.fixture
def meta_file(tmp_path: Path) -> Path:
    t = np.arange(64, dtype=np.float32).reshape(2, 32)
    return write_gguf(tmp_path / "meta.gguf", KV, [("t", t, None)])


def test_metadata_equals_reader(meta_file: Path) -> None:
    before = snapshot(meta_file)
    reader = gguf.GGUFReader(meta_file)
    with nneditor.open(meta_file) as doc:
        assert doc.format == "gguf" and doc.format_version == "3"
        assert set(doc.metadata) == set(reader.fields)
        for name, field in reader.fields.items():
            assert as_plain(doc.metadata[name]) == field.contents(), name
        types = doc.tree["gguf"]["value_types"]
        assert types["t.u64"] == "uint64" and types["tokenizer.ggml.tokens"] == "array[string]"
    assert snapshot(meta_file) == before


def test_metadata_values_are_python_values(meta_file: Path) -> None:
    doc = open_document(meta_file)
    md = doc.metadata
    assert md["t.u64"] == 2**63 + 5 and md["t.i8"] == -100 and md["t.bool"] is True
    assert md["t.str"] == "héllo wörld ✓"
    assert md["t.f32"] == pytest.approx(0.1) and md["t.f32"] == float(np.float32(0.1))
    assert md["t.ints_small"] == [1, -2, 3] and md["t.strs_small"] == ["a", "", "ü"]
    assert md["general.architecture"] == "llama"
    doc.close()


def test_long_arrays_are_lazy(meta_file: Path) -> None:
    doc = open_document(meta_file)
    tokens = doc.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, StringArray) and isinstance(tokens, LazyList)
    assert len(tokens) == len(TOKENS)
    assert tokens[0] == TOKENS[0] and tokens[-1] == TOKENS[-1] and tokens[1000] == ""
    assert tokens[10:13] == TOKENS[10:13] and list(tokens) == TOKENS
    assert tokens.raw(2) == TOKENS[2].encode()
    assert tokens.lengths().tolist() == [len(t.encode()) for t in TOKENS]
    with pytest.raises(IndexError):
        tokens[len(TOKENS)]
    ints = doc.metadata["t.ints_big"]
    assert isinstance(ints, NumericArray) and ints.item_type == "int32"
    assert ints[0] == -500 and ints[-1] == 499 and len(ints) == 1000
    np.testing.assert_array_equal(ints.numpy(), np.arange(-500, 500))
    bools = doc.metadata["t.bools"]
    assert bools[3] is True and bools[4] is False and bools.numpy().dtype == bool
    assert tokens.summary()["length"] == len(TOKENS)
    doc.close()


def test_nested_arrays(tmp_path: Path) -> None:
    nested = [[1, 2, 3], [4], [5, 6]]
    kv = [("t.nested", nested, V.ARRAY, V.ARRAY), ("t.after", 7, V.UINT32, None)]
    path = write_gguf(tmp_path / "nested.gguf", kv)
    doc = open_document(path)
    assert doc.metadata["t.nested"] == nested
    assert doc.metadata["t.after"] == 7
    assert doc.tree["gguf"]["value_types"]["t.nested"] == "array[array[int32]]"


def test_document_contract(meta_file: Path) -> None:
    doc = open_document(meta_file)
    assert doc.graph is None and doc.graph_unavailable_reason == GRAPH_REASON
    caps = doc.capabilities
    assert caps["inspect"].available and caps["read_tensors"].available
    assert not caps["view_graph"].available and caps["view_graph"].reason == GRAPH_REASON
    assert caps["export_weights"].available and "weights only" in caps["export_weights"].reason
    assert doc.size_bytes == meta_file.stat().st_size == doc.identity.size
    ref = doc.tensors["t"]
    assert (ref.dtype, ref.shape, ref.encoding, ref.nbytes) == ("float32", (2, 32), "F32", 256)
    assert ref.info == {"ggml_type": 0, "block_size": 1, "type_size": 4, "ne": [32, 2]}
    doc.close()


# --------------------------------------------------------------------------- tensor values

DEQUANT_TYPES = sorted(quants._type_traits, key=int)


def _block_bytes(qtype: Q, shape: tuple[int, ...]) -> np.ndarray:
    """Bytes for a tensor of ``qtype``: quantized random data when gguf-py can quantize it,
    otherwise random bytes with finite fp16 fields (every bit pattern is a valid block)."""
    values = RNG.standard_normal(shape).astype(np.float32)
    try:
        return quants.quantize(values, qtype)
    except NotImplementedError:
        pass
    byte_shape = quants.quant_shape_to_byte_shape(shape, qtype)
    raw = RNG.integers(0, 256, byte_shape, dtype=np.uint8)
    halves = raw.view(np.uint16)
    halves &= np.uint16(0xBBFF)  # clear exponent bits: no inf/nan halves, modest magnitudes
    return raw


@pytest.fixture(scope="module")
def typed_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tensors: list[tuple[str, np.ndarray, Q | None]] = []
    for qtype in DEQUANT_TYPES:
        tensors.append((f"q.{qtype.name}", _block_bytes(qtype, (6, 512)), qtype))
    tensors.append(("q3d.Q4_K", _block_bytes(Q.Q4_K, (2, 3, 512)), Q.Q4_K))
    tensors.append(("q1d.Q8_0", _block_bytes(Q.Q8_0, (256,)), Q.Q8_0))
    for dt in (np.float32, np.float16, np.int8, np.int16, np.int32, np.int64, np.float64):
        arr = (RNG.standard_normal((5, 7)) * 100).astype(dt)
        tensors.append((f"plain.{np.dtype(dt).name}", arr, None))
    path = tmp_path_factory.mktemp("gguf") / "types.gguf"
    return write_gguf(path, tensors=tensors)


def _reference(path: Path) -> dict[str, tuple[np.ndarray, gguf.ReaderTensor]]:
    reader = gguf.GGUFReader(path)
    out = {}
    for t in reader.tensors:
        if t.tensor_type in (Q.I8, Q.I16, Q.I32, Q.I64, Q.F64):
            ref = np.array(t.data)  # stored as is; gguf-py has nothing to dequantize
        else:
            ref = quants.dequantize(np.array(t.data), t.tensor_type)
        out[t.name] = (ref.reshape(tuple(reversed(t.shape.tolist()))), t)
    return out


def test_every_type_decodes_like_gguf(typed_file: Path) -> None:
    before = snapshot(typed_file)
    refs = _reference(typed_file)
    with nneditor.open(typed_file) as doc:
        assert list(doc.tensors) == list(refs)
        for name, (want, rt) in refs.items():
            ref = doc.tensors[name]
            assert ref.encoding == rt.tensor_type.name, name
            assert ref.shape == want.shape and ref.nbytes == rt.n_bytes, name
            assert ref.offset == rt.data_offset, name
            got = ref.read()
            assert got.shape == want.shape, name
            np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32), name)
    assert snapshot(typed_file) == before


SLICES = ["1:3", "4", ":, 40:300:3", "..., -1", "2:6:2, 255:257", ":, 0", "5, 100:101", "0:0"]


@pytest.mark.parametrize("qtype", DEQUANT_TYPES, ids=lambda q: q.name)
def test_slices_equal_reference_slices(typed_file: Path, qtype: Q) -> None:
    name = f"q.{qtype.name}"
    want = _reference(typed_file)[name][0]
    doc = open_document(typed_file)
    ref = doc.tensors[name]
    assert ref.dtype == ("bfloat16" if qtype == Q.BF16 else "float32")
    for text in SLICES:
        got = ref.read(text)
        expect = eval(f"want[{text}]", {"want": want})  # noqa: S307 - test-owned literals
        assert got.shape == expect.shape, text
        np.testing.assert_array_equal(got.astype(np.float32), expect, text)
    got = ref.read((slice(1, 2), slice(None)))
    np.testing.assert_array_equal(got.astype(np.float32), want[1:2])
    doc.close()


def test_slices_of_3d_and_1d_tensors(typed_file: Path) -> None:
    refs = _reference(typed_file)
    doc = open_document(typed_file)
    want3 = refs["q3d.Q4_K"][0]
    for text in ["1", "0, 1:3", ":, 2, 256:", "..., 7", "1, :, 3:500:7"]:
        got = doc.tensors["q3d.Q4_K"].read(text)
        np.testing.assert_array_equal(got, eval(f"w[{text}]", {"w": want3}), text)  # noqa: S307
    want1 = refs["q1d.Q8_0"][0]
    for text in ["3", "30:70", ":"]:
        got = doc.tensors["q1d.Q8_0"].read(text)
        np.testing.assert_array_equal(got, eval(f"w[{text}]", {"w": want1}), text)  # noqa: S307
    doc.close()


def test_plain_types_keep_their_dtype(typed_file: Path) -> None:
    refs = _reference(typed_file)
    doc = open_document(typed_file)
    for dt in ("float32", "float16", "int8", "int16", "int32", "int64", "float64"):
        ref = doc.tensors[f"plain.{dt}"]
        want = np.array(refs[f"plain.{dt}"][1].data)
        assert ref.dtype == dt
        got = ref.read()
        assert got.dtype == np.dtype(dt)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(ref.read("1:4, 2"), want[1:4, 2])
    bf = doc.tensors["q.BF16"].read()
    assert str(bf.dtype) == "bfloat16"
    doc.close()


def test_reads_return_fresh_writable_arrays(typed_file: Path) -> None:
    doc = open_document(typed_file)
    a = doc.tensors["q.Q4_0"].read()
    a[:] = 0
    assert doc.tensors["q.Q4_0"].read().any()
    doc.close()


# --------------------------------------------------------------------------- layout variants


@pytest.mark.parametrize("alignment", [1, 8, 64, 256, 4096])
def test_alignment_variants(tmp_path: Path, alignment: int) -> None:
    tensors = [
        ("a", RNG.standard_normal((3, 5)).astype(np.float32), None),
        ("b", _block_bytes(Q.Q8_0, (2, 64)), Q.Q8_0),
        ("c", np.arange(7, dtype=np.int16), None),
    ]
    path = write_gguf(tmp_path / f"al{alignment}.gguf", tensors=tensors, alignment=alignment)
    refs = _reference(path)
    doc = open_document(path)
    assert doc.metadata["general.alignment"] == alignment
    assert doc.tree["gguf"]["data_offset"] % alignment == 0
    for name, (want, rt) in refs.items():
        assert doc.tensors[name].offset == rt.data_offset
        np.testing.assert_array_equal(doc.tensors[name].read().astype(want.dtype), want)
    doc.close()


def test_version_2_file(tmp_path: Path) -> None:
    t = _block_bytes(Q.Q4_1, (2, 64))
    path = write_gguf(tmp_path / "v2.gguf", KV[:5], [("w", t, Q.Q4_1)])
    data = bytearray(path.read_bytes())
    assert data[4:8] == (3).to_bytes(4, "little")
    data[4:8] = (2).to_bytes(4, "little")  # v2 and v3 share the layout
    path.write_bytes(bytes(data))
    reader = gguf.GGUFReader(path)
    doc = open_document(path)
    assert doc.format_version == "2" and doc.metadata["GGUF.version"] == 2
    for name, field in reader.fields.items():
        assert as_plain(doc.metadata[name]) == field.contents()
    want = quants.dequantize(np.array(reader.tensors[0].data), Q.Q4_1)
    np.testing.assert_array_equal(doc.tensors["w"].read(), want)
    doc.close()


def test_big_endian_refused(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "be.gguf",
        KV[:3],
        [("w", np.ones((2, 4), np.float32), None)],
        endianess=gguf.GGUFEndian.BIG,
    )
    before = snapshot(path)
    with pytest.raises(ArtifactError) as exc:
        nneditor.open(path)
    msg = str(exc.value)
    assert "big-endian GGUF file (version 3 stored byte-swapped)" in msg
    assert "little-endian GGUF only" in msg and "byte 4" in msg
    assert snapshot(path) == before


def test_version_1_refused(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "v1.gguf", KV[:2])
    data = bytearray(path.read_bytes())
    data[4:8] = (1).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="GGUF version 1 file .* reads versions 2 and 3"):
        open_document(path)
    data[4:8] = (7).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="unsupported GGUF version 7"):
        open_document(path)


def test_a_gguf_without_a_layer_stack_says_why_it_has_no_graph(tmp_path) -> None:  # noqa: ANN001
    """A diffusion transformer as ComfyUI-GGUF stores it (architecture flux, no blk.N.*):
    the capability carries the specific reason, the same one the graph pane shows."""
    w = gguf.GGUFWriter(str(tmp_path / "flux.gguf"), "flux")
    w.add_tensor("double_blocks.0.img_attn.qkv.weight", np.zeros((96, 32), np.float32))
    w.add_tensor("img_in.weight", np.zeros((32, 64), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with nneditor.open(tmp_path / "flux.gguf") as doc:
        reason = doc.graph_unavailable_reason
        assert doc.graph is None and "this GGUF (flux) has no blk.N.* tensors" in reason
        assert doc.capabilities["view_graph"].reason == reason
