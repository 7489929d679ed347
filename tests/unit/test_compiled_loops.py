"""The compiled loops (``artifacts/onnx/_cwire.c``) against their pure-Python twins, which
stay the reference: the same split of every graph, the same initializer headers, the same
nodes and the same candidate nodes, on real models and on bytes built to be odd, cut or
hostile."""

from __future__ import annotations

import os
import random
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nneditor.artifacts.onnx import graph_build, raw_headers
from nneditor.artifacts.onnx import reader as onnx_reader
from nneditor.artifacts.onnx import tensors as onnx_tensors
from nneditor.artifacts.onnx.objects import OnnxNode, as_text
from nneditor.artifacts.onnx.raw_headers import RawHeader, python_raw_headers
from nneditor.artifacts.wire.pbwrite import len_prefix, varint_field
from nneditor.errors import ArtifactError
from nneditor.io.source import MemorySource
from nneditor.model.graph import Graph
from nneditor.model.tensor import TensorRef
from nneditor.platform.compiled import compiled
from nneditor.tensors.loaders import RawLoader

ROOT = Path(__file__).resolve().parents[2]
cwire = compiled("nneditor.artifacts.onnx._cwire")


@pytest.fixture(autouse=True)
def _compiled() -> None:
    if cwire is not None:
        return
    if os.environ.get("NNEDITOR_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("NNEDITOR_PURE_PYTHON is set: the compiled loops are off")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc):
        pytest.fail(
            f"a C compiler ({cc}) is here but the compiled loops (setup.py's COMPILED) were not "
            "built: reinstall with `pip install -e .` and read the build's warning"
        )
    pytest.skip("no C compiler: the ONNX reader runs its pure-Python loops")


def _pure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_build, "cwire", None)
    monkeypatch.setattr(raw_headers, "cwire", None)
    monkeypatch.setattr(onnx_tensors, "cwire", None)


def _real_models() -> list[Path]:
    found = sorted(ROOT.glob("examples/**/*.onnx"))
    cache = Path.home() / ".cache" / "nneditor" / "testdata"
    found += sorted(p for p in cache.glob("**/*.onnx") if p.stat().st_size < 64 * 2**20)
    return found


def _value(v: Any) -> Any:
    if hasattr(v, "nbytes") and hasattr(v, "shape") and hasattr(v, "name"):  # a TensorRef
        return ("tensor", v.name, v.dtype, tuple(v.shape), v.offset)
    if isinstance(v, Graph):
        return ("graph", v.name, len(v.nodes))
    if isinstance(v, list):
        return [_value(x) for x in v]
    return v


def _nodes(graph: Graph) -> list[tuple]:
    out = []
    for n in graph.nodes:
        attrs = {k: _value(v) for k, v in n.attributes.items()}
        out.append((n.index, n.name, n.op_type, n.domain, n.inputs, n.outputs, attrs, n.metadata))
        for key, sub in sorted(n.subgraphs.items()):
            out.append((key, _nodes(sub)))
    return out


def _opened(path: Path) -> tuple[list, list, list]:
    with onnx_reader.open_document(path) as doc:
        graph = doc.graph
        assert graph is not None
        catalog = [
            (r.name, r.dtype, r.shape, r.nbytes, r.encoding, r.offset, r.info)
            for r in doc.tensors.values()
        ]
        return _nodes(graph), [_nodes(f) for f in graph.functions], catalog


def test_real_models_open_to_the_same_graphs_and_catalogs(monkeypatch):
    paths = _real_models()
    assert len(paths) > 3
    nodes = 0
    for path in paths:
        fast = _opened(path)
        with monkeypatch.context() as m:
            _pure(m)
            slow = _opened(path)
        assert fast == slow, path.name
        nodes += len(fast[0])
    assert nodes > 1000


# -- nodes written by hand: what upb keeps, the compiled reader keeps ------------------------


def _f(number: int, payload: bytes) -> bytes:
    return len_prefix(number, len(payload)) + payload


def _model(*nodes: bytes) -> bytes:
    graph = b"".join(_f(1, n) for n in nodes) + _f(2, b"g")
    graph += _f(12, _f(1, b"y"))  # an output, so the model has one
    opset = _f(8, varint_field(2, 17))
    return varint_field(1, 8) + opset + _f(7, graph)


ODD_NODES = {
    "plain": _f(1, b"x") + _f(2, b"y") + _f(3, b"n") + _f(4, b"Relu"),
    "name twice (the last wins)": _f(3, b"first") + _f(3, b"second") + _f(4, b"Relu"),
    "invalid UTF-8": _f(1, b"in\xff\xfe") + _f(3, b"\xc3(") + _f(4, b"Re\x80lu"),
    "an input of another wire type": varint_field(1, 7) + _f(1, b"x") + _f(4, b"Relu"),
    "empty names and a domain": _f(1, b"")
    + _f(1, b"x")
    + _f(2, b"")
    + _f(7, b"com.x")
    + _f(4, b"Op"),
    "unknown and fixed fields": _f(4, b"Relu")
    + b"\x7d\x01\x02\x03\x04"  # field 15, 32-bit
    + b"\x79"
    + bytes(8)  # field 15, 64-bit
    + _f(99, b"future")
    + _f(6, b"doc"),
    "metadata and an attribute": _f(4, b"LeakyRelu")
    + _f(5, _f(1, b"alpha") + b"\x15\x00\x00\x80\x3e" + varint_field(20, 1))
    + _f(9, _f(1, b"k") + _f(2, b"v")),
    "nothing at all": b"",
}


@pytest.mark.parametrize("kind", sorted(ODD_NODES))
def test_odd_nodes_read_as_upb_reads_them(tmp_path, monkeypatch, kind):
    path = tmp_path / "odd.onnx"
    path.write_bytes(_model(ODD_NODES[kind], ODD_NODES["plain"]))
    expected = onnx.load(str(path)).graph.node
    fast = _opened(path)[0]
    for node, proto in zip(fast, expected, strict=True):
        assert node[1] == as_text(proto.name)
        assert node[2] == as_text(proto.op_type)
        assert node[3] == as_text(proto.domain)
        assert node[4] == tuple(as_text(s) for s in proto.input)
        assert node[5] == tuple(as_text(s) for s in proto.output)
    with monkeypatch.context() as m:
        _pure(m)
        assert _opened(path)[0] == fast


def test_a_node_of_a_group_is_left_to_the_python_reader(tmp_path):
    grouped = _f(4, b"Relu") + b"\x7b" + _f(1, b"in group") + b"\x7c"  # field 15 as a group
    path = tmp_path / "group.onnx"
    data = _model(grouped)
    path.write_bytes(data)
    node = _opened(path)[0][0]
    assert node[2] == "Relu" and node[4] == ()  # upb skips the group; so does the fallback
    at = data.index(grouped)
    found = cwire.nodes(memoryview(data), [(at, len(grouped))], frozenset(), OnnxNode, None)
    assert found is None


# -- the split of a graph's fields -------------------------------------------------------------


def _graph_range(data: bytes) -> tuple[int, int]:
    from nneditor.artifacts.onnx.wire_index import scan

    for fno, _wt, _at, pos, n in scan(data, 0, len(data), "model"):
        if fno == 7:
            return pos, n
    raise AssertionError("no graph")


def _python_split(data: bytes, start: int, end: int) -> tuple | Exception:
    builder = graph_build.GraphBuilder.__new__(graph_build.GraphBuilder)
    builder.buf = memoryview(data)
    builder.threshold = 4096
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(graph_build, "cwire", None)
            s = builder._split(start, end - start, node_field=1, what="g", graph=False)
    except ArtifactError as exc:
        return exc
    return (s.keep, s.nodes, s.tags, s.runs, sorted(s.big), s.inits, s.sparse)


def test_the_split_equals_the_python_walk_on_cut_and_damaged_graphs():
    paths = [p for p in _real_models() if p.stat().st_size < 4 * 2**20][:12]
    assert paths
    rng = random.Random(7)
    checked = refused = 0
    for path in paths:
        data = path.read_bytes()
        pos, n = _graph_range(data)
        for trial in range(40):
            blob = bytearray(data)
            end = pos + n
            if trial % 2:
                end = pos + rng.randrange(n + 1)  # cut anywhere
            elif trial:
                for _ in range(3):
                    blob[rng.randrange(pos, pos + n)] = rng.randrange(256)
            want = _python_split(bytes(blob), pos, end)
            got = cwire.split(memoryview(bytes(blob)), pos, end, 1, False, 4096, None)
            if isinstance(want, Exception):
                assert got is None, path.name
                refused += 1
            elif got is not None:
                keep, nodes, tags, runs, big, inits, sparse = got
                assert (keep, nodes, tags, runs, sorted(big), inits, sparse) == want
                checked += 1
    assert checked > 100 and refused > 10


def test_the_split_hands_back_pages_where_the_python_walk_does():
    init = numpy_helper.from_array(np.zeros(40_000, np.float32), "w").SerializeToString()
    graph = _f(5, init) + _f(1, _f(4, b"Relu")) + _f(5, init) + _f(2, b"g")
    seen: dict[str, list[int]] = {"c": [], "py": []}
    got = cwire.split(memoryview(graph), 0, len(graph), 1, True, 4096, seen["c"].append)
    assert got is not None and len(got[5]) == 2
    builder = graph_build.GraphBuilder.__new__(graph_build.GraphBuilder)
    builder.buf = memoryview(graph)
    builder.threshold = 4096
    builder._passed = seen["py"].append  # type: ignore[method-assign]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(graph_build, "cwire", None)
        builder._split(0, len(graph), node_field=1, what="g", graph=True)
    assert seen["c"] == seen["py"] and len(seen["c"]) == 2


# -- initializer headers ------------------------------------------------------------------------


def _tensors() -> list[bytes]:
    arrays = [
        ("w", np.arange(12, dtype=np.float32).reshape(3, 4)),
        ("", np.ones(2, np.int64)),
        ("scalar", np.array(7, np.int32)),
        ("héllo", np.zeros((1, 1, 2), np.float16)),
        ("big_dims", np.zeros((1, 300, 1), np.uint8)),
        ("b" * 150, np.zeros(3, np.int8)),
        ("e", np.zeros((2, 0), np.float32)),
        ("dims9", np.zeros((1,) * 9, np.float32)),
        ("bool", np.array([True, False])),
    ]
    out = [numpy_helper.from_array(a, n).SerializeToString() for n, a in arrays]
    out.append(helper.make_tensor("typed", TensorProto.FLOAT, [2], [1.0, 2.0]).SerializeToString())
    out.append(helper.make_tensor("s", TensorProto.STRING, [1], [b"x"]).SerializeToString())
    bf = helper.make_tensor("bf", TensorProto.BFLOAT16, [2], b"\0\0\0\0", raw=True)
    out.append(bf.SerializeToString())
    dims, kind, name, raw = b"\x08\x02", b"\x10\x01", _f(8, b"t"), _f(9, bytes(8))
    out += [  # fields out of the order protobuf's serializer writes (the general walk's)
        dims + kind + kind + name + raw,
        kind + dims + name + raw,
        dims + name + kind + raw,
        dims + kind + name + name + raw,
        dims + kind + raw + name,
        dims + kind + raw,  # no name: read
    ]
    return out


def test_headers_equal_the_numpy_reader_on_real_and_damaged_tensors():
    rng = random.Random(11)
    base = _tensors()
    pieces: list[bytes] = []
    for _ in range(3000):
        t = bytearray(rng.choice(base))
        action = rng.randrange(5)
        if action == 1 and t:
            t[rng.randrange(min(len(t), 48))] = rng.randrange(256)
        elif action == 2 and t:
            del t[rng.randrange(len(t)) :]
        elif action == 3:
            t[rng.randrange(len(t) + 1) : 0] = bytes([rng.randrange(256)])
        pieces.append(bytes(t))
    blob = b"".join(pieces)
    entries, at = [], 0
    for p in pieces:
        entries.append((at, len(p)))
        at += len(p)
    view = memoryview(blob)
    py_passed: list[int] = []
    c_passed: list[int] = []
    want = python_raw_headers(view, entries, py_passed.append)
    got = cwire.raw_headers(view, entries, raw_headers._TYPES, RawHeader, c_passed.append)
    assert got == want
    assert all(isinstance(h, RawHeader) for h in got if h is not None)
    assert sum(h is not None for h in got) > 500 and sum(h is None for h in got) > 500
    assert c_passed == py_passed
    # out-of-range entries are not read (the Python reader's callers never hand them in)
    outside = cwire.raw_headers(
        view, [(len(blob) - 2, 10), (-1, 3)], raw_headers._TYPES, RawHeader, None
    )
    assert outside == [None, None]


def _ref_facts(ref: TensorRef | None) -> tuple | None:
    if ref is None:
        return None
    loader = ref.loader
    assert type(loader) is RawLoader and type(ref) is TensorRef
    return (
        *(ref.name, ref.dtype, ref.shape, ref.nbytes, ref.encoding, ref.offset, ref.location),
        ref.info,
        *(loader.source, loader.offset, loader.dtype, loader.big_endian),
    )


@pytest.mark.parametrize("in_file", [True, False])
def test_refs_from_headers_equal_the_python_refs(in_file):
    """The catalog's refs for raw headers: the same fields, loaders and info dicts (one dict
    per ref: an edit of one ref's info must not show in another's)."""
    headers = [
        RawHeader("w", "float32", (3, 4), 10, 48),
        None,
        RawHeader("", "int64", (), 7, 8),
        RawHeader("héllo", "bfloat16", (1, 0, 2), 3, 0),
    ]
    ctx = onnx_tensors.TensorContext(
        source=MemorySource(bytes(64)), external=None, token=(), notes=[], in_file=in_file
    )  # type: ignore[arg-type]
    want = onnx_tensors.python_raw_header_refs(ctx, headers, "main")
    got = cwire.raw_refs(headers, TensorRef, RawLoader, ctx.source, in_file, "main")
    assert [_ref_facts(r) for r in got] == [_ref_facts(r) for r in want]
    got[0].info["doc"] = "x"
    assert "doc" not in got[2].info and got[2].info == {"graph": "main", "kind": "initializer"}
    assert got[0].read().tolist() == [[0.0] * 4] * 3
    got[0].name = "renamed"  # the catalog renames clashes: the slots stay writable
    assert got[0].name == "renamed"
    with pytest.raises(TypeError, match="RawHeader or None"):
        cwire.raw_refs([("w", "float32")], TensorRef, RawLoader, ctx.source, True, "g")
    with pytest.raises((TypeError, AttributeError)):
        cwire.raw_refs(headers, dict, RawLoader, ctx.source, True, "g")


def test_candidate_nodes_equal_the_byte_search_in_python():
    """The nodes searched for Constant and subgraph patterns: the same set, on real graphs and
    on runs whose patterns sit at their edges."""
    seen = 0
    for path in _real_models():
        data = path.read_bytes()
        pos, n = _graph_range(data)
        builder = graph_build.GraphBuilder.__new__(graph_build.GraphBuilder)
        builder.buf = memoryview(data)
        builder.threshold = graph_build.THRESHOLD
        with pytest.MonkeyPatch.context() as m:
            m.setattr(graph_build, "cwire", None)
            split = builder._split(pos, n, node_field=1, what="g", graph=False)
            want = builder._candidates(split)
        got = cwire.candidates(builder.buf, split.runs, split.tags, graph_build._PATTERNS)
        assert got == want, path.name
        seen += len(got)
    assert seen > 20
    constant = _f(4, b"Constant")
    nodes = [constant, _f(4, b"Relu"), _f(3, b"x") + constant, _f(4, b"If")]
    blob = b"".join(_f(1, node) for node in nodes)
    tags, at = [], 0
    for node in nodes:
        tags.append(at)
        at += len(_f(1, node))
    runs = [(0, len(blob))]
    found = cwire.candidates(memoryview(blob), runs, tags, graph_build._PATTERNS)
    assert found == {0, 2, 3}
    assert cwire.candidates(memoryview(blob), [(0, 3)], tags, graph_build._PATTERNS) == set()
