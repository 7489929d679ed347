"""Snapshots quantized to float8 with block scales (config.json "quantization_config":
{"quant_method": "fp8", "weight_block_size": [128, 128]}, the official FP8 releases of Qwen3
and DeepSeek): each ``X.weight`` in float8 with its ``X.weight_scale_inv`` is listed as the
float32 matrix it stands for (:mod:`nneditor.tensors.block_scaled`); the scales stay listed.
Activations are not quantized here: the checkpoint's runtime quantizes them on the fly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.model.tensor import TensorRef
from nneditor.tensors.block_scaled import BlockScaledLoader

INFO = "fp8_block_scaled"
SCALE = ".weight_scale_inv"
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")


def is_fp8(qconfig: Any) -> bool:
    return isinstance(qconfig, Mapping) and qconfig.get("quant_method") == "fp8"


def fp8_weights(
    refs: list[TensorRef], qconfig: Mapping[str, Any]
) -> tuple[list[TensorRef], list[str]]:
    """``refs`` with each block-scaled float8 weight as its logical matrix, and notes."""
    block = qconfig.get("weight_block_size")
    if not (
        isinstance(block, (list, tuple)) and len(block) == 2 and all(int(v) > 0 for v in block)
    ):
        return refs, ["FP8 weights without a weight_block_size are listed as stored, not decoded"]
    br, bc = int(block[0]), int(block[1])
    by_name = {r.name: r for r in refs}
    out: list[TensorRef] = []
    notes: list[str] = []
    for ref in refs:
        scale = by_name.get(ref.name.removesuffix(".weight") + SCALE)
        if not ref.name.endswith(".weight") or scale is None:
            out.append(ref)
            continue
        rows, cols = (ref.shape + (0, 0))[:2] if len(ref.shape) == 2 else (0, 0)
        want = (-(-rows // br), -(-cols // bc))
        if ref.dtype not in _FLOAT8 or len(ref.shape) != 2 or tuple(scale.shape) != want:
            notes.append(
                f"{ref.name}: {ref.dtype} {list(ref.shape)} with scales {list(scale.shape)} is "
                f"not float8 in {br} x {bc} blocks; listed as stored"
            )
            out.append(ref)
            continue
        out.append(
            TensorRef(
                ref.name,
                "float32",
                (rows, cols),
                ref.nbytes,
                f"{ref.dtype} x scale per {br} x {bc} block ({scale.name} beside it)",
                BlockScaledLoader(ref, scale, (br, bc)),
                offset=ref.offset,
                location=ref.location,
                info={INFO: {"block": [br, bc], "stored": ref.dtype}},
            )
        )
    return out, notes
