"""MobileNetV2 image classifiers (google/mobilenet_v2_*: MobileNetV2ForImageClassification,
MobileNetV2Model) on NumPy, as transformers' modules compute them, every value named as the
synthesized graph (semantic/checkpoint_mobilenet.py) names it.

Every convolution has no bias and is followed by BatchNorm (eps config.layer_norm_eps, 1e-3 in
the releases) and, but the 1x1 projections, hidden_act (ReLU6). With tf_padding (the releases)
each convolution's input is first padded as TensorFlow's "SAME" convolutions pad it (for a
stride-2 3x3 convolution of an even side: one row below and one column right, none above),
else symmetrically by half the kernel. The stem: a 3x3 convolution of stride 2, a 1x1
expansion where first_layer_is_expansion is false, a depthwise 3x3 and a 1x1 projection. Then
16 inverted residual blocks (1x1 expansion, depthwise 3x3 of the block's stride, 1x1
projection), whose input is added back only where the stride is 1 and the channels do not
change; the final 1x1 convolution (1280 channels, or as depth_multiplier and
finegrained_output make it); the average over its pixels; the classifier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.decoder import conv_ops, ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.image_config import staged_image_config
from nneditor.decoder.vision import ConvNet
from nneditor.semantic.names_mobilenet import (
    STRIDES,
    V1_STRIDES,
    mobilenet_names,
    mobilenet_v1_names,
)

F32 = np.float32
Emit = Callable[[str, np.ndarray], None]


def relu6(x: np.ndarray) -> np.ndarray:
    return np.clip(x, F32(0), F32(6)).astype(F32)


ACTIVATIONS = {**ops.ACTIVATIONS, "relu6": relu6}


def from_hf(config: Mapping[str, Any], names: Sequence[str], folder: Path) -> DecoderConfig:
    """The forward pass of a MobileNetV2 (or MobileNetV1) snapshot in ``folder``, or a
    sentence."""
    if config.get("model_type") == "mobilenet_v1":
        return _v1_from_hf(config, names, folder)
    found = mobilenet_names(names)
    if found.unplaced:
        raise DecoderUnsupported(
            f"this MobileNetV2 snapshot holds {found.unplaced[0]!r}, outside the image "
            "classifier's layout (a segmentation head's); the NumPy decoder runs "
            "MobileNetV2Model and MobileNetV2ForImageClassification"
        )
    if len(found.stages) != len(STRIDES):
        raise DecoderUnsupported(
            f"this MobileNetV2 snapshot numbers {len(found.stages)} inverted residual blocks; "
            f"transformers' MobileNetV2 has {len(STRIDES)}"
        )
    if strides(int(config.get("output_stride") or 32)) != STRIDES:
        raise DecoderUnsupported(
            f"config.json's output_stride {config.get('output_stride')} makes dilated "
            "convolutions (as DeepLabV3 uses), which the NumPy decoder does not run; it runs "
            "output_stride 32"
        )
    widths = tuple(block_widths(config)[1:])
    return _config("mobilenet_v2", config, found, widths, folder)


def _v1_from_hf(config: Mapping[str, Any], names: Sequence[str], folder: Path) -> DecoderConfig:
    found = mobilenet_v1_names(names)
    if found.unplaced:
        raise DecoderUnsupported(
            f"this MobileNetV1 snapshot holds {found.unplaced[0]!r}, outside the image "
            "classifier's layout; the NumPy decoder runs MobileNetV1Model and "
            "MobileNetV1ForImageClassification"
        )
    if len(found.stages) != 2 * len(V1_STRIDES):
        raise DecoderUnsupported(
            f"this MobileNetV1 snapshot numbers {len(found.stages)} layers; transformers' "
            f"MobileNetV1 has {2 * len(V1_STRIDES)}"
        )
    scale, least = float(config.get("depth_multiplier") or 1.0), int(config.get("min_depth") or 8)
    widths = tuple(max(int(d * scale), least) for d in (64, 128, 256, 512, 1024))
    return _config("mobilenet_v1", config, found, widths, folder)


def _config(
    kind: str,
    config: Mapping[str, Any],
    found: Any,
    widths: tuple[int, ...],
    folder: Path,  # noqa: ANN401 - ConvNames
) -> DecoderConfig:
    act = str(config.get("hidden_act") or "relu6")
    if act not in ACTIVATIONS:
        raise DecoderUnsupported(f"{kind} activation {act!r} is not implemented")
    from nneditor.semantic.checkpoint_convnets import sized

    net = ConvNet(
        kind,
        found.stages,
        widths,
        sized(folder),
        int(config.get("num_channels") or 3),
        activation=act,
        tf_padding=bool(config.get("tf_padding", True)),
        bn_eps=float(config.get("layer_norm_eps") or 1e-3),
    )
    return staged_image_config(
        kind,
        config,
        found.names,
        found.stages,
        norm="batch",
        norm_eps=net.bn_eps,
        activation=act,
        convnet=net,
    )


def block_widths(config: Mapping[str, Any]) -> list[int]:
    """The stem's output channels, then each block's, as depth_multiplier scales the
    released widths (rounded to a multiple of depth_divisible_by, at least min_depth, never
    below 90% of the scaled width)."""
    scale = float(config.get("depth_multiplier") or 1.0)
    divisor = int(config.get("depth_divisible_by") or 8)
    least = int(config.get("min_depth") or 8)
    out = []
    for c in (16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320):
        scaled = int(round(c * scale))
        rounded = max(least, int(scaled + divisor / 2) // divisor * divisor)
        out.append(rounded + divisor if rounded < 0.9 * scaled else rounded)
    return out


def strides(output_stride: int) -> tuple[int, ...]:
    """Each block's stride as transformers schedules them for ``output_stride`` (the blocks
    past it run at stride 1, dilated: a schedule unlike :data:`STRIDES` is not run)."""
    current, out = 2, []
    for s in STRIDES:
        if current == output_stride:
            out.append(1 if s == 1 else -1)  # (-1: a dilated block)
        else:
            out.append(s)
            current *= s
    return tuple(out)


def conv_bn(
    w: Any,  # noqa: ANN401 - weights.Weights
    net: ConvNet,
    part: str,
    x: np.ndarray,
    stride: int = 1,
    act: bool = True,
) -> np.ndarray:
    """MobileNetV2's convolution ``part`` (depthwise where its kernel reads one channel),
    its BatchNorm and, with ``act``, its activation."""
    kernel = w.get(f"{part}.weight")
    size = kernel.shape[-1]
    groups = x.shape[0] if kernel.shape[1] == 1 and x.shape[0] > 1 else 1
    if net.tf_padding:
        y = conv_ops.conv2d(conv_ops.same_pad(x, size, stride), kernel, None, stride, 0, groups)
    else:
        y = conv_ops.conv2d(x, kernel, None, stride, (size - 1) // 2, groups)
    weight, bias, mean, var = (w.get(f"{part}_bn.{s}") for s in ("weight", "bias", "mean", "var"))
    y = conv_ops.batch_norm(y, weight, bias, mean, var, net.bn_eps)
    return ACTIVATIONS[net.activation](y) if act else y


def forward(w: Any, cfg: DecoderConfig, pixels: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """The class logits [1, 1, labels] (a base model: its pooled output [1, channels]) of
    ``pixels`` [1, channels, height, width]."""
    net: ConvNet = cfg.convnet
    x = np.ascontiguousarray(pixels[0], dtype=F32)
    x = conv_bn(w, net, "stem.conv", x, 2)
    emit("stem.conv", x[None])
    if net.family == "mobilenet_v1":  # depthwise 3x3 and pointwise 1x1 layers in turn
        for i in range(2 * len(V1_STRIDES)):
            x = conv_bn(w, net, f"blk.{i}.conv", x, V1_STRIDES[i // 2] if i % 2 == 0 else 1)
            emit(f"blk.{i}.output", x[None])
            w.done_with(i)
        return _head(w, cfg, x, emit)
    if w.has("stem.expand.weight"):
        x = conv_bn(w, net, "stem.expand", x)
        emit("stem.expand", x[None])
    x = conv_bn(w, net, "stem.dw", x)
    emit("stem.dw", x[None])
    x = conv_bn(w, net, "stem.project", x, act=False)
    emit("stem.project", x[None])
    for i, stride in enumerate(STRIDES):
        p = f"blk.{i}"
        y = conv_bn(w, net, f"{p}.expand", x)
        emit(f"{p}.expand", y[None])
        y = conv_bn(w, net, f"{p}.dw", y, stride)
        emit(f"{p}.dw", y[None])
        y = conv_bn(w, net, f"{p}.project", y, act=False)
        if residual(stride, x.shape[0], y.shape[0]):
            emit(f"{p}.project", y[None])
            y = (x + y).astype(F32)
        emit(f"{p}.output", y[None])
        x = y
        w.done_with(i)
    x = conv_bn(w, net, "head.conv", x)
    emit("head.conv", x[None])
    return _head(w, cfg, x, emit)


def _head(w: Any, cfg: DecoderConfig, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    pooled = x.mean(axis=(1, 2), dtype=np.float64).astype(F32)
    emit("pooler_output", pooled[None])
    if cfg.classifier is None:
        return pooled[None]
    labels = cfg.classifier.labels
    rows = w.ref("cls_out.weight").shape[0]
    if labels and rows != len(labels):
        raise DecoderUnsupported(
            f"the classifier has {rows} outputs but config.json names {len(labels)} labels"
        )
    logits = w.linear("cls_out.weight", pooled[None], "cls_out.bias").astype(F32)
    emit("result_output", logits[None])
    return logits[None]


def residual(stride: int, channels_in: int, channels_out: int) -> bool:
    """Whether an inverted residual block adds its input back: at stride 1, the channels
    unchanged."""
    return stride == 1 and channels_in == channels_out
