"""safetensors reader: values against safetensors' own loaders, slices, metadata, shards."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from nneditor.artifacts import safetensors as st
from nneditor.artifacts.registry import open_document
from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource, FileSource


def numpy_tensors() -> dict[str, np.ndarray]:
    """Every dtype safetensors.numpy can load back, in assorted shapes (scalar, empty, 3-D)."""
    rng = np.random.default_rng(7)
    out: dict[str, np.ndarray] = {}
    for dt in ["<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "i1", "<u8", "<u4", "<u2", "u1"]:
        out[f"t_{np.dtype(dt).name}"] = (rng.standard_normal((5, 3, 4)) * 50).astype(dt)
    out["t_bool"] = rng.standard_normal((7, 2)) > 0
    out["t_complex64"] = (rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))).astype(
        "<c8"
    )
    out["scalar"] = np.array(3.5, dtype="<f4")
    out["empty"] = np.zeros((0, 3), dtype="<f4")
    out["vector"] = np.arange(11, dtype="<i8")
    return out


def ml_tensors() -> dict[str, np.ndarray]:
    """bf16 and fp8 arrays (ml_dtypes), which safetensors.numpy writes but cannot load back."""
    rng = np.random.default_rng(8)
    base = rng.standard_normal((6, 5)).astype(np.float32) * 4
    return {
        "bf16": base.astype(ml_dtypes.bfloat16),
        "f8_e4m3": base.astype(ml_dtypes.float8_e4m3fn),
        "f8_e5m2": base.astype(ml_dtypes.float8_e5m2),
        "f8_e8m0": np.abs(base).astype(ml_dtypes.float8_e8m0fnu),
    }


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _hand_made(path: Path, header: dict, data: bytes) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def test_every_numpy_dtype_matches_safetensors_load_file(tmp_path, unchanged):
    path = tmp_path / "all.safetensors"
    save_file(numpy_tensors(), path)
    check = unchanged(path)
    reference = load_file(path)
    with open_document(path) as doc:
        assert doc.format == "safetensors" and doc.format_version == ""
        assert set(doc.tensors) == set(reference)
        for name, want in reference.items():
            ref = doc.tensors[name]
            got = ref.read()
            assert got.dtype == want.dtype, name
            assert got.shape == want.shape == ref.shape, name
            np.testing.assert_array_equal(got, want, err_msg=name)
            assert ref.nbytes == want.nbytes
    check()


def test_bf16_and_fp8_match_the_written_arrays(tmp_path, unchanged):
    tensors = ml_tensors()
    path = tmp_path / "ml.safetensors"
    save_file(tensors, path)
    check = unchanged(path)
    with open_document(path) as doc:
        dtypes = {name: doc.tensors[name].info["safetensors_dtype"] for name in tensors}
        assert dtypes == {
            "bf16": "BF16",
            "f8_e4m3": "F8_E4M3",
            "f8_e5m2": "F8_E5M2",
            "f8_e8m0": "F8_E8M0",
        }
        for name, want in tensors.items():
            got = doc.tensors[name].read()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=name)
    check()


def test_bf16_and_fp8_match_safetensors_torch_loader(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "ml.safetensors"
    save_file(ml_tensors(), path)
    with safe_open(path, framework="pt") as f, open_document(path) as doc:
        for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
            want = f.get_tensor(name)
            got = doc.tensors[name].read()
            assert list(want.shape) == list(got.shape)
            width = {1: torch.uint8, 2: torch.int16}[want.element_size()]
            np.testing.assert_array_equal(
                want.view(width).numpy().view(f"u{got.dtype.itemsize}"), _bits(got)
            )


def test_slices_match_numpy_and_touch_only_needed_rows(tmp_path):
    tensors = numpy_tensors()
    path = tmp_path / "s.safetensors"
    save_file(tensors, path)
    reference = load_file(path)
    counting = _CountingSource(FileSource(path))
    refs, _ = st.index_safetensors_file(counting)
    by_name = {r.name: r for r in refs}
    want = reference["t_float32"]  # shape (5, 3, 4)
    cases: list[tuple[str, Any]] = [
        ("1:3", np.s_[1:3]),
        ("4", np.s_[4]),
        ("0:5:2, 2", np.s_[0:5:2, 2]),
        ("..., -1", np.s_[..., -1]),
        ("2, 1, 3", np.s_[2, 1, 3]),
    ]
    for text, key in cases:
        np.testing.assert_array_equal(by_name["t_float32"].read(text), want[key], err_msg=text)
    counting.views.clear()
    by_name["t_float32"].read("2")
    start = by_name["t_float32"].offset
    assert start is not None
    assert counting.views == [(start + 2 * 3 * 4 * 4, 3 * 4 * 4)]
    np.testing.assert_array_equal(by_name["scalar"].read(), reference["scalar"])
    assert by_name["empty"].read().shape == (0, 3)
    counting.close()


class _CountingSource(ByteSource):
    """Wraps a source and records every (offset, length) view asked of it."""

    def __init__(self, inner: ByteSource) -> None:
        self.inner = inner
        self.size = inner.size
        self.path = inner.path
        self.label = inner.label
        self.views: list[tuple[int, int]] = []

    def view(self, offset: int, length: int) -> memoryview:
        self.views.append((offset, length))
        return self.inner.view(offset, length)

    def close(self) -> None:
        self.inner.close()


def test_offsets_are_absolute_and_metadata_is_kept(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"a": np.arange(4, dtype="<f4")}, path, metadata={"format": "pt", "note": "hi"})
    raw = path.read_bytes()
    header_len = struct.unpack("<Q", raw[:8])[0]
    with open_document(path) as doc:
        assert doc.metadata == {"format": "pt", "note": "hi"}
        ref = doc.tensors["a"]
        assert ref.offset == 8 + header_len
        assert raw[8 + header_len : 8 + header_len + 16] == np.arange(4, dtype="<f4").tobytes()
        assert ref.location is None
        assert doc.size_bytes == len(raw) == doc.identity.size
        assert doc.notes == []


def test_capabilities_and_missing_graph(tmp_path):
    path = tmp_path / "c.safetensors"
    save_file({"a": np.zeros(2, dtype="<f4")}, path)
    with open_document(path) as doc:
        assert doc.graph is None
        assert "stores tensors only" in doc.graph_unavailable_reason
        caps = doc.capabilities
        assert caps["inspect"].available and caps["read_tensors"].available
        assert not caps["view_graph"].available
        assert caps["view_graph"].reason == (
            "a safetensors file stores tensors only; it has no computation graph"
        )
        assert caps["export_weights"].available
        assert "weights only — no graph or code" in caps["export_weights"].reason


def test_float4_is_unpacked_low_nibble_first(tmp_path):
    raw = bytes([0x21, 0x43, 0x65, 0x87, 0xA9, 0xCB])  # codes 1,2,3,...,12
    path = _hand_made(
        tmp_path / "f4.safetensors",
        {"w": {"dtype": "F4", "shape": [3, 4], "data_offsets": [0, 6]}},
        raw,
    )
    codes = np.arange(1, 13, dtype=np.uint8).reshape(3, 4)
    want = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)  # ml_dtypes decodes each code
    with open_document(path) as doc:
        ref = doc.tensors["w"]
        assert ref.dtype == "float4_e2m1fn" and ref.nbytes == 6
        np.testing.assert_array_equal(ref.read().astype(np.float32), want)
        np.testing.assert_array_equal(ref.read("1:3, 1").astype(np.float32), want[1:3, 1])


def test_float4_written_by_torch_opens(tmp_path):
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    from safetensors.torch import save_file as torch_save

    packed = torch.arange(16, dtype=torch.uint8).reshape(2, 8)
    path = tmp_path / "t4.safetensors"
    torch_save({"w": packed.view(torch.float4_e2m1fn_x2)}, path)
    with open_document(path) as doc:
        ref = doc.tensors["w"]
        assert ref.info["safetensors_dtype"] == "F4" and ref.nbytes == 16
        assert ref.shape == (2, 16)
        got = ref.read()
    low, high = packed.numpy() & 0xF, packed.numpy() >> 4
    codes = np.stack([low, high], axis=-1).reshape(2, 16).astype(np.uint8)
    np.testing.assert_array_equal(_bits(got), codes)


def test_six_bit_floats_are_listed_but_not_decoded(tmp_path):
    path = _hand_made(
        tmp_path / "f6.safetensors",
        {"w": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]}},
        b"abc",
    )
    with open_document(path) as doc:
        ref = doc.tensors["w"]
        assert (ref.dtype, ref.nbytes) == ("float6_e2m3fn", 3)
        with pytest.raises(ArtifactError, match="cannot decode its values yet"):
            ref.read()


def test_uncovered_bytes_are_noted(tmp_path):
    header = {"a": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}}
    path = _hand_made(tmp_path / "gap.safetensors", header, b"\xff" * 4 + b"\x01\x02" + b"\xff" * 3)
    with open_document(path) as doc:
        np.testing.assert_array_equal(doc.tensors["a"].read(), [1, 2])
        assert doc.notes == [
            "7 of the 9 data bytes belong to no tensor (the official safetensors library "
            "refuses such files)"
        ]


def test_empty_tensors_may_share_offsets(tmp_path):
    header = {
        "a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
        "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
        "c": {"dtype": "F32", "shape": [3, 0], "data_offsets": [4, 4]},
    }
    path = _hand_made(tmp_path / "e.safetensors", header, np.float32(2).tobytes())
    with open_document(path) as doc:
        assert doc.tensors["b"].read().tolist() == [2.0]
        assert doc.tensors["c"].read().shape == (3, 0)


# --------------------------------------------------------------------------- shards


def make_sharded(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """Two shards plus a transformers-style index, all written by safetensors itself."""
    rng = np.random.default_rng(3)
    shard1 = {
        "model.embed.weight": rng.standard_normal((10, 4)).astype("<f4"),
        "model.layers.0.w": rng.standard_normal((4, 4)).astype("<f2"),
    }
    shard2 = {
        "model.layers.1.w": rng.standard_normal((4, 4)).astype("<f4"),
        "lm_head.weight": rng.standard_normal((10, 4)).astype("<f4"),
    }
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    for name, tensors in zip(names, (shard1, shard2), strict=True):
        save_file(tensors, folder / name, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, name))
    total = sum(a.nbytes for a in (*shard1.values(), *shard2.values()))
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    return index, {**shard1, **shard2}


def test_sharded_index_opens_the_union(tmp_path, unchanged):
    index, _ = make_sharded(tmp_path)
    shards = sorted(tmp_path.glob("*.safetensors"))
    checks = [unchanged(p) for p in [index, *shards]]
    reference = {
        name: (shard.name, arr) for shard in shards for name, arr in load_file(shard).items()
    }
    with open_document(index) as doc:
        assert doc.format == "safetensors"
        assert set(doc.tensors) == set(reference)
        for name, (shard, want) in reference.items():
            ref = doc.tensors[name]
            assert ref.location == shard
            np.testing.assert_array_equal(ref.read(), want)
        np.testing.assert_array_equal(
            doc.tensors["lm_head.weight"].read("2:4"), reference["lm_head.weight"][1][2:4]
        )
        assert doc.metadata["format"] == "pt"
        assert doc.metadata["sharded_index"]["shards"] == [p.name for p in shards]
        assert doc.size_bytes == sum(p.stat().st_size for p in [index, *shards])
        assert doc.notes == []
        assert len(doc.sources) == 2
    for check in checks:
        check()


def test_sharded_index_missing_shard_is_named(tmp_path):
    index, _ = make_sharded(tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ArtifactError) as exc:
        open_document(index)
    assert "shard 'model-00002-of-00002.safetensors' listed in the index is missing" in str(
        exc.value
    )


def test_sharded_index_tensor_absent_from_its_shard(tmp_path):
    index, _ = make_sharded(tmp_path)
    data = json.loads(index.read_text())
    data["weight_map"]["ghost"] = "model-00001-of-00002.safetensors"
    index.write_text(json.dumps(data))
    with pytest.raises(ArtifactError) as exc:
        open_document(index)
    assert (
        "the index places tensor 'ghost' in shard 'model-00001-of-00002.safetensors', "
        "but that shard does not contain it"
    ) in str(exc.value)


def test_sharded_index_notes_wrong_total_and_unlisted_tensors(tmp_path):
    index, _ = make_sharded(tmp_path)
    data = json.loads(index.read_text())
    del data["weight_map"]["lm_head.weight"]
    data["metadata"]["total_size"] = 5
    index.write_text(json.dumps(data))
    with open_document(index) as doc:
        assert "lm_head.weight" in doc.tensors
        assert any("1 tensors are not in the index's weight_map" in n for n in doc.notes)
        assert any("says total_size 5 bytes" in n for n in doc.notes)


def test_index_sniffing_needs_the_suffix_and_weight_map(tmp_path):
    from nneditor.artifacts.sniff import sniff_path

    index, _ = make_sharded(tmp_path)
    assert sniff_path(index) == "safetensors"
    other = tmp_path / "other.json"
    other.write_text(index.read_text())
    assert sniff_path(other) != "safetensors"
    no_map = tmp_path / "x.safetensors.index.json"
    no_map.write_text('{"metadata": {}}')
    assert sniff_path(no_map) != "safetensors"
