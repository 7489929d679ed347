"""MobileNetV2 and MobileNetV1 image classifiers of Hugging Face snapshots
(MobileNetV2ForImageClassification, MobileNetV2Model, MobileNetV1ForImageClassification,
MobileNetV1Model, as google/mobilenet_v2_* and mobilenet_v1_* ship them): their tensor names as the synthesized
graph (checkpoint_mobilenet.py) and the NumPy decoder (decoder/mobilenet.py) read them.

Every convolution is a ``{part}.weight`` (no bias) followed by its BatchNorm ``{part}_bn``
(``weight``, ``bias``, ``mean``, ``var``). The stem: ``stem.conv`` (3x3, stride 2), ``stem.expand``
(a 1x1 convolution, only where first_layer_is_expansion is false), ``stem.dw`` (depthwise
3x3) and ``stem.project`` (1x1); each inverted residual block ``blk.{i}``: ``expand`` (1x1),
``dw`` (depthwise 3x3) and ``project`` (1x1); then ``head.conv`` (the final 1x1
convolution) and ``cls_out`` (the classifier). Every block is its own stage (transformers
returns each block's output as a hidden state). MobileNetV1: ``stem.conv``, then 26 layers
``blk.{i}.conv`` (even i: depthwise 3x3, odd i: pointwise 1x1), each a block of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nneditor.semantic.names_convnets import ConvNames

_BN = {"weight": "weight", "bias": "bias", "running_mean": "mean", "running_var": "var"}
_PARTS = {"first_conv": "conv", "expand_1x1": "expand", "conv_3x3": "dw", "reduce_1x1": "project"}
_LAYER = re.compile(
    r"^(?:conv_stem|layer\.(\d+)|(conv_1x1))\.(?:(\w+)\.)?"
    r"(?:convolution\.weight|normalization\.(\w+))$"
)
#: each block's stride in the released network (16 blocks; transformers' fixed schedule)
STRIDES = (2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1)
_COUNTER = "num_batches_tracked"
#: MobileNetV1's depthwise layers' strides (its pointwise layers' are 1)
V1_STRIDES = (1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1)
_V1 = re.compile(r"^(?:conv_stem|layer\.(\d+))\.(?:convolution\.weight|normalization\.(\w+))$")


def mobilenet_v1_names(names: Iterable[str]) -> ConvNames:
    """A MobileNetV1's tensor names mapped to the keys above."""
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    blocks: set[int] = set()
    for name in names:
        inner = name.removeprefix("mobilenet_v1.")
        if inner.endswith(_COUNTER):
            continue
        if inner in ("classifier.weight", "classifier.bias"):
            mapped[f"cls_out.{inner.split('.')[1]}"] = name
            continue
        m = _V1.match(inner)
        stat = _BN.get(m[2]) if m and m[2] else None
        if m is None or (m[2] and stat is None):
            unplaced.append(name)
            continue
        part = f"blk.{m[1]}.conv" if m[1] is not None else "stem.conv"
        if m[1] is not None:
            blocks.add(int(m[1]))
        mapped[f"{part}_bn.{stat}" if m[2] else f"{part}.weight"] = name
    order = sorted(blocks)
    if order != list(range(len(order))):
        unplaced.extend(f"layer.{i}" for i in range(max(order) + 1) if i not in blocks)
    return ConvNames(mapped, tuple(order), tuple(unplaced))


def mobilenet_names(names: Iterable[str]) -> ConvNames:
    """A MobileNetV2's tensor names mapped to the keys above."""
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    blocks: set[int] = set()
    for name in names:
        inner = name.removeprefix("mobilenet_v2.")
        if inner.endswith(_COUNTER):
            continue
        if inner in ("classifier.weight", "classifier.bias"):
            mapped[f"cls_out.{inner.split('.')[1]}"] = name
            continue
        m = _LAYER.match(inner)
        key = _key(m)
        if m is None or key is None:
            unplaced.append(name)
            continue
        if m[1] is not None:
            blocks.add(int(m[1]))
        mapped[key] = name
    order = sorted(blocks)
    if order != list(range(len(order))):
        unplaced.extend(f"layer.{i}" for i in range(max(order) + 1) if i not in blocks)
    return ConvNames(mapped, tuple(order), tuple(unplaced))


def _key(m: re.Match[str] | None) -> str | None:
    if m is None:
        return None
    if m[2]:  # the final 1x1 convolution
        if m[3] is not None:
            return None
        part = "head.conv"
    else:
        sub = _PARTS.get(m[3] or "")
        if sub is None or (m[1] is not None and sub == "conv"):
            return None
        part = f"blk.{m[1]}.{sub}" if m[1] is not None else f"stem.{sub}"
    if m[4] is None:
        return f"{part}.weight"
    stat = _BN.get(m[4])
    return f"{part}_bn.{stat}" if stat else None
