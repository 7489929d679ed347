"""Which initializers are weights, along which axes, and how to stream them in bounded blocks.

Invariants:

- A *weight use* is a stored tensor of the main graph (an initializer, or the tensor of a
  ``Constant`` node, as PaddlePaddle and some other exporters write weights) read as the
  weight input (index 1) of a default-domain ``MatMul``, ``Gemm`` or ``Conv``. Its axes come
  from the consuming op:

  ============  ===================  ============================  ==========================
  op            weight layout        output-channel axis           reduction (input) axis
  ============  ===================  ============================  ==========================
  Conv          [M, C/group, k...]   0                             1
  Gemm transB=1 [N, K]               0                             1
  Gemm transB=0 [K, N]               1                             0
  MatMul        [..., K, N]          rank - 1                      rank - 2
  ============  ===================  ============================  ==========================

- :func:`iter_blocks` covers a tensor with blocks of whole leading-axis rows, or, when one row
  is larger than the budget, with ranges of axis 1 inside ``row_multiple`` rows. A block never
  holds more than ``max(max_elems, row_multiple * col_multiple * prod(shape[2:]))``
  elements, so memory stays bounded whatever the tensor size; the multiples keep N:M groups
  inside one block.
- Nothing here reads tensor values except :func:`read_block`, which reads one block and then
  releases its memory-mapped rows (``ByteSource.release``): the resident set stays bounded
  too, not only the allocations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from nneditor.errors import NNEditorError
from nneditor.model.document import Document
from nneditor.model.graph import Graph, Node
from nneditor.model.tensor import TensorRef
from nneditor.tensors.dtypes import numpy_dtype
from nneditor.tensors.loaders import RawLoader

WEIGHT_OPS = ("MatMul", "Gemm", "Conv")
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
BLOCK_ELEMS = 1 << 21  # 2 Mi elements per block: 8 MiB as float32


class OptimizeError(NNEditorError, ValueError):
    """A quantization or pruning request does not fit the model (bad name, axis, setting)."""


@dataclass(frozen=True, slots=True)
class WeightUse:
    """One node reading an initializer as its weight."""

    tensor: str
    node_index: int
    node_name: str
    op_type: str
    input_index: int
    output_axis: int
    reduction_axis: int
    #: the value the node reads: ``tensor`` itself, or an Identity alias of it
    value: str = ""


@dataclass
class WeightInfo:
    """A stored weight with all of its weight uses and its other readers.

    ``constant_node`` is the index of the main-graph ``Constant`` node holding it, or None
    for an initializer.
    """

    name: str
    ref: TensorRef
    uses: list[WeightUse] = field(default_factory=list)
    other_readers: list[str] = field(default_factory=list)  # node names reading it otherwise
    constant_node: int | None = None
    #: Identity nodes that only pass this weight on to weight uses (PyTorch's exporter feeds
    #: each call of a shared module through one); they go away when the weight is replaced
    aliases: list[int] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.ref.shape

    def axis(self, kind: str) -> int | None:
        """The agreed ``"output"`` or ``"reduction"`` axis of all uses, or None if they differ."""
        axes = {u.output_axis if kind == "output" else u.reduction_axis for u in self.uses}
        return axes.pop() if len(axes) == 1 else None


def is_default_domain(node: Node) -> bool:
    return node.domain in ("", "ai.onnx")


def weight_axes(op_type: str, attrs: dict[str, object], rank: int) -> tuple[int, int] | None:
    """(output axis, reduction axis) of a weight of ``rank`` read by ``op_type``; None if n/a."""
    if rank < 2:
        return None
    if op_type == "Conv":
        return 0, 1
    if op_type == "Gemm":
        trans_b = int(attrs.get("transB", 0) or 0)  # type: ignore[call-overload]
        return (0, 1) if trans_b else (1, 0)
    if op_type == "MatMul":
        return rank - 1, rank - 2
    return None


def require_graph(doc: Document) -> Graph:
    if doc.graph is None:
        reason = doc.graph_unavailable_reason or "the artifact has no graph"
        raise OptimizeError(
            f"{doc.path.name} has no computation graph ({reason}); quantization and pruning "
            "need an ONNX graph to know which tensors are weights"
        )
    return doc.graph


def stored_values(doc: Document) -> dict[str, int | None]:
    """Main-graph values whose data is stored in the artifact: initializer names -> None,
    outputs of default-domain ``Constant`` nodes (tensor ``value``) -> the node's index."""
    graph = require_graph(doc)
    out: dict[str, int | None] = {}
    for node in graph.nodes:
        if node.op_type != "Constant" or not is_default_domain(node) or len(node.outputs) != 1:
            continue
        ref = doc.tensors.get(node.outputs[0])
        if (
            ref is not None
            and ref.info.get("kind") == "constant"
            and ref.info.get("graph", graph.name) == graph.name
        ):
            out[node.outputs[0]] = node.index
    for name in graph.initializers:
        if name in doc.tensors:
            out[name] = None
    return out


def find_weights(doc: Document) -> dict[str, WeightInfo]:
    """Stored main-graph tensors (initializers, or Constant nodes) read as MatMul/Gemm/Conv
    weights, in the order of their first use."""
    graph = require_graph(doc)
    stored = stored_values(doc)
    aliases = _weight_aliases(graph, stored)
    found: dict[str, WeightInfo] = {}
    for node in graph.nodes:
        if node.op_type not in WEIGHT_OPS or not is_default_domain(node) or len(node.inputs) < 2:
            continue
        value = node.inputs[1]
        name, chain = aliases.get(value, (value, ()))
        if name not in stored:
            continue
        ref = doc.tensors[name]
        axes = weight_axes(node.op_type, node.attributes, len(ref.shape))
        if axes is None:
            continue
        info = found.setdefault(name, WeightInfo(name, ref, constant_node=stored[name]))
        info.uses.append(
            WeightUse(name, node.index, node.name, node.op_type, 1, axes[0], axes[1], value)
        )
        info.aliases.extend(i for i in chain if i not in info.aliases)
    for node, owner in graph.walk():
        for i, value in enumerate(node.inputs):
            found_info = found.get(value)
            if found_info is None:
                continue
            main = owner is graph
            if main and node.index in found_info.aliases:
                continue
            if not main or not any(
                u.node_index == node.index and u.input_index == i for u in found_info.uses
            ):
                found_info.other_readers.append(node.name or f"#{node.index}")
    return found


def _weight_aliases(
    graph: Graph, stored: dict[str, int | None]
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Values that are Identity copies of a stored tensor read only as MatMul/Gemm/Conv weights
    (or by further such copies): value -> (stored name, the Identity nodes on the way)."""
    readers: dict[str, list[tuple[Node, int]]] = {}
    for node, _owner in graph.walk():
        for k, v in enumerate(node.inputs):
            if v:
                readers.setdefault(v, []).append((node, k))
    outputs = {vi.name for vi in graph.outputs}
    producer = {o: node for node in graph.nodes for o in node.outputs if o}

    def only_weight_reads(value: str, depth: int) -> bool:
        if value in outputs or depth > 8:
            return False
        for node, k in readers.get(value, ()):
            if node.op_type == "Identity" and is_default_domain(node) and len(node.outputs) == 1:
                if node.index >= len(graph.nodes) or graph.nodes[node.index] is not node:
                    return False  # inside a subgraph
                if not only_weight_reads(node.outputs[0], depth + 1):
                    return False
            elif not (node.op_type in WEIGHT_OPS and is_default_domain(node) and k == 1):
                return False
        return True

    found: dict[str, tuple[str, tuple[int, ...]]] = {}
    for node in graph.nodes:
        if node.op_type != "Identity" or not is_default_domain(node) or len(node.outputs) != 1:
            continue
        chain: list[int] = [node.index]
        root = node.inputs[0] if node.inputs else ""
        while root in producer and producer[root].op_type == "Identity" and len(chain) <= 8:
            chain.append(producer[root].index)
            root = producer[root].inputs[0] if producer[root].inputs else ""
        if root in stored and only_weight_reads(node.outputs[0], 0):
            found[node.outputs[0]] = (root, tuple(reversed(chain)))
    return found


def all_value_names(graph: Graph) -> set[str]:
    """Every value, initializer and node name in the graph (and subgraphs), for new names."""
    names: set[str] = set(graph.initializers)
    names.update(vi.name for vi in graph.inputs)
    names.update(vi.name for vi in graph.outputs)
    names.update(graph.value_info)
    for node, _g in graph.walk():
        names.update(node.inputs)
        names.update(node.outputs)
        names.add(node.name)
    return names


class NameAllocator:
    """Hands out names not yet used in the graph (``base``, then ``base_1``, ``base_2``...)."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)

    def new(self, base: str) -> str:
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


# -- bounded block iteration --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """Rows ``r0:r1`` of axis 0 and ``j0:j1`` of axis 1 (all of axis 1 for row blocks)."""

    r0: int
    r1: int
    j0: int
    j1: int

    def key(self) -> tuple[slice, ...]:
        return (slice(self.r0, self.r1), slice(self.j0, self.j1))

    def channel_slice(self, axis: int) -> slice:
        """Which channels along ``axis`` this block covers."""
        if axis == 0:
            return slice(self.r0, self.r1)
        if axis == 1:
            return slice(self.j0, self.j1)
        return slice(None)


def iter_blocks(
    shape: tuple[int, ...],
    max_elems: int = BLOCK_ELEMS,
    row_multiple: int = 1,
    col_multiple: int = 1,
) -> Iterator[Block]:
    """Cover a tensor of rank >= 2 with :class:`Block` s (see module docstring).

    Row blocks hold a multiple of ``row_multiple`` rows; when rows are split, axis-1 ranges
    hold a multiple of ``col_multiple`` entries (so N:M groups never straddle blocks, given
    that the dimension is itself a multiple).
    """
    rows, cols = shape[0], shape[1]
    inner = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 1
    row_elems = cols * inner
    if rows == 0 or row_elems == 0:
        return
    if row_elems * row_multiple <= max_elems:
        per = max(1, max_elems // row_elems) // row_multiple * row_multiple
        for r in range(0, rows, per):
            yield Block(r, min(rows, r + per), 0, cols)
        return
    per_j = max(1, max_elems // max(1, inner * row_multiple))
    per_j = max(col_multiple, per_j // col_multiple * col_multiple)
    for r in range(0, rows, row_multiple):
        for j in range(0, cols, per_j):
            yield Block(r, min(rows, r + row_multiple), j, min(cols, j + per_j))


def read_block(ref: TensorRef, block: Block, as_float32: bool = True) -> np.ndarray:
    """One block of ``ref`` (a fresh array), as float32 unless ``as_float32`` is False
    (bfloat16/float16 widen exactly). Memory-mapped rows that are fully read are released
    from the resident set, so streaming a 1 GiB model does not leave 1 GiB mapped."""
    values = ref.read(block.key())
    _release(ref, block)
    return np.asarray(values, dtype=np.float32) if as_float32 else values


def _release(ref: TensorRef, block: Block) -> None:
    loader = ref.loader
    if not isinstance(loader, RawLoader) or block.j1 != ref.shape[1]:
        return
    row_bytes = int(np.prod(ref.shape[1:], dtype=np.int64)) * numpy_dtype(loader.dtype).itemsize
    loader.source.release(loader.offset + block.r0 * row_bytes, (block.r1 - block.r0) * row_bytes)


def reduce_except(arr: np.ndarray, axis: int, fn: str) -> np.ndarray:
    """``min``/``max`` over every axis but ``axis`` (1-D result of length arr.shape[axis])."""
    others = tuple(i for i in range(arr.ndim) if i != axis)
    return np.asarray(getattr(arr, fn)(axis=others))


def channel_shape(ndim: int, axis: int) -> tuple[int, ...]:
    """Broadcast shape that puts a per-channel vector on ``axis``."""
    return tuple(-1 if i == axis else 1 for i in range(ndim))
