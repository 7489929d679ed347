"""Zoo MobileNetV2 image classifier: MobileNetV2ForImageClassification as
google/mobilenet_v2_1.0_224 ships it (TensorFlow SAME padding, ReLU6, BatchNorm eps 1e-3, the
1001-class layout whose class 0 is "background" and whose ImageNet classes follow from 1), in
small: depth_multiplier 0.25 (8 to 80 channels, a 320-channel final convolution), 32x32
images, "background" and ten ImageNet labels. Its preprocessor_config.json has the release's
keys (MobileNetV2FeatureExtractor: the shorter side resized to ``size`` with Pillow's bilinear
filter, the centre ``crop_size`` cropped, mean and std 0.5), sized 36 and 32 (theirs: 256 and
224). Written by transformers, tiny random weights with every BatchNorm's weight, bias and
running statistics and the classifier's bias moved off their initialisation. The NumPy
decoder runs it (tests/integration/test_mobilenet.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_beit import LABELS

NAME = "vision-mobilenet-v2"
#: the release's preprocessor_config.json, sized for 32x32 images (theirs: 256, 224)
PROCESSOR = {
    "crop_size": 32,
    "do_center_crop": True,
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "MobileNetV2FeatureExtractor",
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 2,
    "size": 36,
}


def _snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    labels = ["background", *LABELS]
    config = tf.MobileNetV2Config(
        depth_multiplier=0.25,
        finegrained_output=False,
        image_size=32,
        tf_padding=True,
        hidden_act="relu6",
        layer_norm_eps=0.001,
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
        architectures=["MobileNetV2ForImageClassification"],
    )
    torch.manual_seed(0)
    model = tf.MobileNetV2ForImageClassification(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "normalization" in name or name.endswith("bias"):
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
        "transformers save_pretrained (MobileNetV2ForImageClassification)",
        "MobileNetV2 image classifier (as google/mobilenet_v2_1.0_224, in small: depth "
        "multiplier 0.25, TensorFlow SAME padding, ReLU6, 32x32 images cropped from a 36-pixel "
        "shorter side, background plus ten ImageNet labels), BatchNorm statistics moved",
    )(_snapshot)
