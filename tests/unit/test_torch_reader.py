"""PyTorch checkpoint reader: generated torch.save files compared with torch.load.

Every fixture is written by torch.save (new zip and legacy containers); every expected value
comes from ``torch.load(path, weights_only=True)``, never from NNEditor itself.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nneditor.artifacts import registry  # noqa: E402
from nneditor.artifacts.pytorch import checkpoint as torch_pickle  # noqa: E402
from nneditor.errors import ArtifactError  # noqa: E402
from nneditor.io import zipfile_members  # noqa: E402


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, tensor) for every tensor in a torch.load result (reference naming)."""
    if isinstance(obj, torch.Tensor):
        yield prefix or "tensor", obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}.{i}" if prefix else str(i))


def raw_bytes(t: Any) -> bytes:
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def assert_matches_torch(
    path: Path, expected_count: int | None = None, weights_only: bool = True
) -> Any:
    """Open ``path`` with NNEditor and compare every tensor with torch.load's."""
    reference = dict(flatten(torch.load(path, weights_only=weights_only)))
    with torch_pickle.open_document(path) as doc:
        assert list(doc.tensors) == list(reference)
        if expected_count is not None:
            assert len(doc.tensors) == expected_count
        for name, t in reference.items():
            ref = doc.tensors[name]
            assert ref.dtype == str(t.dtype).removeprefix("torch."), name
            assert ref.shape == tuple(t.shape), name
            values = ref.read()
            assert values.shape == tuple(t.shape)
            if t.dtype == torch.complex32:
                np.testing.assert_array_equal(values, t.to(torch.complex64).numpy())
            else:
                assert values.tobytes() == raw_bytes(t), name
        return doc.metadata, doc.tree


def all_dtypes() -> list[Any]:
    names = [
        "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
        "uint8", "bool", "complex64", "complex128", "complex32", "uint16", "uint32", "uint64",
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    ]  # fmt: skip
    return [getattr(torch, n) for n in names if hasattr(torch, n)]


def sample(dtype: Any, shape: tuple[int, ...] = (3, 4)) -> Any:
    base = torch.linspace(-3.5, 3.5, int(np.prod(shape))).reshape(shape)
    if dtype == torch.bool:
        return base > 0
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    if not dtype.is_floating_point:
        return (base * 10).to(torch.int64).abs().to(dtype)
    return base.to(dtype)


LEGACY_DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128,
]  # fmt: skip


def test_every_dtype_new_zip(tmp_path: Path, unchanged: Any) -> None:
    sd = {str(dt).removeprefix("torch."): sample(dt) for dt in all_dtypes()}
    path = tmp_path / "dtypes.pt"
    torch.save(sd, path)
    check = unchanged(path)
    meta, _ = assert_matches_torch(path, len(sd))
    assert meta["container"] == "zip"
    assert meta["untrusted_globals"] == []
    assert "torch._utils._rebuild_tensor_v2" in meta["globals"]
    if hasattr(torch, "float8_e4m3fn"):
        assert "torch._utils._rebuild_tensor_v3" in meta["globals"]
    check()


def test_every_legacy_dtype(tmp_path: Path, unchanged: Any) -> None:
    sd = {str(dt).removeprefix("torch."): sample(dt) for dt in LEGACY_DTYPES}
    path = tmp_path / "legacy.pt"
    torch.save(sd, path, _use_new_zipfile_serialization=False)
    check = unchanged(path)
    meta, _ = assert_matches_torch(path, len(sd))
    assert meta["container"] == "legacy"
    assert meta["storages"] == len(sd)
    check()


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_views_offsets_transposes_and_shared_storage(tmp_path: Path, zipped: bool) -> None:
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    sd = {
        "base": base,
        "row": base[2],  # storage offset 20
        "tail": base.view(-1)[37:],  # offset 37, contiguous
        "transposed": base.t(),  # non-contiguous
        "strided": base[1::2, ::3],  # offset + steps
        "permuted": torch.arange(24, dtype=torch.int16).reshape(2, 3, 4).permute(2, 0, 1),
        "scalar": torch.tensor(7, dtype=torch.int64),
        "empty": torch.zeros(0, 3),
        "same": base,  # the very same tensor under a second name
    }
    path = tmp_path / "views.pt"
    torch.save(sd, path, _use_new_zipfile_serialization=zipped)
    meta, _ = assert_matches_torch(path, len(sd))
    assert meta["storages"] == 4  # base's storage is shared by six tensors
    with torch_pickle.open_document(path) as doc:
        assert doc.tensors["transposed"].encoding == "strided"
        assert doc.tensors["row"].encoding == "raw"
        assert doc.tensors["row"].info["storage_offset"] == 20
        assert doc.tensors["row"].info["storage"] == doc.tensors["base"].info["storage"]
        # slices of strided and contiguous views equal torch's slices
        np.testing.assert_array_equal(doc.tensors["transposed"].read("2:5, 1"), base.t()[2:5, 1])
        np.testing.assert_array_equal(
            doc.tensors["strided"].read("1:, ::2"), base[1::2, ::3][1:, ::2]
        )
        np.testing.assert_array_equal(doc.tensors["base"].read("4"), base[4])


def test_nested_dicts_and_lightning_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 1, 5, 5)).sum().backward()
    opt.step()
    ckpt = {
        "epoch": 3,
        "global_step": 120,
        "pytorch-lightning_version": "2.4.0",
        "state_dict": model.state_dict(),
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [],
        "hyper_parameters": {"lr": 1e-3, "channels": [1, 2], "name": "tiny"},
        "extra": {"nested": {"deeper": {"t": torch.ones(2, 2)}}},
    }
    path = tmp_path / "last.ckpt"
    torch.save(ckpt, path)
    meta, tree = assert_matches_torch(path)
    with torch_pickle.open_document(path) as doc:
        assert "state_dict.0.weight" in doc.tensors
        assert "optimizer_states.0.state.0.exp_avg" in doc.tensors
        assert "extra.nested.deeper.t" in doc.tensors
        assert doc.graph is None
        assert doc.graph_unavailable_reason == torch_pickle.GRAPH_REASON
        assert not doc.capabilities["view_graph"].available
        assert doc.capabilities["read_tensors"].available
    assert tree["epoch"] == 3
    assert tree["hyper_parameters"] == {"lr": 1e-3, "channels": [1, 2], "name": "tiny"}
    assert tree["state_dict"]["0.weight"] == "<tensor float32 [2, 1, 3, 3]>"
    assert tree["optimizer_states"][0]["param_groups"][0]["lr"] == 1e-3
    assert meta["untrusted_globals"] == []


def test_whole_pickled_module_is_named_like_its_state_dict(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    path = tmp_path / "model.pt"
    torch.save(model, path)
    with torch_pickle.open_document(path) as doc:
        assert list(doc.tensors) == list(model.state_dict())
        for name, t in model.state_dict().items():
            np.testing.assert_array_equal(doc.tensors[name].read(), t.numpy())
        assert "torch.nn.modules.linear.Linear" in doc.metadata["untrusted_globals"]
        assert doc.tree["__class__"] == "torch.nn.modules.container.Sequential"
        assert any("never imported or run" in n for n in doc.notes)


def test_registry_sniffs_both_containers(tmp_path: Path) -> None:
    sd = {"w": torch.ones(2)}
    torch.save(sd, tmp_path / "a.pth")
    torch.save(sd, tmp_path / "b.bin", _use_new_zipfile_serialization=False)
    for name in ("a.pth", "b.bin"):
        with registry.open_document(tmp_path / name) as doc:
            assert doc.format == "pytorch"
            np.testing.assert_array_equal(doc.tensors["w"].read(), np.ones(2, np.float32))


def _rewrite_zip(src: Path, dst: Path, edit: Any, compress: int = zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compress) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def test_big_endian_archive(tmp_path: Path) -> None:
    sd = {"f": torch.linspace(-1, 1, 6).reshape(2, 3), "i": torch.arange(5, dtype=torch.int32)}
    src = tmp_path / "le.pt"
    torch.save(sd, src)
    keys = {"0": np.float32, "1": np.int32}

    def swap(name: str, data: bytes) -> bytes:
        if name.endswith("/byteorder"):
            return b"big"
        key = name.rsplit("/", 1)[-1]
        if "/data/" in name and key in keys:
            return np.frombuffer(data, keys[key]).byteswap().tobytes()
        return data

    dst = tmp_path / "be.pt"
    _rewrite_zip(src, dst, swap)
    with torch_pickle.open_document(dst) as doc:
        assert doc.metadata["byteorder"] == "big"
        np.testing.assert_array_equal(doc.tensors["f"].read(), sd["f"].numpy())
        np.testing.assert_array_equal(doc.tensors["i"].read(), sd["i"].numpy())
        np.testing.assert_array_equal(doc.tensors["f"].read("1, 1:"), sd["f"][1, 1:].numpy())


def test_deflated_members_inflate_lazily_and_are_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sd = {"w": torch.arange(1000, dtype=torch.float32), "t": torch.ones(3, 4).t()}
    src = tmp_path / "stored.pt"
    torch.save(sd, src)
    dst = tmp_path / "deflated.pt"
    _rewrite_zip(src, dst, lambda name, data: data, zipfile.ZIP_DEFLATED)
    assert_matches_torch(dst, 2)
    monkeypatch.setattr(zipfile_members, "MAX_INFLATE", 1024)
    with torch_pickle.open_document(dst) as doc:  # data.pkl is small: opening works
        assert doc.tensors["w"].offset is None  # inflated bytes have no file offset
        with pytest.raises(ArtifactError, match="declares 4000 bytes; NNEditor inflates at most"):
            doc.tensors["w"].read()


def test_missing_storage_member(tmp_path: Path) -> None:
    src = tmp_path / "full.pt"
    torch.save({"a": torch.ones(3), "b": torch.zeros(2)}, src)
    dst = tmp_path / "cut.pt"
    _rewrite_zip(src, dst, lambda name, data: None if name.endswith("/data/1") else data)
    with pytest.raises(
        ArtifactError, match=r"refers to storage '1', but the archive has no member"
    ):
        torch_pickle.open_document(dst)


def test_storage_member_smaller_than_declared(tmp_path: Path) -> None:
    src = tmp_path / "full.pt"
    torch.save({"a": torch.ones(30)}, src)
    dst = tmp_path / "short.pt"
    _rewrite_zip(src, dst, lambda name, data: data[:10] if name.endswith("/data/0") else data)
    with pytest.raises(
        ArtifactError, match=r"storage '0' declares 30 float32 elements \(120 bytes\) but archive"
    ) as err:
        torch_pickle.open_document(dst)
    assert str(err.value).startswith(f"PYTORCH {dst}")


def test_bad_byteorder_and_missing_pickle(tmp_path: Path) -> None:
    src = tmp_path / "full.pt"
    torch.save({"a": torch.ones(3)}, src)
    odd = tmp_path / "odd.pt"
    _rewrite_zip(src, odd, lambda n, d: b"middle" if n.endswith("/byteorder") else d)
    with pytest.raises(ArtifactError, match="byteorder member says 'middle'"):
        torch_pickle.open_document(odd)
    nopkl = tmp_path / "nopkl.pt"
    _rewrite_zip(src, nopkl, lambda n, d: None if n.endswith("data.pkl") else d)
    with pytest.raises(ArtifactError, match="has no data.pkl member, so it is not a PyTorch"):
        torch_pickle.open_document(nopkl)


def test_truncated_files(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy.pt"
    torch.save({"a": torch.ones(100)}, legacy, _use_new_zipfile_serialization=False)
    cut = tmp_path / "cut_legacy.pt"
    cut.write_bytes(legacy.read_bytes()[:-50])
    with pytest.raises(
        ArtifactError, match="storage '.*' of 400 bytes at offset .* runs past the end"
    ):
        torch_pickle.open_document(cut)
    zipped = tmp_path / "zip.pt"
    torch.save({"a": torch.ones(100)}, zipped)
    cut_zip = tmp_path / "cut_zip.pt"
    cut_zip.write_bytes(zipped.read_bytes()[:-200])
    with pytest.raises(ArtifactError, match="zip central directory cannot be read"):
        torch_pickle.open_document(cut_zip)


def test_legacy_count_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "legacy.pt"
    torch.save({"a": torch.ones(4)}, path, _use_new_zipfile_serialization=False)
    data = bytearray(path.read_bytes())
    at = len(data) - 16 - 8  # the 8-byte element count before the 16 data bytes
    assert int.from_bytes(data[at : at + 8], "little") == 4
    data[at : at + 8] = (5).to_bytes(8, "little")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(bytes(data))
    with pytest.raises(
        ArtifactError, match="is stored with 5 elements but the object pickle declares 4"
    ):
        torch_pickle.open_document(bad)


def test_plain_pickle_without_storages(tmp_path: Path) -> None:
    import pickle

    path = tmp_path / "plain.pkl"
    path.write_bytes(pickle.dumps({"lr": 0.1, "layers": [1, 2]}, protocol=4) + b"tail")
    with torch_pickle.open_document(path) as doc:
        assert doc.metadata["container"] == "pickle"
        assert doc.tree == {"lr": 0.1, "layers": [1, 2]}
        assert len(doc.tensors) == 0
        assert doc.notes == ["4 bytes after the pickle were not read"]


def test_copy_of_file_is_identical_after_open(tmp_path: Path) -> None:
    path = tmp_path / "w.pt"
    torch.save({"w": torch.randn(64, 64)}, path)
    backup = tmp_path / "backup.pt"
    shutil.copy2(path, backup)
    mtime = path.stat().st_mtime_ns
    with torch_pickle.open_document(path) as doc:
        doc.tensors["w"].read()
    assert path.read_bytes() == backup.read_bytes()
    assert path.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("protocol", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_every_pickle_protocol(tmp_path: Path, protocol: int, zipped: bool) -> None:
    sd = {
        "a": torch.arange(6.0).reshape(2, 3),
        "nested": {"t": torch.ones(3, 2, dtype=torch.bfloat16).t(), "text": "x" * 300},
        "pair": (torch.zeros(3, dtype=torch.int64), 1.5),
    }
    path = tmp_path / f"p{protocol}.pt"
    torch.save(sd, path, pickle_protocol=protocol, _use_new_zipfile_serialization=zipped)
    # torch's weights-only unpickler lacks some protocol 1/4/5 opcodes (INT, FRAME); the file
    # is generated right here, so the full unpickler is a safe reference.
    meta, tree = assert_matches_torch(path, 3, weights_only=False)
    assert meta["pickle_protocol"] == (protocol if protocol >= 2 else 0)  # protocol 1 has no PROTO
    assert tree["nested"]["text"] == "x" * 300
    assert tree["pair"] == ["<tensor int64 [3]>", 1.5]
    with registry.open_document(path) as doc:  # content sniffing finds every variant
        assert doc.format == "pytorch"


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch deprecates its quantized dtypes
@pytest.mark.parametrize("legacy", [False, True])
def test_quantized_tensors_read_as_their_integers_with_the_scheme(tmp_path, legacy) -> None:  # noqa: ANN001
    """torch.ao / torchvision quantized weights (_rebuild_qtensor): the stored integers (as
    int_repr gives them), the per-tensor scale and zero point in the encoding and info, the
    per-channel scales and zero points as tensors of their own; nothing left out."""
    torch.manual_seed(0)
    scales = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    zeros = torch.tensor([0, 1, 2, 3])
    state = {
        "qt": torch.quantize_per_tensor(torch.randn(5), 0.1, 10, torch.qint8),
        "qu": torch.quantize_per_tensor(torch.randn(2, 3), 0.05, 128, torch.quint8),
        "qc": torch.quantize_per_channel(torch.randn(4, 3), scales, zeros, 0, torch.qint8),
    }
    path = tmp_path / "q.pt"
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)
    ref = torch.load(path, weights_only=False)
    with registry.open_document(path) as doc:
        assert list(doc.tensors.keys()) == [
            "qt",
            "qu",
            "qc",
            "qc.q_per_channel_scales",
            "qc.q_per_channel_zero_points",
        ]
        for name in ("qt", "qu", "qc"):
            np.testing.assert_array_equal(doc.tensors[name].read(), ref[name].int_repr().numpy())
        assert doc.tensors["qt"].dtype == "int8" and doc.tensors["qu"].dtype == "uint8"
        assert (
            doc.tensors["qu"].encoding == "quint8, per-tensor affine (scale 0.05, zero point 128)"
        )
        q = doc.tensors["qt"].info["quantization"]
        assert (q["scale"], q["zero_point"]) == (ref["qt"].q_scale(), ref["qt"].q_zero_point())
        assert doc.tensors["qc"].info["quantization"] == {"scheme": "per_channel_affine", "axis": 0}
        got_scales = doc.tensors["qc.q_per_channel_scales"].read()
        np.testing.assert_array_equal(got_scales, ref["qc"].q_per_channel_scales().numpy())
        got_zeros = doc.tensors["qc.q_per_channel_zero_points"].read()
        np.testing.assert_array_equal(got_zeros, ref["qc"].q_per_channel_zero_points().numpy())
        assert not any("per_tensor_affine" in n or "per_channel" in n for n in doc.notes)
