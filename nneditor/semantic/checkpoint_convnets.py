"""Graphs of convolutional image classifiers in Hugging Face snapshots (ResNet, ConvNeXt; and
MobileNetV1/V2, EfficientNet and RegNet through checkpoint_mobilenet.py, checkpoint_efficientnet.py
and checkpoint_regnet.py), synthesized from config.json and the tensor names
(names_convnets.py), as transformers' modules run them; the NumPy decoder (decoder/convnets.py) publishes every value drawn here:

    pixel_values → stem.conv → stem.pool (ResNet) | stem.norm (ConvNeXt)
                 → blk.{i}.conv1 … blk.{i}.output (ResNet: convolutions with BatchNorm, the
                   projection shortcut, the residual add and ReLU)
                 → down.{s}.norm, down.{s}.conv, blk.{i}.dwconv, blk.{i}.norm, blk.{i}.ffn,
                   blk.{i}.scaled, blk.{i}.output (ConvNeXt)
                 → pooler_output → result_output (the class logits, [1, 1, labels])

Shapes are those of the image the snapshot's image processor makes (preprocessor_config.json;
224x224 without one); the networks read other sizes too. Other convolutional families are
refused with a sentence rather than drawn as transformers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nneditor.model.document import Document
from nneditor.model.graph import Graph
from nneditor.semantic.image_builder import FROM, ShapedBuilder
from nneditor.semantic.names_convnets import (
    CONV_FAMILIES,
    DRAWN,
    OTHER_CONV_FAMILIES,
    convnet_names,
)


def is_convnet(config: Mapping[str, Any]) -> bool:
    kind = str(config.get("model_type") or "")
    return kind in CONV_FAMILIES or kind in OTHER_CONV_FAMILIES


def convnet_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str]:
    """The graph of a ResNet or ConvNeXt snapshot, or (None, the reason) for the other
    convolutional families and layouts not laid out here."""
    kind = str(config.get("model_type") or "")
    if kind in OTHER_CONV_FAMILIES:
        return None, (
            f"this {kind} snapshot is a {OTHER_CONV_FAMILIES[kind]} convolutional image model, "
            f"whose graph NNEditor does not draw (it draws and traces {DRAWN} image "
            "classifiers); its weights are listed by name"
        )
    if kind == "mobilenet_v2":
        from nneditor.semantic.names_mobilenet import mobilenet_names

        found = mobilenet_names(doc.tensors.keys())
    elif kind == "mobilenet_v1":
        from nneditor.semantic.names_mobilenet import mobilenet_v1_names

        found = mobilenet_v1_names(doc.tensors.keys())
    elif kind == "efficientnet":
        from nneditor.semantic.names_efficientnet import efficientnet_names

        found = efficientnet_names(doc.tensors.keys())
    elif kind == "regnet":
        from nneditor.semantic.names_regnet import regnet_names

        found = regnet_names(doc.tensors.keys())
    else:
        found = convnet_names(kind, doc.tensors.keys())
    family = CONV_FAMILIES[kind]
    if found.unplaced or not found.stages:
        other = found.unplaced[0] if found.unplaced else "no numbered stage"
        return None, (
            f"this {family} snapshot holds tensors outside the image classifier's layout "
            f"({other!r}: a backbone's or detection head's, not drawn); NNEditor draws "
            f"{family}Model and {family}ForImageClassification; its weights are listed by name"
        )
    folder = Path(doc.path)
    height, width = sized(folder if folder.is_dir() else folder.parent)
    channels = int(config.get("num_channels") or 3)
    b = _ConvBuilder(f"{kind} {FROM}", found, doc)
    b.input((1, channels, height, width))
    if kind == "mobilenet_v2":
        from nneditor.semantic.checkpoint_mobilenet import mobilenet_v2

        x = mobilenet_v2(b, config, height, width)
    elif kind == "mobilenet_v1":
        from nneditor.semantic.checkpoint_mobilenet import mobilenet_v1

        x = mobilenet_v1(b, config, height, width)
    elif kind == "efficientnet":
        from nneditor.semantic.checkpoint_efficientnet import efficientnet

        x = efficientnet(b, config, height, width)
    elif kind == "regnet":
        from nneditor.semantic.checkpoint_regnet import regnet

        x = regnet(b, config, height, width)
    else:
        x = b.resnet(config, height, width) if kind == "resnet" else b.convnext(height, width)
    return b.shaped_graph(x), ""


def sized(folder: Path) -> tuple[int, int]:
    """(height, width) of the image the processor of the snapshot in ``folder`` makes
    (preprocessor_config.json); 224x224 without one."""
    from nneditor.inputs.image import model_sizing

    sizing = model_sizing(folder)
    if sizing is not None and sizing.crop is not None:
        return sizing.crop
    if sizing is not None and sizing.resize is not None:
        return sizing.resize
    return 224, 224


def _out(n: int, kernel: int, stride: int, pad: int) -> int:
    return (n + 2 * pad - kernel) // stride + 1


class _ConvBuilder(ShapedBuilder):
    """ShapedBuilder's nodes (NCHW, or channels-last in ConvNeXt's blocks) for conv nets."""

    def _bn(self, key: str) -> list[str]:
        return [f"{key}.{s}" for s in ("weight", "bias", "mean", "var")]

    # ---------------------------------------------------------------------------- ResNet

    def resnet(self, config: Mapping[str, Any], height: int, width: int) -> str:
        stem = self.width("stem.conv.weight")
        h, w = _out(height, 7, 2, 3), _out(width, 7, 2, 3)
        x = self.add(
            "stem/conv",
            "ConvBNReLU",
            ["pixel_values"],
            "stem.conv",
            ["stem.conv.weight", *self._bn("stem.bn")],
            (1, stem, h, w),
            "conv",
            f"The stem: a 7x7 convolution, stride 2, no bias, to {stem} channels; BatchNorm "
            f"with its running statistics; ReLU {FROM}.",
        )
        h, w = _out(h, 3, 2, 1), _out(w, 3, 2, 1)
        x = self.add(
            "stem/pool",
            "MaxPool",
            [x],
            "stem.pool",
            [],
            (1, stem, h, w),
            "3x3 max pooling, stride 2, padding 1: the embedding output (hidden_states[0]).",
        )
        bottleneck = config.get("layer_type", "bottleneck") == "bottleneck"
        in_bottleneck = bool(config.get("downsample_in_bottleneck"))
        first_strided = bool(config.get("downsample_in_first_stage"))
        out = stem
        for i, s in enumerate(self.stages):
            first = i == 0 or self.stages[i - 1] != s
            stride = 2 if first and (s > 0 or first_strided) else 1
            p = f"blk.{i}"
            out = self.width(f"{p}.conv{3 if bottleneck else 2}.weight")
            if bottleneck:
                inner = self.width(f"{p}.conv1.weight")
                kernels = [(1, stride if in_bottleneck else 1), (3, 1 if in_bottleneck else stride)]
                kernels.append((1, 1))
                widths = [inner, inner, out]
            else:
                kernels, widths = [(3, stride), (3, 1)], [out, out]
            h0, w0 = h, w
            y = x
            for k, ((kernel, st), ch) in enumerate(zip(kernels, widths, strict=True), 1):
                last = k == len(kernels)
                h, w = _out(h, kernel, st, kernel // 2), _out(w, kernel, st, kernel // 2)
                y = self.add(
                    f"stage.{s}/{p}/conv{k}",
                    "ConvBN" if last else "ConvBNReLU",
                    [y],
                    f"{p}.conv{k}",
                    [f"{p}.conv{k}.weight", *self._bn(f"{p}.bn{k}")],
                    (1, ch, h, w),
                    "conv",
                    f"{kernel}x{kernel} convolution"
                    + (f", stride {st}" if st > 1 else "")
                    + f", to {ch} channels; BatchNorm"
                    + ("" if last else "; ReLU")
                    + f" {FROM}.",
                )
            skip = x
            if f"{p}.short.weight" in self.t:
                hs, ws = _out(h0, 1, stride, 0), _out(w0, 1, stride, 0)
                skip = self.add(
                    f"stage.{s}/{p}/shortcut",
                    "ConvBN",
                    [x],
                    f"{p}.shortcut",
                    [f"{p}.short.weight", *self._bn(f"{p}.short_bn")],
                    (1, out, hs, ws),
                    "conv",
                    f"The projection shortcut: a 1x1 convolution, stride {stride}, to {out} "
                    f"channels; BatchNorm {FROM}.",
                )
            x = self.add(
                f"stage.{s}/{p}/residual",
                "AddReLU",
                [y, skip],
                f"{p}.output",
                [],
                (1, out, h, w),
                "residual",
                "The residual add (the block's input"
                + (", projected," if skip != x else "")
                + " plus its convolutions), then ReLU: the block's output.",
            )
        return self._head(x, "resnet", out)

    # -------------------------------------------------------------------------- ConvNeXt

    def convnext(self, height: int, width: int) -> str:
        ref = self._doc.tensors.get(self.t.get("stem.conv.weight", ""))
        patch = int(ref.shape[-1]) if ref is not None and len(ref.shape) == 4 else 4
        ch = self.width("stem.conv.weight")
        h, w = _out(height, patch, patch, 0), _out(width, patch, patch, 0)
        x = self.add(
            "stem/conv",
            "PatchConv",
            ["pixel_values"],
            "stem.conv",
            ["stem.conv.weight", "stem.conv.bias"],
            (1, ch, h, w),
            "conv",
            f"The stem: a {patch}x{patch} convolution, stride {patch} (each patch projected), "
            f"to {ch} channels {FROM}.",
        )
        x = self.add(
            "stem/norm",
            "LayerNorm",
            [x],
            "stem.norm",
            ["stem.norm.weight", "stem.norm.bias"],
            (1, ch, h, w),
            "norm",
            "LayerNorm over the channels at each pixel (eps 1e-6): the embedding output "
            "(hidden_states[0]).",
        )
        for i, s in enumerate(self.stages):
            p = f"blk.{i}"
            if (i == 0 or self.stages[i - 1] != s) and f"down.{s}.conv.weight" in self.t:
                x = self.add(
                    f"stage.{s}/downsample/norm",
                    "LayerNorm",
                    [x],
                    f"down.{s}.norm",
                    [f"down.{s}.norm.weight", f"down.{s}.norm.bias"],
                    (1, ch, h, w),
                    "norm",
                    "The downsampling layer's LayerNorm over the channels (eps 1e-6).",
                )
                ch = self.width(f"down.{s}.conv.weight")
                h, w = _out(h, 2, 2, 0), _out(w, 2, 2, 0)
                x = self.add(
                    f"stage.{s}/downsample/conv",
                    "DownsampleConv",
                    [x],
                    f"down.{s}.conv",
                    [f"down.{s}.conv.weight", f"down.{s}.conv.bias"],
                    (1, ch, h, w),
                    "conv",
                    f"A 2x2 convolution, stride 2, to {ch} channels: the stage's downsampling "
                    f"{FROM}.",
                )
            x = self._convnext_block(f"stage.{s}/{p}", p, x, ch, h, w)
        return self._head(x, "convnext", ch)

    def _convnext_block(self, scope: str, p: str, x: str, ch: int, h: int, w: int) -> str:
        y = self.add(
            f"{scope}/dwconv",
            "DepthwiseConv",
            [x],
            f"{p}.dwconv",
            [f"{p}.dwconv.weight", f"{p}.dwconv.bias"],
            (1, ch, h, w),
            "conv",
            f"Depthwise 7x7 convolution (one filter per channel), padding 3 {FROM}.",
        )
        y = self.add(
            f"{scope}/norm",
            "LayerNorm",
            [y],
            f"{p}.norm",
            [f"{p}.norm.weight", f"{p}.norm.bias"],
            (1, h, w, ch),
            "norm",
            "LayerNorm over the channels, channels last (eps 1e-6).",
        )
        inner = self.width(f"{p}.ffn_up.weight")
        grn = f"{p}.grn.weight" in self.t
        y = self.add(
            f"{scope}/ffn",
            "FeedForward",
            [y],
            f"{p}.ffn",
            [
                f"{p}.ffn_up.weight",
                f"{p}.ffn_up.bias",
                *([f"{p}.grn.weight", f"{p}.grn.bias"] if grn else []),
                f"{p}.ffn_down.weight",
                f"{p}.ffn_down.bias",
            ],
            (1, h, w, ch),
            "ffn",
            f"Pointwise MLP at each pixel: {ch} -> {inner} channels, GELU, "
            + ("global response normalisation (GRN), " if grn else "")
            + f"back to {ch} {FROM}.",
        )
        if f"{p}.ls.weight" in self.t:
            y = self.add(
                f"{scope}/layer_scale",
                "Mul",
                [y],
                f"{p}.scaled",
                [f"{p}.ls.weight"],
                (1, h, w, ch),
                "Layer scale: the MLP's output times a learned vector (gamma).",
            )
        return self.add(
            f"{scope}/residual",
            "Add",
            [x, y],
            f"{p}.output",
            [],
            (1, ch, h, w),
            "residual",
            "The residual add (channels first again): the block's output.",
        )

    # ------------------------------------------------------------------------------ head

    def _head(self, x: str, kind: str, ch: int) -> str:
        if kind == "resnet":
            x = self.add(
                "pooler",
                "GlobalAveragePool",
                [x],
                "pooler_output",
                [],
                (1, ch, 1, 1),
                "Average over every pixel of the last stage: the pooled output.",
            )
        else:
            x = self.add(
                "pooler",
                "GlobalAveragePool",
                [x],
                "pool_mean",
                [],
                (1, ch),
                "Average over every pixel of the last stage.",
            )
            x = self.add(
                "output_norm",
                "LayerNorm",
                [x],
                "pooler_output",
                ["output_norm.weight", "output_norm.bias"],
                (1, ch),
                "norm",
                "The final LayerNorm over the averaged features: the pooled output.",
            )
        return self.classifier(x)
