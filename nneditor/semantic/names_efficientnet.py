"""EfficientNet image classifiers of Hugging Face snapshots (EfficientNetForImageClassification,
EfficientNetModel, as google/efficientnet-b0 ... b7 ship them): their tensor names as the
synthesized graph (checkpoint_efficientnet.py) and the NumPy decoder (decoder/efficientnet.py)
read them, and the blocks' schedule as transformers lays it out from config.json.

Keys: ``stem.conv`` and its BatchNorm ``stem.conv_bn``; each MBConv block ``blk.{i}``'s
``expand`` (1x1, where expand_ratio is not 1), ``dw`` (depthwise), ``project`` (1x1), each with
its ``{part}_bn`` (``weight``, ``bias``, ``mean``, ``var``), and the squeeze-and-excitation
convolutions ``se_reduce`` and ``se_expand`` (with biases); ``head.conv`` / ``head.conv_bn``
(the top 1x1 convolution); ``cls_out`` (the classifier).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nneditor.semantic.names_convnets import ConvNames

_BN = {"weight": "weight", "bias": "bias", "running_mean": "mean", "running_var": "var"}
_TOP = {
    "embeddings.convolution.weight": "stem.conv.weight",
    "encoder.top_conv.weight": "head.conv.weight",
    **{f"embeddings.batchnorm.{k}": f"stem.conv_bn.{v}" for k, v in _BN.items()},
    **{f"encoder.top_bn.{k}": f"head.conv_bn.{v}" for k, v in _BN.items()},
}
_PARTS = {
    "expansion.expand_conv.weight": "expand.weight",
    "depthwise_conv.depthwise_conv.weight": "dw.weight",
    "projection.project_conv.weight": "project.weight",
    "squeeze_excite.reduce.weight": "se_reduce.weight",
    "squeeze_excite.reduce.bias": "se_reduce.bias",
    "squeeze_excite.expand.weight": "se_expand.weight",
    "squeeze_excite.expand.bias": "se_expand.bias",
    **{f"expansion.expand_bn.{k}": f"expand_bn.{v}" for k, v in _BN.items()},
    **{f"depthwise_conv.depthwise_norm.{k}": f"dw_bn.{v}" for k, v in _BN.items()},
    **{f"projection.project_bn.{k}": f"project_bn.{v}" for k, v in _BN.items()},
}
_BLOCK = re.compile(r"^encoder\.blocks\.(\d+)\.(.+)$")


@dataclass(frozen=True)
class Block:
    """One MBConv block as transformers builds it: its depthwise ``stride``, whether its
    input is added back (``residual``: every block of a stage but the first, whatever the
    stride), and whether a stride-2 depthwise convolution pads one pixel less above and left
    (``adjust``: blocks not listed in config.depthwise_padding)."""

    stride: int
    residual: bool
    adjust: bool


def schedule(config: Mapping[str, Any]) -> list[Block]:
    """The blocks of config.json's stages, each repeated ceil(depth_coefficient * repeats)
    times."""
    depth = float(config.get("depth_coefficient") or 1.0)
    strides = [int(s) for s in config.get("strides") or [1, 2, 2, 2, 1, 2, 1]]
    repeats = [int(r) for r in config.get("num_block_repeats") or [1, 2, 2, 3, 3, 4, 1]]
    padded = {int(i) for i in config.get("depthwise_padding") or []}
    out: list[Block] = []
    for stride, count in zip(strides, repeats, strict=False):
        for j in range(int(math.ceil(depth * count))):
            n = len(out)
            out.append(Block(stride if j == 0 else 1, j > 0, n not in padded))
    return out


def efficientnet_names(names: Iterable[str]) -> ConvNames:
    """An EfficientNet's tensor names mapped to the keys above; every block is its own
    stage (transformers returns each block's output as a hidden state)."""
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    blocks: set[int] = set()
    for name in names:
        inner = name.removeprefix("efficientnet.")
        if inner.endswith("num_batches_tracked"):
            continue
        if inner in _TOP:
            mapped[_TOP[inner]] = name
            continue
        if inner in ("classifier.weight", "classifier.bias"):
            mapped[f"cls_out.{inner.split('.')[1]}"] = name
            continue
        m = _BLOCK.match(inner)
        if m is None or m[2] not in _PARTS:
            unplaced.append(name)
            continue
        blocks.add(int(m[1]))
        mapped[f"blk.{m[1]}.{_PARTS[m[2]]}"] = name
    order = sorted(blocks)
    if order != list(range(len(order))):
        unplaced.extend(f"blocks.{i}" for i in range(max(order) + 1) if i not in blocks)
    return ConvNames(mapped, tuple(order), tuple(unplaced))
