"""Hostile and broken ONNX files: every problem is an ArtifactError with a sentence.

Never a crash, a hang, or an allocation sized by what a header claims.
"""

from __future__ import annotations

import contextlib
import os
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nneditor.artifacts.onnx.graph_build import MAX_DEPTH
from nneditor.artifacts.onnx.reader import open_document
from nneditor.errors import ArtifactError
from nneditor.model.document import Document


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _model(inits: list[TensorProto], nodes: list[onnx.NodeProto] | None = None) -> onnx.ModelProto:
    nodes = nodes or [helper.make_node("Identity", [inits[0].name], ["y"])]
    graph = helper.make_graph(nodes, "g", [], [], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _read_everything(doc: Document) -> None:
    """Touch every part a user can reach; only ArtifactError may come out."""
    for ref in doc.tensors.values():
        with contextlib.suppress(ArtifactError):
            ref.read()
    if doc.graph is not None:
        for node, _graph in doc.graph.walk():
            with contextlib.suppress(ArtifactError):
                _ = node.attributes
        _ = doc.graph.value_info


# -- not ONNX at all -------------------------------------------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "empty.onnx", b"")
    with pytest.raises(ArtifactError, match="the file is empty") as info:
        open_document(path)
    assert str(path) in str(info.value) and str(info.value).startswith("ONNX ")


@pytest.mark.parametrize("seed", range(40))
def test_garbage_bytes(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 5000))
    path = _write(tmp_path / "garbage.onnx", rng.bytes(size))
    try:
        with open_document(path) as doc:
            _read_everything(doc)
    except ArtifactError as exc:
        assert str(path) in str(exc) and exc.format == "onnx"


def test_missing_graph(tmp_path: Path) -> None:
    path = _write(tmp_path / "nograph.onnx", b"\x08\x08" + _len_field(2, b"producer"))
    with pytest.raises(ArtifactError, match=r"holds no graph \(ModelProto field 7\)"):
        open_document(path)


def test_graph_with_wrong_wire_type(tmp_path: Path) -> None:
    path = _write(tmp_path / "varint_graph.onnx", b"\x08\x08\x38\x05")
    with pytest.raises(
        ArtifactError, match="field 7 has varint encoding where ONNX stores a message"
    ):
        open_document(path)


def test_two_graphs(tmp_path: Path) -> None:
    graph = helper.make_graph([], "g", [], []).SerializeToString()
    path = _write(tmp_path / "two.onnx", b"\x08\x08" + _len_field(7, graph) * 2)
    with pytest.raises(ArtifactError, match="stores 2 graphs; a valid ONNX model has exactly one"):
        open_document(path)


def test_unsupported_wire_type(tmp_path: Path) -> None:
    path = _write(tmp_path / "group.onnx", b"\x08\x08\x0b\x0c")
    with pytest.raises(ArtifactError, match="unsupported protobuf wire type 3") as info:
        open_document(path)
    assert info.value.offset == 2


# -- truncation and lying lengths ------------------------------------------------------------


def _rich_model() -> bytes:
    w = numpy_helper.from_array(np.arange(300, dtype=np.float32).reshape(20, 15), "w")
    then = helper.make_graph(
        [
            helper.make_node(
                "Constant", [], ["c"], value=numpy_helper.from_array(np.ones(50, np.float32))
            )
        ],
        "then",
        [],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [50])],
        [numpy_helper.from_array(np.arange(10, dtype=np.int64), "sub_w")],
    )
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        helper.make_node("If", ["cond"], ["o"], name="if", then_branch=then, else_branch=then),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.producer_name = "hostile-tests"
    return model.SerializeToString()


def test_truncated_at_many_offsets(tmp_path: Path) -> None:
    data = _rich_model()
    offsets = sorted(set(range(1, len(data), max(1, len(data) // 97))) | {len(data) - 1})
    failures = 0
    for cut in offsets:
        path = _write(tmp_path / f"cut_{cut}.onnx", data[:cut])
        try:
            with open_document(path) as doc:
                _read_everything(doc)
        except ArtifactError as exc:
            failures += 1
            assert str(path) in str(exc)
            text = str(exc)
            assert "truncated" in text or "cut off" in text or "holds no graph" in text, text
    assert failures >= len(offsets) * 3 // 4  # almost every cut lands inside the graph


def test_length_pointing_past_the_end(tmp_path: Path) -> None:
    data = _rich_model()
    graph_at = data.index(b"\x3a")  # ModelProto field 7 tag
    _tag, rest = data[: graph_at + 1], data[graph_at + 1 :]
    length_bytes = len(_varint(len(data) - graph_at - 1))
    lying = data[: graph_at + 1] + _varint(2**40) + rest[length_bytes:]
    path = _write(tmp_path / "lying.onnx", lying)
    with pytest.raises(
        ArtifactError, match=r"field 7 claims 1099511627776 bytes but only \d+ remain"
    ):
        open_document(path)


def test_inner_length_pointing_past_its_message(tmp_path: Path) -> None:
    tensor = b"\x08\x04\x10\x01" + _len_field(8, b"w") + b"\x4a" + _varint(10**9) + b"\x00" * 16
    graph = _len_field(5, tensor) + _len_field(1, _len_field(4, b"Relu"))
    path = _write(tmp_path / "inner.onnx", b"\x08\x08" + _len_field(7, graph))
    with pytest.raises(ArtifactError, match="initializer #0 of graph 'main': field 9 claims"):
        open_document(path)


def test_corrupt_node_payload_is_named(tmp_path: Path) -> None:
    bad_node = _len_field(4, b"Relu") + b"\x0f\xff\xff"  # wire type 7 inside the node
    graph = _len_field(1, _len_field(4, b"Relu")) + _len_field(1, bad_node)
    path = _write(tmp_path / "badnode.onnx", b"\x08\x08" + _len_field(7, graph))
    with pytest.raises(ArtifactError, match=r"node #1 of graph 'main': unsupported protobuf wire"):
        open_document(path)


# -- tensors that lie about their size -------------------------------------------------------


def _tensor_10e12(kind: str) -> TensorProto:
    t = TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[10**6, 10**6])
    if kind == "raw":
        t.raw_data = b"\x00" * 4
    elif kind == "typed":
        t.float_data.extend([1.0, 2.0])
    elif kind == "varint":
        t.data_type = TensorProto.INT64
        t.int64_data.extend([1, 2, 3])
    return t


@pytest.mark.parametrize("kind", ["raw", "typed", "varint", "empty"])
def test_dims_claiming_10e12_elements(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"huge_{kind}.onnx"
    onnx.save_model(_model([_tensor_10e12(kind)]), str(path))
    tracemalloc.start()
    try:
        with open_document(path) as doc:
            t = doc.tensors["huge"]
            assert t.shape == (10**6, 10**6)
            expected = "stored bytes do not match" if kind != "empty" else "stores no values"
            with pytest.raises(ArtifactError, match=expected):
                t.read()
            with pytest.raises(ArtifactError, match=expected):
                t.read("0:2,0:2")
            assert any(expected in note for note in doc.notes)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024


def test_unknown_data_type_and_segments(tmp_path: Path) -> None:
    odd = TensorProto(name="odd", data_type=99, dims=[2], raw_data=b"\x00\x00")
    seg = TensorProto(name="seg", data_type=TensorProto.FLOAT, dims=[1], float_data=[1.0])
    seg.segment.begin = 0
    seg.segment.end = 1
    s = TensorProto(name="s", data_type=TensorProto.STRING, dims=[3], string_data=[b"a"])
    path = tmp_path / "odd.onnx"
    onnx.save_model(_model([odd, seg, s]), str(path))
    with open_document(path) as doc:
        cases = {
            "odd": "data type 99, which is not an ONNX type",
            "seg": "stored in segments",
            "s": "1 strings are stored but the shape needs 3",
        }
        for name, message in cases.items():
            with pytest.raises(ArtifactError, match=message):
                doc.tensors[name].read()


def test_too_many_dimensions(tmp_path: Path) -> None:
    t = TensorProto(name="deep", data_type=TensorProto.FLOAT, dims=[1] * 70, raw_data=b"\0" * 4)
    path = tmp_path / "rank.onnx"
    onnx.save_model(_model([t]), str(path))
    with pytest.raises(ArtifactError, match="more than 64 dimensions"):
        open_document(path)


def test_sparse_tensor_problems(tmp_path: Path) -> None:
    vals = numpy_helper.from_array(np.array([1.0, 2.0], dtype=np.float32), "sp")
    bad_idx = numpy_helper.from_array(np.array([0, 99], dtype=np.int64), "i")
    huge = numpy_helper.from_array(np.array([1.0], dtype=np.float32), "huge")
    huge_idx = numpy_helper.from_array(np.array([0], dtype=np.int64), "j")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["sp"], ["y"])],
        "g",
        [],
        [],
        sparse_initializer=[
            helper.make_sparse_tensor(vals, bad_idx, [4]),
            helper.make_sparse_tensor(huge, huge_idx, [10**6, 10**6]),
        ],
    )
    path = tmp_path / "sparse.onnx"
    onnx.save_model(helper.make_model(graph), str(path))
    with open_document(path) as doc:
        with pytest.raises(ArtifactError, match=r"an index lies outside the shape \[4\]"):
            doc.tensors["sp"].read()
        with pytest.raises(ArtifactError, match="when densified, more than NNEditor's limit"):
            doc.tensors["huge"].read()


# -- external data ---------------------------------------------------------------------------


def _external(tmp_path: Path, location: str, **entries: str) -> Path:
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    for key, value in entries.items():
        t.external_data.add(key=key, value=value)
    model_dir = tmp_path / "model"
    model_dir.mkdir(exist_ok=True)
    path = model_dir / "m.onnx"
    onnx.save_model(_model([t]), str(path))
    return path


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("../../etc/passwd", "leaves the model's folder"),
        ("sub/../../secret.bin", "leaves the model's folder"),
        ("/etc/passwd", "is an absolute path"),
        ("C:\\Windows\\win.ini", "is an absolute path"),
        ("\\\\server\\share\\w.bin", "is an absolute path"),
        ("missing.bin", "is missing"),
        ("", "names no location"),
    ],
)
def test_external_locations_refused(tmp_path: Path, location: str, message: str) -> None:
    path = _external(tmp_path, location)
    with open_document(path) as doc:
        t = doc.tensors["w"]
        with pytest.raises(ArtifactError, match=message):
            t.read()
        assert any(message in note for note in doc.notes)
        assert len(doc.sources) == 1  # nothing outside was opened


def test_external_symlink_escaping_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = _external(tmp_path, "link.bin")
    os.symlink(outside, path.parent / "link.bin")
    message = "resolves outside the model's folder"
    with open_document(path) as doc, pytest.raises(ArtifactError, match=message):
        doc.tensors["w"].read()


def test_external_symlink_inside_the_folder_is_fine(tmp_path: Path) -> None:
    path = _external(tmp_path, "link.bin")
    target = path.parent / "real.bin"
    target.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    os.symlink(target, path.parent / "link.bin")
    with open_document(path) as doc:
        assert doc.tensors["w"].read().tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("entries", "size", "message"),
    [
        ({}, 8, "is 8 bytes but the tensor needs bytes 0..16; the file is too short"),
        ({"offset": "12"}, 20, "is 20 bytes but the tensor needs bytes 12..28"),
        ({"offset": "abc"}, 64, "external data offset 'abc' is not a whole number"),
        ({"offset": "-4"}, 64, "external data offset -4 is negative"),
        ({"length": "8"}, 64, "external data length is 8 bytes but float32 x 4 needs 16"),
    ],
)
def test_external_file_checks(
    tmp_path: Path, entries: dict[str, str], size: int, message: str
) -> None:
    path = _external(tmp_path, "w.bin", **entries)
    (path.parent / "w.bin").write_bytes(b"\x01" * size)
    with open_document(path) as doc, pytest.raises(ArtifactError, match=message):
        doc.tensors["w"].read()


def test_external_file_changed_after_open(tmp_path: Path) -> None:
    path = _external(tmp_path, "w.bin")
    data = path.parent / "w.bin"
    data.write_bytes(b"\x00" * 16)
    with open_document(path) as doc:
        data.write_bytes(b"\x00" * 8)
        with pytest.raises(ArtifactError, match="changed size since the model was opened"):
            doc.tensors["w"].read()


# -- nesting ---------------------------------------------------------------------------------


def _nested(depth: int) -> bytes:
    graph = _len_field(2, b"leaf")
    for level in range(depth):
        attr = _len_field(1, b"then_branch") + b"\xa0\x01\x05" + _len_field(6, graph)
        node = _len_field(4, b"If") + _len_field(5, attr) + _len_field(3, f"if{level}".encode())
        graph = _len_field(1, node) + _len_field(2, f"g{level}".encode())
    opset = _len_field(8, b"\x08\x15")
    return b"\x08\x08" + _len_field(7, graph) + opset


def test_nesting_within_the_limit_opens(tmp_path: Path) -> None:
    path = _write(tmp_path / "nested_ok.onnx", _nested(MAX_DEPTH))
    with open_document(path) as doc:
        assert doc.graph is not None and doc.graph.node_count == MAX_DEPTH


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 60, 400])
def test_deeply_nested_subgraphs(tmp_path: Path, depth: int) -> None:
    path = _write(tmp_path / "nested.onnx", _nested(depth))
    with pytest.raises(ArtifactError, match=f"nested more than {MAX_DEPTH} levels deep"):
        open_document(path)


def test_source_is_never_modified_by_failed_opens(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.onnx", _rich_model()[:-7])
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    for _ in range(3):
        with contextlib.suppress(ArtifactError):
            open_document(path).close()
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
