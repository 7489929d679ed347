"""Textual StableHLO (and MHLO/CHLO) reader: MLIR text -> Document.

The module's main graph is ``@main`` (else the first public function, else the first); the
other functions become ``graph.functions``. Node names are SSA result names (``%0``, ``%cst``);
op types are full op names (``stablehlo.add``) with the dialect as domain. Regions (reduce
bodies, while cond/body, if/case branches, sort comparators) are nested graphs in
``node.subgraphs``. Every ``dense<...>`` constant (``stablehlo.constant``, ``mhlo.constant``,
``arith.constant``) is a lazy :class:`TensorRef` named ``<function>/<ssa name>``.

Invariants:
- The file is mapped read-only and scanned with regular expressions (see stablehlo_lexer);
  literal bodies are recorded as byte ranges and decoded only when read (stablehlo_dense).
- Syntax errors raise ArtifactError naming the line and column.
- The dialect is never written back: editing and export capabilities say so.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.artifacts.stablehlo.dense import (
    HexLoader,
    SplatLoader,
    from_storage,
    list_decoder,
    parse_scalar,
    storage_itemsize,
    unhex,
)
from nneditor.artifacts.stablehlo.ir import (
    DenseLit,
    Func,
    FuncType,
    Module,
    Op,
    Region,
    TypeRef,
)
from nneditor.artifacts.stablehlo.lexer import Lexer, LexError
from nneditor.artifacts.stablehlo.parser import Parser
from nneditor.errors import ArtifactError
from nneditor.io.identity import Identity, fast_identity
from nneditor.io.source import ByteSource, open_source
from nneditor.model.capabilities import WEIGHTS_ONLY, build, no, yes
from nneditor.model.document import Document
from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.loaders import DecodedLoader, TensorLoader, UnavailableLoader
from nneditor.tensors.shapes import shape_problem, shape_text

FORMAT = "stablehlo"
INSPECTION_ONLY = "Textual StableHLO is inspection-only: NNEditor does not write the dialect back"
CAPABILITIES = build(
    inspect=yes(),
    read_tensors=yes(),
    view_graph=yes(),
    edit_graph=no(INSPECTION_ONLY),
    edit_tensors=no(INSPECTION_ONLY),
    quantize=no(INSPECTION_ONLY),
    prune=no(INSPECTION_ONLY),
    export_revision=no(INSPECTION_ONLY),
    export_weights=WEIGHTS_ONLY,
)

RETURN_OPS = {"return", "func.return", "stablehlo.return", "mhlo.return", "chlo.return"}
#: Region names of well-known ops when the text does not name them (generic form).
KNOWN_REGIONS: dict[str, tuple[str, ...]] = {
    "while": ("cond", "body"),
    "if": ("true_branch", "false_branch"),
    "reduce": ("body",),
    "reduce_window": ("body",),
    "sort": ("comparator",),
    "scatter": ("update_computation",),
    "select_and_scatter": ("select", "scatter"),
    "all_reduce": ("computation",),
    "reduce_scatter": ("computation",),
    "map": ("computation",),
}
#: Constants with at most this many elements are also shown decoded in node attributes.
_INLINE_ELEMENTS = 16


def open_document(path: Path) -> Document:
    """Open a textual StableHLO/MHLO module (``.mlir``, ``.stablehlo``, ...)."""
    source = open_source(path)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # parsing allocates many small acyclic objects; collection passes only cost time
    try:
        module = parse_source(source, str(path))
        if not module.funcs and not module.other_ops and not module.name:
            raise ArtifactError(
                "the file holds no MLIR module or function",
                format=FORMAT,
                path=str(path),
                hint="expected text such as 'module { func.func @main(...) ... }'",
            )
        identity = fast_identity(source, source.mtime_ns)
        return _Builder(path, source, module, identity).document()
    except BaseException:
        source.close()
        raise
    finally:
        if gc_was_enabled:
            gc.enable()


def parse_source(source: ByteSource, label: str = "") -> Module:
    """Parse the whole source; LexError becomes ArtifactError with line and column."""
    parser = Parser(source.view(0, source.size))
    try:
        return parser.parse()
    except LexError as exc:
        line, col = parser.lx.line_col(exc.offset)
        raise ArtifactError(
            f"line {line}, column {col}: {exc.message}",
            format=FORMAT,
            path=label or None,
            offset=exc.offset,
        ) from None
    except RecursionError:
        raise ArtifactError(
            "the module nests too deeply to be read", format=FORMAT, path=label or None
        ) from None


class _Builder:
    def __init__(self, path: Path, source: ByteSource, module: Module, identity: Identity) -> None:
        self.path = path
        self.source = source
        self.module = module
        self.identity = identity
        self.catalog = TensorCatalog()
        self.dialects: Counter[str] = Counter()
        self.notes: list[str] = []
        self.lexer = Lexer(source.view(0, source.size))

    def document(self) -> Document:
        funcs = self.module.funcs
        main = _pick_main(funcs)
        graph: Graph | None = None
        reason = ""
        if main is None:
            reason = "the module defines no functions"
        else:
            graph = self.func_graph(main, "main")
            graph.functions = [self.func_graph(f, "function") for f in funcs if f is not main]
        return Document(
            format=FORMAT,
            format_version=_version(self.module.attrs),
            path=self.path,
            size_bytes=self.source.size,
            identity=self.identity,
            metadata=self.metadata(),
            tensors=self.catalog,
            graph=graph,
            graph_unavailable_reason=reason,
            capabilities=CAPABILITIES,
            sources=[self.source],
            notes=self.notes,
        )

    def metadata(self) -> dict[str, Any]:
        mod = self.module
        return {
            "module": mod.name,
            "module_attributes": {k: _plain(v, self.lexer) for k, v in mod.attrs.items()},
            "functions": [self._signature(f) for f in mod.funcs],
            "operations": sum(self.dialects.values()),
            "dialects": dict(sorted(self.dialects.items())),
            "constants": len(self.catalog),
            "aliases": dict(list(mod.aliases.items())[:64]),
            "resources": sorted(mod.resources),
            "module_ops": [op.name for op in mod.other_ops[:64]],
        }

    def _signature(self, func: Func) -> dict[str, Any]:
        return {
            "name": func.name,
            "visibility": func.visibility,
            "inputs": [
                {"name": n, "type": t.text, "attributes": _plain(a, self.lexer)}
                for n, t, a in func.args
            ],
            "results": [
                {"type": t.text, "attributes": _plain(a, self.lexer)} for t, a in func.results
            ],
            "declaration_only": func.body is None,
        }

    # -- graphs -------------------------------------------------------------------------------

    def func_graph(self, func: Func, kind: str) -> Graph:
        graph = Graph(name=func.name, kind=kind)
        graph.inputs = [_value_info(n, t) for n, t, _a in func.args]
        if func.body is not None:
            self._fill(graph, func.body, func.name)
        ret = _terminator(func.body)
        names = ret.operands if ret is not None else []
        graph.outputs = [
            _value_info(names[i] if i < len(names) else f"result{i}", t)
            for i, (t, _a) in enumerate(func.results)
        ]
        if len(names) > len(graph.outputs):
            graph.outputs += [
                graph.value_type(n) or ValueInfo(n) for n in names[len(graph.outputs) :]
            ]
        return graph

    def _region_graph(self, region: Region, name: str, owner: Node, func: str) -> Graph:
        graph = Graph(name=f"{owner.name}/{name}", kind="subgraph", owner=owner)
        entry = region.blocks[0].args if region.blocks else []
        graph.inputs = [_value_info(n, t) for n, t in entry]
        self._fill(graph, region, func)
        ret = _terminator(region)
        if ret is not None:
            types = ret.operand_types
            graph.outputs = [
                _value_info(n, types[i] if i < len(types) else None)
                for i, n in enumerate(ret.operands)
            ]
        return graph

    def _fill(self, graph: Graph, region: Region, func: str) -> None:
        for block in region.blocks:
            for name, t in block.args:
                if t is not None:
                    graph.value_info[name] = _value_info(name, t)
            for op in block.ops:
                node = self._node(op, len(graph.nodes), func, block.label)
                graph.nodes.append(node)
                for res, t in zip(node.outputs, op.result_types, strict=False):
                    graph.value_info[res] = _value_info(res, t)

    def _node(self, op: Op, index: int, func: str, block: str) -> Node:
        dialect = sys.intern(op.name.split(".", 1)[0]) if "." in op.name else "func"
        self.dialects[dialect] += 1
        name = op.results[0].split("#", 1)[0] if op.results else f"{op.name}@{op.line}"
        info: dict[str, Any] = {"line": op.line, "column": op.col}
        if block:
            info["block"] = block
        attrs = {k: _plain(v, self.lexer) for k, v in op.attrs.items()}
        args = [_plain(v, self.lexer) for v in op.positional if not isinstance(v, DenseLit)]
        if args:
            attrs["args"] = args
        lit = op.dense
        if lit is not None and op.name.rsplit(".", 1)[-1] == "constant" and op.results:
            ref = self._constant(lit, op, f"{func}/{name}")
            if ref is not None:
                info["tensor"] = ref.name
                attrs["value"] = self._inline(ref)
        node = Node(
            index,
            name,
            op.name,
            dialect,
            tuple(op.operands),
            tuple(op.results),
            attrs=attrs or None,
            info=info,
        )
        short = op.name.rsplit(".", 1)[-1]
        known = KNOWN_REGIONS.get(short, ())
        if short == "case":
            known = tuple(f"branch{i}" for i in range(len(op.regions)))
        for i, (label, region) in enumerate(op.regions):
            rname = known[i] if label.startswith("region") and i < len(known) else label
            while rname in node.subgraphs:
                rname += "'"
            node.subgraphs[rname] = self._region_graph(region, rname, node, func)
        return node

    # -- constants ----------------------------------------------------------------------------

    def _constant(self, lit: DenseLit, op: Op, name: str) -> TensorRef | None:
        typ = lit.type or (op.result_types[0] if op.result_types else None)
        count = typ.count if typ is not None else None
        if typ is None or typ.dtype is None or count is None or typ.shape is None:
            what = typ.text if typ is not None else "an unknown type"
            self.notes.append(f"constant {name} ({what}) is not listed: its type cannot be decoded")
            return None
        shape = tuple(int(d) for d in typ.shape if d is not None)
        problem = shape_problem(shape)
        if problem:  # e.g. tensor<0x9223372036854775807xf32>: empty, yet no array has it
            raise ArtifactError(
                f"line {op.line}, column {op.col}: constant {name} has the type "
                f"{typ.text[:80]}, whose shape {shape_text(shape)} {problem}",
                format=FORMAT,
                path=str(self.path),
                offset=op.offset,
            )
        loader = self._loader(lit, typ.dtype, count, name, typ.text)
        ref = TensorRef(
            name=name,
            dtype=typ.dtype,
            shape=shape,
            nbytes=lit.end - lit.start,
            encoding=f"dense_{lit.kind}",
            loader=loader,
            offset=lit.start,
            info={"line": op.line, "op": op.name, "type": typ.text},
        )
        return self.catalog.add(ref)

    def _loader(self, lit: DenseLit, dtype: str, count: int, name: str, tname: str) -> TensorLoader:
        src = self.source
        if lit.kind == "list":
            key = (FORMAT, self.identity.fingerprint, lit.start)
            return DecodedLoader(list_decoder(src, lit.start, lit.end, dtype, count, name), key)
        if lit.kind == "splat":
            if lit.end - lit.start > 256:
                return UnavailableLoader(f"the splat value of constant {name!r} is not a number")
            text = bytes(src.view(lit.start, lit.end - lit.start))
            return SplatLoader(lambda: parse_scalar(text, dtype, name), dtype, name, src.label)
        if lit.kind == "resource":
            span = self.module.resources.get(lit.resource)
            if span is None:
                why = (
                    "its data was elided when the module was printed"
                    if lit.resource == "__elided__"
                    else f"the blob {lit.resource!r} is not in the file's dialect_resources section"
                )
                return UnavailableLoader(f"constant {name!r} cannot be read: {why}")
            # A resource blob starts with a 4-byte alignment word (8 hex digits).
            if not (span[1] - span[0] >= 10 and bytes(src.view(span[0], 2)) in (b"0x", b"0X")):
                return UnavailableLoader(
                    f"the resource blob of constant {name!r} is not a hex string"
                )
            return self._hex_loader(span[0] + 10, span[1], dtype, count, name, tname)
        if lit.kind == "hex":
            return self._hex_loader(lit.start, lit.end, dtype, count, name, tname)
        return UnavailableLoader(
            f"constant {name!r} holds {lit.kind} data, which NNEditor does not decode"
        )

    def _hex_loader(
        self, start: int, end: int, dtype: str, count: int, name: str, tname: str
    ) -> TensorLoader:
        ndigits = end - start
        if ndigits % 2:
            return UnavailableLoader(
                f"the hex literal of constant {name!r} has an odd number of digits"
            )
        nbytes = ndigits // 2
        item = storage_itemsize(dtype)
        if nbytes == count * item:
            return HexLoader(self.source, start, dtype, name)
        if dtype == "bool" and nbytes == (count + 7) // 8:
            return HexLoader(self.source, start, dtype, name, bit_packed=True)
        if nbytes == item:
            src = self.source
            return SplatLoader(
                lambda: from_storage(unhex(src, start, ndigits, name), dtype, name),
                dtype,
                name,
                src.label,
            )
        return UnavailableLoader(
            f"the hex literal of constant {name!r} holds {nbytes} bytes but {tname} needs "
            f"{count * item} bytes; the file is corrupt"
        )

    def _inline(self, ref: TensorRef) -> Any:
        label = f"tensor {ref.name!r} ({ref.dtype}{list(ref.shape)})"
        if ref.size > _INLINE_ELEMENTS or ref.nbytes > 4096:
            return label
        try:
            value = ref.read()
        except ArtifactError as exc:
            return f"{label}: {exc.detail}"
        return value.tolist() if value.ndim else value.item()


def _pick_main(funcs: list[Func]) -> Func | None:
    for f in funcs:
        if f.name == "main":
            return f
    for f in funcs:
        if f.visibility == "public" and f.body is not None:
            return f
    return funcs[0] if funcs else None


def _terminator(region: Region | None) -> Op | None:
    if region is None or not region.blocks or not region.blocks[-1].ops:
        return None
    last = region.blocks[-1].ops[-1]
    return last if last.name in RETURN_OPS else None


def _value_info(name: str, t: TypeRef | None) -> ValueInfo:
    if t is None:
        return ValueInfo(name)
    doc = "" if t.dtype is not None and t.shape is not None else t.text
    return ValueInfo(name, t.dtype, t.shape, doc)


def _version(attrs: dict[str, Any]) -> str:
    for key, value in attrs.items():
        if "version" in key and key.split(".", 1)[0] in ("stablehlo", "mhlo", "vhlo"):
            return str(value)
    return ""


def _plain(value: Any, lexer: Lexer) -> Any:
    """Attribute value -> JSON-friendly Python (DenseLit and function types become text)."""
    if isinstance(value, DenseLit):
        if value.kind == "resource":
            return f"dense_resource<{value.resource}>"
        size = value.end - value.start
        if size <= 256:
            body = lexer.squeezed(value.start, value.end)
            body = f'"0x{body}"' if value.kind == "hex" else body
            suffix = f" : {value.type.text}" if value.type is not None else ""
            return f"dense<{body}>{suffix}"
        return f"dense<… {size} bytes>"
    if isinstance(value, FuncType):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v, lexer) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, lexer) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
