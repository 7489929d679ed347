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
from collections.abc import Iterable, Mapping
from typing import Any

from nneditor.semantic.names_bert import vit_names
from nneditor.semantic.names_unconverted import layered_names

#: model_type -> the tower (decoder/vit.py's Vision.tower)
VISION_TOWERS = {"clip_vision_model": "clip", "siglip_vision_model": "siglip"}
#: a tower as sentences name it
TOWER_NAMES = {"clip": "CLIP", "siglip": "SigLIP"}
#: model_type -> the class of both towers in one snapshot (decoder/clip_pair.py)
PAIRS = {"clip": "CLIPModel", "siglip": "SiglipModel"}


def is_pair(config: Mapping[str, Any]) -> bool:
    """A CLIPModel or SiglipModel snapshot's config (its two towers' configs inside)."""
    kind = str(config.get("model_type") or "")
    return kind in PAIRS and isinstance(config.get("text_config"), Mapping)


def pair_extras(kind: str) -> tuple[str, ...]:
    """The tensors of a pair beside its towers: the logit scale (and SigLIP's bias), the text
    tower's projection (CLIP's text_projection; SigLIP's head, with a bias)."""
    if kind == "siglip":
        return ("logit_scale", "logit_bias", "text_model.head.weight", "text_model.head.bias")
    return ("logit_scale", "text_projection.weight")


def split_pair(kind: str, names: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """(the vision tower's names as CLIPVisionModel(WithProjection) or SiglipVisionModel
    stores them, the text tower's as CLIPTextModel does, the rest) of a pair."""
    extra = set(pair_extras(kind))
    vision, text, rest = [], [], []
    for n in names:
        if n.startswith("vision_model.") or n == "visual_projection.weight":
            vision.append(n)
        elif n.startswith("text_model.") and n not in extra:
            text.append(n)
        else:
            rest.append(n)
    return vision, text, rest


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


#: BEiT's and data2vec-vision's own tensors (beside ViT's, under the transformers 4 names the
#: releases store): layer scales, relative-position bias tables, the mean-pooling LayerNorm
_BEIT_PREFIXES = ("beit.", "data2vec_vision.")
_BEIT_LAYER = re.compile(r"^(?:encoder\.layer|layers)\.(\d+)\.(.+)$")
_BEIT_LAYER_PARTS = {
    "lambda_1": "ls1.weight",
    "lambda_2": "ls2.weight",
    "attention.attention.relative_position_bias.relative_position_bias_table": (
        "attn_rel_b.weight"
    ),
    "relative_position_bias.relative_position_bias_table": "attn_rel_b.weight",
}
_BEIT_TOP = {
    "encoder.relative_position_bias.relative_position_bias_table": "rel_pos_b.weight",
    "shared_position_bias.relative_position_bias_table": "rel_pos_b.weight",
}
_BEIT_POOLER = {
    "pooler.layernorm.weight": "cls_norm.weight",
    "pooler.layernorm.bias": "cls_norm.bias",
}
#: the fixed index buffers older saves kept (decoder/beit.py computes them)
_BEIT_INDEX = "relative_position_index"


def is_beit(names: Iterable[str]) -> bool:
    """Whether a vision transformer's names are BEiT's (data2vec-vision's): its prefixes, layer
    scales or relative-position tables."""
    return any(
        n.startswith(_BEIT_PREFIXES) or n.endswith(("lambda_1", "relative_position_bias_table"))
        for n in names
    )


def beit_names(names: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """A BEiT or data2vec-vision snapshot's names as the decoder reads them: its own tensors
    here, the rest as names_bert.vit_names maps a ViT's. The pooler's
    LayerNorm (mean pooling) is the classifier's ``cls_norm``; without a classifier it is off
    the traced path, as ViTModel's pooler."""
    names = list(names)
    headed = "classifier.weight" in names
    mapped: dict[str, str] = {}
    rest: dict[str, str] = {}
    for name in names:
        inner = name
        for prefix in _BEIT_PREFIXES:
            inner = inner.removeprefix(prefix)
        layer = _BEIT_LAYER.match(inner)
        if layer and layer[2] in _BEIT_LAYER_PARTS:
            mapped[f"blk.{layer[1]}.{_BEIT_LAYER_PARTS[layer[2]]}"] = name
        elif inner in _BEIT_TOP:
            mapped[_BEIT_TOP[inner]] = name
        elif inner in _BEIT_POOLER and headed:
            mapped[_BEIT_POOLER[inner]] = name
        elif not inner.endswith(_BEIT_INDEX) and not (inner in _BEIT_POOLER and not headed):
            rest[inner] = name
    inner_mapped, unplaced = vit_names(list(rest))
    mapped.update({key: rest[inner] for key, inner in inner_mapped.items()})
    return mapped, [rest[n] for n in unplaced]
