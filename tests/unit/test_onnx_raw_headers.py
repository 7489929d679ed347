"""The vectorised reader of initializer headers, checked against onnx's own parse; every
layout it does not take must be left to the general walk (None), never misread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nneditor.artifacts.onnx import graph_build
from nneditor.artifacts.onnx import reader as onnx_reader
from nneditor.artifacts.onnx.raw_headers import WINDOW, read_raw_headers
from nneditor.artifacts.onnx.wire_index import LEN, scan
from nneditor.artifacts.wire.pbwrite import len_prefix, varint, varint_field

ROOT = Path(__file__).resolve().parents[2]


def _field(number: int, payload: bytes) -> bytes:
    return len_prefix(number, len(payload)) + payload


def _number(number: int, value: int) -> bytes:
    return varint_field(number, value)


def _entries(blob: bytes) -> list[tuple[int, int]]:
    """(payload offset, length) of each length-delimited field in ``blob``."""
    return [(pos, n) for _f, wt, _a, pos, n in scan(blob, 0, len(blob), "test") if wt == LEN]


def _read(*tensors: bytes):
    blob = b"".join(_field(5, t) for t in tensors)
    return blob, read_raw_headers(memoryview(blob), _entries(blob))


def _raw(name: str, arr: np.ndarray) -> bytes:
    return numpy_helper.from_array(arr, name).SerializeToString()


def test_common_layouts_are_read_as_onnx_reads_them():
    arrays = {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4),
        "": np.ones(2, np.int64),  # no name
        "scalar": np.array(7, np.int32),
        "héllo/ünïcode": np.zeros((1, 1, 2), np.float16),
        "big_dims": np.zeros((1, 300, 1), np.uint8),  # a dim of two varint bytes
        "b" * 150: np.zeros(3, np.int8),  # a long name, still inside the window
    }
    tensors = [_raw(k, v) for k, v in arrays.items()]
    blob, headers = _read(*tensors)
    assert all(h is not None for h in headers)
    for (name, arr), h in zip(arrays.items(), headers, strict=True):
        proto = TensorProto.FromString(_raw(name, arr))
        assert h.name == proto.name
        assert h.dims == tuple(proto.dims)
        assert h.dtype == {1: "float32", 7: "int64", 6: "int32", 10: "float16", 2: "uint8"}.get(
            proto.data_type, h.dtype
        )
        assert blob[h.offset : h.offset + h.nbytes] == proto.raw_data
    assert headers[0].dtype == "float32" and headers[4].dtype == "uint8"
    assert headers[5].dtype == "int8"


def _tensor(name=b"t", dims=(2,), dtype=1, raw=b"\0" * 8, extra=b"", order="canonical"):
    dims_part = b"".join(_number(1, d) for d in dims)
    parts = {
        "dims": dims_part,
        "type": _number(2, dtype),
        "name": _field(8, name),
        "raw": _field(9, raw),
    }
    if order == "name-first":
        return parts["name"] + dims_part + parts["type"] + parts["raw"] + extra
    return dims_part + parts["type"] + parts["name"] + parts["raw"] + extra


@pytest.mark.parametrize(
    "blob",
    [
        _field(1, varint(2)) + _number(2, 1) + _field(8, b"t") + _field(9, b"\0" * 8),  # packed
        _tensor(extra=_field(12, b"a doc string")),  # a field after raw_data
        _tensor(extra=_number(14, 1)),  # data_location after raw_data
        _tensor(order="name-first"),
        _tensor(name=b"n" * (WINDOW + 10)),  # the name runs past the window
        _tensor(dims=(1,) * 9, raw=b"\0" * 4),  # more dimensions than read here
        _tensor(dims=(0, 2), raw=b""),  # a zero dimension: the general walk checks the shape
        _tensor(dims=(-1,), raw=b""),  # a negative dimension
        _tensor(dtype=22, raw=b"\0"),  # int4: sub-byte packing
        _tensor(dtype=8, raw=b"ab"),  # strings do not store raw_data
        _tensor(dtype=99),  # not an ONNX type
        _tensor(raw=b"\0" * 7),  # 7 bytes for two float32 values
        _number(2, 1) + _field(8, b"t") + _field(4, b"\0" * 8),  # typed float_data
        _tensor(dims=(2,), dtype=1, raw=b"\0" * 8)[:-3],  # cut off
    ],
    ids=[
        "packed-dims",
        "doc-after-raw",
        "location-after-raw",
        "name-first",
        "long-name",
        "nine-dims",
        "zero-dim",
        "negative-dim",
        "int4",
        "string",
        "unknown-type",
        "size-mismatch",
        "typed-field",
        "truncated",
    ],
)
def test_other_layouts_are_left_to_the_general_walk(blob):
    whole = _field(5, blob)
    headers = read_raw_headers(memoryview(whole), [(len(whole) - len(blob), len(blob))])
    assert headers == [None]


def test_one_odd_tensor_leaves_its_neighbours_read():
    good = _raw("a", np.arange(3, dtype=np.float32))
    odd = _tensor(extra=_field(12, b"doc"))
    blob, headers = _read(good, odd, good)
    assert headers[0] is not None and headers[1] is None and headers[2] is not None
    assert (
        blob[headers[2].offset : headers[2].offset + 12] == np.arange(3, dtype=np.float32).tobytes()
    )


def _real_models() -> list[Path]:
    found = sorted(ROOT.glob("examples/**/*.onnx"))
    cache = Path.home() / ".cache" / "nneditor" / "testdata"
    found += sorted(p for p in cache.glob("**/*.onnx") if p.stat().st_size < 64 * 2**20)
    return found


def _catalog(path: Path) -> list[tuple]:
    with onnx_reader.open_document(path) as doc:
        return [
            (r.name, r.dtype, r.shape, r.nbytes, r.encoding, r.offset, r.info, type(r.loader))
            for r in doc.tensors.values()
        ]


def test_real_models_open_to_the_same_catalog_with_and_without_the_reader(monkeypatch):
    paths = _real_models()
    assert len(paths) > 3
    read = 0
    for path in paths:
        fast = _catalog(path)
        model = onnx.load(str(path), load_external_data=False)
        protos = {t.name: t for t in model.graph.initializer}
        with onnx_reader.open_document(path) as doc:
            data = path.read_bytes()
            for ref in doc.tensors.values():
                proto = protos.get(ref.name)
                if proto is None or ref.encoding != "raw" or ref.offset is None:
                    continue
                assert tuple(proto.dims) == ref.shape, (path.name, ref.name)
                assert data[ref.offset : ref.offset + ref.nbytes] == proto.raw_data, ref.name
                read += 1
        with monkeypatch.context() as m:
            m.setattr(graph_build, "read_raw_headers", lambda buf, e, passed=None: [None] * len(e))
            slow = _catalog(path)
        assert fast == slow, path.name
    assert read > 100


def test_a_model_of_odd_and_common_initializers_opens_like_onnx_reads_it(tmp_path):
    common = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "common")
    typed = helper.make_tensor("typed", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    doc = numpy_helper.from_array(np.ones(2, np.int64), "documented")
    doc.doc_string = "kept"
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "common"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[common, typed, doc],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with onnx_reader.open_document(path) as d:
        assert d.tensors["common"].read().tolist() == [[0, 1, 2], [3, 4, 5]]
        assert d.tensors["common"].encoding == "raw"
        assert d.tensors["typed"].read().tolist() == [1.0, 2.0, 3.0]
        assert d.tensors["documented"].info["doc"] == "kept"
        assert d.tensors["documented"].read().tolist() == [1, 1]
