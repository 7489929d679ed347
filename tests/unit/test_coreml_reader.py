"""Core ML reader: .mlmodel protobufs and .mlpackage folders built here with a tiny encoder.

coremltools is not a dependency. Messages follow coremltools' mlmodel/format/*.proto (Model,
FeatureTypes, NeuralNetwork, MIL); ML program weights follow MILBlob's storage format. Values
are checked against the numpy arrays written into the fixtures.
"""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from nneditor.artifacts.coreml import reader as coreml
from nneditor.artifacts.registry import open_document
from nneditor.artifacts.sniff import sniff_path
from nneditor.errors import ArtifactError

# -- a tiny protobuf encoder ----------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def fv(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def fb(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fs(number: int, text: str) -> bytes:
    return fb(number, text.encode())


def fm(number: int, *parts: bytes) -> bytes:
    return fb(number, b"".join(parts))


def packed(number: int, values: list[int]) -> bytes:
    return fb(number, b"".join(varint(v) for v in values))


def floats(number: int, values: np.ndarray | list[float]) -> bytes:
    return fb(number, np.asarray(values, "<f4").tobytes())


def array_feature(number: int, name: str, shape: list[int], dtype: int = 65568) -> bytes:
    return fm(number, fs(1, name), fm(3, fm(5, packed(1, shape), fv(2, dtype))))


def tensor_type(code: int, dims: list[int]) -> bytes:
    return fm(1, fv(1, code), fv(2, len(dims)), *[fm(3, fm(1, fv(1, d))) for d in dims])


def named(name: str, code: int, dims: list[int]) -> bytes:
    return fs(1, name) + fm(2, tensor_type(code, dims))


def blob_storage(arrays: list[tuple[int, bytes]]) -> tuple[bytes, list[int]]:
    """MILBlob v2: 64-byte header, then 64-byte metadata + data records, 64-byte aligned."""
    out = bytearray(struct.pack("<II", len(arrays), 2) + b"\0" * 56)
    offsets = []
    for code, data in arrays:
        meta = len(out)
        out += struct.pack("<IIQQQ", 0xDEADBEEF, code, len(data), meta + 64, 0) + b"\0" * 32
        out += data + b"\0" * (-len(data) % 64)
        offsets.append(meta)
    return bytes(out), offsets


# -- fixtures -------------------------------------------------------------------------------

RNG = np.random.default_rng(5)
FC_W = RNG.standard_normal((3, 4)).astype(np.float32)
FC_B = np.array([0.5, -1.5, 2.5], np.float32)
BN = np.array([1.0, 0.5, -2.0], np.float16)
CONV = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
EMB = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
Q8 = np.array([0, 17, 255, 3], np.uint8)

DESCRIPTION = fm(
    2,
    array_feature(1, "input", [1, 4]),
    array_feature(10, "output", [1, 3]),
    fm(1, fs(1, "photo"), fm(3, fm(4, fv(1, 224), fv(2, 160), fv(3, 20)))),
    fm(
        100,
        fs(1, "a tiny network"),
        fs(2, "1.0"),
        fs(3, "NNEditor tests"),
        fm(100, fs(1, "com.example.k"), fs(2, "v")),
    ),
)


def nn_model(extra_layers: bytes = b"") -> bytes:
    dense = fm(
        140, fv(1, 4), fv(2, 3), fv(10, 1), fm(20, floats(1, FC_W.ravel())), fm(21, floats(1, FC_B))
    )
    bn = fm(160, fv(1, 3), *[fm(f, fb(2, BN.tobytes())) for f in (15, 16, 17, 18)])
    conv = fm(100, fv(1, 2), fv(2, 3), packed(20, [3, 3]), fm(90, fb(30, CONV.tobytes())))
    emb = fm(150, fv(1, 4), fv(2, 3), fm(20, fb(31, EMB.tobytes())))
    quant = fm(
        290,
        packed(1, [4]),
        fm(2, fb(30, Q8.tobytes()), fm(40, fv(1, 8), fm(101, floats(1, [0.1]), floats(2, [0.0])))),
    )
    layers = [
        fm(1, fs(1, "dense"), fs(2, "input"), fs(3, "h"), dense),
        fm(1, fs(1, "bn"), fs(2, "h"), fs(3, "h2"), bn),
        fm(1, fs(1, "conv"), fs(2, "photo"), fs(3, "c"), conv),
        fm(1, fs(1, "emb"), fs(2, "h2"), fs(3, "e"), emb),
        fm(1, fs(1, "table"), fs(3, "t"), quant),
        fm(1, fs(1, "relu"), fs(2, "h2"), fs(3, "output"), fm(130, fm(10, b""))),
    ]
    return fv(1, 4) + DESCRIPTION + fm(500, *layers, extra_layers)


W16 = RNG.standard_normal((3, 4)).astype(np.float16)
B32 = np.array([1.0, 2.0, 3.0], np.float32)
U4 = np.array([1, 15, 7, 0, 9, 3], np.uint8)
IMM = np.array([[0.25, -0.5], [4.0, 8.0]], np.float32)


def _pack_u4(values: np.ndarray) -> bytes:
    return (values[0::2] | (values[1::2] << 4)).astype(np.uint8).tobytes()


def ml_program(
    weight_name: str = "@model_path/weights/weight.bin", offsets: list[int] | None = None
) -> bytes:
    offsets = offsets or [64, 192, 320]

    def blob(code: int, dims: list[int], off: int) -> bytes:
        return fm(2, tensor_type(code, dims)) + fm(5, fs(1, weight_name), fv(2, off))

    def const(name: str, code: int, dims: list[int], value: bytes) -> bytes:
        return fm(
            3, fs(1, "const"), fm(3, named(name, code, dims)), fm(5, fs(1, "val"), fm(2, value))
        )

    def arg(param: str, *names: str) -> bytes:
        return fm(2, fs(1, param), fm(2, *[fm(1, fs(1, n)) for n in names]))

    immediate = fm(2, tensor_type(11, [2, 2])) + fm(3, fm(1, fm(1, floats(1, IMM.ravel()))))
    ints = fm(2, tensor_type(23, [3])) + fm(3, fm(1, fm(2, packed(1, [5, (1 << 64) - 2, 9]))))
    ops = [
        const("w", 10, [3, 4], blob(10, [3, 4], offsets[0])),
        const("b", 11, [3], blob(11, [3], offsets[1])),
        const("lut", 35, [6], blob(35, [6], offsets[2])),
        const("imm", 11, [2, 2], immediate),
        const("axes", 23, [3], ints),
        fm(
            3,
            fs(1, "linear"),
            arg("x", "x"),
            arg("weight", "w"),
            arg("bias", "b"),
            fm(3, named("lin", 11, [1, 3])),
        ),
        fm(
            3,
            fs(1, "cond"),
            arg("pred", "x"),
            fm(3, named("y", 11, [1, 3])),
            fm(
                4,
                fs(2, "lin"),
                fm(3, fs(1, "identity"), arg("x", "lin"), fm(3, named("lin2", 11, [1, 3]))),
            ),
        ),
    ]
    block = fs(2, "y") + b"".join(ops)
    function = (
        fm(1, named("x", 11, [1, 4])) + fs(2, "CoreML7") + fm(3, fs(1, "CoreML7"), fm(2, block))
    )
    helper = fs(2, "CoreML7") + fm(3, fs(1, "CoreML7"), fm(2, b""))
    program = (
        fv(1, 1) + fm(2, fs(1, "main"), fm(2, function)) + fm(2, fs(1, "helper"), fm(2, helper))
    )
    desc = fm(2, array_feature(1, "x", [1, 4]), array_feature(10, "y", [1, 3]))
    return fv(1, 8) + desc + fm(502, program)


def make_package(
    tmp_path: Path,
    model: bytes | None = None,
    manifest_path: str = "com.apple.CoreML/model.mlmodel",
) -> Path:
    root = tmp_path / "tiny.mlpackage"
    data = root / "Data" / "com.apple.CoreML"
    (data / "weights").mkdir(parents=True)
    storage, offsets = blob_storage([(1, W16.tobytes()), (2, B32.tobytes()), (11, _pack_u4(U4))])
    assert offsets == [64, 192, 320]
    (data / "weights" / "weight.bin").write_bytes(storage)
    (data / "model.mlmodel").write_bytes(model if model is not None else ml_program())
    manifest = {
        "fileFormatVersion": "1.0.0",
        "itemInfoEntries": {
            "A1": {
                "author": "com.apple.CoreML",
                "description": "CoreML Model Specification",
                "name": "model.mlmodel",
                "path": manifest_path,
            },
            "B2": {
                "author": "com.apple.CoreML",
                "description": "CoreML Model Weights",
                "name": "weights",
                "path": "com.apple.CoreML/weights",
            },
        },
        "rootModelIdentifier": "A1",
    }
    (root / "Manifest.json").write_text(json.dumps(manifest))
    return root


def _write(tmp_path: Path, data: bytes, name: str = "model.mlmodel") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- neural networks ------------------------------------------------------------------------


def test_neural_network_layers_and_weights(tmp_path: Path, unchanged) -> None:
    path = _write(tmp_path, nn_model())
    check = unchanged(path)
    assert sniff_path(path) == "coreml"
    with open_document(path) as doc:
        assert (doc.format, doc.format_version) == ("coreml", "4")
        meta = doc.metadata
        assert meta["model_type"] == "neuralNetwork"
        assert meta["short_description"] == "a tiny network" and meta["author"] == "NNEditor tests"
        assert meta["user_defined"] == {"com.example.k": "v"}
        graph = doc.graph
        assert graph is not None
        assert [n.op_type for n in graph.nodes] == [
            "innerProduct",
            "batchnorm",
            "convolution",
            "embedding",
            "loadConstant",
            "activation",
        ]
        assert graph.nodes[0].inputs == ("input", "dense/weights", "dense/bias")
        assert graph.nodes[0].outputs == ("h",)
        ins = {v.name: v for v in graph.inputs}
        assert (ins["input"].dtype, ins["input"].shape) == ("float32", (1, 4))
        assert ins["photo"].doc == "image 224x160 RGB" and ins["photo"].shape == (160, 224)
        t = doc.tensors
        np.testing.assert_array_equal(t["dense/weights"].read(), FC_W)
        np.testing.assert_array_equal(t["dense/bias"].read(), FC_B)
        for name in ("gamma", "beta", "mean", "variance"):
            assert t[f"bn/{name}"].dtype == "float16"
            np.testing.assert_array_equal(t[f"bn/{name}"].read(), BN)
        np.testing.assert_array_equal(t["conv/weights"].read(), CONV)
        np.testing.assert_array_equal(t["emb/weights"].read(), EMB)
        table = t["table/data"]
        assert table.dtype == "uint8" and table.info["quantization"]["bits"] == 8
        assert table.info["quantization"]["kind"] == "linear"
        np.testing.assert_array_equal(table.read(), Q8)
        raw = path.read_bytes()
        w = t["dense/weights"]
        assert w.offset is not None
        assert raw[w.offset : w.offset + w.nbytes] == FC_W.tobytes()
        assert not doc.capabilities["edit_graph"].available
    check()


def test_large_model_is_sniffed_as_coreml(tmp_path: Path) -> None:
    big = RNG.standard_normal((256, 512)).astype(np.float32)  # 512 KiB: past the sniff head
    layer = fm(
        1,
        fs(1, "fc"),
        fs(2, "input"),
        fs(3, "output"),
        fm(140, fv(1, 512), fv(2, 256), fm(20, floats(1, big.ravel()))),
    )
    path = _write(tmp_path, fv(1, 4) + DESCRIPTION + fm(500, layer))
    assert sniff_path(path) == "coreml"
    with open_document(path) as doc:
        np.testing.assert_array_equal(doc.tensors["fc/weights"].read("255"), big[255])


def test_pipeline_and_other_model_types(tmp_path: Path) -> None:
    sub_nn = (
        fv(1, 4)
        + DESCRIPTION
        + fm(
            500,
            fm(
                1,
                fs(1, "dense"),
                fs(2, "input"),
                fs(3, "output"),
                fm(140, fv(1, 4), fv(2, 3), fm(20, floats(1, FC_W.ravel()))),
            ),
        )
    )
    glm = (
        fv(1, 1)
        + fm(2, array_feature(1, "output", [1, 3]), array_feature(10, "score", [1]))
        + fm(300, b"")
    )
    pipeline = (
        fv(1, 4)
        + fm(2, array_feature(1, "input", [1, 4]), array_feature(10, "score", [1]))
        + fm(202, fm(1, sub_nn), fm(1, glm), fs(2, "net"), fs(2, "head"))
    )
    with open_document(_write(tmp_path, pipeline)) as doc:
        graph = doc.graph
        assert graph is not None
        assert [(n.name, n.op_type) for n in graph.nodes] == [
            ("net", "neuralNetwork"),
            ("head", "glmRegressor"),
        ]
        assert graph.nodes[0].subgraphs["model"].nodes[0].op_type == "innerProduct"
        assert graph.nodes[1].inputs == ("output",) and graph.nodes[1].outputs == ("score",)
        assert "has no layer graph" in graph.nodes[1].attributes["reason"]
        np.testing.assert_array_equal(doc.tensors["net/dense/weights"].read(), FC_W)
    with open_document(_write(tmp_path, glm, "glm.mlmodel")) as doc:
        assert doc.graph is None
        assert (
            doc.graph_unavailable_reason
            == "a Core ML glmRegressor model has no layer graph NNEditor can show"
        )
        assert doc.capabilities["view_graph"].reason == doc.graph_unavailable_reason
        assert [v["name"] for v in doc.metadata["inputs"]] == ["output"]


# -- ML programs and packages ---------------------------------------------------------------


def test_ml_program_package(tmp_path: Path, unchanged) -> None:
    root = make_package(tmp_path)
    checks = [unchanged(p) for p in root.rglob("*") if p.is_file()]
    assert sniff_path(root) == "coreml"
    with open_document(root) as doc:
        assert (doc.format, doc.format_version) == ("coreml", "8")
        assert doc.path == root
        assert doc.size_bytes == sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        meta = doc.metadata
        assert meta["model_type"] == "mlProgram"
        assert meta["ml_program"]["functions"] == ["main", "helper"]
        (weights,) = meta["weight_files"]
        assert (weights["blobs"], weights["version"]) == (3, 2)
        graph = doc.graph
        assert graph is not None and graph.name == "main"
        assert [n.op_type for n in graph.nodes] == [
            "const",
            "const",
            "const",
            "const",
            "const",
            "linear",
            "cond",
        ]
        linear = graph.nodes[5]
        assert linear.inputs == ("x", "w", "b") and linear.outputs == ("lin",)
        assert linear.attributes == {"x": "x", "weight": "w", "bias": "b"}
        cond = graph.nodes[6]
        assert cond.subgraphs["block0"].nodes[0].op_type == "identity"
        assert [f.name for f in graph.functions] == ["helper"]
        assert [(v.name, v.dtype, v.shape) for v in graph.inputs] == [("x", "float32", (1, 4))]
        t = doc.tensors
        w = t["w"]
        assert (w.dtype, w.shape, w.encoding) == ("float16", (3, 4), "mil_blob")
        assert w.location is not None and w.location.endswith("weight.bin")
        np.testing.assert_array_equal(w.read(), W16)
        np.testing.assert_array_equal(t["b"].read(), B32)
        np.testing.assert_array_equal(t["lut"].read(), U4)
        np.testing.assert_array_equal(t["imm"].read(), IMM)
        np.testing.assert_array_equal(t["axes"].read(), [5, -2, 9])
        assert graph.nodes[4].attributes["val"] == [5, -2, 9]
    for check in checks:
        check()


def test_bare_ml_program_points_to_the_package(tmp_path: Path) -> None:
    with open_document(_write(tmp_path, ml_program())) as doc:
        with pytest.raises(
            ArtifactError, match="open the package folder instead of the bare .mlmodel"
        ):
            doc.tensors["w"].read()
        np.testing.assert_array_equal(doc.tensors["imm"].read(), IMM)


# -- hostile input --------------------------------------------------------------------------


def test_weight_paths_cannot_leave_the_package(tmp_path: Path) -> None:
    root = make_package(tmp_path, ml_program(weight_name="@model_path/../../../secret.bin"))
    (tmp_path / "secret.bin").write_bytes(b"\0" * 4096)
    with (
        open_document(root) as doc,
        pytest.raises(ArtifactError, match="points outside the model folder; refused"),
    ):
        doc.tensors["w"].read()


def test_manifest_paths_cannot_leave_the_package(tmp_path: Path) -> None:
    root = make_package(tmp_path, manifest_path="../../outside.mlmodel")
    with pytest.raises(ArtifactError, match="points outside the package; refused"):
        open_document(root)


def test_broken_manifests(tmp_path: Path) -> None:
    root = make_package(tmp_path)
    (root / "Manifest.json").write_text("{not json")
    with pytest.raises(ArtifactError, match="Manifest.json is not valid JSON"):
        coreml.open_document(root)
    (root / "Manifest.json").write_text(json.dumps({"itemInfoEntries": {}}))
    with pytest.raises(ArtifactError, match="does not name the root model"):
        coreml.open_document(root)


def test_bad_blob_records_explain_on_read(tmp_path: Path) -> None:
    root = make_package(tmp_path, ml_program(offsets=[0, 10**6, 128]))
    with open_document(root) as doc:
        t = doc.tensors
        with pytest.raises(
            ArtifactError, match="no blob metadata record .sentinel 0xDEADBEEF. at offset 0"
        ):
            t["w"].read()
        with pytest.raises(ArtifactError, match="at offset 1000000 lies past the end of"):
            t["b"].read()
        with pytest.raises(ArtifactError, match="no blob metadata record"):
            t["lut"].read()


def test_truncated_and_foreign_protobufs(tmp_path: Path) -> None:
    data = nn_model()
    path = tmp_path / "cut.mlmodel"
    for cut in range(1, len(data), 97):
        path.write_bytes(data[:cut])
        try:
            with coreml.open_document(path) as doc:
                for ref in doc.tensors.values():
                    ref.read()
        except ArtifactError as exc:
            assert str(path) in str(exc)
    with pytest.raises(ArtifactError, match="not a Core ML model"):
        coreml.open_document(_write(tmp_path, fv(7, 3) + fs(8, "x"), "other.mlmodel"))


def test_random_corruption_never_crashes(tmp_path: Path) -> None:
    data = nn_model()
    rng = np.random.default_rng(9)
    path = tmp_path / "fuzz.mlmodel"
    for _ in range(200):
        mutated = bytearray(data)
        for pos in rng.integers(0, len(data), size=3):
            mutated[pos] = int(rng.integers(0, 256))
        path.write_bytes(bytes(mutated))
        try:
            with coreml.open_document(path) as doc:
                for ref in doc.tensors.values():
                    with contextlib.suppress(ArtifactError):
                        ref.read()
        except ArtifactError:
            pass
