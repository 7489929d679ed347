"""Logical pruning (threshold, explicit mask, exact N:M): previews and same-shape plans.

Invariants:

- Logical pruning only writes zeros into weights; shapes, dtypes and the stored size stay
  the same, so a preview never claims a smaller or faster model (``claims``). Structural
  pruning, which does change shapes, is :mod:`nneditor.optimize.channel_prune`.
- Candidates are the stored MatMul/Gemm/Conv weights (as for quantization); those held by
  Constant nodes are planned in ``replace_constants``.
- Threshold: weights with ``|w| < threshold`` become 0. Mask: a ``.npy`` per tensor (read
  with ``allow_pickle=False`` through a memory map after its header, shape and size were
  checked); non-zero entries keep, zero entries prune. N:M: along the reduction axis of the
  consuming op (K for MatMul ``[K, N]``, input channels for Conv, Gemm by transB), every group
  of M consecutive weights keeps exactly the N of largest magnitude (ties: lower index).
- Previews stream blocks (bounded memory); N:M blocks are aligned to whole groups.
- Cancelled previews return the tensors finished so far with ``partial=True``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.jobs import JobHandle
from nneditor.model.document import Document
from nneditor.optimize.channel_prune import (
    ChannelPrunePreview,
    channel_prune_plan,
    preview_channel_pruning,
    prove_terminal,
    weakest_channels,
)
from nneditor.optimize.masks import load_mask
from nneditor.optimize.plans import EditPlan, NewInitializer
from nneditor.optimize.weights import (
    BLOCK_ELEMS,
    FLOAT_DTYPES,
    Block,
    OptimizeError,
    WeightInfo,
    find_weights,
    iter_blocks,
    read_block,
    require_graph,
)
from nneditor.tensors.dtypes import numpy_dtype

MIN_ELEMENTS = 1024

KeepFn = Callable[[np.ndarray, Block], np.ndarray]


# -- masks on plain arrays ---------------------------------------------------------------


def threshold_keep(values: np.ndarray, threshold: float) -> np.ndarray:
    """True where ``|w| >= threshold`` (kept)."""
    return np.abs(values) >= threshold


def nm_keep(values: np.ndarray, n: int, m: int, axis: int) -> np.ndarray:
    """Exact N:M keep-mask: in each run of ``m`` along ``axis``, the ``n`` largest |w|."""
    _check_nm(n, m)
    axis = axis % values.ndim
    if values.shape[axis] % m:
        raise OptimizeError(
            f"axis {axis} has {values.shape[axis]} entries, not a multiple of M={m}; "
            "exact N:M needs whole groups"
        )
    moved = np.moveaxis(np.abs(values), axis, -1)
    groups = moved.reshape(*moved.shape[:-1], moved.shape[-1] // m, m)
    order = np.argsort(-groups, axis=-1, kind="stable")
    keep = np.zeros(groups.shape, dtype=bool)
    np.put_along_axis(keep, order[..., :n], True, axis=-1)
    return np.moveaxis(keep.reshape(moved.shape), -1, axis)


def _check_nm(n: int, m: int) -> None:
    if not (isinstance(n, int) and isinstance(m, int) and 0 < n < m):
        raise OptimizeError(f"N:M pruning needs integers 0 < N < M, got {n}:{m}")


# -- methods ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Threshold:
    threshold: float

    def describe(self) -> str:
        return f"magnitude threshold {self.threshold:g}"


@dataclass(frozen=True)
class NM:
    n: int
    m: int

    def describe(self) -> str:
        return f"exact {self.n}:{self.m} along the reduction axis"


@dataclass(frozen=True)
class Masks:
    masks: Mapping[str, str | Path | np.ndarray]

    def describe(self) -> str:
        return f"explicit masks for {len(self.masks)} tensors"


Method = Threshold | NM | Masks


@dataclass
class PruneTarget:
    info: WeightInfo
    keep: KeepFn
    row_multiple: int = 1
    col_multiple: int = 1
    axis: int | None = None


def _targets(
    doc: Document,
    method: Method,
    tensor_names: Sequence[str] | None,
    min_elements: int,
) -> tuple[list[PruneTarget], list[dict[str, str]]]:
    require_graph(doc)
    weights = find_weights(doc)
    if isinstance(method, Masks) and tensor_names is None:
        tensor_names = list(method.masks)
    if isinstance(method, Threshold) and not (
        math.isfinite(method.threshold) and method.threshold >= 0
    ):
        raise OptimizeError(f"the threshold must be a finite number >= 0, got {method.threshold}")
    if isinstance(method, NM):
        _check_nm(method.n, method.m)
    explicit = tensor_names is not None
    if tensor_names is not None:
        for name in tensor_names:
            if name not in weights:
                raise OptimizeError(
                    f"tensor {name!r} is not a stored MatMul, Gemm or Conv weight of this "
                    f"graph ({len(weights)} are); pruning applies to weights only"
                )
        chosen = [weights[n] for n in dict.fromkeys(tensor_names)]
    else:
        chosen = list(weights.values())
    targets, skipped = [], []
    for info in chosen:
        if info.ref.dtype not in FLOAT_DTYPES:
            skipped.append({"name": info.name, "reason": f"dtype {info.ref.dtype} is not pruned"})
            continue
        if not explicit and info.ref.size < min_elements:
            skipped.append({"name": info.name, "reason": f"tiny tensor ({info.ref.size} elements)"})
            continue
        target = _make_target(info, method, explicit)
        if isinstance(target, str):
            skipped.append({"name": info.name, "reason": target})
        else:
            targets.append(target)
    return targets, skipped


def _make_target(info: WeightInfo, method: Method, explicit: bool) -> PruneTarget | str:
    if isinstance(method, Threshold):
        t = method.threshold
        return PruneTarget(info, lambda x, _b: threshold_keep(x, t))
    if isinstance(method, Masks):
        mask = method.masks[info.name]
        arr = mask if isinstance(mask, np.ndarray) else load_mask(Path(mask), info.shape, info.name)
        if isinstance(mask, np.ndarray) and tuple(arr.shape) != info.shape:
            raise OptimizeError(
                f"the mask for {info.name!r} has shape {list(arr.shape)} but the tensor has "
                f"shape {list(info.shape)}"
            )
        return PruneTarget(info, lambda _x, b: np.asarray(arr[b.key()]) != 0)
    axis = info.axis("reduction")
    if axis is None:
        return "its consumers disagree on the reduction axis"
    n, m = method.n, method.m
    if info.shape[axis] % m:
        reason = (
            f"its reduction axis {axis} has {info.shape[axis]} entries, not a multiple of M={m}"
        )
        if explicit:
            raise OptimizeError(f"cannot prune {info.name!r} {n}:{m}: {reason}")
        return reason
    return PruneTarget(
        info,
        lambda x, _b: nm_keep(x, n, m, axis),
        row_multiple=m if axis == 0 else 1,
        col_multiple=m if axis == 1 else 1,
        axis=axis,
    )


# -- preview ---------------------------------------------------------------------------------


@dataclass
class TensorPrunePreview:
    name: str
    shape: tuple[int, ...]
    dtype: str
    axis: int | None
    count: int
    zeros_before: int
    zeros_after: int
    pruned: int
    removed_l2: float
    total_l2: float
    max_abs_removed: float
    nbytes: int

    @property
    def sparsity_before(self) -> float:
        return self.zeros_before / self.count if self.count else 0.0

    @property
    def sparsity_after(self) -> float:
        return self.zeros_after / self.count if self.count else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "nm_axis": self.axis,
            "count": self.count,
            "pruned": self.pruned,
            "zeros_before": self.zeros_before,
            "zeros_after": self.zeros_after,
            "sparsity_before": self.sparsity_before,
            "sparsity_after": self.sparsity_after,
            "removed_l2_fraction": self.removed_l2 / self.total_l2 if self.total_l2 else 0.0,
            "max_abs_removed": self.max_abs_removed,
            "bytes_before": self.nbytes,
            "bytes_after": self.nbytes,
        }


@dataclass
class PrunePreview:
    method: Method
    tensors: list[TensorPrunePreview] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    partial: bool = True

    def totals(self) -> dict[str, Any]:
        count = sum(t.count for t in self.tensors)
        zeros = sum(t.zeros_after for t in self.tensors)
        removed = math.sqrt(sum(t.removed_l2**2 for t in self.tensors))
        total = math.sqrt(sum(t.total_l2**2 for t in self.tensors))
        return {
            "tensors": len(self.tensors),
            "elements": count,
            "pruned": sum(t.pruned for t in self.tensors),
            "sparsity_before": sum(t.zeros_before for t in self.tensors) / count if count else 0.0,
            "sparsity_after": zeros / count if count else 0.0,
            "removed_l2_fraction": removed / total if total else 0.0,
            "bytes_before": sum(t.nbytes for t in self.tensors),
            "bytes_after": sum(t.nbytes for t in self.tensors),
        }

    def claims(self) -> dict[str, Any]:
        return {
            "logical_sparsity": True,
            "mathematical_conversion": True,
            "storage_reduction": None,
            "runtime_acceleration": "not measured",
            "note": "Pruned weights are stored as dense zeros: shapes and file size stay the "
            "same, and no runtime speed-up is implied or measured.",
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method.describe(),
            "partial": self.partial,
            "tensors": [t.as_dict() for t in self.tensors],
            "skipped": list(self.skipped),
            "totals": self.totals(),
            "claims": self.claims(),
        }


def _blocks(target: PruneTarget, block_elems: int) -> list[Block]:
    return list(
        iter_blocks(target.info.shape, block_elems, target.row_multiple, target.col_multiple)
    )


def _preview_tensor(
    target: PruneTarget, handle: JobHandle, progress: list[int], block_elems: int
) -> TensorPrunePreview:
    ref = target.info.ref
    zb = za = pruned = 0
    removed_sq = total_sq = max_removed = 0.0
    for block in _blocks(target, block_elems):
        handle.check_cancelled()
        x = read_block(ref, block, as_float32=False)
        keep = target.keep(x.astype(np.float32), block)
        x64 = x.astype(np.float64)
        gone = x64[~keep]
        zb += int(x.size - np.count_nonzero(x))
        za += int(x.size - np.count_nonzero(np.where(keep, x64, 0.0)))
        pruned += int(gone.size)
        removed_sq += float(np.dot(gone, gone))
        total_sq += float(np.dot(x64.reshape(-1), x64.reshape(-1)))
        if gone.size:
            max_removed = max(max_removed, float(np.abs(gone).max()))
        progress[0] += x.size
        handle.progress(progress[0], progress[1], f"pruning {target.info.name}")
    return TensorPrunePreview(
        target.info.name,
        ref.shape,
        ref.dtype,
        target.axis,
        ref.size,
        zb,
        za,
        pruned,
        math.sqrt(removed_sq),
        math.sqrt(total_sq),
        max_removed,
        ref.nbytes,
    )


def preview_pruning(
    doc: Document,
    method: Method,
    tensor_names: Sequence[str] | None = None,
    handle: JobHandle | None = None,
    *,
    min_elements: int = MIN_ELEMENTS,
    block_elems: int = BLOCK_ELEMS,
) -> PrunePreview:
    """Sparsity preview per tensor and in total for ``method`` (see module docstring)."""
    handle = handle or JobHandle()
    targets, skipped = _targets(doc, method, tensor_names, min_elements)
    preview = PrunePreview(method, skipped=skipped)
    handle.set_partial(preview)
    progress = [0, sum(t.info.ref.size for t in targets)]
    for target in targets:
        preview.tensors.append(_preview_tensor(target, handle, progress, block_elems))
    preview.partial = False
    handle.progress(progress[1], progress[1], "done")
    return preview


def prune_plan(
    doc: Document,
    method: Method,
    tensor_names: Sequence[str] | None = None,
    *,
    min_elements: int = MIN_ELEMENTS,
    block_elems: int = BLOCK_ELEMS,
) -> EditPlan:
    """Same-name, same-shape replacements holding the pruned values (byte-patch friendly)."""
    targets, skipped = _targets(doc, method, tensor_names, min_elements)
    plan = EditPlan("prune-logical", f"Logical pruning: {method.describe()}")
    plan.notes += [f"{s['name']} is not pruned: {s['reason']}" for s in skipped]
    plan.notes.append("Logical pruning writes zeros; the model keeps its shapes and stored size.")
    for target in targets:
        ref = target.info.ref
        init = NewInitializer(
            ref.name, ref.dtype, ref.shape, _pruned_producer(target, block_elems), "pruned"
        )
        if target.info.constant_node is None:
            plan.replace_initializers.append(init)
        else:
            plan.replace_constants.append(init)
    return plan


def _pruned_producer(target: PruneTarget, block_elems: int) -> Callable[[], np.ndarray]:
    def produce() -> np.ndarray:
        ref = target.info.ref
        out = np.empty(ref.shape, dtype=numpy_dtype(ref.dtype))
        for block in _blocks(target, block_elems):
            x = read_block(ref, block, as_float32=False)
            keep = target.keep(x.astype(np.float32), block)
            out[block.key()] = np.where(keep, x, np.zeros((), dtype=x.dtype))
        return out

    return produce


__all__ = [
    "NM",
    "ChannelPrunePreview",
    "channel_prune_plan",
    "preview_channel_pruning",
    "prove_terminal",
    "weakest_channels",
    "Masks",
    "PrunePreview",
    "Threshold",
    "load_mask",
    "nm_keep",
    "preview_pruning",
    "prune_plan",
    "threshold_keep",
]
