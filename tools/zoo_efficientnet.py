"""Zoo EfficientNet image classifier: EfficientNetForImageClassification as
google/efficientnet-b0 ships it (swish, BatchNorm eps 1e-3, mean pooling, MBConv blocks with
squeeze and excitation), in small: width_coefficient 0.25 and depth_coefficient 0.5 (10
blocks of 8 to 80 channels, a 320-channel top convolution), 32x32 images, ten ImageNet
labels. Its preprocessor_config.json has the release's keys (EfficientNetImageProcessor:
nearest resize to ``size``, ImageNet's mean, the release's std, include_top's second division
by it), sized 32 (theirs: 224). Written by transformers, tiny random weights with every
BatchNorm's weight, bias and running statistics and every bias moved off their
initialisation. The NumPy decoder runs it (tests/integration/test_efficientnet.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_beit import LABELS

NAME = "vision-efficientnet"
#: the release's preprocessor_config.json, sized for 32x32 images (theirs: 224)
PROCESSOR = {
    "crop_size": {"height": 289, "width": 289},
    "do_center_crop": False,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_processor_type": "EfficientNetImageProcessor",
    "image_std": [0.47853944, 0.4732864, 0.47434163],
    "include_top": True,
    "resample": 0,
    "rescale_factor": 0.00392156862745098,
    "rescale_offset": False,
    "size": {"height": 32, "width": 32},
}


def _snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    config = tf.EfficientNetConfig(
        width_coefficient=0.25,
        depth_coefficient=0.5,
        hidden_dim=320,
        image_size=32,
        id2label=dict(enumerate(LABELS)),
        label2id={name: i for i, name in enumerate(LABELS)},
        architectures=["EfficientNetForImageClassification"],
    )
    torch.manual_seed(0)
    model = tf.EfficientNetForImageClassification(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "bn" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.2)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.3)
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) * 1.5 + 0.25)
    model.save_pretrained(str(path))
    (path / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2))


def register(generator: Callable[..., Any]) -> None:
    generator(
        NAME,
        "transformers save_pretrained (EfficientNetForImageClassification)",
        "EfficientNet image classifier (as google/efficientnet-b0, in small: width 0.25, depth "
        "0.5, swish, squeeze and excitation, 32x32 images with the release's include_top "
        "scaling, ten ImageNet labels), BatchNorm statistics moved",
    )(_snapshot)
