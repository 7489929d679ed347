"""Zoo Swin image classifier: SwinForImageClassification as
microsoft/swin-tiny-patch4-window7-224 ships it (stages of windowed-attention blocks shifted on
every other block, a relative-position bias table per block, patch merging between stages, the
final LayerNorm and the tokens' mean before the classifier), in small, with the release's
preprocessor_config.json (ViTFeatureExtractor's keys: resized straight to size x size with
Pillow's bicubic filter, no crop, ImageNet's mean and std) at 32 pixels. Written by
transformers, tiny random weights moved off their initialisation: norms, biases and the
relative-position tables (zeros at initialisation, which would hide a decoder that read them
wrong). The NumPy decoder runs it (tests/integration/test_swin.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_beit import LABELS
from zoo_weights import perturbed

SWIN = "vision-swin"
#: the release's preprocessor_config.json, sized for 32x32 images (its: 224)
PROCESSOR = {
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "ViTFeatureExtractor",
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 3,
    "size": 32,
}


def _swin_snapshot(path: Path) -> None:
    """In small: 32x32 images in 2x2 patches (a 16x16 grid of tokens), 4x4 windows, two
    stages of two blocks (16 and 32 channels, 2 and 4 heads), ten labels."""
    import torch
    import transformers as tf

    config = tf.SwinConfig(
        image_size=32,
        patch_size=2,
        embed_dim=16,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=4,
        mlp_ratio=4.0,
        hidden_act="gelu",
        id2label=dict(enumerate(LABELS)),
        label2id={name: i for i, name in enumerate(LABELS)},
    )
    torch.manual_seed(0)
    model = perturbed(tf.SwinForImageClassification(config).eval())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("relative_position_bias_table"):
                p.copy_(torch.randn_like(p))
    model.save_pretrained(str(path))
    (path / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2))


def register(generator: Callable[..., Any]) -> None:
    generator(
        SWIN,
        "transformers save_pretrained (SwinForImageClassification)",
        "Swin image classifier (as microsoft/swin-tiny-patch4-window7-224, in small: 32x32 "
        "images, 2x2 patches, 4x4 windows shifted on every other block, two stages of two "
        "blocks with patch merging between them, ten ImageNet labels), tiny random weights "
        "with relative-position tables moved off zero",
    )(_swin_snapshot)
