"""Zoo BEiT image classifier: BeitForImageClassification as microsoft/beit-base-patch16-224
ships it (a relative-position bias table per layer, layer scales, the patch tokens' mean
through the pooler's LayerNorm; its preprocessor_config.json as the release's, from
BeitFeatureExtractor's days), written by transformers, tiny random weights moved off their
initialisation. The NumPy decoder runs it (tests/integration/test_beit.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_weights import perturbed

BEIT = "vision-beit"
LABELS = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead", "ray",
          "cock", "hen", "ostrich", "brambling"]  # fmt: skip


def _beit_snapshot(path: Path) -> None:
    """In small: 32x32 images in 8x8 patches (a 4x4 window), two layers, ten labels. The
    relative-position tables, layer scales and class token start at zeros and constants in
    transformers' initialisation; they are moved as trained ones are, or a decoder that left
    them out would still agree."""
    import torch
    import transformers as tf

    config = tf.BeitConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        image_size=32,
        patch_size=8,
        use_relative_position_bias=True,
        use_mean_pooling=True,
        layer_scale_init_value=0.1,
        id2label=dict(enumerate(LABELS)),
        label2id={name: i for i, name in enumerate(LABELS)},
    )
    torch.manual_seed(0)
    model = perturbed(tf.BeitForImageClassification(config).eval())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("lambda_1", "lambda_2", "cls_token", "bias_table")):
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(path))
    processor = {  # (the release's, for 224x224 images)
        "crop_size": 32,
        "do_center_crop": False,
        "do_normalize": True,
        "do_resize": True,
        "feature_extractor_type": "BeitFeatureExtractor",
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "reduce_labels": False,
        "resample": 2,
        "size": 32,
    }
    (path / "preprocessor_config.json").write_text(json.dumps(processor, indent=2))


def register(generator: Callable[..., Any]) -> None:
    generator(
        BEIT,
        "transformers save_pretrained (BeitForImageClassification)",
        "BEiT image classifier (as microsoft/beit-base-patch16-224, in small: 32x32 images, "
        "8x8 patches, a relative-position bias per layer, layer scales, mean-pooled patches, "
        "ten ImageNet labels), tiny random weights",
    )(_beit_snapshot)
