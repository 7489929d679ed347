"""CLIP's and SigLIP's vision towers (CLIPVisionModel, CLIPVisionModelWithProjection,
SiglipVisionModel), which llama.cpp converts only as multimodal projectors: their names as
the decoder's vision transformer reads them (``vision_model.`` dropped, as transformers 4
stored them).

Beside ViT's keys: CLIP's ``pre_layrnorm`` as ``token_embd_norm`` (a LayerNorm between the
embeddings and the blocks, as BERT's), the bias-free ``visual_projection`` as ``image_proj``;
SigLIP's attention-pooling head (``head.*``) as ``pool_*``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nneditor.semantic.names_unconverted import layered_names

#: model_type -> the tower (decoder/vit.py's Vision.tower)
VISION_TOWERS = {"clip_vision_model": "clip", "siglip_vision_model": "siglip"}
#: a tower as sentences name it
TOWER_NAMES = {"clip": "CLIP", "siglip": "SigLIP"}
#: a CLIP layer's parts (the text tower's and the vision tower's alike)
CLIP_LAYER_PARTS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.out_proj": "attn_output",
    "layer_norm1": "attn_norm",
    "layer_norm2": "ffn_norm",
    "mlp.fc1": "ffn_up",
    "mlp.fc2": "ffn_down",
}
CLIP_LAYER = re.compile(r"^encoder\.layers\.(\d+)\.(.+)\.(weight|bias)$")
_TOP = {
    "embeddings.class_embedding": "cls_token.weight",
    "embeddings.patch_embedding.weight": "patch_embd.weight",
    "embeddings.patch_embedding.bias": "patch_embd.bias",
    "embeddings.position_embedding.weight": "patch_pos.weight",
    "pre_layrnorm.weight": "token_embd_norm.weight",
    "pre_layrnorm.bias": "token_embd_norm.bias",
    "post_layernorm.weight": "output_norm.weight",
    "post_layernorm.bias": "output_norm.bias",
    "visual_projection.weight": "image_proj.weight",
    # SigLIP's multihead attention pooling (torch.nn.MultiheadAttention's packed q/k/v)
    "head.probe": "pool_probe.weight",
    "head.attention.in_proj_weight": "pool_attn_qkv.weight",
    "head.attention.in_proj_bias": "pool_attn_qkv.bias",
    "head.attention.out_proj.weight": "pool_attn_output.weight",
    "head.attention.out_proj.bias": "pool_attn_output.bias",
    "head.layernorm.weight": "pool_norm.weight",
    "head.layernorm.bias": "pool_norm.bias",
    "head.mlp.fc1.weight": "pool_ffn_up.weight",
    "head.mlp.fc1.bias": "pool_ffn_up.bias",
    "head.mlp.fc2.weight": "pool_ffn_down.weight",
    "head.mlp.fc2.bias": "pool_ffn_down.bias",
}
#: the keys of the tower's output side (tensor_check's top-level keys)
TOWER_KEYS = frozenset(v for k, v in _TOP.items() if k.startswith(("visual", "head.")))
_PATCHES = "embeddings.patch_embedding.weight"


def is_clip_vision(names: Iterable[str]) -> bool:
    """Whether a vision transformer's names are CLIP's or SigLIP's (ViT's patch embedding is
    embeddings.patch_embeddings.projection)."""
    return any(n.removeprefix("vision_model.") == _PATCHES for n in names)


def clip_vision_names(names: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    return layered_names(  # (position_ids: a buffer transformers 4 kept)
        names,
        lambda n: n.removeprefix("vision_model."),
        CLIP_LAYER,
        CLIP_LAYER_PARTS,
        _TOP,
        ("position_ids",),
    )
