"""The graph of a MobileNetV2 image classifier (names_mobilenet.py's tensors), drawn on
checkpoint_convnets.py's builder as transformers' MobileNetV2 runs it; the NumPy decoder
(decoder/mobilenet.py) publishes every value drawn here:

    pixel_values → stem.conv → stem.expand (where stored) → stem.dw → stem.project
                 → blk.{i}.expand → blk.{i}.dw → blk.{i}.project → blk.{i}.output (the
                   residual add where the stride is 1 and the channels unchanged; else the
                   projection itself is the block's output)
                 → head.conv → pooler_output → result_output
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.semantic.image_builder import FROM
from nneditor.semantic.names_mobilenet import STRIDES


def _side(n: int, stride: int) -> int:
    """A 3x3 (or 1x1) convolution's output side: ceil(n / stride), with TensorFlow's SAME
    padding and with the symmetric one alike."""
    return -(-n // stride)


def mobilenet_v2(b: Any, config: Mapping[str, Any], height: int, width: int) -> str:  # noqa: ANN401 - checkpoint_convnets._ConvBuilder
    """Draw the stem, the 16 inverted residual blocks, the final convolution, the pooling and
    the classifier; the last value's name."""
    act = str(config.get("hidden_act") or "relu6")
    pad = (
        "TensorFlow SAME padding (the odd row and column below and right)"
        if config.get("tf_padding", True)
        else "symmetric padding"
    )
    eps = float(config.get("layer_norm_eps") or 1e-3)
    bn = f"BatchNorm (eps {eps:g})"

    def conv(scope: str, key: str, x: str, out: str, shape: tuple[int, ...], what: str) -> str:
        act_text = "" if key.endswith("project") else f"; {act}"
        keys = [f"{key}.weight", *(f"{key}_bn.{s}" for s in ("weight", "bias", "mean", "var"))]
        return b.add(
            scope, "ConvBN" + ("" if act_text == "" else "Act"), [x], out, keys, shape,
            "conv", f"{what}, {pad}; {bn}{act_text} {FROM}.",
        )  # fmt: skip

    h, w = _side(height, 2), _side(width, 2)
    ch = b.width("stem.conv.weight")
    x = conv("stem/conv", "stem.conv", "pixel_values", "stem.conv", (1, ch, h, w),
             f"The stem: a 3x3 convolution, stride 2, no bias, to {ch} channels")  # fmt: skip
    if "stem.expand.weight" in b.t:
        x = conv("stem/expand", "stem.expand", x, "stem.expand", (1, ch, h, w),
                 "A 1x1 convolution (first_layer_is_expansion false)")  # fmt: skip
    x = conv("stem/dw", "stem.dw", x, "stem.dw", (1, ch, h, w),
             "Depthwise 3x3 convolution (one filter per channel)")  # fmt: skip
    ch = b.width("stem.project.weight")
    x = conv("stem/project", "stem.project", x, "stem.project", (1, ch, h, w),
             f"A 1x1 projection to {ch} channels, no activation")  # fmt: skip
    for i, stride in enumerate(STRIDES):
        p, scope = f"blk.{i}", f"block.{i}"
        inner, out = b.width(f"{p}.expand.weight"), b.width(f"{p}.project.weight")
        add = stride == 1 and out == ch
        y = conv(f"{scope}/expand", f"{p}.expand", x, f"{p}.expand", (1, inner, h, w),
                 f"1x1 expansion to {inner} channels")  # fmt: skip
        h, w = _side(h, stride), _side(w, stride)
        y = conv(f"{scope}/dw", f"{p}.dw", y, f"{p}.dw", (1, inner, h, w),
                 "Depthwise 3x3 convolution" + (f", stride {stride}" if stride > 1 else ""))  # fmt: skip
        y = conv(f"{scope}/project", f"{p}.project", y, f"{p}.project" if add else f"{p}.output",
                 (1, out, h, w), f"1x1 projection to {out} channels, no activation"
                 + ("" if add else ": the block's output (no residual: the stride or the "
                    "channels change)"))  # fmt: skip
        if add:
            y = b.add(
                f"{scope}/residual", "Add", [x, y], f"{p}.output", [], (1, out, h, w),
                "residual", "The residual add (stride 1, channels unchanged): the block's output.",
            )  # fmt: skip
        x, ch = y, out
    ch = b.width("head.conv.weight")
    x = conv("head/conv", "head.conv", x, "head.conv", (1, ch, h, w),
             f"The final 1x1 convolution to {ch} channels (the last hidden state)")  # fmt: skip
    x = b.add("pooler", "GlobalAveragePool", [x], "pooler_output", [], (1, ch),
              "Average over every pixel: the pooled output.")  # fmt: skip
    if "cls_out.weight" not in b.t:
        return x
    labels = b.width("cls_out.weight")
    return b.add(
        "classifier", "Linear", [x], "result_output", ["cls_out.weight", "cls_out.bias"],
        (1, 1, labels), "head",
        f"The classifier (dropout is the identity in eval): a linear layer to {labels} class "
        f"logits {FROM}.",
    )  # fmt: skip


def mobilenet_v1(b: Any, config: Mapping[str, Any], height: int, width: int) -> str:  # noqa: ANN401 - checkpoint_convnets._ConvBuilder
    """MobileNetV1: the stem, 13 depthwise 3x3 and pointwise 1x1 layer pairs (each layer's
    output ``blk.{i}.output``, transformers' hidden_states[i]), the pooling, the classifier."""
    from nneditor.semantic.names_mobilenet import V1_STRIDES

    act = str(config.get("hidden_act") or "relu6")
    pad = "TensorFlow SAME padding" if config.get("tf_padding", True) else "symmetric padding"
    bn = f"BatchNorm (eps {float(config.get('layer_norm_eps') or 1e-3):g}); {act}"
    x, h, w = "pixel_values", height, width
    for i in range(-1, 2 * len(V1_STRIDES)):
        key = "stem.conv" if i < 0 else f"blk.{i}.conv"
        stride = 2 if i < 0 else (V1_STRIDES[i // 2] if i % 2 == 0 else 1)
        h, w = _side(h, stride), _side(w, stride)
        ch = b.width(f"{key}.weight")
        what = (
            "The stem: a 3x3 convolution"
            if i < 0
            else "Depthwise 3x3 convolution"
            if i % 2 == 0
            else f"Pointwise 1x1 convolution to {ch} channels"
        )
        keys = [f"{key}.weight", *(f"{key}_bn.{s}" for s in ("weight", "bias", "mean", "var"))]
        x = b.add(
            "stem/conv" if i < 0 else f"layer.{i}/conv", "ConvBNAct", [x],
            "stem.conv" if i < 0 else f"blk.{i}.output", keys, (1, ch, h, w), "conv",
            what + (f", stride {stride}" if stride > 1 else "") + f", {pad}; {bn} {FROM}.",
        )  # fmt: skip
    x = b.add("pooler", "GlobalAveragePool", [x], "pooler_output", [], (1, ch),
              "Average over every pixel: the pooled output.")  # fmt: skip
    if "cls_out.weight" not in b.t:
        return x
    labels = b.width("cls_out.weight")
    return b.add(
        "classifier", "Linear", [x], "result_output", ["cls_out.weight", "cls_out.bias"],
        (1, 1, labels), "head",
        f"The classifier (dropout is the identity in eval): a linear layer to {labels} class "
        f"logits {FROM}.",
    )  # fmt: skip
