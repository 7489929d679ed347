"""Convolutional image classifiers of Hugging Face snapshots (ResNetForImageClassification,
ConvNextForImageClassification, ConvNextV2ForImageClassification and their base models; the
other drawn families' names are in names_mobilenet.py, names_efficientnet.py and
names_regnet.py): their tensor names as the synthesized
graph (checkpoint_convnets.py) and the NumPy decoder (decoder/convnets.py) read them.

Blocks are numbered across the stages (``blk.{i}``, i counting every stage's blocks in order),
as a transformer's layers are; ``stages`` says which stage each belongs to.

ResNet: ``stem.conv`` and ``stem.bn`` (the 7x7 embedder and its BatchNorm), each block's
``conv{k}`` / ``bn{k}`` (k = 1, 2 for the basic layer; 1, 2, 3 for the bottleneck) and its
projection shortcut ``short`` / ``short_bn`` where it has one; a BatchNorm's ``weight``,
``bias``, ``mean`` and ``var`` (running statistics). ConvNeXt: ``stem.conv`` and
``stem.norm`` (the patchify convolution and its LayerNorm), ``down.{s}.norm`` and
``down.{s}.conv`` (stage s's downsampling layer), each block's ``dwconv``, ``norm``,
``ffn_up``, ``ffn_down``, layer scale ``ls`` and ConvNeXt V2's ``grn``; ``output_norm`` over the pooled features.
Both end in ``cls_out`` (the classifier).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nneditor.semantic.image_builder import StagedNames

#: the families drawn and traced: model_type -> the name sentences use
CONV_FAMILIES = {
    "resnet": "ResNet",
    "convnext": "ConvNeXt",
    "mobilenet_v2": "MobileNetV2",
    "mobilenet_v1": "MobileNetV1",
    "efficientnet": "EfficientNet",
    "regnet": "RegNet",
    "convnextv2": "ConvNeXt V2",
}
#: the drawn families, as sentences name them
DRAWN = "ResNet, ConvNeXt, ConvNeXt V2, MobileNetV1, MobileNetV2, EfficientNet and RegNet"
#: convolutional image families of transformers that are neither drawn nor traced (their
#: tensor names would otherwise be read as a transformer's layers)
OTHER_CONV_FAMILIES = {
    "mobilevit": "MobileViT",
    "mobilevitv2": "MobileViTV2",
    "bit": "BiT",
    "poolformer": "PoolFormer",
    "van": "VAN",
    "efficientformer": "EfficientFormer",
    "textnet": "TextNet",
}

_BN = {"weight": "weight", "bias": "bias", "running_mean": "mean", "running_var": "var"}
_RESNET_TOP = {
    **{f"embedder.embedder.normalization.{k}": f"stem.bn.{v}" for k, v in _BN.items()},
    "embedder.embedder.convolution.weight": "stem.conv.weight",
    "classifier.1.weight": "cls_out.weight",
    "classifier.1.bias": "cls_out.bias",
}
_RESNET_BLOCK = re.compile(r"^encoder\.stages\.(\d+)\.layers\.(\d+)\.(.+)$")
_RESNET_PART = re.compile(
    r"^(?:layer\.(\d+)|(shortcut))\.(?:convolution\.weight|normalization\.(\w+))$"
)

_CONVNEXT_TOP = {
    "embeddings.patch_embeddings.weight": "stem.conv.weight",
    "embeddings.patch_embeddings.bias": "stem.conv.bias",
    "embeddings.layernorm.weight": "stem.norm.weight",
    "embeddings.layernorm.bias": "stem.norm.bias",
    "layernorm.weight": "output_norm.weight",
    "layernorm.bias": "output_norm.bias",
    "classifier.weight": "cls_out.weight",
    "classifier.bias": "cls_out.bias",
}
_CONVNEXT_DOWN = re.compile(r"^encoder\.stages\.(\d+)\.downsampling_layer\.([01])\.(weight|bias)$")
_CONVNEXT_BLOCK = re.compile(r"^encoder\.stages\.(\d+)\.layers\.(\d+)\.(.+)$")
_CONVNEXT_PART = {
    "dwconv.weight": "dwconv.weight",
    "dwconv.bias": "dwconv.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
    "pwconv1.weight": "ffn_up.weight",
    "pwconv1.bias": "ffn_up.bias",
    "pwconv2.weight": "ffn_down.weight",
    "pwconv2.bias": "ffn_down.bias",
    "layer_scale_parameter": "ls.weight",
    "grn.weight": "grn.weight",  # (ConvNeXt V2's global response normalisation)
    "grn.bias": "grn.bias",
}
#: BatchNorm's step counter: kept by torch, read by nothing in eval mode
_COUNTER = "num_batches_tracked"


ConvNames = StagedNames  # (image_builder.py: the names of a staged network)


def convnet_names(model_type: str, names: Iterable[str]) -> ConvNames:
    """A ResNet's or ConvNeXt's tensor names mapped to the keys above (model_type in
    :data:`CONV_FAMILIES`)."""
    prefix = f"{model_type}."
    top = _RESNET_TOP if model_type == "resnet" else _CONVNEXT_TOP
    block_re = _RESNET_BLOCK if model_type == "resnet" else _CONVNEXT_BLOCK
    names = list(names)
    blocks: dict[tuple[int, int], dict[str, str]] = {}
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    for name in names:
        inner = name.removeprefix(prefix)
        if inner.endswith(_COUNTER):
            continue
        if inner in top:
            mapped[top[inner]] = name
            continue
        down = _CONVNEXT_DOWN.match(inner) if model_type != "resnet" else None
        if down:
            part = "norm" if down[2] == "0" else "conv"
            mapped[f"down.{down[1]}.{part}.{down[3]}"] = name
            continue
        m = block_re.match(inner)
        key = _block_key(model_type, m[3]) if m else None
        if m is None or key is None:
            unplaced.append(name)
            continue
        blocks.setdefault((int(m[1]), int(m[2])), {})[key] = name
    order = sorted(blocks)
    for i, at in enumerate(order):
        mapped.update({f"blk.{i}.{key}": name for key, name in blocks[at].items()})
    return ConvNames(mapped, tuple(s for s, _ in order), tuple(unplaced))


def _block_key(model_type: str, rest: str) -> str | None:
    if model_type != "resnet":  # ConvNeXt and ConvNeXt V2
        return _CONVNEXT_PART.get(rest)
    m = _RESNET_PART.match(rest)
    if m is None:
        return None
    stat = _BN.get(m[3]) if m[3] else "weight"
    if stat is None:
        return None
    if m[2]:  # the projection shortcut
        return f"short.{stat}" if m[3] is None else f"short_bn.{stat}"
    k = int(m[1]) + 1
    return f"conv{k}.{stat}" if m[3] is None else f"bn{k}.{stat}"
