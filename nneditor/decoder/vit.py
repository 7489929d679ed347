"""Vision Transformers (google/vit-base-patch16-224 and its fine-tunes: ViTModel,
ViTForImageClassification; DeiT, whose distillation token follows the class token), which
llama.cpp does not convert.

The image [1, channels, height, width] is cut into patches, each projected by the patch
embedding (a convolution whose stride is its kernel: a matrix over the flattened patch), a
learned class token goes first and the learned position table is added; then pre-norm blocks
(LayerNorm before the attention and before the GELU feed-forward), the final LayerNorm, and a
classifier over the class token. The values are the pixel values as given: resizing and
normalising an image (preprocessor_config.json) happen before. DINOv2's differences (layer
scale, positions interpolated to any image size, its head) are decoder/dinov2.py's, BEiT's
(relative-position bias, layer scale, mean-pooled patches) decoder/beit.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from nneditor.decoder import beit, clip_vision, dinov2
from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.vision import PIXELS_NOTE, Vision, encoder_fields, image_and_patch

ARCH = "vit"
F32 = np.float32
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    if config.get("model_type") in clip_vision.TOWERS:
        return clip_vision.from_hf(config, common)
    if config.get("model_type") in beit.MODEL_TYPES:
        return beit.from_hf(config, common)
    act = str(config.get("hidden_act") or "gelu")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"ViT activation {act!r} is not implemented")
    size, patch = image_and_patch(config, "ViT")
    names = common["names"]
    is_dinov2 = config.get("model_type") == "dinov2"
    classifier = None
    if "cls_out.weight" in names:
        classifier = classifier_head(config, names)
        if is_dinov2:  # the class token beside the patches' mean
            classifier = replace(classifier, pooling="cls_mean")
    swiglu = is_dinov2 and bool(config.get("use_swiglu_ffn"))  # [gate; up] in one matrix
    channels = int(config.get("num_channels") or 3)
    return DecoderConfig(
        **common,
        **encoder_fields(common),
        norm_eps=float(config.get("layer_norm_eps") or (1e-6 if is_dinov2 else 1e-12)),
        activation="silu" if swiglu else _ACTIVATIONS[act],
        fused_gate_up=swiglu,
        classifier=classifier,
        vision=Vision(size, patch, channels, size // patch if is_dinov2 else 0),
        notes=(PIXELS_NOTE,),
    )


def embed(
    w: Any,  # noqa: ANN401 - weights.Weights
    cfg: DecoderConfig,
    pixels: np.ndarray,
    emit: Callable[[str, np.ndarray], None],
) -> np.ndarray:
    """[1 + patches, hidden]: the class token (SigLIP has none), then each patch's
    projection, plus positions."""
    v = cfg.vision
    assert v is not None
    rows, cols = _grid(v, pixels)
    # (a convolution whose stride is its kernel leaves out the pixels past the last patch)
    pixels = pixels[:, :, : rows * v.patch, : cols * v.patch]
    # [1, C, rows, P, cols, P] -> [rows * cols, C * P * P], each patch flattened as the kernel is
    patches = pixels.reshape(v.channels, rows, v.patch, cols, v.patch).transpose(1, 3, 0, 2, 4)
    patches = np.ascontiguousarray(patches.reshape(rows * cols, -1), dtype=F32)
    kernel = w.get("patch_embd.weight").reshape(cfg.hidden, -1)
    x = patches @ kernel.T
    if w.has("patch_embd.bias"):
        x = x + w.get("patch_embd.bias")
    emit("inp_patches", x[None].astype(F32))
    tokens = [w.get("cls_token.weight").reshape(1, cfg.hidden)] if w.has("cls_token.weight") else []
    if w.has("dist_token.weight"):  # DeiT: the distillation token follows the class token
        tokens.append(w.get("dist_token.weight").reshape(1, cfg.hidden))
    x = np.concatenate([*tokens, x]).astype(F32)
    if not w.has("patch_pos.weight"):  # BEiT: positions in the attention's bias only
        emit("inp_embd_pos", x[None])
        return x
    table = w.get("patch_pos.weight").reshape(-1, cfg.hidden)
    if v.grid:  # DINOv2: the stored grid's positions resized to the image's
        table = dinov2.positions(table, v.grid, rows, cols)
    if table.shape[0] != x.shape[0]:
        raise DecoderUnsupported(
            f"the position table has {table.shape[0]} rows for {x.shape[0]} positions (the "
            "class token, where there is one, and the patches); other image sizes are not "
            "interpolated here"
        )
    x = (x + table).astype(F32)
    emit("inp_embd_pos", x[None])
    return x


def _grid(v: Vision, pixels: np.ndarray) -> tuple[int, int]:
    """The image's patch rows and columns (DINOv2: any image of at least one patch)."""
    shape = list(pixels.shape)
    if not v.grid:
        want = [1, v.channels, v.size, v.size]
        if shape != want and v.relative:
            side = v.size // v.patch
            raise DecoderUnsupported(
                f"pixel values must be {want} for this BEiT, given {shape}: its relative-"
                f"position bias tables are stored for a {side}x{side} window of patches, and "
                "resizing them bilinearly for another image, as transformers does, is not "
                "implemented"
            )
        if shape != want:
            raise DecoderUnsupported(f"pixel values must be {want} for this ViT, given {shape}")
        return v.size // v.patch, v.size // v.patch
    if len(shape) != 4 or shape[:2] != [1, v.channels] or min(shape[2:]) < v.patch:
        raise DecoderUnsupported(
            f"pixel values must be [1, {v.channels}, height, width] of at least one "
            f"{v.patch}x{v.patch} patch for this DINOv2, given {shape}"
        )
    return shape[2] // v.patch, shape[3] // v.patch


def distilled_logits(
    w: Any,  # noqa: ANN401 - weights.Weights
    x: np.ndarray,
    emit: Callable[[str, np.ndarray], None],
) -> np.ndarray:
    """DeiT with its teacher's head: the class token's and the distillation token's logits,
    averaged (as DeiTForImageClassificationWithTeacher returns them)."""
    cls = w.linear("cls_out.weight", x[:1], "cls_out.bias" if w.has("cls_out.bias") else None)
    dist = w.linear("dist_out.weight", x[1:2], "dist_out.bias" if w.has("dist_out.bias") else None)
    logits = ((cls + dist) / F32(2)).astype(F32)
    emit("result_output", logits[None])
    return logits[None]
