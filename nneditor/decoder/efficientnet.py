"""EfficientNet image classifiers (google/efficientnet-b0 ... b7:
EfficientNetForImageClassification, EfficientNetModel) on NumPy, as transformers' modules
compute them, every value named as the synthesized graph (semantic/checkpoint_efficientnet.py)
names it.

Every BatchNorm takes config.batch_norm_eps (1e-3 in the releases) and every activation
hidden_act (swish, i.e. SiLU). The stem pads one pixel right and below, then a 3x3 convolution
of stride 2 reads it unpadded. Each MBConv block (names_efficientnet.schedule): a 1x1 expansion
where expand_ratio is not 1; the depthwise convolution, padded by half its kernel on each
side at stride 1, and at stride 2 one pixel less above and left unless the block is listed
in config.depthwise_padding; squeeze and excitation (the pixels' mean through a 1x1
convolution, the activation, another 1x1 convolution and a sigmoid scale each channel); the 1x1
projection with BatchNorm and no activation; the block's input added back on every block of a
stage but its first (dropout and drop-connect are the identity in eval). Then the top 1x1
convolution, BatchNorm and activation; the mean (pooling_type mean) or maximum over the pixels;
the classifier.
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
from nneditor.semantic.names_efficientnet import Block, efficientnet_names, schedule

F32 = np.float32
Emit = Callable[[str, np.ndarray], None]
ACTIVATIONS = {**ops.ACTIVATIONS, "swish": ops.silu}


def from_hf(config: Mapping[str, Any], names: Sequence[str], folder: Path) -> DecoderConfig:
    """The forward pass of an EfficientNet snapshot in ``folder``, or a sentence."""
    found = efficientnet_names(names)
    if found.unplaced:
        raise DecoderUnsupported(
            f"this EfficientNet snapshot holds {found.unplaced[0]!r}, outside the image "
            "classifier's layout; the NumPy decoder runs EfficientNetModel and "
            "EfficientNetForImageClassification"
        )
    blocks = schedule(config)
    if len(blocks) != len(found.stages):
        raise DecoderUnsupported(
            f"config.json's stages make {len(blocks)} blocks, but the tensor names number "
            f"{len(found.stages)}; the snapshot does not fit its configuration"
        )
    act = str(config.get("hidden_act") or "swish")
    if act not in ACTIVATIONS:
        raise DecoderUnsupported(f"EfficientNet activation {act!r} is not implemented")
    pooling = str(config.get("pooling_type") or "mean")
    if pooling not in ("mean", "max"):
        raise DecoderUnsupported(f"EfficientNet pooling_type {pooling!r} is not mean or max")
    from nneditor.semantic.checkpoint_convnets import sized

    net = ConvNet(
        "efficientnet",
        found.stages,
        (int(config.get("hidden_dim") or 0),),
        sized(folder),
        int(config.get("num_channels") or 3),
        activation=act,
        bn_eps=float(config.get("batch_norm_eps") or 1e-3),
        blocks=tuple(blocks),
        pooling=pooling,
        pool_window=int(config.get("hidden_dim") or 0),
    )
    return staged_image_config(
        "efficientnet",
        config,
        found.names,
        found.stages,
        norm="batch",
        norm_eps=net.bn_eps,
        activation=act,
        convnet=net,
    )


def _bn(w: Any, net: ConvNet, part: str, y: np.ndarray, act: bool = True) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    weight, bias, mean, var = (w.get(f"{part}_bn.{s}") for s in ("weight", "bias", "mean", "var"))
    y = conv_ops.batch_norm(y, weight, bias, mean, var, net.bn_eps)
    return ACTIVATIONS[net.activation](y).astype(F32) if act else y


def depthwise_pad(x: np.ndarray, kernel: int, block: Block) -> np.ndarray:
    """The depthwise convolution's input padded as transformers pads it (half the kernel on
    every side; at stride 2 with ``adjust``, one pixel less above and left)."""
    half = kernel // 2
    before = half - 1 if block.stride == 2 and block.adjust else half
    return np.pad(x, ((0, 0), (before, half), (before, half)))


def block_forward(w: Any, net: ConvNet, i: int, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """MBConv block ``i`` of ``x`` [C, H, W]."""
    p, block = f"blk.{i}", net.blocks[i]
    y = x
    if w.has(f"{p}.expand.weight"):
        y = _bn(w, net, f"{p}.expand", conv_ops.conv2d(y, w.get(f"{p}.expand.weight")))
        emit(f"{p}.expand", y[None])
    kernel = w.get(f"{p}.dw.weight")
    padded = depthwise_pad(y, kernel.shape[-1], block)
    y = _bn(w, net, f"{p}.dw", conv_ops.conv2d(padded, kernel, None, block.stride, 0, y.shape[0]))
    emit(f"{p}.dw", y[None])
    y = excite(w, net, p, y)
    emit(f"{p}.se", y[None])
    y = _bn(w, net, f"{p}.project", conv_ops.conv2d(y, w.get(f"{p}.project.weight")), act=False)
    if block.residual:
        emit(f"{p}.project", y[None])
        y = (y + x).astype(F32)
    emit(f"{p}.output", y[None])
    return y


def excite(w: Any, net: ConvNet, p: str, y: np.ndarray) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """Squeeze and excitation: each channel of ``y`` scaled by the sigmoid of two 1x1
    convolutions (the activation between) of the pixels' mean."""
    mean = y.mean(axis=(1, 2), dtype=np.float64).astype(F32)
    s = mean[None]
    for k, part in enumerate(("se_reduce", "se_expand")):
        kernel = w.get(f"{p}.{part}.weight")
        s = ops.linear(s, kernel.reshape(kernel.shape[0], -1), w.get(f"{p}.{part}.bias"))
        s = ACTIVATIONS[net.activation](s.astype(F32)) if k == 0 else s.astype(F32)
    return (y * ops.sigmoid(s)[0][:, None, None]).astype(F32)


def forward(w: Any, cfg: DecoderConfig, pixels: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """The class logits [1, 1, labels] (a base model: its pooled output [1, channels]) of
    ``pixels`` [1, channels, height, width]."""
    net: ConvNet = cfg.convnet
    x = np.pad(np.asarray(pixels[0], dtype=F32), ((0, 0), (0, 1), (0, 1)))
    x = _bn(w, net, "stem.conv", conv_ops.conv2d(x, w.get("stem.conv.weight"), None, 2))
    emit("stem.conv", x[None])
    for i in range(len(net.blocks)):
        x = block_forward(w, net, i, x, emit)
        w.done_with(i)
    x = _bn(w, net, "head.conv", conv_ops.conv2d(x, w.get("head.conv.weight")))
    emit("head.conv", x[None])
    if max(x.shape[1:]) > net.pool_window:
        raise ValueError(
            f"the {x.shape[1]}x{x.shape[2]} last hidden state is wider than the "
            f"{net.pool_window}-pixel pooling window (config.hidden_dim)"
        )
    if net.pooling == "max":
        pooled = x.max(axis=(1, 2)).astype(F32)
    else:
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
