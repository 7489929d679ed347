"""Zoo convolutional image classifiers: ResNetForImageClassification as microsoft/resnet-50
ships it (bottleneck blocks, four stages, the first not downsampling) and
ConvNextForImageClassification as facebook/convnext-tiny-224 does, in small, each with its
release's preprocessor_config.json (ConvNextFeatureExtractor's keys: the shorter side resized
to size / crop_pct, the centre size x size cropped, ImageNet's mean and std) at 32 pixels.
Written by transformers, tiny random weights moved off their initialisation: BatchNorm's
weights, biases and running statistics, LayerNorms, biases and ConvNeXt's layer scales (1e-6
at initialisation, which would hide a decoder that left them out). The NumPy decoder runs
them (tests/integration/test_convnets.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_beit import LABELS

RESNET = "vision-resnet"
CONVNEXT = "vision-convnext"
#: the releases' preprocessor_config.json, sized for 32x32 images (theirs: 224)
PROCESSOR = {
    "crop_pct": 0.875,
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "ConvNextFeatureExtractor",
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 3,
    "size": 32,
}


def _moved(model: Any) -> Any:  # noqa: ANN401
    """``model`` with its norms (weights, biases, running statistics), biases and layer
    scales moved off their initialisation (seeded by the caller)."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.2)
            if name.endswith("layer_scale_parameter"):
                p.copy_(torch.randn_like(p) * 0.5)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.3)
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) * 1.5 + 0.25)
    return model


def _labelled() -> dict[str, Any]:
    return {
        "id2label": dict(enumerate(LABELS)),
        "label2id": {name: i for i, name in enumerate(LABELS)},
    }


def _save(path: Path, model: Any) -> None:  # noqa: ANN401
    model.save_pretrained(str(path))
    (path / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2))


def _resnet_snapshot(path: Path) -> None:
    """microsoft/resnet-50 in small: four stages of 2, 1, 1, 1 bottleneck blocks (16 to 64
    channels), an 8-channel stem, ten labels."""
    import torch
    import transformers as tf

    config = tf.ResNetConfig(
        embedding_size=8,
        hidden_sizes=[16, 32, 48, 64],
        depths=[2, 1, 1, 1],
        layer_type="bottleneck",
        hidden_act="relu",
        downsample_in_first_stage=False,
        **_labelled(),
    )
    torch.manual_seed(0)
    _save(path, _moved(tf.ResNetForImageClassification(config).eval()))


def _convnext_snapshot(path: Path) -> None:
    """facebook/convnext-tiny-224 in small: four stages of 2, 1, 1, 1 blocks (8 to 32
    channels), 4x4 patches, ten labels."""
    import torch
    import transformers as tf

    config = tf.ConvNextConfig(
        hidden_sizes=[8, 16, 24, 32],
        depths=[2, 1, 1, 1],
        num_stages=4,
        patch_size=4,
        image_size=32,
        layer_norm_eps=1e-12,
        layer_scale_init_value=1e-6,
        **_labelled(),
    )
    torch.manual_seed(0)
    _save(path, _moved(tf.ConvNextForImageClassification(config).eval()))


def register(generator: Callable[..., Any]) -> None:
    generator(
        RESNET,
        "transformers save_pretrained (ResNetForImageClassification)",
        "ResNet image classifier (as microsoft/resnet-50, in small: bottleneck blocks in four "
        "stages of 2, 1, 1, 1, 32x32 images cropped as its ConvNeXt processor does, ten "
        "ImageNet labels), tiny random weights with BatchNorm statistics moved",
    )(_resnet_snapshot)
    generator(
        CONVNEXT,
        "transformers save_pretrained (ConvNextForImageClassification)",
        "ConvNeXt image classifier (as facebook/convnext-tiny-224, in small: four stages of "
        "2, 1, 1, 1 blocks, 4x4 patches, 32x32 images cropped by crop_pct, ten ImageNet "
        "labels), tiny random weights with layer scales moved off 1e-6",
    )(_convnext_snapshot)
