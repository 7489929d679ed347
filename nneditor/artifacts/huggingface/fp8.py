"""Snapshots whose weights are float8 with scales: each ``X.weight`` in float8 with its scale
tensor is listed as the float32 matrix it stands for (:mod:`nneditor.tensors.block_scaled`);
the scales stay listed. Two ways of writing them:

- ``"quant_method": "fp8"`` (the official FP8 releases of Qwen3 and DeepSeek):
  ``X.weight_scale_inv``, one scale per ``weight_block_size`` block;
- ``"quant_method": "compressed-tensors"`` with ``"format": "float-quantized"`` and 8-bit
  float weights (llm-compressor's FP8 models): ``X.weight_scale``, one scale per output
  channel, for the whole tensor, or per ``block_structure`` block.

Activations are not quantized here: those checkpoints' runtimes quantize them on the fly
(static activation scales, ``X.input_scale``, stay listed and make the decoder refuse).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nneditor.artifacts.huggingface.decoded import decoded_matrix
from nneditor.model.tensor import TensorRef
from nneditor.tensors.block_scaled import BlockScaledLoader

INFO = "fp8_block_scaled"
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")
Blocks = Callable[[int, int], tuple[int, int]]


def scheme(qconfig: Any) -> tuple[str, Blocks] | str | None:
    """(scale suffix, block size per [rows, cols]) of an FP8 quantization_config, why it is
    not decoded, or None when the config is not FP8 at all."""
    if not isinstance(qconfig, Mapping):
        return None
    if qconfig.get("quant_method") == "fp8":
        block = qconfig.get("weight_block_size")
        if isinstance(block, (list, tuple)) and len(block) == 2 and all(int(v) > 0 for v in block):
            br, bc = int(block[0]), int(block[1])
            return ".weight_scale_inv", lambda _r, _c: (br, bc)
        return "FP8 weights without a weight_block_size are listed as stored, not decoded"
    if qconfig.get("quant_method") != "compressed-tensors":
        return None
    if qconfig.get("format") != "float-quantized":
        return None
    groups = [g for g in (qconfig.get("config_groups") or {}).values() if isinstance(g, Mapping)]
    weights = [g.get("weights") or {} for g in groups]
    kinds = {(w.get("type"), w.get("num_bits"), w.get("strategy")) for w in weights}
    if len(kinds) != 1 or next(iter(kinds))[:2] != ("float", 8):
        return f"compressed-tensors weights {sorted(map(str, kinds))} are listed as stored"
    strategy = next(iter(kinds))[2]
    if strategy == "channel":
        return ".weight_scale", lambda _r, c: (1, c)
    if strategy == "tensor":
        return ".weight_scale", lambda r, c: (r, c)
    block = weights[0].get("block_structure")
    if strategy == "block" and isinstance(block, (list, tuple)) and len(block) == 2:
        br, bc = int(block[0]), int(block[1])
        return ".weight_scale", lambda _r, _c: (br, bc)
    return f"compressed-tensors FP8 with strategy {strategy!r} is listed as stored"


def fp8_weights(
    refs: list[TensorRef], qconfig: Mapping[str, Any]
) -> tuple[list[TensorRef], list[str]]:
    """``refs`` with each scaled float8 weight as its logical matrix, and notes."""
    how = scheme(qconfig)
    if how is None:
        return refs, []
    if isinstance(how, str):
        return refs, [how]
    suffix, blocks = how
    by_name = {r.name: r for r in refs}
    out: list[TensorRef] = []
    notes: list[str] = []
    for ref in refs:
        scale = by_name.get(ref.name.removesuffix(".weight") + suffix)
        if not ref.name.endswith(".weight") or scale is None:
            out.append(ref)
            continue
        rows, cols = ref.shape if len(ref.shape) == 2 else (0, 0)
        br, bc = blocks(rows, cols) if rows and cols else (1, 1)
        grid = (-(-rows // br), -(-cols // bc))
        fits = tuple(scale.shape) == grid or (grid == (1, 1) and tuple(scale.shape) == (1,))
        if ref.dtype not in _FLOAT8 or len(ref.shape) != 2 or not fits:
            notes.append(
                f"{ref.name}: {ref.dtype} {list(ref.shape)} with scales {list(scale.shape)} is "
                f"not float8 in {br} x {bc} blocks; listed as stored"
            )
            out.append(ref)
            continue
        out.append(
            decoded_matrix(
                ref,
                (rows, cols),
                f"{ref.dtype} x scale per {br} x {bc} block ({scale.name} beside it)",
                BlockScaledLoader(ref, scale, (br, bc)),
                [scale.name],
                {INFO: {"block": [br, bc], "stored": ref.dtype}},
            )
        )
    return out, notes
