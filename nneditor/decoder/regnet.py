"""RegNet image classifiers (facebook/regnet-x-*, regnet-y-*: RegNetForImageClassification,
RegNetModel) on NumPy, as transformers' modules compute them, every value named as the
synthesized graph (semantic/checkpoint_regnet.py) names it.

Every convolution has no bias and is followed by BatchNorm (torch's eps 1e-5: the config
states none), padded by half its kernel. The stem: a 3x3 convolution of stride 2 with
hidden_act. Each block: a 1x1 convolution, a grouped 3x3 one (groups of config.groups_width
channels; the stage's stride in its first block, the first stage's only with
downsample_in_first_stage), for the Y layer squeeze and excitation (the pixels' mean through a
1x1 convolution to a quarter of the block's input channels, ReLU, a 1x1 convolution back and a
sigmoid scaling each channel), a 1x1 convolution without activation, the input added back (a
1x1 convolution of the stride with BatchNorm where the channels or the stride change), then
hidden_act. The classifier reads the average of the last stage's pixels.
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
from nneditor.semantic.names_regnet import regnet_names

F32 = np.float32
BN_EPS = 1e-5
#: the activation inside the Y layer's squeeze and excitation (fixed, whatever hidden_act is)
SE_ACT = "relu"
Emit = Callable[[str, np.ndarray], None]


def from_hf(config: Mapping[str, Any], names: Sequence[str], folder: Path) -> DecoderConfig:
    """The forward pass of a RegNet snapshot in ``folder``, or a sentence."""
    found = regnet_names(names)
    if found.unplaced:
        raise DecoderUnsupported(
            f"this RegNet snapshot holds {found.unplaced[0]!r}, outside the image classifier's "
            "layout; the NumPy decoder runs RegNetModel and RegNetForImageClassification"
        )
    depths = [int(d) for d in config.get("depths") or []]
    if found.depths() != depths:
        raise DecoderUnsupported(
            f"config.json states {depths} blocks per stage, but the tensor names number "
            f"{found.depths()}; the snapshot does not fit its configuration"
        )
    act = str(config.get("hidden_act") or "relu")
    if act not in ops.ACTIVATIONS:
        raise DecoderUnsupported(f"RegNet activation {act!r} is not implemented")
    from nneditor.semantic.checkpoint_convnets import sized

    net = ConvNet(
        "regnet",
        found.stages,
        tuple(int(c) for c in config.get("hidden_sizes") or []),
        sized(folder),
        int(config.get("num_channels") or 3),
        first_strided=bool(config.get("downsample_in_first_stage", True)),
        activation=act,
        bn_eps=BN_EPS,
    )
    return staged_image_config(
        "regnet",
        config,
        found.names,
        found.stages,
        hidden=net.widths[-1] if net.widths else 0,
        norm="batch",
        norm_eps=BN_EPS,
        activation=act,
        convnet=net,
    )


def conv_bn(
    w: Any,  # noqa: ANN401 - weights.Weights
    net: ConvNet,
    conv: str,
    bn: str,
    x: np.ndarray,
    stride: int = 1,
    act: bool = True,
) -> np.ndarray:
    """Convolution ``conv`` (grouped as its kernel's input width says), BatchNorm ``bn`` and,
    with ``act``, hidden_act."""
    kernel = w.get(f"{conv}.weight")
    groups = x.shape[0] // kernel.shape[1]
    y = conv_ops.conv2d(x, kernel, None, stride, kernel.shape[-1] // 2, groups)
    weight, bias, mean, var = (w.get(f"{bn}.{s}") for s in ("weight", "bias", "mean", "var"))
    y = conv_ops.batch_norm(y, weight, bias, mean, var, net.bn_eps)
    return ops.ACTIVATIONS[net.activation](y).astype(F32) if act else y


def excite(w: Any, p: str, y: np.ndarray) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """The Y layer's squeeze and excitation of ``y`` [C, H, W] (ReLU between its two 1x1
    convolutions, whatever hidden_act is)."""
    s = y.mean(axis=(1, 2), dtype=np.float64).astype(F32)[None]
    for part in ("se_reduce", "se_expand"):
        kernel = w.get(f"{p}.{part}.weight")
        s = ops.linear(s, kernel.reshape(kernel.shape[0], -1), w.get(f"{p}.{part}.bias"))
        s = ops.ACTIVATIONS[SE_ACT](s.astype(F32)) if part == "se_reduce" else s.astype(F32)
    return (y * ops.sigmoid(s)[0][:, None, None]).astype(F32)


def forward(w: Any, cfg: DecoderConfig, pixels: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """The class logits [1, 1, labels] (a base model: its pooled output [1, C, 1, 1]) of
    ``pixels`` [1, channels, height, width]."""
    net: ConvNet = cfg.convnet
    act = ops.ACTIVATIONS[net.activation]
    x = conv_bn(w, net, "stem.conv", "stem.bn", np.asarray(pixels[0], dtype=F32), 2)
    emit("stem.conv", x[None])
    for i, s in enumerate(net.stages):
        first = i == 0 or net.stages[i - 1] != s
        stride = 2 if first and (s > 0 or net.first_strided) else 1
        p = f"blk.{i}"
        y = conv_bn(w, net, f"{p}.conv1", f"{p}.bn1", x)
        emit(f"{p}.conv1", y[None])
        y = conv_bn(w, net, f"{p}.conv2", f"{p}.bn2", y, stride)
        emit(f"{p}.conv2", y[None])
        if w.has(f"{p}.se_reduce.weight"):
            y = excite(w, p, y)
            emit(f"{p}.se", y[None])
        y = conv_bn(w, net, f"{p}.conv3", f"{p}.bn3", y, act=False)
        emit(f"{p}.conv3", y[None])
        skip = x
        if w.has(f"{p}.short.weight"):
            skip = conv_bn(w, net, f"{p}.short", f"{p}.short_bn", x, stride, act=False)
            emit(f"{p}.shortcut", skip[None])
        if skip.shape != y.shape:
            raise ValueError(f"block {i} adds {list(skip.shape)} to {list(y.shape)}")
        x = act(y + skip).astype(F32)
        emit(f"{p}.output", x[None])
        w.done_with(i)
    pooled = x.mean(axis=(1, 2), dtype=np.float64).astype(F32)
    emit("pooler_output", pooled[None, :, None, None])
    if cfg.classifier is None:
        return pooled[None, :, None, None]
    labels = cfg.classifier.labels
    rows = w.ref("cls_out.weight").shape[0]
    if labels and rows != len(labels):
        raise DecoderUnsupported(
            f"the classifier has {rows} outputs but config.json names {len(labels)} labels"
        )
    logits = w.linear("cls_out.weight", pooled[None], "cls_out.bias").astype(F32)
    emit("result_output", logits[None])
    return logits[None]
