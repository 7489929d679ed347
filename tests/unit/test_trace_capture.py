"""Capture store (budget, partial prefix, manifest), .npy writing and the JSON-lines protocol."""

from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest

from nneditor.tracing.capture import MANIFEST, CaptureStore, storable, write_npy
from nneditor.tracing.capture_file import CONTAINER, CaptureReadError, read_value
from nneditor.tracing.protocol import ProtocolError, decode, encode, event, run_request


def test_write_npy_round_trips_through_numpy(tmp_path):
    cases = {
        "chunked": np.arange(10_000, dtype=np.float32).reshape(100, 100),
        "fortran": np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
        "empty": np.zeros((0, 5), np.float16),
        "bool": np.array([[True, False, True]]),
        "scalar": np.array(3.5, np.float64),
        "text": np.array(["a", "bcd"]),
    }
    for name, arr in cases.items():
        path = tmp_path / f"{name}.npy"
        write_npy(path, arr, chunk_bytes=1000)
        back = np.load(path, allow_pickle=False)
        assert back.dtype == arr.dtype and back.shape == arr.shape, name
        np.testing.assert_array_equal(back, arr)


def test_storable_widens_what_npy_cannot_hold():
    bf = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    arr, original = storable(bf)
    assert original == "bfloat16" and arr.dtype == np.float32
    np.testing.assert_array_equal(arr, [1.5, -2.0])
    text, original = storable(np.array([b"ab", "cd"], dtype=object))
    assert original == "string" and text.tolist() == ["ab", "cd"]
    plain = np.zeros(3, np.float32)
    assert storable(plain)[0] is plain and storable(plain)[1] is None


def test_budget_yields_captured_partial_and_dropped(tmp_path):
    store = CaptureStore(tmp_path, budget_bytes=1000, chunk_bytes=64)
    values = {f"v{i}": np.arange(100, dtype=np.float32) + i for i in range(4)}  # 400 bytes each
    for name in values:
        store.register(name, producer="n", op_type="Relu")
    for name, arr in values.items():
        store.write(name, arr)
    store.write_manifest({"backend": "test"})
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    recs = {r["name"]: r for r in manifest["values"]}
    assert [recs[n]["status"] for n in values] == ["captured", "captured", "partial", "dropped"]
    assert manifest["partial"] is True and manifest["counts"]["partial"] == 1
    part = recs["v2"]
    assert part["shape"] == [100] and part["stored_shape"] == [50]
    assert (
        "capture budget of 0.000953674 MB reached: the first 50 of 100 elements" in part["reason"]
    )
    prefix = read_value(tmp_path, part)
    np.testing.assert_array_equal(prefix, values["v2"].reshape(-1)[:50])
    assert recs["v3"]["file"] is None and "reached; not stored" in recs["v3"]["reason"]
    np.testing.assert_array_equal(read_value(tmp_path, recs["v0"]), values["v0"])
    assert manifest["captured_bytes"] == 1000


def test_non_tensor_values_and_pending_values_are_reported(tmp_path):
    store = CaptureStore(tmp_path, budget_bytes=10**6, chunk_bytes=10**6)
    for name in ("seq", "never"):
        store.register(name)
    store.write("seq", [np.zeros(2), np.ones(2)])
    store.finish_pending("not produced")
    recs = store.records
    assert recs["seq"]["status"] == "dropped" and "a list value" in recs["seq"]["reason"]
    assert recs["never"]["reason"] == "not produced"
    assert store.counts() == {"captured": 0, "partial": 0, "dropped": 2, "pending": 0}


def test_protocol_lines():
    line = encode(event("progress", done=1, total=2))
    assert line.endswith("\n") and decode(line) == {"event": "progress", "done": 1, "total": 2}
    assert decode(run_request({"a": 1}).encode()) == {
        "protocol": 1,
        "type": "run",
        "request": {"a": 1},
    }
    with pytest.raises(ProtocolError, match="not JSON"):
        decode("hello")
    with pytest.raises(ProtocolError, match="not a JSON object"):
        decode("[1, 2]")
    with pytest.raises(ValueError):
        encode({"x": float("nan")})


def test_patching_the_manifest_head_keeps_every_value_line(tmp_path):
    from nneditor.tracing.capture import dump_manifest, patch_manifest_head

    values = [{"name": 'odd "name"\nwith newline', "status": "captured"}, {"name": "b"}]
    doc = {"format": "nneditor-trace", "run": {"notes": ["two\nlines"], "n": 1}, "values": values}
    path = dump_manifest(doc, tmp_path / MANIFEST)
    text = path.read_text(encoding="utf-8")
    patch_manifest_head(path, text, {"run": {"notes": ["two\nlines"], "n": 2, "elapsed_s": 0.5}})
    back = json.loads(path.read_text(encoding="utf-8"))
    assert back == {**doc, "run": {"notes": ["two\nlines"], "n": 2, "elapsed_s": 0.5}}
    assert path.read_text(encoding="utf-8").split("\n", 1)[1] == text.split("\n", 1)[1]
    assert not (tmp_path / (MANIFEST + ".part")).exists()


def test_a_graph_input_capture_refers_to_its_input_file(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    run = tmp_path / "run"
    (run / "inputs").mkdir(parents=True)
    src = run / "inputs" / "000.npy"
    write_npy(src, x, 1 << 20)
    store = CaptureStore(run, budget_bytes=32, chunk_bytes=64)
    store.register("x")
    store.register("y")
    rec = store.write("x", x, same_as=src)
    assert rec["status"] == "captured" and rec["file"] == "inputs/000.npy"
    np.testing.assert_array_equal(read_value(run, rec), x)
    # over the budget: a flat prefix is written, never a reference to the whole input
    rec = store.write("y", x, same_as=src)
    store.write_manifest({})
    assert rec["status"] == "partial" and rec["file"] == CONTAINER
    np.testing.assert_array_equal(read_value(run, rec), [0.0, 1.0])


def test_npy_layout_links_a_graph_input_capture_to_its_input_file(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    src = tmp_path / "input.npy"
    write_npy(src, x, 1 << 20)
    store = CaptureStore(tmp_path / "run", budget_bytes=32, chunk_bytes=64, layout="npy")
    store.register("x")
    store.register("y")
    rec = store.write("x", x, same_as=src)
    path = tmp_path / "run" / rec["file"]
    assert rec["status"] == "captured" and os.stat(path).st_ino == os.stat(src).st_ino
    np.testing.assert_array_equal(np.load(path, allow_pickle=False), x)
    rec = store.write("y", x, same_as=src)
    store.close()
    path = tmp_path / "run" / rec["file"]
    assert rec["status"] == "partial" and os.stat(path).st_ino != os.stat(src).st_ino
    np.testing.assert_array_equal(np.load(path, allow_pickle=False), [0.0, 1.0])


def _mixed_values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "a/f32": rng.standard_normal((3, 5)).astype(np.float32),
        "odd bytes": np.arange(7, dtype=np.uint8),  # leaves later values unaligned
        "f64": rng.standard_normal(4),
        "i64": np.arange(-3, 9, dtype=np.int64).reshape(3, 4),
        "empty": np.zeros((0, 3), np.float16),
        "flags": np.array([True, False, True]),
        "scalar": np.array(2.5, np.float32),
        "strided": rng.standard_normal((6, 4)).astype(np.float32)[::2, ::-1],
    }


@pytest.mark.parametrize(("writers", "pwrite"), [(0, True), (2, True), (2, False)])
def test_the_container_is_a_safetensors_file_any_reader_opens(
    tmp_path, writers, pwrite, monkeypatch
):
    from safetensors.numpy import load_file  # the reference reader

    from nneditor.tracing import capture_file

    monkeypatch.setattr(capture_file, "_HAS_PWRITE", pwrite)  # False: the Windows path

    values = _mixed_values()
    store = CaptureStore(tmp_path, budget_bytes=10**6, chunk_bytes=16, writers=writers)
    for name in values:
        store.register(name)
    for name, arr in values.items():
        store.write(name, arr)
    store.write_manifest({})
    store.close()
    loaded = load_file(str(tmp_path / CONTAINER))
    assert set(loaded) == set(values)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    for rec in manifest["values"]:
        want = values[rec["name"]]
        assert rec["file"] == CONTAINER
        np.testing.assert_array_equal(loaded[rec["name"]], want)
        np.testing.assert_array_equal(read_value(tmp_path, rec), want)
        np.testing.assert_array_equal(read_value(tmp_path, rec, mmap=False), want)
        assert read_value(tmp_path, rec).dtype == want.dtype
    assert not list((tmp_path / "values").iterdir())  # no file per value


def test_values_the_container_cannot_hold_get_their_own_npy(tmp_path):
    store = CaptureStore(tmp_path, budget_bytes=10**6, chunk_bytes=64)
    words = np.array([b"ab", b"cde"], dtype=object)
    complex_ = np.array([1 + 2j, 3 - 1j], np.complex64)
    big_endian = np.arange(3, dtype=">i4")
    for name in ("words", "complex", "be", "ok"):
        store.register(name)
    recs = [
        store.write("words", words),
        store.write("complex", complex_),
        store.write("be", big_endian),
        store.write("ok", np.ones(2, np.float32)),
    ]
    store.write_manifest({})
    assert [r["file"].startswith("values/") for r in recs] == [True, True, True, False]
    assert list(read_value(tmp_path, recs[0])) == ["ab", "cde"]
    np.testing.assert_array_equal(read_value(tmp_path, recs[1]), complex_)
    np.testing.assert_array_equal(read_value(tmp_path, recs[2]), [0, 1, 2])


@pytest.mark.parametrize("pwrite", [True, False])
def test_a_header_larger_than_reserved_moves_the_data_once(tmp_path, pwrite, monkeypatch):
    from safetensors.numpy import load_file

    from nneditor.tracing import capture_file

    monkeypatch.setattr(capture_file, "_HAS_PWRITE", pwrite)

    store = CaptureStore(tmp_path, budget_bytes=10**9, chunk_bytes=64, writers=0)
    store.register("first")
    first = np.arange(10, dtype=np.float32)
    store.write("first", first)  # the container reserves a header for one name
    late = {f"late_{'x' * 200}_{i}": np.full((1,) * 12, i, np.int32) for i in range(40)}
    for name, arr in late.items():  # unregistered, long names, 12 dimensions
        store.write(name, arr)
    store.write_manifest({})
    loaded = load_file(str(tmp_path / CONTAINER))
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    recs = {r["name"]: r for r in manifest["values"]}
    np.testing.assert_array_equal(read_value(tmp_path, recs["first"]), first)
    np.testing.assert_array_equal(loaded["first"], first)
    for name, arr in late.items():
        np.testing.assert_array_equal(read_value(tmp_path, recs[name]), arr)
        np.testing.assert_array_equal(loaded[name], arr)


def test_reading_a_truncated_container_says_so(tmp_path):
    store = CaptureStore(tmp_path, budget_bytes=10**6, chunk_bytes=64)
    store.register("v")
    rec = store.write("v", np.ones(1000, np.float32))
    store.write_manifest({})
    with open(tmp_path / CONTAINER, "r+b") as fh:
        fh.truncate(rec["offset"] + 100)
    with pytest.raises(CaptureReadError, match="shorter than the manifest says"):
        read_value(tmp_path, rec)
    outside = dict(rec, file="../elsewhere.safetensors")
    with pytest.raises(CaptureReadError, match="outside the trace"):
        read_value(tmp_path, outside)
