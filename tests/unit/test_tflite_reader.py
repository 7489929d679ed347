"""TFLite reader: flatbuffers built here with the ``flatbuffers`` Builder, following schema.fbs.

Field slots follow tensorflow/compiler/mlir/lite/schema/schema.fbs (declaration order, a union
taking two slots). Values are checked against the numpy arrays written into the buffers.
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

flatbuffers = pytest.importorskip("flatbuffers")

from nneditor.artifacts.registry import open_document  # noqa: E402
from nneditor.artifacts.sniff import sniff_path  # noqa: E402
from nneditor.artifacts.tflite import reader as tflite  # noqa: E402
from nneditor.errors import ArtifactError  # noqa: E402

FLOAT32, INT32, UINT8, STRING, INT8, INT4, RESOURCE = 0, 2, 3, 5, 9, 17, 13


# -- a schema-following builder -------------------------------------------------------------


def _vec(b: Any, width: int, values: list[Any], prepend: str) -> int:
    b.StartVector(width, len(values), width)
    for v in reversed(values):
        getattr(b, prepend)(v)
    return b.EndVector()


def _data(b: Any, data: bytes) -> int:
    b.StartVector(1, len(data), 16)  # Buffer.data has force_align: 16
    b.head = b.head - len(data)
    b.Bytes[b.head : b.head + len(data)] = data
    b.vectorNumElems = len(data)
    return b.EndVector()


def _tables(b: Any, offsets: list[int]) -> int:
    return _vec(b, 4, offsets, "PrependUOffsetTRelative")


def build_model(model: dict[str, Any]) -> bytes:
    b = flatbuffers.Builder(1024)
    buffers = []
    for spec in model["buffers"]:
        spec = spec if isinstance(spec, dict) else {"data": spec}
        data = _data(b, spec["data"]) if spec.get("data") else None
        b.StartObject(3)  # table Buffer { data, offset, size }
        if data is not None:
            b.PrependUOffsetTRelativeSlot(0, data, 0)
        if "offset" in spec:
            b.PrependUint64Slot(1, spec["offset"], 0)
            b.PrependUint64Slot(2, spec["size"], 0)
        buffers.append(b.EndObject())
    codes = []
    for code in model["opcodes"]:
        custom = b.CreateString(code["custom"]) if "custom" in code else None
        b.StartObject(
            4
        )  # table OperatorCode { deprecated_builtin_code, custom_code, version, builtin_code }
        b.PrependInt8Slot(0, min(code["builtin"], 127), 0)
        if custom is not None:
            b.PrependUOffsetTRelativeSlot(1, custom, 0)
        b.PrependInt32Slot(2, code.get("version", 1), 1)
        if not code.get("deprecated_only"):
            b.PrependInt32Slot(3, code["builtin"], 0)
        codes.append(b.EndObject())
    subgraphs = [_subgraph(b, sg) for sg in model["subgraphs"]]
    metadata = []
    for name, index in model.get("metadata", []):
        text = b.CreateString(name)
        b.StartObject(2)  # table Metadata { name, buffer }
        b.PrependUOffsetTRelativeSlot(0, text, 0)
        b.PrependUint32Slot(1, index, 0)
        metadata.append(b.EndObject())
    signatures = [_signature(b, s) for s in model.get("signatures", [])]
    description = b.CreateString(model.get("description", ""))
    vectors = [_tables(b, x) for x in (codes, subgraphs, buffers, metadata, signatures)]
    b.StartObject(8)  # table Model
    b.PrependUint32Slot(0, model.get("version", 3), 0)
    b.PrependUOffsetTRelativeSlot(1, vectors[0], 0)
    b.PrependUOffsetTRelativeSlot(2, vectors[1], 0)
    b.PrependUOffsetTRelativeSlot(3, description, 0)
    b.PrependUOffsetTRelativeSlot(4, vectors[2], 0)
    b.PrependUOffsetTRelativeSlot(6, vectors[3], 0)
    b.PrependUOffsetTRelativeSlot(7, vectors[4], 0)
    b.Finish(b.EndObject(), file_identifier=b"TFL3")
    return bytes(b.Output())


def _subgraph(b: Any, sg: dict[str, Any]) -> int:
    tensors = []
    for t in sg["tensors"]:
        name = b.CreateString(t["name"])
        shape = _vec(b, 4, t["shape"], "PrependInt32")
        signature = _vec(b, 4, t["signature"], "PrependInt32") if "signature" in t else None
        quant = None
        if "scale" in t:
            scale = _vec(b, 4, t["scale"], "PrependFloat32")
            zero = _vec(b, 8, t["zero_point"], "PrependInt64")
            b.StartObject(
                7
            )  # QuantizationParameters { min, max, scale, zero_point, details(2), dim }
            b.PrependUOffsetTRelativeSlot(2, scale, 0)
            b.PrependUOffsetTRelativeSlot(3, zero, 0)
            b.PrependInt32Slot(6, t.get("qdim", 0), 0)
            quant = b.EndObject()
        b.StartObject(8)  # table Tensor
        b.PrependUOffsetTRelativeSlot(0, shape, 0)
        b.PrependInt8Slot(1, t["type"], 0)
        b.PrependUint32Slot(2, t.get("buffer", 0), 0)
        b.PrependUOffsetTRelativeSlot(3, name, 0)
        if quant is not None:
            b.PrependUOffsetTRelativeSlot(4, quant, 0)
        if signature is not None:
            b.PrependUOffsetTRelativeSlot(7, signature, 0)
        tensors.append(b.EndObject())
    operators = []
    for op in sg["operators"]:
        ins = _vec(b, 4, op["inputs"], "PrependInt32")
        outs = _vec(b, 4, op["outputs"], "PrependInt32")
        b.StartObject(9)  # table Operator { opcode_index, inputs, outputs, options(2), ... }
        b.PrependUint32Slot(0, op["opcode_index"], 0)
        b.PrependUOffsetTRelativeSlot(1, ins, 0)
        b.PrependUOffsetTRelativeSlot(2, outs, 0)
        operators.append(b.EndObject())
    tensor_vec, op_vec = _tables(b, tensors), _tables(b, operators)
    ins = _vec(b, 4, sg["inputs"], "PrependInt32")
    outs = _vec(b, 4, sg["outputs"], "PrependInt32")
    name = b.CreateString(sg["name"])
    b.StartObject(6)  # table SubGraph { tensors, inputs, outputs, operators, name, ... }
    b.PrependUOffsetTRelativeSlot(0, tensor_vec, 0)
    b.PrependUOffsetTRelativeSlot(1, ins, 0)
    b.PrependUOffsetTRelativeSlot(2, outs, 0)
    b.PrependUOffsetTRelativeSlot(3, op_vec, 0)
    b.PrependUOffsetTRelativeSlot(4, name, 0)
    return b.EndObject()


def _signature(b: Any, sig: dict[str, Any]) -> int:
    def tensor_maps(items: dict[str, int]) -> int:
        maps = []
        for name, index in items.items():
            text = b.CreateString(name)
            b.StartObject(2)  # TensorMap { name, tensor_index }
            b.PrependUOffsetTRelativeSlot(0, text, 0)
            b.PrependUint32Slot(1, index, 0)
            maps.append(b.EndObject())
        return _tables(b, maps)

    ins, outs = tensor_maps(sig["inputs"]), tensor_maps(sig["outputs"])
    key = b.CreateString(sig["key"])
    b.StartObject(
        5
    )  # SignatureDef { inputs, outputs, signature_key, deprecated_tag, subgraph_index }
    b.PrependUOffsetTRelativeSlot(0, ins, 0)
    b.PrependUOffsetTRelativeSlot(1, outs, 0)
    b.PrependUOffsetTRelativeSlot(2, key, 0)
    b.PrependUint32Slot(4, sig.get("subgraph", 0), 0)
    return b.EndObject()


# -- fixtures -------------------------------------------------------------------------------

RNG = np.random.default_rng(3)
W = RNG.standard_normal((3, 4)).astype(np.float32)
BIAS = np.array([7, -8, 9], dtype=np.int32)
Q = np.array([[1, 255], [128, 0]], dtype=np.uint8)
INT4_VALUES = np.array([-8, -1, 0, 7, 3], dtype=np.int8)


def _pack_int4(values: np.ndarray) -> bytes:
    codes = (values.astype(np.int16) & 0xF).astype(np.uint8)
    codes = np.append(codes, 0) if codes.size % 2 else codes
    return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).tobytes()


def _strings(items: list[bytes]) -> bytes:
    offsets, pos = [], 4 * (len(items) + 2)
    for s in items:
        offsets.append(pos)
        pos += len(s)
    offsets.append(pos)
    return struct.pack(f"<i{len(items) + 1}i", len(items), *offsets) + b"".join(items)


def mlp_model() -> dict[str, Any]:
    return {
        "description": "hand-built MLP",
        "buffers": [
            b"",
            W.tobytes(),
            BIAS.tobytes(),
            Q.tobytes(),
            b"1.14.0\0\0\0\0\0\0",
            _pack_int4(INT4_VALUES),
            _strings([b"cat", b"dog"]),
            b"\0" * 8,
        ],
        "opcodes": [
            {"builtin": 9},  # FULLY_CONNECTED
            {"builtin": 150, "version": 2},  # GELU: > 127, only in builtin_code
            {"builtin": 32, "custom": "MyFancyOp"},
            {"builtin": 22, "deprecated_only": True},  # RESHAPE in an old file
        ],
        "subgraphs": [
            {
                "name": "main",
                "inputs": [0],
                "outputs": [5],
                "tensors": [
                    {"name": "input", "shape": [1, 4], "signature": [-1, 4], "type": FLOAT32},
                    {"name": "dense/kernel", "shape": [3, 4], "type": FLOAT32, "buffer": 1},
                    {"name": "dense/bias", "shape": [3], "type": INT32, "buffer": 2},
                    {"name": "fc", "shape": [1, 3], "type": FLOAT32},
                    {
                        "name": "q",
                        "shape": [2, 2],
                        "type": UINT8,
                        "buffer": 3,
                        "scale": [0.5, 0.25],
                        "zero_point": [128, 0],
                        "qdim": 0,
                    },
                    {"name": "out", "shape": [1, 3], "type": FLOAT32},
                    {"name": "fc", "shape": [5], "type": INT4, "buffer": 5},
                    {"name": "labels", "shape": [2], "type": STRING, "buffer": 6},
                    {"name": "bad", "shape": [3], "type": FLOAT32, "buffer": 7},
                ],
                "operators": [
                    {"opcode_index": 0, "inputs": [0, 1, 2], "outputs": [3]},
                    {"opcode_index": 1, "inputs": [3], "outputs": [5]},
                    {"opcode_index": 2, "inputs": [5, -1, 4], "outputs": []},
                    {"opcode_index": 3, "inputs": [6], "outputs": [7]},
                ],
            },
            {
                "name": "cond",
                "inputs": [0],
                "outputs": [0],
                "tensors": [
                    {"name": "x", "shape": [1], "type": FLOAT32},
                    {"name": "k", "shape": [3, 4], "type": FLOAT32, "buffer": 1},
                ],
                "operators": [],
            },
        ],
        "metadata": [("min_runtime_version", 4)],
        "signatures": [{"key": "serving_default", "inputs": {"x": 0}, "outputs": {"y": 5}}],
    }


def _write(tmp_path: Path, data: bytes, name: str = "model.tflite") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- parsing --------------------------------------------------------------------------------


def test_model_graph_and_metadata(tmp_path: Path, unchanged) -> None:
    path = _write(tmp_path, build_model(mlp_model()))
    check = unchanged(path)
    assert sniff_path(path) == "tflite"
    with open_document(path) as doc:
        assert (doc.format, doc.format_version) == ("tflite", "3")
        meta = doc.metadata
        assert meta["description"] == "hand-built MLP"
        assert [c["name"] for c in meta["operator_codes"]] == [
            "FULLY_CONNECTED",
            "GELU",
            "MyFancyOp",
            "RESHAPE",
        ]
        assert meta["metadata"] == {"min_runtime_version": "1.14.0"}
        assert meta["signature_defs"] == [
            {
                "key": "serving_default",
                "subgraph": 0,
                "inputs": {"x": "input"},
                "outputs": {"y": "out"},
            }
        ]
        graph = doc.graph
        assert graph is not None and graph.name == "main" and graph.kind == "main"
        assert [n.op_type for n in graph.nodes] == [
            "FULLY_CONNECTED",
            "GELU",
            "MyFancyOp",
            "RESHAPE",
        ]
        fc, gelu, custom, reshape = graph.nodes
        assert fc.inputs == ("input", "dense/kernel", "dense/bias") and fc.outputs == ("fc",)
        assert fc.name == "fc"
        assert gelu.attributes["version"] == 2
        assert custom.domain == "custom" and custom.inputs == ("out", "", "q")
        assert custom.name == "MyFancyOp_2"
        assert reshape.inputs == ("fc#6",)  # duplicate tensor names stay distinct values
        assert [(v.name, v.dtype, v.shape) for v in graph.inputs] == [
            ("input", "float32", (None, 4))
        ]
        assert [v.name for v in graph.outputs] == ["out"]
        assert "quantized: scale=[0.5, 0.25]" in graph.value_info["q"].doc
        assert [f.name for f in graph.functions] == ["cond"]
        assert set(graph.initializers) >= {"dense/kernel", "dense/bias", "q"}
    check()


def test_tensors_read_the_buffers(tmp_path: Path) -> None:
    path = _write(tmp_path, build_model(mlp_model()))
    raw = path.read_bytes()
    with open_document(path) as doc:
        t = doc.tensors
        assert set(t) == {"dense/kernel", "dense/bias", "q", "fc#6", "labels", "bad", "cond/k"}
        kernel = t["dense/kernel"]
        assert (kernel.dtype, kernel.shape, kernel.nbytes) == ("float32", (3, 4), 48)
        assert kernel.offset is not None
        assert raw[kernel.offset : kernel.offset + 48] == W.tobytes()
        assert kernel.offset % 16 == 0
        np.testing.assert_array_equal(kernel.read(), W)
        np.testing.assert_array_equal(kernel.read("1:"), W[1:])
        np.testing.assert_array_equal(t["dense/bias"].read(), BIAS)
        q = t["q"]
        np.testing.assert_array_equal(q.read(), Q)
        assert q.info["quantization"]["scale"] == [0.5, 0.25]
        assert q.info["quantization"]["zero_point"] == [128, 0]
        np.testing.assert_array_equal(t["fc#6"].read().astype(np.int8), INT4_VALUES)
        assert t["labels"].read().tolist() == ["cat", "dog"]
        with pytest.raises(
            ArtifactError, match=r"declares float32\[3\] \(12 bytes\) but its buffer holds 8 bytes"
        ):
            t["bad"].read()
        np.testing.assert_array_equal(t["cond/k"].read(), W)


def test_buffers_stored_after_the_flatbuffer(tmp_path: Path) -> None:
    data = np.arange(10, dtype=np.float32)

    def model(offset: int) -> dict[str, Any]:
        return {
            "buffers": [b"", {"offset": offset, "size": data.nbytes}],
            "opcodes": [{"builtin": 0}],
            "subgraphs": [
                {
                    "name": "main",
                    "inputs": [0],
                    "outputs": [2],
                    "tensors": [
                        {"name": "x", "shape": [10], "type": FLOAT32},
                        {"name": "w", "shape": [10], "type": FLOAT32, "buffer": 1},
                        {"name": "y", "shape": [10], "type": FLOAT32},
                    ],
                    "operators": [{"opcode_index": 0, "inputs": [0, 1], "outputs": [2]}],
                }
            ],
        }

    size = len(build_model(model(1 << 40)))  # same layout whatever the offset value
    offset = size + (-size % 16)
    blob = build_model(model(offset))
    assert len(blob) == size
    path = _write(tmp_path, blob + b"\0" * (offset - size) + data.tobytes())
    with open_document(path) as doc:
        ref = doc.tensors["w"]
        assert ref.offset == offset
        np.testing.assert_array_equal(ref.read(), data)
    # the same model without the trailing data: listed, and reading explains why it cannot be read
    with (
        open_document(_write(tmp_path, blob, "cut.tflite")) as doc,
        pytest.raises(
            ArtifactError, match="lies past the end of the .*-byte file; the file is truncated"
        ),
    ):
        doc.tensors["w"].read()


def test_capabilities(tmp_path: Path) -> None:
    with open_document(_write(tmp_path, build_model(mlp_model()))) as doc:
        assert doc.capabilities["view_graph"].available
        assert not doc.capabilities["edit_graph"].available
        assert "inspection-only" in doc.capabilities["export_revision"].reason


# -- hostile input --------------------------------------------------------------------------


def test_missing_identifier(tmp_path: Path) -> None:
    data = bytearray(build_model(mlp_model()))
    data[4:8] = b"XXXX"
    with pytest.raises(ArtifactError, match="the flatbuffer file identifier 'TFL3' is missing"):
        tflite.open_document(_write(tmp_path, bytes(data)))


def test_truncated_files_raise_artifact_errors(tmp_path: Path) -> None:
    data = build_model(mlp_model())
    path = tmp_path / "cut.tflite"
    for cut in list(range(0, 64)) + list(range(64, len(data), 7)):
        path.write_bytes(data[:cut])
        try:
            with tflite.open_document(path) as doc:
                for ref in doc.tensors.values():
                    with contextlib.suppress(ArtifactError):
                        ref.read()
        except ArtifactError as exc:
            assert str(path) in str(exc)


def test_root_offset_out_of_bounds(tmp_path: Path) -> None:
    data = bytearray(build_model(mlp_model()))
    data[0:4] = struct.pack("<I", 10**9)
    with pytest.raises(ArtifactError) as info:
        tflite.open_document(_write(tmp_path, bytes(data)))
    assert "the root table offset" in str(info.value) or "lies outside the" in str(info.value)
    assert "the file is truncated or corrupt" in str(info.value)


def test_huge_vector_length_is_refused(tmp_path: Path) -> None:
    data = bytearray(build_model(mlp_model()))
    # Patch the length word of the model's buffer-list vector to claim 2**31 entries.
    root = struct.unpack_from("<I", data, 0)[0]
    vtable = root - struct.unpack_from("<i", data, root)[0]
    field = root + struct.unpack_from("<H", data, vtable + 4 + 2 * 4)[0]  # slot 4: buffers
    vector = field + struct.unpack_from("<I", data, field)[0]
    struct.pack_into("<I", data, vector, 2**31)
    with pytest.raises(
        ArtifactError, match=r"the buffer list claims 2147483648 elements of 4 bytes"
    ):
        tflite.open_document(_write(tmp_path, bytes(data)))


def test_shared_vectors_hit_the_work_budget(tmp_path: Path) -> None:
    # 20,000 operators all pointing at one table whose inputs vector has 20,000 entries: a
    # 160 kB file asking for 400 million index visits.
    b = flatbuffers.Builder(1 << 20)
    ins = _vec(b, 4, [0] * 20_000, "PrependInt32")
    b.StartObject(9)
    b.PrependUOffsetTRelativeSlot(1, ins, 0)
    op = b.EndObject()
    ops = _tables(b, [op] * 20_000)
    shape = _vec(b, 4, [1], "PrependInt32")
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(0, shape, 0)
    tensor = b.EndObject()
    tensors = _tables(b, [tensor])
    b.StartObject(6)
    b.PrependUOffsetTRelativeSlot(0, tensors, 0)
    b.PrependUOffsetTRelativeSlot(3, ops, 0)
    sg = b.EndObject()
    b.StartObject(4)
    b.PrependInt32Slot(3, 0, 0)
    code = b.EndObject()
    sgs, codes = _tables(b, [sg]), _tables(b, [code])
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(1, codes, 0)
    b.PrependUOffsetTRelativeSlot(2, sgs, 0)
    b.Finish(b.EndObject(), file_identifier=b"TFL3")
    with pytest.raises(
        ArtifactError, match="revisit the same data far more often than its size allows"
    ):
        tflite.open_document(_write(tmp_path, bytes(b.Output())))


def test_bad_indices_are_named(tmp_path: Path) -> None:
    model = mlp_model()
    model["subgraphs"][0]["operators"][0]["inputs"] = [0, 99]
    with pytest.raises(ArtifactError, match="refers to tensor 99 but the subgraph has 9 tensors"):
        tflite.open_document(_write(tmp_path, build_model(model)))
    model = mlp_model()
    model["subgraphs"][0]["operators"][0]["opcode_index"] = 42
    with pytest.raises(ArtifactError, match="uses operator code 42 but the model defines 4"):
        tflite.open_document(_write(tmp_path, build_model(model)))
    model = mlp_model()
    model["subgraphs"][0]["tensors"][1]["buffer"] = 77
    with tflite.open_document(_write(tmp_path, build_model(model))) as doc:
        assert "dense/kernel" not in doc.tensors
        assert any("refers to buffer 77 but the model has 8" in n for n in doc.notes)


def test_random_corruption_never_crashes(tmp_path: Path) -> None:
    data = build_model(mlp_model())
    rng = np.random.default_rng(11)
    path = tmp_path / "fuzz.tflite"
    for _ in range(300):
        mutated = bytearray(data)
        for pos in rng.integers(8, len(data), size=4):
            mutated[pos] = int(rng.integers(0, 256))
        path.write_bytes(bytes(mutated))
        try:
            with tflite.open_document(path) as doc:
                for ref in doc.tensors.values():
                    with contextlib.suppress(ArtifactError):
                        ref.read()
        except ArtifactError:
            pass


def test_fused_names_give_keras_scopes(tmp_path: Path) -> None:
    """TFLite joins the TF ops a kernel replaced with ';': the architecture level reads like
    the Keras model (one stage per layer), not one stage per fused name."""
    from nneditor.api import hierarchy

    layers = ["conv1d", "conv1d_1", "max_pooling1d", "dense", "dense_1"]
    tensors: list[dict[str, Any]] = [{"name": "input", "shape": [1, 4], "type": FLOAT32}]
    operators = []
    for k, layer in enumerate(layers):
        later = layers[k + 1 :] or ["x"]
        for j, op in enumerate(("Conv1D", "BiasAdd", "Relu")):
            fused = ";".join(f"model_1/{other}/{op}" for other in (layer, *later))
            tensors.append({"name": f"{fused}{j}", "shape": [1, 4], "type": FLOAT32})
            operators.append(
                {"opcode_index": 0, "inputs": [len(tensors) - 2], "outputs": [len(tensors) - 1]}
            )
    model = {
        "description": "Keras-like names",
        "buffers": [b""],
        "opcodes": [{"builtin": 21}],  # RELU
        "subgraphs": [
            {
                "name": "main",
                "inputs": [0],
                "outputs": [len(tensors) - 1],
                "tensors": tensors,
                "operators": operators,
            }
        ],
    }
    with open_document(_write(tmp_path, build_model(model))) as doc:
        h = hierarchy(doc)
        assert h.mode == "scopes"
        assert [g.name for g in h.root.children] == layers
        assert [g.node_count for g in h.root.children] == [3] * len(layers)
