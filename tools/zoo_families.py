"""Tiny random models of the families the bundled tracer plugins run (besides the decoders of
zoo_decoders.py): diffusers' conditional UNet in the Stable Diffusion 1.x layout and the SDXL
layout (pooled text embedding and time ids), written by diffusers' own save_pretrained; Whisper,
CLIP vision and LLaVA written by transformers, and that CLIP tower as llama.cpp-style GGUF
(zoo_clip_gguf.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import zoo_clip_gguf

_UNET_COMMON: dict[str, Any] = {
    "sample_size": 8,
    "in_channels": 4,
    "out_channels": 4,
    "layers_per_block": 2,
    "block_out_channels": (32, 64),
    "down_block_types": ("CrossAttnDownBlock2D", "DownBlock2D"),
    "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D"),
    "cross_attention_dim": 32,
    "attention_head_dim": 8,
    "norm_num_groups": 8,
}
UNETS: dict[str, dict[str, Any]] = {
    "unet-sd": {},
    "unet-sdxl": {
        "addition_embed_type": "text_time",
        "addition_time_embed_dim": 8,
        "projection_class_embeddings_input_dim": 32 + 6 * 8,
        "use_linear_projection": True,
        "transformer_layers_per_block": 2,
    },
}


def _unet(extra: dict[str, Any], path: Path) -> None:
    import diffusers
    import torch

    torch.manual_seed(0)
    model = diffusers.UNet2DConditionModel(**_UNET_COMMON, **extra).eval()
    with torch.no_grad():  # zero-initialised output layers would hide a wrong capture
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias") or "conv_out" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(path))


def _perturb(model: Any) -> None:
    import torch

    with torch.no_grad():  # unit norms and zero biases would hide a missing weight
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)


def _whisper(path: Path) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    config = tf.WhisperConfig(
        vocab_size=500,
        num_mel_bins=8,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        d_model=32,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=16,
        max_target_positions=32,
        decoder_start_token_id=3,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = tf.WhisperForConditionalGeneration(config).eval()
    _perturb(model)
    model.save_pretrained(str(path))


def _clip_vision_model() -> Any:
    """The seeded CLIP vision tower of ``clip-vision`` (and the source of its GGUF files)."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    config = tf.CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
        projection_dim=16,
    )
    model = tf.CLIPVisionModelWithProjection(config).eval()
    _perturb(model)
    return model


def _clip_vision(path: Path) -> None:
    _clip_vision_model().save_pretrained(str(path))


def _llava(path: Path) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    vision = tf.CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
    )
    text = tf.LlamaConfig(
        vocab_size=300,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    config = tf.LlavaConfig(vision_config=vision, text_config=text, image_token_id=299)
    model = tf.LlavaForConditionalGeneration(config).eval()
    _perturb(model)
    model.save_pretrained(str(path))


def _qwen_vl(model_type: str, path: Path, vocab: int = 300) -> None:
    """Qwen2-VL / Qwen2.5-VL (14-pixel, 2-frame patches) and Qwen3-VL (16-pixel), the real
    models' patch profiles, so automatic inputs get a grid that multiplies out; two (Qwen3-VL:
    three) vision blocks and two language blocks."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    text = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": vocab,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    }
    vision: dict[str, Any] = {"depth": 2, "num_heads": 4, "patch_size": 14, "spatial_merge_size": 2}
    if model_type == "qwen2_vl":
        vision |= {"embed_dim": 32, "hidden_size": 64, "mlp_ratio": 2}
        cls, config_cls = tf.Qwen2VLForConditionalGeneration, tf.Qwen2VLConfig
    elif model_type in ("qwen3_vl", "qwen3_vl_moe"):  # 16-pixel patches, learned positions,
        text |= {"head_dim": 16}  # DeepStack mergers
        text["rope_scaling"] = {
            "rope_type": "default",
            "mrope_section": [2, 3, 3],
            "mrope_interleaved": True,
        }
        vision = {
            "depth": 3,
            "num_heads": 4,
            "hidden_size": 32,
            "intermediate_size": 64,
            "out_hidden_size": 64,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0, 1],
        }
        cls, config_cls = tf.Qwen3VLForConditionalGeneration, tf.Qwen3VLConfig
        if model_type == "qwen3_vl_moe":  # Qwen3-VL-30B-A3B's text model: 8 experts, 2 a token
            # (an expert width whose double is not the hidden size: the layouts stay apart)
            text |= {"moe_intermediate_size": 48, "num_experts": 8, "num_experts_per_tok": 2}
            cls, config_cls = tf.Qwen3VLMoeForConditionalGeneration, tf.Qwen3VLMoeConfig
    else:  # Qwen2.5-VL: windowed attention except in the listed blocks, a SwiGLU MLP
        vision |= {
            "hidden_size": 32,
            "out_hidden_size": 64,
            "intermediate_size": 64,
            "window_size": 56,
            "fullatt_block_indexes": [1],
        }
        cls, config_cls = tf.Qwen2_5_VLForConditionalGeneration, tf.Qwen2_5_VLConfig
    config = config_cls(
        text_config=text,
        vision_config=vision,
        image_token_id=299,
        video_token_id=298,
        vision_start_token_id=297,
        vision_end_token_id=296,
    )
    model = cls(config).eval()
    _perturb(model)
    model.save_pretrained(str(path))
    if model_type == "qwen3_vl_moe":
        _experts_as_released(path / "model.safetensors")


def _experts_as_released(file: Path) -> None:
    """Qwen3-VL-MoE's releases store each layer's experts as [expert, in, out] (gate_up_proj
    [E, hidden, 2 x width], down_proj [E, width, hidden]); transformers 5 holds and saves them
    [expert, out, in] and transposes a release's on loading, and llama.cpp's converter expects
    the release's."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(file))
    for name, value in tensors.items():
        if name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            tensors[name] = value.transpose(1, 2).contiguous()
    save_file(tensors, str(file), metadata={"format": "pt"})


def register(generator: Callable[..., Any]) -> None:
    generator("whisper-tiny", "transformers save_pretrained", "Whisper, tiny random weights")(
        _whisper
    )
    generator("clip-vision", "transformers save_pretrained", "CLIP vision tower with projection")(
        _clip_vision
    )
    zoo_clip_gguf.register(generator, _clip_vision_model)
    generator("llava-tiny", "transformers save_pretrained", "LLaVA: CLIP vision + Llama")(_llava)
    for name, model_type in (
        ("qwen2-vl-tiny", "qwen2_vl"),
        ("qwen2.5-vl-tiny", "qwen2_5_vl"),
        ("qwen3-vl-tiny", "qwen3_vl"),
    ):
        generator(name, "transformers save_pretrained", f"{model_type}: vision + Qwen2")(
            lambda path, m=model_type: _qwen_vl(m, path)
        )
    for name, extra in UNETS.items():
        generator(name, "diffusers save_pretrained", f"{name}: tiny random UNet2DConditionModel")(
            lambda path, e=extra: _unet(e, path)
        )
