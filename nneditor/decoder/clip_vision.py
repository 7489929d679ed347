"""CLIP's and SigLIP's vision towers (openai/clip-vit-*: CLIPVisionModel and
CLIPVisionModelWithProjection; google/siglip-*: SiglipVisionModel), which llama.cpp converts
only as multimodal projectors: ViT's embedding and pre-norm blocks (decoder/vit.py) with their
own ends.

- CLIP: the class token is a vector, the patch convolution has no bias, and a LayerNorm
  (``pre_layrnorm``, read as ``token_embd_norm``) comes before the blocks; QuickGELU. The last
  block's output is the sequence output (last_hidden_state); ``post_layernorm`` normalises the
  class token alone: ``pooler_output``; WithProjection's bias-free ``visual_projection``
  (``image_proj``) gives ``image_embeds``, where the graph ends (else at the pooled output).
- SigLIP: no class token, a patch convolution with a bias, GELU-tanh; ``post_layernorm``
  normalises every position (last_hidden_state), then the multihead-attention pooling head
  (``head.*``, vision_use_head) reads them with one learned query (``head.probe``, through
  torch.nn.MultiheadAttention's packed q/k/v), adds its MLP over a LayerNorm and gives
  ``pooler_output``. Without the head the graph ends at post_layernorm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.vision import PIXELS_NOTE, Vision, encoder_fields, image_and_patch
from nneditor.semantic.names_vision import TOWER_KEYS, TOWER_NAMES, VISION_TOWERS

F32 = np.float32
TOWERS = VISION_TOWERS
_ACTIVATIONS = {"quick_gelu": "quick_gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
Emit = Callable[[str, np.ndarray], None]


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    tower = TOWERS[str(config.get("model_type"))]
    act = str(
        config.get("hidden_act") or ("quick_gelu" if tower == "clip" else "gelu_pytorch_tanh")
    )
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(
            f"{TOWER_NAMES[tower]} vision activation {act!r} is not implemented"
        )
    size, patch = image_and_patch(config, f"{TOWER_NAMES[tower]} tower")
    names = common["names"]
    _refuse_layouts(tower, names)
    ends = _ends(tower, names)
    notes = (
        PIXELS_NOTE,
        f"the trace ends at {ends}"
        + ("; the last block's output is last_hidden_state" if tower == "clip" else ""),
    )
    return DecoderConfig(
        **common,
        **encoder_fields(common),
        norm_eps=float(config.get("layer_norm_eps") or (1e-5 if tower == "clip" else 1e-6)),
        activation=_ACTIVATIONS[act],
        vision=Vision(size, patch, int(config.get("num_channels") or 3), tower=tower, ends=ends),
        notes=notes,
    )


def _refuse_layouts(tower: str, names: Mapping[str, str]) -> None:
    """Tensors transformers' class of this tower does not have, or a head stored in part."""
    head = sorted(k for k in TOWER_KEYS if k.startswith("pool_"))
    foreign = head if tower == "clip" else ["image_proj.weight", "cls_token.weight"]
    odd = [names[k] for k in foreign if k in names]
    if odd:
        raise DecoderUnsupported(
            f"tensor {odd[0]!r} is not part of transformers' {TOWER_NAMES[tower]} vision tower; the "
            "NumPy decoder refuses rather than leave a weight out"
        )
    if tower == "clip" and "cls_token.weight" not in names:
        raise DecoderUnsupported("this CLIP vision tower has no class embedding to pool")
    missing = [k for k in head if k not in names]
    if tower == "siglip" and len(missing) not in (0, len(head)):
        raise DecoderUnsupported(
            f"this SigLIP tower's attention-pooling head lacks {missing[0]}; a head run in part "
            "would give a wrong pooled output"
        )


def _ends(tower: str, names: Mapping[str, str]) -> str:
    """The value the tower ends at, in words."""
    if tower == "clip":
        pooled = "pooler_output (post_layernorm over the class token)"
        return (
            f"image_embeds (visual_projection of its {pooled})"
            if "image_proj.weight" in names
            else pooled
        )
    if "pool_probe.weight" in names:
        return "pooler_output (the attention-pooling head over post_layernorm's positions)"
    return "post_layernorm's output over every position (no pooling head: vision_use_head off)"


def finish(w: Any, cfg: DecoderConfig, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401
    """The tower's end after the last block (``x`` [positions, hidden]): its pooled output or
    image embedding ([1, 1, width]), or SigLIP's normalised positions without a head."""
    assert cfg.vision is not None
    if cfg.vision.tower == "clip":  # post_layernorm over the class token alone
        pooled = _norm(w, cfg, "output_norm", x[:1])
        emit("pooler_output", pooled[None])
        if not w.has("image_proj.weight"):
            return pooled[None]
        embeds = w.linear("image_proj.weight", pooled)
        emit("image_embeds", embeds[None])
        return embeds[None]
    x = _norm(w, cfg, "output_norm", x)
    emit("result_norm", x[None])
    if not w.has("pool_probe.weight"):
        return x[None]
    return _attention_pool(w, cfg, x, emit)[None]


def _norm(w: Any, cfg: DecoderConfig, key: str, x: np.ndarray) -> np.ndarray:  # noqa: ANN401
    return ops.layer_norm(x, w.get(f"{key}.weight"), w.optional(f"{key}.bias"), cfg.norm_eps)


def _attention_pool(w: Any, cfg: DecoderConfig, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401
    """SigLIP's head: one learned query attends over every position (MultiheadAttention),
    then a residual MLP over a LayerNorm; [1, hidden]."""
    d, heads = cfg.hidden, cfg.n_heads
    hd = d // heads
    probe = w.get("pool_probe.weight").reshape(1, d)
    wq, wk, wv = np.split(w.get("pool_attn_qkv.weight"), 3)
    bq, bk, bv = np.split(w.get("pool_attn_qkv.bias"), 3)
    q = (probe @ wq.T + bq).reshape(heads, 1, hd)
    k = (x @ wk.T + bk).reshape(-1, heads, hd).transpose(1, 2, 0)  # [heads, hd, seq]
    v = (x @ wv.T + bv).reshape(-1, heads, hd).transpose(1, 0, 2)  # [heads, seq, hd]
    scores = (q @ k) * F32(1 / math.sqrt(hd))  # [heads, 1, seq]
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    weights = scores / scores.sum(-1, keepdims=True)
    out = (weights @ v).transpose(1, 0, 2).reshape(1, d).astype(F32)
    a = w.linear("pool_attn_output.weight", out, "pool_attn_output.bias")
    emit("pool_attn", a[None])
    h = _norm(w, cfg, "pool_norm", a)
    emit("pool_norm", h[None])
    up = w.linear("pool_ffn_up.weight", h, "pool_ffn_up.bias")
    f = w.linear("pool_ffn_down.weight", ops.ACTIVATIONS[cfg.activation](up), "pool_ffn_down.bias")
    pooled = (a + f).astype(F32)
    emit("pooler_output", pooled[None])
    return pooled
