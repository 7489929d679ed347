"""The lazy ONNX reader on models generated with onnx.helper, checked against onnx itself."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.artifacts.onnx import graph_build
from nneditor.artifacts.onnx.reader import open_document
from nneditor.errors import ArtifactError
from nneditor.model.graph import Graph

RNG = np.random.default_rng(7)

# -- helpers ---------------------------------------------------------------------------------


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save_model(model, str(path))
    return path


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto] = (),  # type: ignore[assignment]
    inputs: list[onnx.ValueInfoProto] = (),  # type: ignore[assignment]
    outputs: list[onnx.ValueInfoProto] = (),  # type: ignore[assignment]
    opset: int = 21,
    **kw: Any,
) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kw)


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


def _assert_same(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if ref.dtype == object:
        assert got.tolist() == ref.tolist()
    else:
        assert got.tobytes() == ref.tobytes()


def _reference_tensors(graph: onnx.GraphProto, out: list[tuple[str, np.ndarray]]) -> list:
    """(name, array) of every initializer and Constant tensor, in the reader's order."""
    for t in graph.initializer:
        out.append((t.name, numpy_helper.to_array(t)))
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for a in node.attribute:
                if a.name == "value":
                    out.append((node.output[0], numpy_helper.to_array(a.t)))
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _reference_tensors(a.g, out)
            for g in a.graphs:
                _reference_tensors(g, out)
    return out


@pytest.fixture(params=["batched", "wire"])
def wire_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test twice: normally, and with every node indexed from the wire."""
    if request.param == "wire":
        monkeypatch.setattr(graph_build, "THRESHOLD", -1)
    return str(request.param)


# -- dtypes ----------------------------------------------------------------------------------


def _values(name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name == "string":
        words = ["a", "bc", "ünï", "", "d e"]
        return np.array([words[i % 5] for i in range(int(np.prod(shape)))], dtype=object).reshape(
            shape
        )
    if name == "bool":
        return RNG.random(shape) < 0.5
    if name.startswith("complex"):
        dt = np.complex64 if name == "complex64" else np.complex128
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dt)
    if name in ("int4", "uint4", "int2", "uint2"):
        dt = np.dtype(getattr(ml_dtypes, name))
        info = ml_dtypes.iinfo(dt)
        return RNG.integers(int(info.min), int(info.max) + 1, size=shape).astype(dt)
    if name.startswith("float") and name not in ("float16", "float32", "float64"):
        dt = np.dtype(getattr(ml_dtypes, name))
        base = RNG.choice([0.5, 1.0, 2.0, 4.0, -1.0, -0.5, 1.5], size=shape)
        if name == "float8_e8m0fnu":
            base = np.abs(base)
        return base.astype(dt)
    if name == "bfloat16":
        return RNG.standard_normal(shape).astype(ml_dtypes.bfloat16)
    dt = np.dtype(name)
    if dt.kind == "f":
        return RNG.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)


DTYPES = [
    ("float32", TensorProto.FLOAT),
    ("uint8", TensorProto.UINT8),
    ("int8", TensorProto.INT8),
    ("uint16", TensorProto.UINT16),
    ("int16", TensorProto.INT16),
    ("int32", TensorProto.INT32),
    ("int64", TensorProto.INT64),
    ("string", TensorProto.STRING),
    ("bool", TensorProto.BOOL),
    ("float16", TensorProto.FLOAT16),
    ("float64", TensorProto.DOUBLE),
    ("uint32", TensorProto.UINT32),
    ("uint64", TensorProto.UINT64),
    ("complex64", TensorProto.COMPLEX64),
    ("complex128", TensorProto.COMPLEX128),
    ("bfloat16", TensorProto.BFLOAT16),
    ("float8_e4m3fn", TensorProto.FLOAT8E4M3FN),
    ("float8_e4m3fnuz", TensorProto.FLOAT8E4M3FNUZ),
    ("float8_e5m2", TensorProto.FLOAT8E5M2),
    ("float8_e5m2fnuz", TensorProto.FLOAT8E5M2FNUZ),
    ("uint4", TensorProto.UINT4),
    ("int4", TensorProto.INT4),
    ("float4_e2m1fn", TensorProto.FLOAT4E2M1),
    ("float8_e8m0fnu", TensorProto.FLOAT8E8M0),
    ("uint2", TensorProto.UINT2),
    ("int2", TensorProto.INT2),
    ("float6_e2m3fn", TensorProto.FLOAT6E2M3),
    ("float6_e3m2fn", TensorProto.FLOAT6E3M2),
]
TYPED_FIELD = {
    "float32": "float_data",
    "complex64": "float_data",
    "float64": "double_data",
    "complex128": "double_data",
    "int64": "int64_data",
    "uint32": "uint64_data",
    "uint64": "uint64_data",
    "string": "string_data",
}
SLICES = ["1:3,:", "2", "0:5:2,1:4", "...,4", "4,4"]


def _dtype_model(tmp_path: Path, raw: bool) -> tuple[Path, dict[str, TensorProto]]:
    tensors = {}
    for name, code in DTYPES:
        if raw and name == "string":
            continue
        arr = _values(name, (5, 7))
        if raw:
            tensor = helper.make_tensor(name, code, arr.shape, arr, raw=True)
        else:
            tensor = helper.make_tensor(name, code, arr.shape, arr.reshape(-1), raw=False)
        tensors[name] = tensor
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n in tensors]
    path = _save(_model(nodes, list(tensors.values())), tmp_path / f"dtypes_{raw}.onnx")
    return path, tensors


@pytest.mark.parametrize("raw", [True, False], ids=["raw_data", "typed_fields"])
def test_every_dtype_matches_numpy_helper(tmp_path: Path, raw: bool, unchanged: Callable) -> None:
    path, tensors = _dtype_model(tmp_path, raw)
    check = unchanged(path)
    data = path.read_bytes()
    with open_document(path) as doc:
        assert sorted(doc.tensors) == sorted(tensors)
        for name, tensor in tensors.items():
            ref = numpy_helper.to_array(tensor)
            t = doc.tensors[name]
            assert t.dtype == name
            assert t.shape == (5, 7)
            _assert_same(t.read(), ref)
            for key in SLICES:
                expr = key.replace("...", "Ellipsis")
                want = np.asarray(ref[eval(f"np.s_[{expr}]")], dtype=ref.dtype)
                _assert_same(t.read(key), want)
            if raw:
                assert t.encoding == "raw"
                assert data[t.offset : t.offset + t.nbytes] == tensor.raw_data
            else:
                assert t.encoding == TYPED_FIELD.get(name, "int32_data")
    check()


def test_unpacked_and_split_typed_fields(tmp_path: Path) -> None:
    """Legacy writers emit one tag per element; repeated fields may also come in pieces."""
    import struct

    floats = [1.5, -2.0, 3.25, 0.0, 7.0, -1.0]
    f_unpacked = b"".join(b"\x25" + struct.pack("<f", v) for v in floats[:4])
    f_packed = _len_field(4, struct.pack("<2f", *floats[4:]))
    ints = [-3, 0, 5, 70000, -(2**31), 2**31 - 1]
    i_unpacked = b"".join(b"\x28" + _varint(v & 0xFFFFFFFFFFFFFFFF) for v in ints)
    longs = [2**40, -5, 0, 1]
    l_mixed = _len_field(7, b"".join(_varint(v & 0xFFFFFFFFFFFFFFFF) for v in longs[:2]))
    l_mixed += b"".join(b"\x38" + _varint(v & 0xFFFFFFFFFFFFFFFF) for v in longs[2:])
    doubles = [0.1, -2.5]
    d_unpacked = b"".join(b"\x51" + struct.pack("<d", v) for v in doubles)

    def tensor(name: str, dt: int, dims: list[int], body: bytes) -> bytes:
        head = b"".join(b"\x08" + _varint(d) for d in dims) + b"\x10" + _varint(dt)
        return head + body + _len_field(8, name.encode())

    blobs = [
        tensor("f", TensorProto.FLOAT, [2, 3], f_unpacked + f_packed),
        tensor("i", TensorProto.INT32, [6], i_unpacked),
        tensor("l", TensorProto.INT64, [4], l_mixed),
        tensor("d", TensorProto.DOUBLE, [2], d_unpacked),
        tensor(
            "h", TensorProto.FLOAT16, [3], b"".join(b"\x28" + _varint(v) for v in (15360, 0, 48128))
        ),
    ]
    base = _model([helper.make_node("Identity", ["f"], ["y"])])
    graph_bytes = base.graph.SerializeToString() + b"".join(_len_field(5, b) for b in blobs)
    base.ClearField("graph")
    path = tmp_path / "unpacked.onnx"
    path.write_bytes(base.SerializeToString() + _len_field(7, graph_bytes))
    ref = onnx.load(str(path))
    with open_document(path) as doc:
        for t in ref.graph.initializer:
            _assert_same(doc.tensors[t.name].read(), numpy_helper.to_array(t))
        assert doc.tensors["f"].read("1,:").tolist() == [0.0, 7.0, -1.0]


# -- graph structure -------------------------------------------------------------------------


def _conv_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]
        ),
        helper.make_node("LeakyRelu", ["c"], ["r"], name="act", alpha=0.25),
        helper.make_node("Reshape", ["r", "shape"], ["flat"], name="reshape"),
        helper.make_node(
            "ConstantOfShape",
            ["shape"],
            ["zeros"],
            name="cos",
            value=numpy_helper.from_array(np.array([0.5], dtype=np.float32)),
        ),
        helper.make_node(
            "Custom",
            ["flat"],
            ["y"],
            name="custom",
            domain="com.example",
            label="héllo",
            names=["a", "b"],
            scales=[0.5, 2.0],
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8]),
        # IR v3 style: initializers listed as graph inputs too.
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3, 3]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", None])]
    model = _model(nodes, [w, b, shape], inputs, outputs, producer_name="tests")
    model.opset_import.append(helper.make_opsetid("com.example", 3))
    model.producer_version = "1.2"
    model.model_version = 7
    model.doc_string = "a test model"
    model.domain = "org.test"
    helper.set_model_props(model, {"author": "me", "license": "none"})
    model.graph.value_info.append(
        helper.make_tensor_value_info("c", TensorProto.FLOAT, ["N", 4, 8, 8])
    )
    model.graph.value_info.append(
        helper.make_value_info(
            "seq", helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, [2]))
        )
    )
    return model


def test_graph_metadata_and_attributes(tmp_path: Path, wire_mode: str) -> None:
    model = _conv_model()
    path = _save(model, tmp_path / "conv.onnx")
    with open_document(path) as doc:
        assert doc.format == "onnx"
        assert doc.format_version == str(model.ir_version)
        md = doc.metadata
        assert md["producer_name"] == "tests" and md["producer_version"] == "1.2"
        assert md["model_version"] == 7 and md["doc_string"] == "a test model"
        assert md["domain"] == "org.test"
        assert md["metadata_props"] == {"author": "me", "license": "none"}
        assert md["opset_import"] == {"ai.onnx": 21, "com.example": 3}
        g = doc.graph
        assert g is not None and g.kind == "main" and g.name == "g"
        assert g.opsets == {"": 21, "com.example": 3}
        assert [v.name for v in g.inputs] == ["x"]  # "w" is an initializer
        assert g.inputs[0].dtype == "float32" and g.inputs[0].shape == ("N", 3, 8, 8)
        assert g.outputs[0].shape == ("N", None)
        assert g.initializers == ["w", "b", "shape"]
        assert g.value_info["c"].shape == ("N", 4, 8, 8)
        assert (
            g.value_info["seq"].dtype is None
            and "seq(tensor(float32)" in g.value_info["seq"].type_text
        )
        for got, ref in zip(g.nodes, model.graph.node, strict=True):
            assert (got.name, got.op_type, got.domain) == (ref.name, ref.op_type, ref.domain)
            assert got.inputs == tuple(ref.input) and got.outputs == tuple(ref.output)
        conv, act, _reshape, cos, custom = g.nodes
        assert all((n._proto is None) == (wire_mode == "wire") for n in g.nodes)  # type: ignore[attr-defined]
        assert conv.attributes == {"pads": [1, 1, 1, 1], "strides": [1, 1]}
        assert act.attributes == {"alpha": 0.25}
        assert custom.attributes == {"label": "héllo", "names": ["a", "b"], "scales": [0.5, 2.0]}
        value = cos.attributes["value"]
        assert value.dtype == "float32" and value.read().tolist() == [0.5]
        assert [n.index for n in g.nodes] == [0, 1, 2, 3, 4]
        caps = doc.capabilities
        assert caps["inspect"].available and caps["read_tensors"].available
        assert caps["view_graph"].available
        for action in ("edit_graph", "edit_tensors", "export_revision"):
            assert caps[action].available and caps[action].reason
        assert not caps["export_weights"].available and caps["export_weights"].reason
        info = doc.tensors["w"].info
        assert info == {"graph": "g", "kind": "initializer"}
        _assert_same(doc.tensors["w"].read(), numpy_helper.to_array(model.graph.initializer[0]))


def test_nodes_are_built_on_first_access(tmp_path: Path) -> None:
    path = _save(_conv_model(), tmp_path / "conv.onnx")
    with open_document(path) as doc:
        g = doc.graph
        assert not g.nodes_built  # type: ignore[union-attr]
        assert len(g.nodes) == 5  # type: ignore[union-attr]
        assert g.nodes_built  # type: ignore[union-attr]
        assert g.nodes is g.nodes  # type: ignore[union-attr]


def test_registry_opens_onnx_by_content(tmp_path: Path) -> None:
    path = _save(_conv_model(), tmp_path / "model.bin")
    with nneditor.open(path) as doc:
        assert doc.format == "onnx" and len(doc.tensors) == 3


# -- subgraphs, constants, functions ---------------------------------------------------------


def _branch(name: str, value: float, big: bool = False) -> onnx.GraphProto:
    size = 20000 if big else 3
    init = numpy_helper.from_array(np.full(size, value, dtype=np.float32), f"{name}_w")
    const = helper.make_node(
        "Constant",
        [],
        [f"{name}_c"],
        name=f"{name}_const",
        value=numpy_helper.from_array(np.arange(size, dtype=np.float32) * value),
    )
    add = helper.make_node("Add", [f"{name}_w", f"{name}_c"], [f"{name}_out"], name=f"{name}_add")
    out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [size])
    return helper.make_graph([const, add], name, [], [out], [init])


def _control_flow_model(big: bool = False) -> onnx.ModelProto:
    if_node = helper.make_node(
        "If",
        ["cond"],
        ["if_out"],
        name="if",
        then_branch=_branch("then", 1.0, big),
        else_branch=_branch("else", 2.0),
    )
    body_init = numpy_helper.from_array(np.array([3.0], dtype=np.float32), "shared")
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
            helper.make_node("Add", ["acc_in", "shared"], ["acc_out"], name="accumulate"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1]),
        ],
        [body_init],
    )
    loop = helper.make_node("Loop", ["trip", "cond", "acc"], ["final"], name="loop", body=body)
    top_init = numpy_helper.from_array(np.array([9.0], dtype=np.float32), "shared")
    top_const = helper.make_node(
        "Constant",
        [],
        ["top_c"],
        name="top_const",
        value=numpy_helper.from_array(RNG.standard_normal((40, 50)).astype(np.float32)),
    )
    inputs = [
        helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        helper.make_tensor_value_info("trip", TensorProto.INT64, []),
        helper.make_tensor_value_info("acc", TensorProto.FLOAT, [1]),
    ]
    outputs = [
        helper.make_tensor_value_info("if_out", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("final", TensorProto.FLOAT, [1]),
    ]
    return _model([top_const, if_node, loop], [top_init], inputs, outputs)


@pytest.mark.parametrize("big", [False, True], ids=["small", "big-branch"])
def test_if_loop_subgraphs_keep_ranges(
    tmp_path: Path, wire_mode: str, big: bool, unchanged: Callable
) -> None:
    model = _control_flow_model(big)
    path = _save(model, tmp_path / "control.onnx")
    check = unchanged(path)
    data = path.read_bytes()
    ref = _reference_tensors(model.graph, [])
    with open_document(path) as doc:
        g = doc.graph
        assert g is not None and [n.op_type for n in g.nodes] == ["Constant", "If", "Loop"]
        if_node, loop = g.nodes[1], g.nodes[2]
        assert sorted(if_node.subgraphs) == ["else_branch", "then_branch"]
        then = if_node.subgraphs["then_branch"]
        assert then.kind == "subgraph" and then.owner is if_node and then.name == "then"
        assert if_node.attributes["then_branch"] is then
        assert [n.name for n in then.nodes] == ["then_const", "then_add"]
        assert then.initializers == ["then_w"]
        assert loop.subgraphs["body"].inputs[0].name == "i"
        assert g.node_count == 3 + 2 + 2 + 2
        # Every tensor, in order, equals onnx's own decoding; names are unique.
        refs = list(doc.tensors.values())
        assert [r.name for r in refs] == [
            "shared",
            "top_c",
            "else_w",  # onnx.helper stores attributes sorted by name
            "else_c",
            "then_w",
            "then_c",
            "shared#2",
        ]
        for (name, arr), t in zip(ref, refs, strict=True):
            assert t.name.split("#")[0] == name
            _assert_same(t.read(), arr)
            assert t.encoding == "raw"
            assert data[t.offset : t.offset + t.nbytes] == arr.tobytes()
        assert doc.tensors["shared#2"].info == {"graph": "g/loop/body", "kind": "initializer"}
        assert doc.tensors["then_c"].info["kind"] == "constant"
        assert doc.tensors["then_c"].info["graph"] == "g/if/then_branch"
        assert doc.tensors["then_c"].info["node"] == "then_const"
        assert then.nodes[0].attributes["value"] is doc.tensors["then_c"]
        assert doc.tensors["top_c"].read("1:3,:").tolist() == ref[1][1][1:3, :].tolist()
    check()


def test_scan_and_graphs_attribute(tmp_path: Path, wire_mode: str) -> None:
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s_in", "x_in"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["y"]),
        ],
        "scan_body",
        [
            helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
        ],
    )
    scan = helper.make_node(
        "Scan", ["s0", "xs"], ["s_final", "ys"], name="scan", body=body, num_scan_inputs=1
    )
    g1 = helper.make_graph([helper.make_node("Relu", ["a"], ["b"])], "alt0", [], [])
    g2 = helper.make_graph([helper.make_node("Neg", ["a"], ["b"])], "alt1", [], [])
    multi = helper.make_node("Choose", ["ys"], ["z"], name="multi", domain="com.example")
    multi.attribute.append(helper.make_attribute("alternatives", [g1, g2]))
    model = _model([scan, multi])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    path = _save(model, tmp_path / "scan.onnx")
    with open_document(path) as doc:
        scan_node, multi_node = doc.graph.nodes  # type: ignore[union-attr]
        assert list(scan_node.subgraphs) == ["body"]
        assert scan_node.attributes["num_scan_inputs"] == 1
        assert sorted(multi_node.subgraphs) == ["alternatives[0]", "alternatives[1]"]
        alts = multi_node.attributes["alternatives"]
        assert [a.name for a in alts] == ["alt0", "alt1"]
        assert alts[1].nodes[0].op_type == "Neg"
        assert doc.graph.node_count == 2 + 2 + 1 + 1  # type: ignore[union-attr]


def test_constant_variants(tmp_path: Path, wire_mode: str) -> None:
    values = np.array([[1, 2], [3, 4]], dtype=np.int64)
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 6.0], dtype=np.float32), "sv"),
        numpy_helper.from_array(np.array([1, 6], dtype=np.int64), "si"),
        [2, 4],
    )
    nodes = [
        helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(values)),
        helper.make_node("Constant", [], ["f"], value_float=2.5),
        helper.make_node("Constant", [], ["fs"], value_floats=[1.0, -1.0]),
        helper.make_node("Constant", [], ["i"], value_int=-4),
        helper.make_node("Constant", [], ["is"], value_ints=[1, 2, 3]),
        helper.make_node("Constant", [], ["s"], value_string="hi"),
        helper.make_node("Constant", [], ["ss"], value_strings=["a", "b"]),
        helper.make_node("Constant", [], ["sp"], sparse_value=sparse),
        helper.make_node(
            "Constant",
            [],
            ["typed"],
            value=helper.make_tensor("v", TensorProto.INT16, [3], [1, -2, 3]),
        ),
        helper.make_node(
            "Constant",
            [],
            ["words"],
            value=helper.make_tensor("w", TensorProto.STRING, [2], ["x", "yz"]),
        ),
    ]
    model = _model(nodes)
    path = _save(model, tmp_path / "consts.onnx")
    with open_document(path) as doc:
        assert list(doc.tensors) == ["t", "f", "fs", "i", "is", "s", "ss", "sp", "typed", "words"]
        assert doc.tensors["typed"].encoding == "int32_data"
        assert doc.tensors["t"].encoding == "raw" and doc.tensors["t"].offset is not None
        for node in model.graph.node:
            attr = node.attribute[0]
            got = doc.tensors[node.output[0]]
            assert got.info["kind"] == "constant"
            if attr.name == "value":
                _assert_same(got.read(), numpy_helper.to_array(attr.t))
            elif attr.name == "sparse_value":
                dense = np.zeros(8, dtype=np.float32)
                dense[numpy_helper.to_array(attr.sparse_tensor.indices)] = numpy_helper.to_array(
                    attr.sparse_tensor.values
                )
                _assert_same(got.read(), dense.reshape(2, 4))
            else:
                expected = helper.get_attribute_value(attr)
                if isinstance(expected, bytes):
                    expected = expected.decode()
                if isinstance(expected, list) and expected and isinstance(expected[0], bytes):
                    expected = [e.decode() for e in expected]
                assert got.read().tolist() == expected


def test_sparse_initializers(tmp_path: Path) -> None:
    vals = numpy_helper.from_array(np.array([1.0, 2.0, 3.0], dtype=np.float32), "sp1")
    flat_idx = numpy_helper.from_array(np.array([0, 5, 11], dtype=np.int64), "i1")
    vals2 = helper.make_tensor("sp2", TensorProto.INT32, [2], [7, 8])  # typed int32_data
    coord_idx = numpy_helper.from_array(np.array([[0, 1], [2, 3]], dtype=np.int64), "i2")
    graph = helper.make_graph(
        [helper.make_node("Add", ["sp1", "sp1"], ["y"])],
        "g",
        [],
        [],
        sparse_initializer=[
            helper.make_sparse_tensor(vals, flat_idx, [3, 4]),
            helper.make_sparse_tensor(vals2, coord_idx, [3, 4]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    path = _save(model, tmp_path / "sparse.onnx")
    with open_document(path) as doc:
        assert doc.graph.initializers == ["sp1", "sp2"]  # type: ignore[union-attr]
        for sp in onnx.load(str(path)).graph.sparse_initializer:
            values = numpy_helper.to_array(sp.values)
            idx = numpy_helper.to_array(sp.indices)
            dense = np.zeros((3, 4), dtype=values.dtype)
            if idx.ndim == 1:
                dense.reshape(-1)[idx] = values
            else:
                dense[tuple(idx.T)] = values
            t = doc.tensors[sp.values.name]
            assert t.encoding == "sparse" and t.info["kind"] == "sparse_initializer"
            _assert_same(t.read(), dense)
            _assert_same(t.read("1:3,:"), dense[1:3, :])
            _assert_same(t.read(), dense)  # served from the decoded cache


def test_local_functions(tmp_path: Path) -> None:
    body = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.float32(2.0))),
        helper.make_node("Mul", ["x", "k"], ["t"]),
        helper.make_node("Add", ["t", "x"], ["y"]),
    ]
    fn = helper.make_function(
        "custom.fns",
        "Twice",
        ["x"],
        ["y"],
        body,
        [helper.make_opsetid("", 21)],
        attributes=["alpha"],
    )
    node = helper.make_node("Twice", ["a"], ["b"], domain="custom.fns", name="call")
    model = _model(
        [node],
        inputs=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
        outputs=[helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
        functions=[fn],
    )
    model.opset_import.append(helper.make_opsetid("custom.fns", 1))
    path = _save(model, tmp_path / "fn.onnx")
    with open_document(path) as doc:
        g = doc.graph
        assert g is not None and len(g.functions) == 1
        f = g.functions[0]
        assert (f.kind, f.name, f.domain) == ("function", "Twice", "custom.fns")
        assert [n.op_type for n in f.nodes] == ["Constant", "Mul", "Add"]
        assert [v.name for v in f.inputs] == ["x"] and [v.name for v in f.outputs] == ["y"]
        assert f.opsets == {"": 21}
        assert doc.metadata["functions"] == ["custom.fns::Twice"]
        assert g.node_count == 1  # functions are not walked as subgraphs
        assert doc.tensors["k"].read().tolist() == 2.0


# -- external data ---------------------------------------------------------------------------


def _external_model(tmp_path: Path, one_file: bool = True) -> tuple[Path, onnx.ModelProto]:
    w = numpy_helper.from_array(RNG.standard_normal((6, 4)).astype(np.float32), "w")
    q = helper.make_tensor(
        "q", TensorProto.INT4, [5], np.array([1, -2, 3, -8, 7]).astype(ml_dtypes.int4), raw=True
    )
    h = numpy_helper.from_array(RNG.standard_normal((3, 3)).astype(np.float16), "h")
    model = _model([helper.make_node("Identity", ["w"], ["y"])], [w, q, h])
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    path = tmp_path / "ext.onnx"
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=one_file,
        location="weights.bin",
        size_threshold=0,
    )
    return path, reference


@pytest.mark.parametrize("one_file", [True, False], ids=["one-file", "file-per-tensor"])
def test_external_data(tmp_path: Path, one_file: bool, unchanged: Callable) -> None:
    path, reference = _external_model(tmp_path, one_file)
    checks = [unchanged(p) for p in sorted(tmp_path.iterdir())]
    with open_document(path) as doc:
        files = {t.location for t in doc.tensors.values()}
        assert len(doc.sources) == 1 + len(files)
        for t in reference.graph.initializer:
            got = doc.tensors[t.name]
            assert got.encoding == "external"
            ref = numpy_helper.to_array(t)
            _assert_same(got.read(), ref)
            _assert_same(got.read("1:3"), ref[1:3])
            blob = (tmp_path / got.location).read_bytes()  # type: ignore[operator]
            assert blob[got.offset : got.offset + got.nbytes] == t.raw_data
        assert doc.size_bytes == sum(p.stat().st_size for p in tmp_path.iterdir())
    for check in checks:
        check()


def _set_entry(model: onnx.ModelProto, name: str, key: str, value: str) -> None:
    for t in model.graph.initializer:
        if t.name == name:
            for e in t.external_data:
                if e.key == key:
                    e.value = value
                    return
            t.external_data.add(key=key, value=value)
            return
    raise KeyError(name)


def test_external_checksum(tmp_path: Path) -> None:
    path, _ = _external_model(tmp_path)
    model = onnx.load(str(path), load_external_data=False)
    blob = (tmp_path / "weights.bin").read_bytes()
    w = next(t for t in model.graph.initializer if t.name == "w")
    entries = {e.key: e.value for e in w.external_data}
    start, length = int(entries.get("offset", 0)), int(entries["length"])
    _set_entry(model, "w", "checksum", hashlib.sha1(blob[start : start + length]).hexdigest())
    _set_entry(model, "h", "checksum", hashlib.sha1(blob).hexdigest())  # whole-file digest
    _set_entry(model, "q", "checksum", "0" * 40)
    onnx.save_model(model, str(path))
    with open_document(path) as doc:
        assert doc.tensors["w"].read().shape == (6, 4)
        assert doc.tensors["h"].read().shape == (3, 3)
        with pytest.raises(ArtifactError, match="does not match its SHA-1 checksum"):
            doc.tensors["q"].read()


def test_model_over_2gb_with_sparse_external_file(tmp_path: Path) -> None:
    rows, cols = 150_000_000, 4  # 2.4 GB of float32
    big = TensorProto(name="big", data_type=TensorProto.FLOAT, dims=[rows, cols])
    big.data_location = TensorProto.EXTERNAL
    nbytes = rows * cols * 4
    for key, value in (("location", "big.bin"), ("offset", "0"), ("length", str(nbytes))):
        big.external_data.add(key=key, value=value)
    tail = TensorProto(name="tail", data_type=TensorProto.INT64, dims=[3])
    tail.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "big.bin"), ("offset", str(nbytes)), ("length", "24")):
        tail.external_data.add(key=key, value=value)
    model = _model([helper.make_node("Identity", ["big"], ["y"])], [big, tail])
    path = _save(model, tmp_path / "huge.onnx")
    last = np.arange(8, dtype=np.float32).reshape(2, 4)
    with open(tmp_path / "big.bin", "wb") as fh:
        fh.truncate(nbytes + 24)  # sparse: no disk space used for the zeros
        fh.seek(nbytes - last.nbytes)
        fh.write(last.tobytes())
        fh.write(np.array([7, 8, 9], dtype=np.int64).tobytes())
    started = time.perf_counter()
    with open_document(path) as doc:
        elapsed = time.perf_counter() - started
        assert elapsed < 5
        t = doc.tensors["big"]
        assert t.shape == (rows, cols) and t.nbytes == nbytes and t.encoding == "external"
        assert doc.size_bytes > 2**31
        assert t.read(f"{rows - 2}:{rows},:").tolist() == last.tolist()
        assert not t.read("5:7,:").any()
        assert doc.tensors["tail"].read().tolist() == [7, 8, 9]


# -- odds and ends ---------------------------------------------------------------------------


def test_invalid_utf8_names_become_text(tmp_path: Path) -> None:
    model = _model([helper.make_node("Relu", ["xx"], ["yy"], name="nn")])
    data = model.SerializeToString().replace(b"nn", b"\xff\xfe")
    path = tmp_path / "bad_utf8.onnx"
    path.write_bytes(data)
    with open_document(path) as doc:
        node = doc.graph.nodes[0]  # type: ignore[union-attr]
        assert node.name == "\ufffd\ufffd" and node.inputs == ("xx",)


def test_graph_walk_counts_nested_nodes(tmp_path: Path) -> None:
    path = _save(_control_flow_model(), tmp_path / "cf.onnx")
    with open_document(path) as doc:
        g = doc.graph
        assert isinstance(g, Graph)
        kinds = {sub.kind for _n, sub in g.walk()}
        assert kinds == {"main", "subgraph"}
        assert len(list(g.walk())) == 9


def test_non_tensor_and_anonymous_types(tmp_path: Path) -> None:
    """A ZipMap's seq(map) output is described, not shown as '? ?'; a dim named '?' (how
    Paddle2ONNX writes an unknown extent) is unknown, not a symbol shared by every such axis."""
    import onnxruntime as ort

    from nneditor.cli.report import inspect_report
    from nneditor.inputs import check_set, detect_inputs

    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=0),
            helper.make_node(
                "ZipMap", ["m"], ["probs"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2]
            ),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])],
        [
            helper.make_value_info(
                "probs",
                helper.make_sequence_type_proto(
                    helper.make_map_type_proto(
                        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None)
                    )
                ),
            )
        ],
    )
    opsets = [helper.make_opsetid("", 11), helper.make_opsetid("ai.onnx.ml", 1)]
    path = tmp_path / "zipmap.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opsets, ir_version=8), path)
    x = np.random.default_rng(0).random((1, 3, 48, 192), dtype=np.float32)
    # the reference: ONNX Runtime accepts 48 x 192 and returns a list of dicts
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert isinstance(got[0], list) and set(got[0][0]) == {0, 1, 2}
    with nneditor.open(path) as doc:
        report = inspect_report(doc, with_hierarchy=False)
        out = report["graph"]["outputs"][0]
        assert out == {
            "name": "probs",
            "dtype": None,
            "shape": None,
            "type": "seq(map(int64, tensor(float32)))",
        }
        assert report["graph"]["inputs"][0]["shape"] == [-1, 3, None, None]
        plan = detect_inputs(doc)
    check_set(plan, {"x": x})  # raised "dim '?' is 48 ... but 192" before


def test_empty_typed_tensors_read_as_onnx_reads_them(tmp_path):
    """A tensor with a zero in its shape stores no values (Paddle's exports hold a few):
    read as onnx reads it, its array made only when read."""
    from onnx import TensorProto, helper, numpy_helper

    from nneditor.tensors.loaders import EmptyLoader

    tensors = [
        helper.make_tensor("e_f", TensorProto.FLOAT, [0, 3], []),
        helper.make_tensor("e_i", TensorProto.INT64, [2, 0], []),
        helper.make_tensor("e_h", TensorProto.FLOAT16, [0], []),
    ]
    outs = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in tensors]
    graph = helper.make_graph([], "g", [], outs, tensors)
    path = tmp_path / "empty.onnx"
    onnx.save(helper.make_model(graph), path)
    with open_document(path) as doc:
        for t in tensors:
            ref = doc.tensors[t.name]
            assert isinstance(ref.loader, EmptyLoader) and ref.nbytes == 0
            got, want = ref.read(), numpy_helper.to_array(t)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert ref.read("0:0").shape == (0, *want.shape[1:])
