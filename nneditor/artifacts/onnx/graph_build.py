"""Build Graph objects (main graph, subgraphs, local functions) from wire ranges.

Plan for one GraphProto (or FunctionProto):

1. Walk its top-level fields (tag + length only), sorting them into nodes, initializers, sparse
   initializers and everything else.
2. Concatenate the byte ranges of every field except initializers and *big* nodes (over
   :data:`THRESHOLD` bytes: large Constants, large subgraphs) and parse that once with
   ``pb.GraphProto.FromString`` (C speed). This validates every node at open.
3. Index initializers from the wire so that their values stay byte ranges in the file.
4. Index from the wire the nodes that hold data we must not copy: big nodes, Constant nodes
   (their tensor joins the catalog with a byte range) and nodes with graph attributes (their
   subgraphs are built by this same procedure, recursively, so their initializers keep ranges).
   Small ones are found without touching every parsed node: their bytes must contain
   ``op_type`` = Constant/If/Loop/Scan/SequenceMap or an attribute ``type`` of GRAPH(S), so a
   ``bytes.find`` over the node runs yields candidates, each confirmed by its wire walk (or,
   for the common raw-data Constant, by the cheaper :mod:`fast_constant` reader).
5. Turn the parsed NodeProtos into :class:`OnnxNode` objects when ``graph.nodes`` is first
   read (see :class:`OnnxGraph`); wire-indexed nodes take their places. Where the compiled
   loops are built (``_cwire.c``, :mod:`nneditor.platform.compiled`), steps 1 and 5, the
   headers of step 3 and the byte search of step 4 run in C: the nodes are then read from
   their bytes and keep their position among the parsed protos.

Invariants:
- Node order is the stored order; ``Node.index`` is the position in its graph.
- Catalog order: a graph's initializers, then its sparse initializers, then per wire-indexed
  node in stored order its Constant tensor or its subgraphs' tensors (depth first).
- Subgraph nesting deeper than :data:`MAX_DEPTH` raises :class:`ArtifactError`.
- A protobuf decode failure falls back to node-by-node parsing; a node protobuf rejects is
  indexed from the wire instead, so the error (if any) names that node and its byte offset.
- Known gap: a small node whose ``op_type`` length is not canonically encoded, or a
  custom-domain node whose graph attribute omits ``type``, is not found by the byte search;
  its graph attribute is then shown as a name only.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from nneditor.artifacts.onnx import protos as pb
from nneditor.artifacts.onnx import wire_index as w
from nneditor.artifacts.onnx.attributes import (
    A,
    NodeDecoder,
    WireAttribute,
    decode_wire_attributes,
    graph_keys,
    scan_attribute,
)
from nneditor.artifacts.onnx.elem_types import ONNX_DTYPES, value_info_from_proto
from nneditor.artifacts.onnx.fast_constant import read_fast_constant
from nneditor.artifacts.onnx.objects import OnnxGraph, OnnxNode, as_text, proto_node, wire_node
from nneditor.artifacts.onnx.raw_headers import read_raw_headers
from nneditor.artifacts.onnx.tensor_index import index_sparse, index_tensor
from nneditor.artifacts.onnx.tensors import (
    TensorContext,
    array_ref,
    make_ref,
    make_sparse_ref,
    range_loader,
    raw_header_refs,
)
from nneditor.errors import ArtifactError
from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.platform.compiled import compiled
from nneditor.tensors.dtypes import stored_nbytes
from nneditor.tensors.shapes import shape_problem

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

#: the compiled loops (_cwire.c), or None: the Python loops here
cwire = compiled("nneditor.artifacts.onnx._cwire")
#: Nodes larger than this are indexed from the wire instead of being parsed by protobuf.
THRESHOLD = 64 * 1024
#: Release mapped file pages after every this many bytes walked (bounds RSS at open).
_SHED_EVERY = 64 * 1024 * 1024
#: Deepest subgraph nesting accepted (If inside Loop inside ...).
MAX_DEPTH = 32

_STANDARD = frozenset(("", "ai.onnx"))
_WIRE_OPS = frozenset(("If", "Loop", "Scan", "SequenceMap", "Constant"))
_CONSTANT_VALUES = {
    "value_float": ("float32", False),
    "value_floats": ("float32", True),
    "value_int": ("int64", False),
    "value_ints": ("int64", True),
    "value_string": ("string", False),
    "value_strings": ("string", True),
}

NodeEntry = tuple[int, int]  # (payload offset, length) of one NodeProto

#: Byte patterns that every node needing a wire walk contains: ``op_type`` (field 4) equal to
#: a control-flow op or Constant, or an attribute ``type`` (field 20) of GRAPH / GRAPHS.
_PATTERNS = tuple(b"\x22" + bytes([len(op)]) + op.encode() for op in sorted(_WIRE_OPS)) + (
    b"\xa0\x01\x05",
    b"\xa0\x01\x0a",
)


@dataclass
class _Split:
    """A message's top-level fields sorted by role."""

    keep: list[tuple[int, int]] = field(default_factory=list)  # merged [start, end) ranges
    nodes: list[NodeEntry] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)  # tag offset of each node, ascending
    runs: list[tuple[int, int]] = field(default_factory=list)  # merged ranges of small nodes
    big: set[int] = field(default_factory=set)  # indexes into ``nodes`` left out of the parse
    inits: list[NodeEntry] = field(default_factory=list)
    sparse: list[NodeEntry] = field(default_factory=list)


class GraphBuilder:
    """Builds graphs for one model; owns the catalog and the notes it fills."""

    def __init__(
        self,
        buf: memoryview,
        tensors: TensorContext,
        catalog: TensorCatalog,
        opsets: dict[str, int],
        threshold: int | None = None,
    ) -> None:
        self.buf = buf
        self.tensors = tensors
        self.catalog = catalog
        self.opsets = opsets
        self.threshold = THRESHOLD if threshold is None else threshold
        self._released = 0  # file pages before this offset were handed back (see _shed)

    # -- graphs ---------------------------------------------------------------------------

    def graph(
        self,
        start: int,
        length: int,
        *,
        path: str,
        kind: str = "main",
        owner: OnnxNode | None = None,
        depth: int = 0,
    ) -> Graph:
        if depth > MAX_DEPTH:
            where = path if len(path) <= 120 else "…" + path[-120:]
            raise ArtifactError(
                f"subgraphs are nested more than {MAX_DEPTH} levels deep (at {where!r}); "
                "NNEditor refuses deeper nesting",
                offset=start,
            )
        what = f"graph {path!r}"
        split = self._split(start, length, node_field=1, what=what, graph=True)
        proto, protos = self._parse(split, pb.GraphProto, what)
        name = as_text(proto.name)
        if kind == "main" and name:
            path = name
        inits = self._initializers(split, path)
        graph = OnnxGraph(name=name, kind=kind, owner=owner, opsets=self.opsets)
        graph.initializers = inits
        wired, constants = self._wired_nodes(split, path, depth)
        graph.set_sources(
            partial(_materialize, protos, split, wired, constants, self.tensors),
            partial(_value_infos, proto),
        )
        skip = set(inits)
        graph.inputs = [
            value_info_from_proto(v) for v in proto.input if as_text(v.name) not in skip
        ]
        graph.outputs = [value_info_from_proto(v) for v in proto.output]
        return graph

    def function(self, start: int, length: int, index: int) -> Graph:
        """A local function (ModelProto.functions) as a Graph of kind "function"."""
        what = f"local function #{index}"
        split = self._split(start, length, node_field=7, what=what, graph=False)
        proto, protos = self._parse(split, pb.FunctionProto, what)
        name, domain = as_text(proto.name), as_text(proto.domain)
        path = f"function {domain}::{name}" if domain else f"function {name}"
        opsets = {as_text(o.domain): int(o.version) for o in proto.opset_import}
        graph = OnnxGraph(name=name, kind="function", opsets=opsets, domain=domain)
        wired, constants = self._wired_nodes(split, path, 0)
        graph.set_sources(
            partial(_materialize, protos, split, wired, constants, self.tensors),
            partial(_value_infos, proto),
        )
        graph.inputs = [ValueInfo(as_text(n)) for n in proto.input]
        graph.outputs = [ValueInfo(as_text(n)) for n in proto.output]
        return graph

    # -- splitting and parsing ------------------------------------------------------------

    def _split(self, start: int, length: int, *, node_field: int, what: str, graph: bool) -> _Split:
        """Sort the top-level fields (hot loop: one pass, runs merged as they come)."""
        if cwire is not None:
            passed = self._passed if graph else None
            found = cwire.split(
                self.buf, start, start + length, node_field, graph, self.threshold, passed
            )
            if found is not None:
                keep, nodes, tags, runs, big, inits, sparse = found
                return _Split(keep, nodes, tags, runs, set(big), inits, sparse)
            # not plainly well-formed: the Python walk below reads it or says what is wrong
        split = _Split()
        keep, nodes, tags, runs = split.keep, split.nodes, split.tags, split.runs
        threshold = self.threshold
        run_start = run_end = -1  # current run of kept fields
        node_start = node_end = -1  # current run of small nodes
        fields = w.scan(self.buf, start, start + length, what, self._passed if graph else None)
        for fno, wt, tag_pos, pos, n in fields:
            end = pos if wt == w.VARINT else pos + n
            if wt == w.LEN:
                if fno == node_field:
                    tags.append(tag_pos)
                    nodes.append((pos, n))
                    if n > threshold:
                        split.big.add(len(nodes) - 1)
                        continue
                    if tag_pos == node_end:
                        node_end = end
                    else:
                        if node_end >= 0:
                            runs.append((node_start, node_end))
                        node_start, node_end = tag_pos, end
                elif graph and fno == 5:
                    split.inits.append((pos, n))
                    continue
                elif graph and fno == 15:
                    split.sparse.append((pos, n))
                    continue
            if tag_pos == run_end:
                run_end = end
            else:
                if run_end >= 0:
                    keep.append((run_start, run_end))
                run_start, run_end = tag_pos, end
        if run_end >= 0:
            keep.append((run_start, run_end))
        if node_end >= 0:
            runs.append((node_start, node_end))
        return split

    def _parse(self, split: _Split, cls: Any, what: str) -> tuple[Any, Any]:
        """Parse the kept fields once; returns (message, the small nodes' protos in order)."""
        buf = self.buf
        data = b"".join([buf[a:b] for a, b in split.keep])
        try:
            proto = cls.FromString(data)
            return proto, proto.node
        except (DecodeError, RecursionError):
            return self._parse_slowly(split, cls, what)

    def _parse_slowly(self, split: _Split, cls: Any, what: str) -> tuple[Any, list[Any]]:
        """Node-by-node parse after a batch failure: bad nodes are indexed from the wire."""
        buf = self.buf
        node_ranges = {(pos, pos + n) for pos, n in split.nodes}
        rest = [_without_nodes(buf, a, b, node_ranges, what) for a, b in split.keep]
        try:
            proto = cls.FromString(b"".join(rest))
        except (DecodeError, RecursionError) as exc:
            raise ArtifactError(
                f"{what}: its inputs, outputs or value types cannot be decoded ({exc}); "
                "the file is corrupt",
                offset=split.keep[0][0] if split.keep else None,
            ) from None
        protos: list[Any] = []
        for j, (pos, n) in enumerate(split.nodes):
            if j in split.big:
                continue
            try:
                protos.append(pb.NodeProto.FromString(bytes(buf[pos : pos + n])))
            except (DecodeError, RecursionError):
                split.big.add(j)
        return proto, protos

    def _passed(self, offset: int) -> None:
        """The wire scan stepped over a large field: shed the pages behind it now and then."""
        if offset - self._released > _SHED_EVERY:
            self._shed(offset)

    def _shed(self, upto: int) -> None:
        """Hand back the file pages mapped so far below ``upto``.

        Touching one initializer header makes the kernel map the neighbouring cached pages too
        (fault-around, 64 KiB each); over thousands of initializers that alone would add
        hundreds of MB to the resident set. The pages stay in the page cache.
        """
        self.tensors.source.release(self._released, upto - self._released)
        self._released = upto

    # -- tensors --------------------------------------------------------------------------

    def _initializers(self, split: _Split, path: str) -> list[str]:
        buf, ctx, add = self.buf, self.tensors, self.catalog.add
        names: list[str] = []
        self._released = 0
        headers = read_raw_headers(buf, split.inits, self._passed)
        self._released = 0
        for i, ref in enumerate(raw_header_refs(ctx, headers, path)):
            if ref is not None:
                names.append(ref.name)
                add(ref)
                continue
            pos, n = split.inits[i]
            if pos - self._released > _SHED_EVERY:
                self._shed(pos)
            idx = index_tensor(buf, pos, n, f"initializer #{i} of graph {path!r}")
            names.append(idx.name)
            add(make_ref(ctx, idx, idx.name, {"graph": path, "kind": "initializer"}))
        for i, (pos, n) in enumerate(split.sparse):
            sidx = index_sparse(buf, pos, n, f"sparse initializer #{i} of graph {path!r}")
            name = sidx.values.name if sidx.values else f"sparse_initializer_{i}"
            names.append(name)
            info = {"graph": path, "kind": "sparse_initializer"}
            add(make_sparse_ref(ctx, sidx, name, info))
        return names

    # -- nodes ----------------------------------------------------------------------------

    def _candidates(self, split: _Split) -> set[int]:
        """Small nodes whose bytes contain a pattern of a Constant / subgraph-holding node."""
        if cwire is not None:
            return cwire.candidates(self.buf, split.runs, split.tags, _PATTERNS)
        found: set[int] = set()
        tags = split.tags
        for a, b in split.runs:
            data = bytes(self.buf[a:b])
            for pattern in _PATTERNS:
                hit = data.find(pattern)
                while hit >= 0:
                    found.add(bisect_right(tags, a + hit) - 1)
                    hit = data.find(pattern, hit + 1)
        return found

    def _wired_nodes(
        self, split: _Split, path: str, depth: int
    ) -> tuple[dict[int, OnnxNode], dict[int, TensorRef]]:
        """Nodes needing attention at open: (wire-indexed nodes, Constant refs of parsed nodes).

        Big nodes and nodes holding graphs are indexed from the wire. A small Constant in the
        common layout (raw_data tensor) is read by :mod:`fast_constant` instead, because
        PyTorch exports hold thousands of them.
        """
        wired: dict[int, OnnxNode] = {}
        constants: dict[int, TensorRef] = {}
        for j in sorted(split.big | self._candidates(split)):
            if j not in split.big:
                ref = self._fast_constant(split.nodes[j], path)
                if ref is not None:
                    constants[j] = ref
                    continue
            node, special = self._wire_node(j, split.nodes[j], path, depth)
            if special or j in split.big:
                wired[j] = node
        return wired, constants

    def _fast_constant(self, entry: NodeEntry, path: str) -> TensorRef | None:
        """Catalog a small Constant's raw tensor via the fast reader; None if not that simple."""
        pos, n = entry
        facts = read_fast_constant(bytes(self.buf[pos : pos + n]))
        if facts is None:
            return None
        dtype = ONNX_DTYPES.get(facts.data_type)
        if dtype is None or dtype == "string":
            return None
        if facts.raw_length != stored_nbytes(dtype, math.prod(facts.dims)):
            return None  # the general path explains the mismatch
        if shape_problem(facts.dims):
            return None  # e.g. [0, 2**63 - 1]: the general path refuses it with a sentence
        info: dict[str, Any] = {"graph": path, "kind": "constant", "node": facts.node_name}
        if facts.tensor_name and facts.tensor_name != facts.output:
            info["onnx_name"] = facts.tensor_name
        offset = pos + facts.raw_offset
        loader = range_loader(self.tensors.source, offset, facts.raw_length, dtype)
        ref = TensorRef(
            facts.output,
            dtype,
            facts.dims,
            facts.raw_length,
            "raw",
            loader,
            offset=offset,
            info=info,
        )
        return self.catalog.add(ref)

    def _wire_node(
        self, index: int, entry: NodeEntry, path: str, depth: int
    ) -> tuple[OnnxNode, bool]:
        """Index one NodeProto from the wire; returns (node, holds a Constant or a graph)."""
        buf = self.buf
        pos, n = entry
        what = f"node #{index} of graph {path!r}"
        inputs: list[str] = []
        outputs: list[str] = []
        name = op_type = domain = ""
        attrs: list[WireAttribute] = []
        metadata: dict[str, str] = {}
        for fno, wt, _at, p, m in w.scan(buf, pos, pos + n, what):
            if wt != w.LEN:
                continue
            if fno == 1:
                inputs.append(w.text(buf, p, m))
            elif fno == 2:
                outputs.append(w.text(buf, p, m))
            elif fno == 3:
                name = w.text(buf, p, m)
            elif fno == 4:
                op_type = w.text(buf, p, m)
            elif fno == 7:
                domain = w.text(buf, p, m)
            elif fno == 5:
                attrs.append(scan_attribute(buf, p, m, f"attribute of {what}"))
            elif fno == 9:  # metadata_props: StringStringEntryProto {key = 1, value = 2}
                kv = {
                    k: w.text(buf, q, r)
                    for k, wt2, _a, q, r in w.scan(buf, p, p + m, what)
                    if wt2 == w.LEN
                }
                metadata[kv.get(1, "")] = kv.get(2, "")
        node = wire_node(index, name, op_type, domain, tuple(inputs), tuple(outputs), dict)
        if metadata:
            node.info = {"metadata": metadata}
        label = name or f"{op_type}#{index}"
        for attr in attrs:
            for key, (gpos, glen) in zip(graph_keys(attr), attr.graphs, strict=False):
                sub_path = f"{path}/{label}/{key}"
                node.subgraphs[key] = self.graph(
                    gpos, glen, path=sub_path, kind="subgraph", owner=node, depth=depth + 1
                )
        known: dict[str, Any] = {}
        constant = op_type == "Constant" and domain in _STANDARD
        if constant:
            known = self._constant(node, attrs, path)
        node._attr_source = partial(decode_wire_attributes, node, attrs, self.tensors, known)
        return node, constant or bool(node.subgraphs)

    def _constant(self, node: OnnxNode, attrs: list[WireAttribute], path: str) -> dict[str, Any]:
        """Register a Constant node's value in the catalog under its output name."""
        name = node.outputs[0] if node.outputs else node.name
        info = {"graph": path, "kind": "constant", "node": node.name}
        known: dict[str, Any] = {}
        for attr in attrs:
            ref = self._constant_ref(attr, name, dict(info))
            if ref is not None:
                known[attr.name] = self.catalog.add(ref)
                break
        return known

    def _constant_ref(
        self, attr: WireAttribute, name: str, info: dict[str, Any]
    ) -> TensorRef | None:
        buf, ctx = self.buf, self.tensors
        if attr.name == "value" and attr.tensors and not attr.listed:
            pos, n = attr.tensors[-1]
            return make_ref(ctx, index_tensor(buf, pos, n, f"Constant {name!r}"), name, info)
        if attr.name == "sparse_value" and attr.sparse and not attr.listed:
            pos, n = attr.sparse[-1]
            return make_sparse_ref(ctx, index_sparse(buf, pos, n, f"Constant {name!r}"), name, info)
        spec = _CONSTANT_VALUES.get(attr.name)
        if spec is None:
            return None
        try:
            proto = A.FromString(bytes(buf[attr.start : attr.start + attr.length]))
        except DecodeError as exc:
            raise ArtifactError(
                f"Constant {name!r}: attribute {attr.name!r} cannot be decoded ({exc})",
                offset=attr.start,
            ) from None
        return array_ref(name, _constant_array(proto, *spec), spec[0], info)


def _constant_array(proto: Any, dtype: str, listed: bool) -> np.ndarray:
    if dtype == "float32":
        values: list[Any] = list(proto.floats) if listed else [proto.f]
        arr = np.array(values, dtype=np.float32)
    elif dtype == "int64":
        arr = np.array(list(proto.ints) if listed else [proto.i], dtype=np.int64)
    else:
        raw = list(proto.strings) if listed else [proto.s]
        arr = np.empty(len(raw), dtype=object)
        for i, s in enumerate(raw):
            arr[i] = as_text(s)
    return arr if listed else arr.reshape(())


def _materialize(
    protos: Any,
    split: _Split,
    wired: dict[int, OnnxNode],
    constants: dict[int, TensorRef],
    ctx: TensorContext,
) -> list[Node]:
    """The graph's node list: parsed nodes wrapped as OnnxNode, wire-indexed ones in place.

    ``protos`` holds the parsed nodes in order, without the ``split.big`` ones (big or
    unparsable nodes, all of which are in ``wired``). ``constants`` maps parsed Constant nodes
    to their catalog refs, which become their ``value`` attribute.
    """
    decode = NodeDecoder(protos, ctx)
    left_out = frozenset(split.big)
    built = _compiled_nodes(split, left_out, decode, ctx)
    if built is not None:
        for j, wire in wired.items():
            built[j] = wire
        for j, ref in constants.items():
            built[j]._attrs = {"value": ref}
        return built
    if not wired and not constants:
        return [proto_node(j, pn, decode) for j, pn in enumerate(protos)]
    parsed = iter(protos)
    nodes: list[Node] = []
    count = len(left_out) + len(protos)
    for j in range(count):
        if j in left_out:
            nodes.append(wired[j])
            continue
        pn = next(parsed)
        node = wired.get(j)
        if node is None:
            node = proto_node(j, pn, decode)
            if j in constants:
                node._attrs = {"value": constants[j]}
        nodes.append(node)
    return nodes


def _compiled_nodes(
    split: _Split, left_out: frozenset[int], decode: NodeDecoder, ctx: TensorContext
) -> list[Node] | None:
    """The nodes built from their wire bytes by ``_cwire.nodes`` (None: use the protos).

    The file is viewed afresh (and the view let go) so that a graph whose nodes were never
    read does not keep the document's map exported after it is closed.
    """
    if cwire is None:
        return None
    source = ctx.source
    try:
        view = source.view(0, source.size)
    except ValueError:  # the document was closed: the parsed protos still hold every node
        return None
    try:
        return cwire.nodes(view, split.nodes, left_out, OnnxNode, decode)
    finally:
        view.release()


def _value_infos(proto: Any) -> dict[str, ValueInfo]:
    out: dict[str, ValueInfo] = {}
    for vi in proto.value_info:
        info = value_info_from_proto(vi)
        out[info.name] = info
    return out


def _without_nodes(
    buf: memoryview, start: int, end: int, node_ranges: set[tuple[int, int]], what: str
) -> bytes:
    """The fields of ``buf[start:end]`` minus the node fields (for the slow parse)."""
    parts = []
    for _fno, wt, tag_pos, pos, n in w.scan(buf, start, end, what):
        stop = pos + n if wt in (w.LEN, w.I32, w.I64) else pos
        if wt == w.LEN and (pos, pos + n) in node_ranges:
            continue
        parts.append(bytes(buf[tag_pos:stop]))
    return b"".join(parts)
