"""The DecoderConfig of an image classifier with a forward of its own (the convolutional
families of convnets.py, mobilenet.py, efficientnet.py and regnet.py; swin.py): stages of
blocks over pixels, no tokens, rotation or vocabulary head; the classifier where stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig
from nneditor.decoder.vision import PIXELS_NOTE


def staged_image_config(
    arch: str,
    config: Mapping[str, Any],
    names: dict[str, str],
    stages: tuple[int, ...],
    **fields: Any,  # noqa: ANN401 - the family's own DecoderConfig fields
) -> DecoderConfig:
    """``fields``: at least norm, norm_eps, activation and the family's network (convnet= or
    swin=); hidden and the attention's heads where the family has them."""
    classifier = classifier_head(config, names) if "cls_out.weight" in names else None
    base: dict[str, Any] = {
        "hidden": 0,
        "n_heads": 0,
        "n_kv_heads": 0,
        "head_dim": 0,
        "rope": "none",
        "gated": False,
        "causal": False,
        "head": False,
    }
    return DecoderConfig(
        arch=arch,
        source="huggingface",
        n_layers=len(stages),
        vocab=len(classifier.labels) if classifier else 0,
        classifier=classifier,
        names=names,
        notes=(PIXELS_NOTE,),
        **{**base, **fields},
    )
