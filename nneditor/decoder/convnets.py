"""Convolutional image classifiers (microsoft/resnet-*, facebook/convnext-*: ResNetModel,
ResNetForImageClassification, ConvNextModel, ConvNextForImageClassification) on NumPy, as
transformers' modules compute them, every value named as the synthesized graph
(semantic/checkpoint_convnets.py) names it.

ResNet: the stem (a 7x7 convolution, stride 2, BatchNorm, ReLU; 3x3 max pooling, stride 2),
then stages of basic (two 3x3 convolutions) or bottleneck (1x1 down to a quarter of the
channels, 3x3, 1x1 back) blocks, each convolution followed by BatchNorm with its running
statistics (eps 1e-5, torch's default: the config states none) and, but the last, ReLU; the
residual (a 1x1 convolution with BatchNorm where the channels or the stride change) is added
before the block's ReLU. Each stage but the first halves the image in its first block (the
first too with downsample_in_first_stage), in the bottleneck's 3x3 convolution (its first 1x1
with downsample_in_bottleneck). The classifier reads the average of the last stage's pixels.

ConvNeXt V2 is ConvNeXt with global response normalisation (GRN) after the MLP's GELU and no
layer scale. ConvNeXt: the stem (a patch x patch convolution of stride patch, LayerNorm over the channels),
stages opening (all but the first) with a LayerNorm and a 2x2 convolution of stride 2, blocks
of a depthwise 7x7 convolution, LayerNorm (channels last, eps 1e-6), a pointwise MLP with
GELU, the layer scale, the residual add; the average of the last stage's pixels through the
final LayerNorm (config.layer_norm_eps) before the classifier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.decoder import conv_ops, efficientnet, mobilenet, ops, regnet
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.image_config import staged_image_config
from nneditor.decoder.vision import ConvNet
from nneditor.semantic.names_convnets import (
    CONV_FAMILIES,
    DRAWN,
    OTHER_CONV_FAMILIES,
    convnet_names,
)

F32 = np.float32
#: BatchNorm2d's eps (ResNet's config states none) and ConvNeXt's LayerNorms' in its stem,
#: downsampling layers and blocks (fixed in transformers' modules)
BN_EPS = 1e-5
LN_EPS = 1e-6
#: the eps under GRN's mean of the channels' norms (ConvNeXt V2, fixed in transformers)
GRN_EPS = 1e-6
Emit = Callable[[str, np.ndarray], None]


def from_hf(config: Mapping[str, Any], names: Sequence[str], folder: Path) -> DecoderConfig:
    """The forward pass of a ResNet, ConvNeXt, MobileNetV2 (decoder/mobilenet.py),
    EfficientNet (decoder/efficientnet.py) or RegNet (decoder/regnet.py) snapshot in
    ``folder``, or a sentence."""
    kind = str(config.get("model_type") or "")
    if kind in OTHER_CONV_FAMILIES:
        raise DecoderUnsupported(
            f"the NumPy decoder does not run {OTHER_CONV_FAMILIES[kind]} ({kind}) snapshots; "
            f"of convolutional image classifiers it runs {DRAWN}"
        )
    if kind in ("mobilenet_v2", "mobilenet_v1"):
        return mobilenet.from_hf(config, names, folder)
    if kind == "efficientnet":
        return efficientnet.from_hf(config, names, folder)
    if kind == "regnet":
        return regnet.from_hf(config, names, folder)
    family = CONV_FAMILIES[kind]
    found = convnet_names(kind, names)
    if found.unplaced:
        raise DecoderUnsupported(
            f"this {family} snapshot holds {found.unplaced[0]!r}, outside the image "
            f"classifier's layout (a backbone's or another head's); the NumPy decoder runs "
            f"{family}Model and {family}ForImageClassification"
        )
    depths = [int(d) for d in config.get("depths") or []]
    if found.depths() != depths:
        raise DecoderUnsupported(
            f"config.json states {depths} blocks per stage, but the tensor names number "
            f"{found.depths()}; the snapshot does not fit its configuration"
        )
    widths = tuple(int(c) for c in config.get("hidden_sizes") or [])
    act = str(config.get("hidden_act") or ("relu" if kind == "resnet" else "gelu"))
    if act not in ops.ACTIVATIONS:
        raise DecoderUnsupported(f"{family} activation {act!r} is not implemented")
    layer = str(config.get("layer_type") or "bottleneck")
    if kind == "resnet" and layer not in ("basic", "bottleneck"):
        raise DecoderUnsupported(f"ResNet layer_type {layer!r} is not implemented")
    from nneditor.semantic.checkpoint_convnets import sized

    net = ConvNet(
        kind,
        found.stages,
        widths,
        sized(folder),
        int(config.get("num_channels") or 3),
        bottleneck=kind == "resnet" and layer == "bottleneck",
        first_strided=bool(config.get("downsample_in_first_stage")),
        strided_1x1=bool(config.get("downsample_in_bottleneck")),
        activation=act,
    )
    return staged_image_config(
        kind,
        config,
        found.names,
        found.stages,
        hidden=widths[-1] if widths else 0,
        norm="layer",
        norm_eps=float(config.get("layer_norm_eps") or 1e-12),
        activation=act,
        convnet=net,
    )


def forward(w: Any, cfg: DecoderConfig, pixels: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """The class logits [1, 1, labels] (a base model: its pooled output) of ``pixels``
    [1, channels, height, width]."""
    net: ConvNet = cfg.convnet
    shape = list(pixels.shape)
    if len(shape) != 4 or shape[:2] != [1, net.channels]:
        raise DecoderUnsupported(
            f"pixel values must be [1, {net.channels}, height, width] for this {net.family}, "
            f"given {shape}"
        )
    x = np.ascontiguousarray(pixels[0], dtype=F32)
    try:
        if net.family in ("mobilenet_v2", "mobilenet_v1"):
            return mobilenet.forward(w, cfg, pixels, emit)
        if net.family == "efficientnet":
            return efficientnet.forward(w, cfg, pixels, emit)
        if net.family == "regnet":
            return regnet.forward(w, cfg, pixels, emit)
        x = _resnet(w, net, x, emit) if net.family == "resnet" else _convnext(w, cfg, x, emit)
    except ValueError as exc:  # an image too small for the strides, or shapes out of place
        raise DecoderUnsupported(
            f"the {shape[2]}x{shape[3]} image does not pass through this {net.family} ({exc}); "
            f"its processor makes {net.size[0]}x{net.size[1]} images"
        ) from None
    if cfg.classifier is None:
        return x[None] if net.family != "resnet" else x[None, :, None, None]
    labels = cfg.classifier.labels
    rows = w.ref("cls_out.weight").shape[0]
    if labels and rows != len(labels):
        raise DecoderUnsupported(
            f"the classifier has {rows} outputs but config.json names {len(labels)} labels"
        )
    logits = w.linear("cls_out.weight", x[None], "cls_out.bias").astype(F32)
    emit("result_output", logits[None])
    return logits[None]


def _conv_bn(
    w: Any,  # noqa: ANN401 - weights.Weights
    conv: str,
    bn: str,
    x: np.ndarray,
    stride: int,
    act: Callable[[np.ndarray], np.ndarray] | None,
) -> np.ndarray:
    kernel = w.get(f"{conv}.weight")
    y = conv_ops.conv2d(x, kernel, None, stride, kernel.shape[-1] // 2)
    weight, bias, mean, var = (w.get(f"{bn}.{s}") for s in ("weight", "bias", "mean", "var"))
    y = conv_ops.batch_norm(y, weight, bias, mean, var, BN_EPS)
    return act(y).astype(F32) if act is not None else y


def _resnet(w: Any, net: ConvNet, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401
    """The pooled output [channels] of ResNet's stem and stages."""
    act = ops.ACTIVATIONS[net.activation]
    x = _conv_bn(w, "stem.conv", "stem.bn", x, 2, act)
    emit("stem.conv", x[None])
    x = conv_ops.max_pool(x, 3, 2, 1)
    emit("stem.pool", x[None])
    for i, s in enumerate(net.stages):
        first = i == 0 or net.stages[i - 1] != s
        stride = 2 if first and (s > 0 or net.first_strided) else 1
        p = f"blk.{i}"
        if net.bottleneck:
            strides = [stride, 1, 1] if net.strided_1x1 else [1, stride, 1]
        else:
            strides = [stride, 1]
        y = x
        for k, st in enumerate(strides, 1):
            last = k == len(strides)
            y = _conv_bn(w, f"{p}.conv{k}", f"{p}.bn{k}", y, st, None if last else act)
            emit(f"{p}.conv{k}", y[None])
        skip = x
        if w.has(f"{p}.short.weight"):
            skip = _conv_bn(w, f"{p}.short", f"{p}.short_bn", x, stride, None)
            emit(f"{p}.shortcut", skip[None])
        if skip.shape != y.shape:
            raise ValueError(f"block {i} adds {list(skip.shape)} to {list(y.shape)}")
        x = act(y + skip).astype(F32)
        emit(f"{p}.output", x[None])
        w.done_with(i)
    pooled = x.mean(axis=(1, 2), dtype=np.float64).astype(F32)
    emit("pooler_output", pooled[None, :, None, None])
    return pooled


def _convnext(w: Any, cfg: DecoderConfig, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401
    """The pooled output [channels] of ConvNeXt's stem, stages and final LayerNorm."""
    net: ConvNet = cfg.convnet
    kernel = w.get("stem.conv.weight")
    x = conv_ops.conv2d(x, kernel, w.get("stem.conv.bias"), kernel.shape[-1])
    emit("stem.conv", x[None])
    x = conv_ops.channel_norm(x, w.get("stem.norm.weight"), w.get("stem.norm.bias"), LN_EPS)
    emit("stem.norm", x[None])
    act = ops.ACTIVATIONS[cfg.activation]
    for i, s in enumerate(net.stages):
        first = i == 0 or net.stages[i - 1] != s
        if first and w.has(f"down.{s}.conv.weight"):
            d = f"down.{s}"
            x = conv_ops.channel_norm(x, w.get(f"{d}.norm.weight"), w.get(f"{d}.norm.bias"), LN_EPS)
            emit(f"{d}.norm", x[None])
            x = conv_ops.conv2d(x, w.get(f"{d}.conv.weight"), w.get(f"{d}.conv.bias"), 2)
            emit(f"{d}.conv", x[None])
        x = _convnext_block(w, f"blk.{i}", x, act, emit)
        w.done_with(i)
    mean = x.mean(axis=(1, 2), dtype=np.float64).astype(F32)
    emit("pool_mean", mean[None])
    pooled = ops.layer_norm(
        mean, w.get("output_norm.weight"), w.get("output_norm.bias"), cfg.norm_eps
    )
    emit("pooler_output", pooled[None])
    return pooled


def _convnext_block(
    w: Any,  # noqa: ANN401 - weights.Weights
    p: str,
    x: np.ndarray,
    act: Callable[[np.ndarray], np.ndarray],
    emit: Emit,
) -> np.ndarray:
    channels = x.shape[0]
    kernel = w.get(f"{p}.dwconv.weight")
    y = conv_ops.conv2d(x, kernel, w.get(f"{p}.dwconv.bias"), 1, kernel.shape[-1] // 2, channels)
    emit(f"{p}.dwconv", y[None])
    y = ops.layer_norm(
        y.transpose(1, 2, 0), w.get(f"{p}.norm.weight"), w.get(f"{p}.norm.bias"), LN_EPS
    )
    emit(f"{p}.norm", y[None])
    rows, cols = y.shape[:2]
    h = act(w.linear(f"{p}.ffn_up.weight", y.reshape(rows * cols, channels), f"{p}.ffn_up.bias"))
    if w.has(f"{p}.grn.weight"):  # ConvNeXt V2
        h = grn(
            h.astype(F32).reshape(rows, cols, -1), w.get(f"{p}.grn.weight"), w.get(f"{p}.grn.bias")
        )
        h = h.reshape(rows * cols, -1)
    y = w.linear(f"{p}.ffn_down.weight", h.astype(F32), f"{p}.ffn_down.bias")
    y = y.reshape(rows, cols, channels).astype(F32)
    emit(f"{p}.ffn", y[None])
    if w.has(f"{p}.ls.weight"):
        y = (y * w.get(f"{p}.ls.weight")).astype(F32)
        emit(f"{p}.scaled", y[None])
    x = (x + y.transpose(2, 0, 1)).astype(F32)
    emit(f"{p}.output", x[None])
    return x


def grn(h: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """ConvNeXt V2's global response normalisation of ``h`` [H, W, C]: each channel's L2 norm
    over the pixels, over the channels' mean of those norms (plus 1e-6), scales ``h``; then
    ``weight`` times that plus ``bias`` is added to ``h``."""
    norms = np.sqrt(np.square(h, dtype=np.float64).sum(axis=(0, 1))).astype(F32)
    scale = norms / (norms.mean(dtype=np.float64).astype(F32) + F32(GRN_EPS))
    weight, bias = weight.reshape(-1), bias.reshape(-1)
    return (weight * (h * scale) + bias + h).astype(F32)
