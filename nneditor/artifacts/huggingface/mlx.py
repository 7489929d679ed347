"""mlx-community snapshots: weights quantized by MLX (``config.json`` "quantization":
{"group_size", "bits", "mode": "affine"}, per-module overrides by module path).

Each quantized ``X.weight`` (packed uint32 words) with its ``X.scales`` and ``X.biases`` is
listed as the logical float32 matrix it stands for, decoded on read
(:mod:`nneditor.tensors.mlx_affine`); the scales and biases stay listed as stored. Other MLX
modes (mxfp4, nvfp4: scales only) stay packed, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.artifacts.huggingface.decoded import decoded_matrix
from nneditor.model.tensor import TensorRef
from nneditor.tensors.mlx_affine import BITS, MLXAffineLoader

INFO = "mlx_quantization"


def mlx_weights(
    refs: list[TensorRef], quant: Mapping[str, Any]
) -> tuple[list[TensorRef], list[str]]:
    """``refs`` with each affine-quantized weight as its logical matrix, and notes."""
    mode = str(quant.get("mode") or "affine")
    if mode != "affine":
        return refs, [
            f"the weights are MLX {mode}-quantized; NNEditor lists their packed words as stored "
            "and does not decode them"
        ]
    by_name = {r.name: r for r in refs}
    out: list[TensorRef] = []
    notes: list[str] = []
    for ref in refs:
        base = ref.name.removesuffix(".weight")
        scales, biases = by_name.get(base + ".scales"), by_name.get(base + ".biases")
        if base == ref.name or scales is None or biases is None:
            out.append(ref)
            continue
        own = quant.get(base)
        params = own if isinstance(own, Mapping) else quant
        try:
            bits, group = int(params["bits"]), int(params["group_size"])
        except (KeyError, TypeError, ValueError):
            notes.append(f"{ref.name}: the MLX quantization gives no bits and group_size")
            out.append(ref)
            continue
        made = _affine_ref(ref.name, ref, scales, biases, bits, group)
        if isinstance(made, str):
            notes.append(made)
            out.append(ref)
        else:
            out.append(made)
    return out, notes


def _affine_ref(
    name: str, weight: TensorRef, scales: TensorRef, biases: TensorRef, bits: int, group: int
) -> TensorRef | str:
    """The logical float32 [out, in] tensor of an MLX-quantized weight, or why not."""
    if bits not in BITS:
        return f"{name}: MLX {bits}-bit quantization is not one NNEditor decodes ({BITS})"
    if weight.dtype != "uint32" or len(weight.shape) != 2 or len(scales.shape) != 2:
        return f"{name}: not an MLX packed weight (uint32 [out, words]) with 2-D scales"
    rows, words = weight.shape
    cols = words * 32 // bits
    if scales.shape != (rows, cols // group) or biases.shape != scales.shape or cols % group:
        return (
            f"{name}: {rows} x {cols} values in groups of {group} do not match scales "
            f"{list(scales.shape)} and biases {list(biases.shape)}"
        )
    return decoded_matrix(
        weight,
        (rows, cols),
        f"MLX affine {bits}-bit, groups of {group} (scales and biases beside it)",
        MLXAffineLoader(weight, scales, biases, bits, group),
        [scales.name, biases.name],
        {INFO: {"bits": bits, "group_size": group, "packed": list(weight.shape)}},
    )
