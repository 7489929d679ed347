"""The zoo's CLIP vision tower written as GGUF the way llama.cpp's CLIP loader reads it (the
legacy image-encoder conversion that llava/mmproj files follow): architecture ``clip``, the
``clip.*`` and ``clip.vision.*`` keys, ``v.*`` tensors. Keys and tensor names come from
gguf-py's constants (``gguf.Keys.Clip``, ``gguf.Keys.ClipVision``, ``gguf.TENSOR_NAMES``);
two things have no constant there and are spelled as the legacy conversion spelled them:
``clip.has_text_encoder`` and the image-text projection, kept under transformers' own name
``visual_projection.weight``.

The source is the seeded ``CLIPVisionModelWithProjection`` of the ``clip-vision`` snapshot
(zoo_families.py), so that snapshot is the reference forward for these files. Types follow the
legacy converter's f16 rule (4-D and 2-D ``.weight`` tensors in the reduced type, the rest
float32) except that the F32 file keeps the patch convolution in float32 too (the legacy tool
always wrote it as F16; llama.cpp reads either): the F32 file is then the source exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

PROJECTION = "visual_projection.weight"  # no gguf-py constant: transformers' name, kept
#: zoo name -> the reduced type of the large weights (None: everything float32)
FILES = {
    "clip-vision.gguf": None,
    "clip-vision-f16.gguf": "F16",
    "clip-vision-q8_0.gguf": "Q8_0",
}


def _names(n_layers: int) -> dict[str, str]:
    """transformers' parameter names -> GGUF tensor names (gguf-py's MODEL_TENSOR.V_*)."""
    import gguf

    T = gguf.MODEL_TENSOR  # noqa: N806 - gguf-py's enum
    n = gguf.TENSOR_NAMES
    vm = "vision_model."
    out = {
        f"{vm}embeddings.class_embedding": n[T.V_ENC_EMBD_CLS],
        f"{vm}embeddings.patch_embedding.weight": n[T.V_ENC_EMBD_PATCH] + ".weight",
        f"{vm}embeddings.position_embedding.weight": n[T.V_ENC_EMBD_POS] + ".weight",
        PROJECTION: PROJECTION,
    }
    for hf, t in (("pre_layrnorm", T.V_PRE_NORM), ("post_layernorm", T.V_POST_NORM)):
        for kind in ("weight", "bias"):
            out[f"{vm}{hf}.{kind}"] = f"{n[t]}.{kind}"
    layer = {
        "self_attn.q_proj": T.V_ENC_ATTN_Q,
        "self_attn.k_proj": T.V_ENC_ATTN_K,
        "self_attn.v_proj": T.V_ENC_ATTN_V,
        "self_attn.out_proj": T.V_ENC_ATTN_O,
        "layer_norm1": T.V_ENC_INPUT_NORM,
        "layer_norm2": T.V_ENC_POST_ATTN_NORM,
        "mlp.fc1": T.V_ENC_FFN_UP,
        "mlp.fc2": T.V_ENC_FFN_DOWN,
    }
    for i in range(n_layers):
        for hf, t in layer.items():
            for kind in ("weight", "bias"):
                out[f"{vm}encoder.layers.{i}.{hf}.{kind}"] = f"{n[t].format(bid=i)}.{kind}"
    return out


def reduced(name: str, shape: tuple[int, ...], kind: str | None) -> str | None:
    """The type a weight is stored in under ``kind`` (None: float32): the legacy converter's
    rule; Q8_0 only where rows are whole 32-element blocks, else F16."""
    if kind is None or not name.endswith("weight") or len(shape) not in (2, 4):
        return None
    if kind == "Q8_0" and len(shape) == 2 and shape[-1] % 32 == 0:
        return "Q8_0"
    return "F16"


def write(path: Path, kind: str | None, model: Any) -> None:
    import gguf
    import numpy as np

    cfg = model.config
    names = _names(cfg.num_hidden_layers)
    w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    w.add_name("tiny-random-clip-vision")
    w.add_description("tiny random CLIP vision tower with projection")
    file_type = {None: "ALL_F32", "F16": "MOSTLY_F16", "Q8_0": "MOSTLY_Q8_0"}[kind]
    w.add_file_type(gguf.LlamaFileType[file_type])
    w.add_clip_has_vision_encoder(True)
    w.add_bool("clip.has_text_encoder", False)  # the legacy key; gguf-py has no constant
    w.add_bool(gguf.Keys.Clip.HAS_LLAVA_PROJECTOR, False)
    w.add_vision_image_size(cfg.image_size)
    w.add_vision_patch_size(cfg.patch_size)
    w.add_vision_embedding_length(cfg.hidden_size)
    w.add_vision_feed_forward_length(cfg.intermediate_size)
    w.add_vision_projection_dim(cfg.projection_dim)
    w.add_vision_head_count(cfg.num_attention_heads)
    w.add_vision_attention_layernorm_eps(cfg.layer_norm_eps)
    w.add_vision_block_count(cfg.num_hidden_layers)
    w.add_vision_image_mean([0.48145466, 0.4578275, 0.40821073])  # OpenAI CLIP's processor
    w.add_vision_image_std([0.26862954, 0.26130258, 0.27577711])
    w.add_vision_use_gelu(cfg.hidden_act == "gelu")  # false: quick_gelu
    for hf, tensor in model.state_dict().items():
        arr = np.ascontiguousarray(tensor.detach().numpy(), dtype=np.float32)
        to = reduced(hf, arr.shape, kind)
        if to == "Q8_0":
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(names[hf], q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(names[hf], arr.astype(np.float16) if to == "F16" else arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def register(generator: Callable[..., Any], model: Callable[[], Any]) -> None:
    for name, kind in FILES.items():
        generator(
            name, "gguf-py (llama.cpp's CLIP image-encoder layout)", f"CLIP vision, {kind or 'F32'}"
        )(lambda path, k=kind: write(path, k, model()))
