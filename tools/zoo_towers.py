"""Zoo vision towers of CLIP and SigLIP, which embed images rather than classify them:
CLIPVisionModelWithProjection as openai/clip-vit-base-patch32's vision side ships it (its
image processor: the shorter side resized, a centre crop) and SiglipVisionModel with its
attention-pooling head (a fixed resize), written by transformers, tiny random weights moved
off their initialisation. The NumPy decoder runs them (tests/integration/test_clip_vision.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_weights import perturbed

CLIP = "vision-clip"
SIGLIP = "vision-siglip"
#: CLIPModel: both towers and a CLIP-style tokenizer (zero-shot image classification)
CLIP_PAIR = "vision-clip-pair"
#: a two-block tower over 32x32 images in 8x8 patches
_SMALL = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 32,
    "patch_size": 8,
}


def _moved(model: Any) -> Any:  # noqa: ANN401
    """Norms and biases off their neutral values, the embeddings and SigLIP's probe too."""
    import torch

    model = perturbed(model.eval())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embedding" in name or name.endswith("probe"):
                p.add_(torch.randn_like(p) * 0.5)
    return model


def _clip_snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    config = tf.CLIPVisionConfig(**_SMALL, projection_dim=48)
    torch.manual_seed(0)
    _moved(tf.CLIPVisionModelWithProjection(config)).save_pretrained(str(path))
    _clip_processor(path)


def _clip_pair_snapshot(path: Path) -> None:
    """CLIPModel as openai/clip-vit-base-patch32 ships it, in small: its tokenizer files
    (tools/zoo_encoders.py's CLIP-style BPE: start 0, end-of-text 1, which also pads) and its
    image processor; the logit scale off its initial value."""
    import torch
    import transformers as tf
    from zoo_encoders import _clip_tokenizer

    path.mkdir(parents=True, exist_ok=True)
    vocab = _clip_tokenizer(path)
    text = {
        **{k: v for k, v in _SMALL.items() if k not in ("image_size", "patch_size")},
        "vocab_size": vocab,
        "max_position_embeddings": 77,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 1,
    }
    config = tf.CLIPConfig(text_config=text, vision_config=_SMALL, projection_dim=48)
    torch.manual_seed(0)
    model = _moved(tf.CLIPModel(config))
    with torch.no_grad():
        model.logit_scale.fill_(3.2)
    model.save_pretrained(str(path))
    _clip_processor(path)


def _clip_processor(path: Path) -> None:
    processor = {  # the release's, at 32 pixels for its 224
        "crop_size": {"height": 32, "width": 32},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_processor_type": "CLIPImageProcessor",
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"shortest_edge": 32},
    }
    (path / "preprocessor_config.json").write_text(json.dumps(processor, indent=2))


def _siglip_snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    config = tf.SiglipVisionConfig(**_SMALL)
    torch.manual_seed(0)
    _moved(tf.SiglipVisionModel(config)).save_pretrained(str(path))
    processor = {  # google/siglip-base-patch16-224's, at 32 pixels
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "SiglipImageProcessor",
        "image_std": [0.5, 0.5, 0.5],
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"height": 32, "width": 32},
    }
    (path / "preprocessor_config.json").write_text(json.dumps(processor, indent=2))


def register(generator: Callable[..., Any]) -> None:
    generator(
        CLIP,
        "transformers save_pretrained (CLIPVisionModelWithProjection)",
        "CLIP vision tower with its projection (as openai/clip-vit-base-patch32's, in small: "
        "32x32 images in 8x8 patches, its image processor's resize and crop), tiny random "
        "weights",
    )(_clip_snapshot)
    generator(
        SIGLIP,
        "transformers save_pretrained (SiglipVisionModel)",
        "SigLIP vision tower with its attention-pooling head (as google/siglip-base-patch16-"
        "224's, in small: 32x32 images in 8x8 patches), tiny random weights",
    )(_siglip_snapshot)
    generator(
        CLIP_PAIR,
        "transformers save_pretrained (CLIPModel) + a CLIP-style tokenizers BPE",
        "CLIP with both towers (as openai/clip-vit-base-patch32, in small: 32x32 images in "
        "8x8 patches, its image processor, a CLIP-style tokenizer), tiny random weights",
    )(_clip_pair_snapshot)
