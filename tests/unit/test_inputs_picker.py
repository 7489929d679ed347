"""The tensor picker: safe .npy/.npz reading (hostile headers), matching and validation."""

from __future__ import annotations

import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nneditor
from nneditor.errors import ArtifactError
from nneditor.inputs import InputSpecError, assign_file, check_set, detect_inputs, load_tensor_file


def make_model(path: Path) -> Path:
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["y"]),
            helper.make_node("Identity", ["state"], ["s"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "batch"]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
        ],
    )
    onnx.save(helper.make_model(graph), path)
    return path


@pytest.fixture
def plan(tmp_path):
    with nneditor.open(make_model(tmp_path / "m.onnx")) as doc:
        return detect_inputs(doc)


def _x(batch: int = 1, dtype: str = "float32") -> np.ndarray:
    return np.arange(batch * 12, dtype=dtype).reshape(batch, 3, 4)


def test_npz_arrays_match_inputs_by_name(plan, tmp_path, unchanged):
    path = tmp_path / "in.npz"
    np.savez(path, x=_x(2), state=np.zeros((2, 2), np.float32))
    check = unchanged(path)
    got = assign_file(plan, path)
    np.testing.assert_array_equal(got["x"], _x(2))
    assert sorted(got) == ["state", "x"]
    check_set(plan, got)
    check()


def test_single_array_files_assign_directly(plan, tmp_path):
    npy = tmp_path / "x.npy"
    np.save(npy, _x())
    assert list(assign_file(plan, npy, "x")) == ["x"]
    one = tmp_path / "one.npz"
    np.savez(one, anything=np.zeros((2, 5), np.float32))
    assert list(assign_file(plan, one, "state")) == ["state"]
    with pytest.raises(InputSpecError) as exc:
        assign_file(plan, npy)
    assert str(exc.value) == (
        f"{npy} holds one array; choose which input it is for (the inputs are ['x', 'state'])"
    )


def test_archives_with_unknown_or_missing_names_are_refused(plan, tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=_x(), extra=np.zeros(1, np.float32))
    with pytest.raises(InputSpecError) as exc:
        assign_file(plan, path)
    assert str(exc.value) == (
        f"{path} holds an array named 'extra' that matches no model input "
        "(the inputs are ['x', 'state'])"
    )
    with pytest.raises(InputSpecError, match="holds arrays \\['extra', 'x'\\] but none is named"):
        assign_file(plan, path, "state")
    with pytest.raises(InputSpecError, match="the model has no input named 'nope'"):
        assign_file(plan, path, "nope")
    with pytest.raises(InputSpecError) as exc:
        check_set(plan, {"x": _x()})
    assert str(exc.value) == (
        "inputs ['state'] have no values; assign them or generate them automatically"
    )


def test_mismatches_name_expected_and_given(plan, tmp_path):
    f64 = tmp_path / "f64.npy"
    np.save(f64, _x(dtype="float64"))
    with pytest.raises(InputSpecError) as exc:
        assign_file(plan, f64, "x")
    assert str(exc.value) == (
        f"input 'x' expects float32 ['batch', 3, 4], given float64 [1, 3, 4] from {f64}: "
        "the dtype differs"
    )
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((1, 4, 4), np.float32))
    with pytest.raises(InputSpecError, match="axis 1 is 4, not 3"):
        assign_file(plan, wrong, "x")
    np.save(wrong, np.zeros((3, 4), np.float32))
    with pytest.raises(InputSpecError, match="2 axes instead of 3"):
        assign_file(plan, wrong, "x")
    with pytest.raises(InputSpecError) as exc:
        check_set(plan, {"x": _x(2), "state": np.zeros((2, 3), np.float32)})
    assert str(exc.value) == (
        "dim 'batch' is 2 in input 'x' but 3 in input 'state'; inputs sharing a dim name must agree"
    )


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _claim_shape(data: bytes, real: str, claimed: str) -> bytes:
    """Rewrite the shape in a version-1.0 .npy header, keeping the header length."""
    header_end = data.index(b"\n") + 1
    text = data[10 : header_end - 1].rstrip().replace(real.encode(), claimed.encode())
    width = header_end - 11
    assert len(text) <= width
    return data[:10] + text.ljust(width) + b"\n" + data[header_end:]


def test_hostile_npy_headers_are_refused_without_allocating(tmp_path):
    huge = tmp_path / "huge.npy"
    huge.write_bytes(_claim_shape(_npy_bytes(np.zeros(4, np.float32)), "(4,)", "(1000000000000,)"))
    tracemalloc.start()
    with pytest.raises(ArtifactError) as exc:
        load_tensor_file(huge)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (
        "the array header claims 4,000,000,000,000 bytes (float32, shape [1000000000000])"
        in str(exc.value)
    )
    assert peak < 1_000_000
    short = tmp_path / "short.npy"
    short.write_bytes(_claim_shape(_npy_bytes(np.zeros(4, np.float32)), "(4,)", "(40,)"))
    with pytest.raises(ArtifactError) as exc:
        load_tensor_file(short)
    assert "claims 160 bytes (float32, shape [40]) but only 16 are stored" in str(exc.value)
    assert "the file is truncated or damaged" in str(exc.value)
    pickled = tmp_path / "obj.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ArtifactError) as exc:
        load_tensor_file(pickled)
    assert "the array stores Python objects, which need pickle" in str(exc.value)
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"hello world")
    with pytest.raises(ArtifactError, match="is neither a NumPy .npy file nor a .npz archive"):
        load_tensor_file(junk)
    with pytest.raises(ArtifactError, match="no such file"):
        load_tensor_file(tmp_path / "missing.npy")


def test_hostile_npz_members_are_refused(tmp_path):
    path = tmp_path / "bad.npz"
    big = _claim_shape(_npy_bytes(np.zeros(4, np.float32)), "(4,)", "(1000000000000,)")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", big)
    tracemalloc.start()
    with pytest.raises(ArtifactError) as exc:
        load_tensor_file(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert f"{path} member x.npy" in str(exc.value) and "more than the" in str(exc.value)
    assert peak < 1_000_000
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", _npy_bytes(np.zeros(2, np.float32)))
        zf.writestr("evil.pkl", b"cos\nsystem\n")
    with pytest.raises(
        ArtifactError, match="member evil.pkl: the archive holds a member that is not"
    ):
        load_tensor_file(path)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(ArtifactError, match="not a readable .npz archive"):
        load_tensor_file(broken)
