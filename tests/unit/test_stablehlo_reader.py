"""Textual StableHLO reader: structure, types, lazy constants, malformed and hostile input.

jax is not a dependency, so the modules are written by hand in the shapes ``jax.jit(...).lower()
.as_text()`` prints (pretty ops, regions, hex constants) plus the generic form. Constant values
are checked against the numpy arrays the hex/list literals were generated from.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from nneditor.artifacts.registry import open_document
from nneditor.artifacts.sniff import sniff_path
from nneditor.artifacts.stablehlo import reader as stablehlo
from nneditor.errors import ArtifactError

RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((4, 16)).astype(np.float32)
B1 = RNG.standard_normal(16).astype(np.float32)
W2 = RNG.standard_normal((16, 2)).astype(np.float32)
IDX = np.array([[3, -1, 7], [0, 12, -5]], dtype=np.int32)


def _hex(a: np.ndarray) -> str:
    return "0x" + a.tobytes().hex().upper()


MLP = f"""// 2-layer MLP, printed like jax.jit(f).lower(x).as_text()
#loc1 = loc("mlp.py":10:4)
module @jit_mlp attributes {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32, stablehlo.version = "1.8.0"}} {{
  func.func public @main(%arg0: tensor<?x4xf32> {{mhlo.layout_mode = "default"}}, %arg1: tensor<8xbf16>) -> (tensor<?x2xf32> {{jax.result_info = ""}}, tensor<f32>) {{
    %cst = stablehlo.constant dense<"{_hex(W1)}"> : tensor<4x16xf32>
    %cst_0 = stablehlo.constant dense<"{_hex(B1)}"> : tensor<16xf32>
    %cst_1 = stablehlo.constant dense<"{_hex(W2)}"> : tensor<16x2xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %c = stablehlo.constant dense<[[3, -1, 7], [0, 12, -5]]> : tensor<2x3xi32>
    %0 = stablehlo.dot_general %arg0, %cst, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<?x4xf32>, tensor<4x16xf32>) -> tensor<?x16xf32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [1] : (tensor<16xf32>) -> tensor<?x16xf32>
    %2 = stablehlo.add %0, %1 : tensor<?x16xf32>
    %3 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<?x16xf32>
    %4 = stablehlo.maximum %2, %3 : tensor<?x16xf32>
    %5 = stablehlo.dot_general %4, %cst_1, contracting_dims = [1] x [0] : (tensor<?x16xf32>, tensor<16x2xf32>) -> tensor<?x2xf32>
    %6 = stablehlo.reduce(%5 init: %cst_2) across dimensions = [0, 1] : (tensor<?x2xf32>, tensor<f32>) -> tensor<f32>
     reducer(%arg2: tensor<f32>, %arg3: tensor<f32>)  {{
      %9 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %9 : tensor<f32>
    }}
    %c_3 = stablehlo.constant dense<0> : tensor<i64>
    %7:2 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %6) : tensor<i64>, tensor<f32>
     cond {{
      %c_5 = stablehlo.constant dense<3> : tensor<i64>
      %9 = stablehlo.compare  LT, %iterArg, %c_5,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %9 : tensor<i1>
    }} do {{
      %c_5 = stablehlo.constant dense<1> : tensor<i64>
      %9 = stablehlo.add %iterArg, %c_5 : tensor<i64>
      %10 = func.call @scale(%iterArg_4) : (tensor<f32>) -> tensor<f32>
      stablehlo.return %9, %10 : tensor<i64>, tensor<f32>
    }}
    %8 = "stablehlo.sort"(%5) <{{dimension = 1 : i64, is_stable = true}}> ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %9 = stablehlo.compare  GT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %9 : tensor<i1>
    }}) : (tensor<?x2xf32>) -> tensor<?x2xf32> loc(#loc1)
    return %8, %7#1 : tensor<?x2xf32>, tensor<f32>
  }}
  func.func private @scale(%arg0: tensor<f32>) -> tensor<f32> {{
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %p = stablehlo.constant dense<true> : tensor<i1>
    %0 = "stablehlo.if"(%p) ({{
      %1 = stablehlo.multiply %arg0, %cst : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }}, {{
      stablehlo.return %arg0 : tensor<f32>
    }}) : (tensor<i1>) -> tensor<f32>
    func.return %0 : tensor<f32>
  }}
}}
"""


def _write(tmp_path: Path, text: str | bytes, name: str = "model.mlir") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _open_error(path: Path) -> str:
    with pytest.raises(ArtifactError) as info:
        stablehlo.open_document(path)
    return str(info.value)


# -- structure ------------------------------------------------------------------------------


def test_mlp_graph_structure(tmp_path: Path, unchanged) -> None:
    path = _write(tmp_path, MLP)
    check = unchanged(path)
    with open_document(path) as doc:
        assert doc.format == "stablehlo"
        assert doc.format_version == "1.8.0"
        graph = doc.graph
        assert graph is not None and graph.name == "main"
        ops = [n.op_type for n in graph.nodes]
        assert ops == [
            "stablehlo.constant",
            "stablehlo.constant",
            "stablehlo.constant",
            "stablehlo.constant",
            "stablehlo.constant",
            "stablehlo.dot_general",
            "stablehlo.broadcast_in_dim",
            "stablehlo.add",
            "stablehlo.broadcast_in_dim",
            "stablehlo.maximum",
            "stablehlo.dot_general",
            "stablehlo.reduce",
            "stablehlo.constant",
            "stablehlo.while",
            "stablehlo.sort",
            "return",
        ]
        assert graph.node_count == 16 + 2 + 3 + 4 + 2
        by_name = {n.name: n for n in graph.nodes}
        dot = by_name["%0"]
        assert dot.inputs == ("%arg0", "%cst") and dot.outputs == ("%0",)
        assert dot.domain == "stablehlo"
        assert dot.attributes["contracting_dims"] == "[1] x [0]"
        assert dot.attributes["precision"] == ["DEFAULT", "DEFAULT"]
        assert by_name["%1"].attributes["dims"] == [1]
        # reduce: operands, attribute and reducer region with block arguments
        reduce = by_name["%6"]
        assert reduce.inputs == ("%5", "%cst_2")
        assert reduce.attributes["dimensions"] == [0, 1]
        body = reduce.subgraphs["reducer"]
        assert [vi.name for vi in body.inputs] == ["%arg2", "%arg3"]
        assert [n.op_type for n in body.nodes] == ["stablehlo.add", "stablehlo.return"]
        assert [vi.name for vi in body.outputs] == ["%9"]
        # while: two results, cond/do regions, iteration arguments typed from the op
        loop = by_name["%7"]
        assert loop.outputs == ("%7#0", "%7#1") and loop.inputs == ("%c_3", "%6")
        assert set(loop.subgraphs) == {"cond", "do"}
        cond = loop.subgraphs["cond"]
        assert [(v.name, v.dtype) for v in cond.inputs] == [
            ("%iterArg", "int64"),
            ("%iterArg_4", "float32"),
        ]
        assert cond.nodes[1].attributes["args"] == ["LT", "SIGNED"]
        assert loop.subgraphs["do"].nodes[2].op_type == "func.call"
        # generic sort: properties and a named comparator region
        sort = by_name["%8"]
        assert sort.attributes["dimension"] == 1 and sort.attributes["is_stable"] is True
        assert [v.name for v in sort.subgraphs["comparator"].inputs] == ["%a", "%b"]
        result = graph.value_type("%7#1")
        assert result is not None and result.dtype == "float32"
    check()


def test_types_inputs_outputs_and_functions(tmp_path: Path) -> None:
    with open_document(_write(tmp_path, MLP)) as doc:
        graph = doc.graph
        assert graph is not None
        assert [(v.name, v.dtype, v.shape) for v in graph.inputs] == [
            ("%arg0", "float32", (None, 4)),
            ("%arg1", "bfloat16", (8,)),
        ]
        assert [(v.name, v.dtype, v.shape) for v in graph.outputs] == [
            ("%8", "float32", (None, 2)),
            ("%7#1", "float32", ()),
        ]
        assert [f.name for f in graph.functions] == ["scale"]
        scale = graph.functions[0]
        assert scale.kind == "function"
        branch = next(n for n in scale.nodes if n.op_type == "stablehlo.if")
        assert set(branch.subgraphs) == {"true_branch", "false_branch"}
        meta = doc.metadata
        assert meta["module"] == "jit_mlp"
        assert meta["module_attributes"]["mhlo.num_partitions"] == 1
        main_sig = meta["functions"][0]
        assert main_sig["inputs"][0]["attributes"] == {"mhlo.layout_mode": "default"}
        assert main_sig["results"][0]["attributes"] == {"jax.result_info": ""}
        assert meta["functions"][1]["visibility"] == "private"
        assert meta["dialects"]["stablehlo"] > 20


@pytest.mark.parametrize(
    ("mlir_type", "dtype", "shape"),
    [
        ("tensor<1x?x3xf32>", "float32", (1, None, 3)),
        ("tensor<bf16>", "bfloat16", ()),
        ("tensor<2x2xi1>", "bool", (2, 2)),
        ("tensor<7xui8>", "uint8", (7,)),
        ("tensor<3xcomplex<f32>>", "complex64", (3,)),
        ("tensor<4xf8E4M3FN>", "float8_e4m3fn", (4,)),
        ("tensor<2xi4>", "int4", (2,)),
        ("tensor<?x4xf32, #stablehlo.bounds<8, ?>>", "float32", (None, 4)),
        ("tensor<*xf32>", "float32", None),
        ("tensor<2x!quant.uniform<i8:f32, 0.5>>", None, (2,)),
    ],
)
def test_tensor_types(
    tmp_path: Path, mlir_type: str, dtype: str | None, shape: tuple | None
) -> None:
    text = f"func.func @main(%x: {mlir_type}) -> {mlir_type} {{\n  return %x : {mlir_type}\n}}\n"
    with open_document(_write(tmp_path, text)) as doc:
        vi = doc.graph.inputs[0]  # type: ignore[union-attr]
        assert (vi.dtype, vi.shape) == (dtype, shape)
        if dtype is None or shape is None:
            assert vi.doc == mlir_type


def test_capabilities_say_inspection_only(tmp_path: Path) -> None:
    with open_document(_write(tmp_path, MLP)) as doc:
        caps = doc.capabilities
        assert caps["inspect"].available and caps["read_tensors"].available
        assert caps["view_graph"].available
        for action in ("edit_graph", "export_revision"):
            assert not caps[action].available
            assert caps[action].reason == (
                "Textual StableHLO is inspection-only: NNEditor does not write the dialect back"
            )


# -- constants ------------------------------------------------------------------------------


def test_constants_are_lazy_and_match_numpy(tmp_path: Path) -> None:
    with open_document(_write(tmp_path, MLP)) as doc:
        t = doc.tensors
        w1 = t["main/%cst"]
        assert (w1.dtype, w1.shape, w1.encoding) == ("float32", (4, 16), "dense_hex")
        assert w1.offset is not None
        text = _write(tmp_path, MLP).read_bytes()
        assert text[w1.offset : w1.offset + 8] == _hex(W1)[2:10].encode()
        assert w1.nbytes == 2 * W1.nbytes
        np.testing.assert_array_equal(w1.read(), W1)
        np.testing.assert_array_equal(w1.read("1:3, 5"), W1[1:3, 5])
        np.testing.assert_array_equal(t["main/%cst_0"].read(), B1)
        np.testing.assert_array_equal(t["main/%cst_1"].read("-1"), W2[-1])
        splat = t["main/%cst_2"]
        assert splat.encoding == "dense_splat" and splat.read().shape == ()
        ints = t["main/%c"]
        assert (ints.dtype, ints.encoding) == ("int32", "dense_list")
        np.testing.assert_array_equal(ints.read(), IDX)
        # region constants belong to their function; duplicated SSA names stay unique
        assert t["main/%c_5"].read() == 3 and t["main/%c_5#2"].read() == 1
        assert t["scale/%p"].read().dtype == np.bool_
        assert doc.graph is not None
        node = next(n for n in doc.graph.nodes if n.name == "%c")
        assert node.info is not None and node.info["tensor"] == "main/%c"
        assert node.attributes["value"] == IDX.tolist()


def test_constant_spellings(tmp_path: Path) -> None:
    bf = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    c64 = np.array([1 + 2j, -3.5 + 0j], dtype=np.complex64)
    f16 = np.array([[0.5, 1.0], [2.0, -4.0]], dtype=np.float16)
    blob = np.arange(6, dtype=np.int16)
    nan_bits = np.array([np.nan, 1.0], dtype=np.float32)
    text = f"""module {{
  func.func @main() -> tensor<3xbf16> {{
    %0 = stablehlo.constant dense<[1.500000e+00, -2.000000e+00, 3.250000e+00]> : tensor<3xbf16>
    %1 = stablehlo.constant dense<[(1.000000e+00,2.000000e+00), (-3.500000e+00,0.000000e+00)]> : tensor<2xcomplex<f32>>
    %2 = stablehlo.constant dense<"{_hex(f16)}"> : tensor<2x2xf16>
    %3 = stablehlo.constant dense<"0x0000C03F"> : tensor<2x3xf32>
    %4 = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
    %5 = stablehlo.constant dense<-7> : tensor<2x2xi8>
    %6 = stablehlo.constant dense_resource<blob1> : tensor<2x3xi16>
    %7 = stablehlo.constant dense<[0x7FC00000, 1.000000e+00]> : tensor<2xf32>
    %8 = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xui8>
    %9 = "stablehlo.constant"() <{{value = dense<[5, 6]> : tensor<2xi64>}}> : () -> tensor<2xi64>
    %10 = stablehlo.constant dense_resource<__elided__> : tensor<4xf32>
    return %0 : tensor<3xbf16>
  }}
}}

{{-#
  dialect_resources: {{
    builtin: {{
      blob1: "0x02000000{blob.tobytes().hex()}"
    }}
  }}
#-}}
"""
    with open_document(_write(tmp_path, text)) as doc:
        t = doc.tensors
        np.testing.assert_array_equal(t["main/%0"].read(), bf)
        assert t["main/%0"].read().dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(t["main/%1"].read(), c64)
        np.testing.assert_array_equal(t["main/%2"].read(), f16)
        np.testing.assert_array_equal(t["main/%3"].read(), np.full((2, 3), 1.5, np.float32))
        np.testing.assert_array_equal(t["main/%4"].read(), [True, False, True])
        np.testing.assert_array_equal(t["main/%5"].read(), np.full((2, 2), -7, np.int8))
        assert t["main/%6"].encoding == "dense_resource"
        np.testing.assert_array_equal(t["main/%6"].read(), blob.reshape(2, 3))
        np.testing.assert_array_equal(t["main/%7"].read(), nan_bits)
        np.testing.assert_array_equal(t["main/%8"].read(), [[1, 2], [3, 4]])
        assert t["main/%8"].read().dtype == np.uint8
        np.testing.assert_array_equal(t["main/%9"].read(), [5, 6])
        with pytest.raises(ArtifactError, match="elided when the module was printed"):
            t["main/%10"].read()
        assert doc.metadata["resources"] == ["blob1"]


def test_generic_module_form(tmp_path: Path) -> None:
    text = """"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
  ^bb0(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>):
    %0 = "stablehlo.constant"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
    %1 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %2 = "mhlo.multiply"(%1, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%2) : (tensor<4xf32>) -> ()
  }) : () -> ()
}) : () -> ()
"""
    path = _write(tmp_path, text)
    assert sniff_path(path) == "stablehlo"
    with open_document(path) as doc:
        graph = doc.graph
        assert graph is not None and graph.name == "main"
        assert [n.op_type for n in graph.nodes] == [
            "stablehlo.constant",
            "stablehlo.add",
            "mhlo.multiply",
            "func.return",
        ]
        assert graph.nodes[2].domain == "mhlo"
        assert [(v.name, v.shape) for v in graph.inputs] == [("%arg0", (4,)), ("%arg1", (4,))]
        assert [v.name for v in graph.outputs] == ["%2"]
        np.testing.assert_array_equal(doc.tensors["main/%0"].read(), [1, 2, 3, 4])


def test_sniff_and_registry(tmp_path: Path) -> None:
    path = _write(tmp_path, MLP, "model.txt")  # the extension does not matter
    assert sniff_path(path) == "stablehlo"
    with open_document(path) as doc:
        assert doc.format == "stablehlo"


# -- malformed input ------------------------------------------------------------------------

MALFORMED = [
    (
        "module {\n  func.func @main(%arg0 tensor<4xf32>) {\n  }\n}\n",
        "line 2, column 25: expected ':' after the argument name, found 'tensor'",
    ),
    (
        "module {\n  func.func @main() {\n    %0 = stablehlo.add %a, %b : tensor<4xf32> `\n  }\n}\n",
        "line 3, column 47: unexpected character '`'",
    ),
    (
        'module {\n  func.func @main() {\n    %0 = stablehlo.constant dense<"0x0000803F\n',
        "line 3, column 35: unterminated string literal",
    ),
    (
        "module {\n  func.func @main() {\n    %0 = stablehlo.constant dense<[1.0, 2.0, 3.0 : tensor<3xf32>\n",
        "line 3, column 34: unterminated '<...>' literal",
    ),
    (
        "module {\n  func.func @main() {\n    return\n  }\n",
        "line 1, column 8: the module's '{' is never closed",
    ),
    ("garbage here\n", "line 1, column 1: expected 'module', 'func.func' or an alias definition"),
    (
        "module {\n  func.func @main() -> tensor<f32> {\n    %0 = = stablehlo.add\n  }\n}\n",
        "line 3, column 10: expected an operation name, found '='",
    ),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_input_names_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    error = _open_error(path)
    assert message in error
    assert str(path) in error and error.startswith("STABLEHLO ")


def test_error_offset_is_the_byte_offset(tmp_path: Path) -> None:
    text = "module {\n  func.func @main() {\n    %0 = stablehlo.add %a, %b : tensor<4xf32> `\n"
    with pytest.raises(ArtifactError) as info:
        stablehlo.open_document(_write(tmp_path, text))
    assert info.value.offset == text.index("`")


def test_empty_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="holds no MLIR module or function"):
        stablehlo.open_document(_write(tmp_path, "// only a comment\n"))
    with pytest.raises(ArtifactError, match="unexpected character"):
        stablehlo.open_document(_write(tmp_path, b"module {\x00\xff\xfe}"))


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    text = "module attributes {a = " + "[" * 5000 + "]" * 5000 + "} {\n}\n"
    with pytest.raises(ArtifactError, match="nesting is deeper than 200 levels"):
        stablehlo.open_document(_write(tmp_path, text))


# -- hostile constants ----------------------------------------------------------------------


def test_huge_splat_costs_nothing_until_read(tmp_path: Path) -> None:
    text = (
        "module {\n  func.func @main() -> tensor<1000000x1000000xf32> {\n"
        "    %0 = stablehlo.constant dense<1.5> : tensor<1000000x1000000xf32>\n"
        "    return %0 : tensor<1000000x1000000xf32>\n  }\n}\n"
    )
    tracemalloc.start()
    try:
        doc = stablehlo.open_document(_write(tmp_path, text))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024
    with doc:
        ref = doc.tensors["main/%0"]
        assert ref.shape == (1_000_000, 1_000_000) and ref.size == 10**12
        np.testing.assert_array_equal(ref.read("0:2, 0:3"), np.full((2, 3), 1.5, np.float32))
        with pytest.raises(ArtifactError) as info:
            ref.read()
        message = str(info.value)
        assert "reading 1,000,000,000,000 elements of tensor 'main/%0' at once" in message
        assert "read a slice such as '0:16' instead" in message


def test_wrong_literal_sizes_explain_on_read(tmp_path: Path) -> None:
    text = """module {
  func.func @main() -> tensor<3xf32> {
    %0 = stablehlo.constant dense<"0x0000803F00000040"> : tensor<3xf32>
    %1 = stablehlo.constant dense<[1.0, 2.0]> : tensor<3xf32>
    %2 = stablehlo.constant dense<[1, 300]> : tensor<2xi8>
    %3 = stablehlo.constant dense<"0x00zz"> : tensor<2xi8>
    %4 = stablehlo.constant dense<[1.0, oops]> : tensor<2xf32>
    return %0 : tensor<3xf32>
  }
}
"""
    with open_document(_write(tmp_path, text)) as doc:
        t = doc.tensors
        with pytest.raises(ArtifactError, match="holds 8 bytes but tensor<3xf32> needs 12 bytes"):
            t["main/%0"].read()
        with pytest.raises(ArtifactError, match="it holds 2 values but its type needs 3"):
            t["main/%1"].read()
        with pytest.raises(ArtifactError, match=r"a value \(300\) is out of range for int8"):
            t["main/%2"].read()
        with pytest.raises(ArtifactError, match="contains a character that is not a hex digit"):
            t["main/%3"].read()
        with pytest.raises(ArtifactError, match="a value is not a number"):
            t["main/%4"].read()


def test_large_hex_constant_is_scanned_without_copies(tmp_path: Path) -> None:
    data = RNG.standard_normal(3_000_000).astype(np.float32)  # 24 MB of hex text
    text = (
        "module {\n  func.func @main() -> tensor<3000x1000xf32> {\n"
        f'    %cst = stablehlo.constant dense<"{_hex(data)}"> : tensor<3000x1000xf32>\n'
        "    return %cst : tensor<3000x1000xf32>\n  }\n}\n"
    )
    path = _write(tmp_path, text)
    tracemalloc.start()
    try:
        doc = stablehlo.open_document(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, peak  # bounded line-counting chunks, no literal copy
    with doc:
        ref = doc.tensors["main/%cst"]
        np.testing.assert_array_equal(ref.read("2998:3000"), data.reshape(3000, 1000)[2998:])


MORE_OPS = """#loc3 = loc("f.py":3:1)
module @jit_f attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{}"}} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<1x4x4x1xf32> loc("x"), %arg1: tensor<3x3x1x1xf32>, %arg2: tensor<3x4xf32>, %arg3: tensor<2x1xi32>) -> (tensor<1x2x2x1xf32>, tuple<tensor<f32>, tensor<f32>>) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]]} {batch_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>) -> tensor<1x2x2x1xf32> loc(#loc3)
    %1 = stablehlo.iota dim = 0 : tensor<4xi32>
    %2 = stablehlo.convert %1 : (tensor<4xi32>) -> tensor<4xf32>
    %3 = stablehlo.slice %2 [0:2] : (tensor<4xf32>) -> tensor<2xf32>
    %4 = "stablehlo.gather"(%arg2, %arg3) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>}> : (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.custom_call @Sharding(%4) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %6 = stablehlo.tuple %cst, %cst : tuple<tensor<f32>, tensor<f32>>
    %7 = "stablehlo.case"(%1) ({
      stablehlo.return %cst : tensor<f32>
    }, {
      stablehlo.return %cst : tensor<f32>
    }) : (tensor<4xi32>) -> tensor<f32>
    %8 = chlo.erf %cst : tensor<f32> -> tensor<f32>
    %9 = stablehlo.select %p, %cst, %8 : tensor<i1>, tensor<f32>
    return %0, %6 : tensor<1x2x2x1xf32>, tuple<tensor<f32>, tensor<f32>>
  } loc(#loc3)
}
#loc4 = loc(callsite(#loc3 at #loc3))
"""


def test_more_op_syntax(tmp_path: Path) -> None:
    path = _write(tmp_path, MORE_OPS.replace("\n", "\r\n"))  # CRLF line ends are whitespace too
    with open_document(path) as doc:
        graph = doc.graph
        assert graph is not None
        nodes = {n.name: n for n in graph.nodes}
        conv = nodes["%0"].attributes
        assert conv["dim_numbers"] == "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
        assert conv["window"] == {"stride": [1, 1], "pad": [[0, 0], [0, 0]]}
        assert conv["precision_config"] == ["#stablehlo<precision DEFAULT>"] * 2
        assert nodes["%1"].attributes == {"dim": 0}
        assert nodes["%3"].attributes["args"] == ["[0:2]"]
        gather = nodes["%4"].attributes
        assert gather["slice_sizes"] == [1, 4]
        assert gather["dimension_numbers"].startswith("#stablehlo.gather<offset_dims = [1]")
        assert nodes["%5"].attributes["args"] == ["@Sharding"]
        assert nodes["%5"].attributes["mhlo.sharding"] == "{replicated}"
        assert set(nodes["%7"].subgraphs) == {"branch0", "branch1"}
        assert graph.value_type("%8") == graph.value_info["%8"]
        assert (graph.value_info["%8"].dtype, graph.value_info["%8"].shape) == ("float32", ())
        assert graph.value_info["%9"].dtype == "float32"  # select: "pred type, result type"
        assert graph.outputs[1].dtype is None
        assert graph.outputs[1].doc == "tuple<tensor<f32>, tensor<f32>>"
        assert doc.metadata["module_ops"] == ["sdy.mesh"]
        assert set(doc.metadata["aliases"]) == {"#loc3", "#loc4"}
