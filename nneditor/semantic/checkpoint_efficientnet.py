"""The graph of an EfficientNet image classifier (names_efficientnet.py's tensors), drawn on
checkpoint_convnets.py's builder as transformers' EfficientNet runs it; the NumPy decoder
(decoder/efficientnet.py) publishes every value drawn here:

    pixel_values → stem.conv (hidden_states[0])
                 → blk.{i}.expand (where expand_ratio is not 1) → blk.{i}.dw → blk.{i}.se
                   → blk.{i}.project → blk.{i}.output (the residual add on every block of a
                   stage but its first; there the projection is the block's output)
                 → head.conv → pooler_output → result_output
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.semantic.image_builder import FROM
from nneditor.semantic.names_efficientnet import schedule


def efficientnet(b: Any, config: Mapping[str, Any], height: int, width: int) -> str:  # noqa: ANN401 - checkpoint_convnets._ConvBuilder
    """Draw the stem, the MBConv blocks, the top convolution, the pooling and the
    classifier; the last value's name."""
    act = str(config.get("hidden_act") or "swish")
    bn = f"BatchNorm (eps {float(config.get('batch_norm_eps') or 1e-3):g})"

    def conv(scope: str, key: str, x: str, out: str, shape: tuple[int, ...], what: str) -> str:
        last = key.endswith("project")
        keys = [f"{key}.weight", *(f"{key}_bn.{s}" for s in ("weight", "bias", "mean", "var"))]
        return b.add(
            scope, "ConvBN" if last else "ConvBNAct", [x], out, keys, shape, "conv",
            f"{what}; {bn}" + ("" if last else f"; {act}") + f" {FROM}.",
        )  # fmt: skip

    h, w = (height + 1 - 3) // 2 + 1, (width + 1 - 3) // 2 + 1
    ch = b.width("stem.conv.weight")
    x = conv("stem/conv", "stem.conv", "pixel_values", "stem.conv", (1, ch, h, w),
             f"The stem: one pixel padded right and below, a 3x3 convolution, stride 2, to {ch} "
             "channels")  # fmt: skip
    for i, block in enumerate(schedule(config)):
        p, scope = f"blk.{i}", f"block.{i}"
        y = x
        if f"{p}.expand.weight" in b.t:
            ch = b.width(f"{p}.expand.weight")
            y = conv(f"{scope}/expand", f"{p}.expand", y, f"{p}.expand", (1, ch, h, w),
                     f"1x1 expansion to {ch} channels")  # fmt: skip
        ref = b._doc.tensors.get(b.t.get(f"{p}.dw.weight", ""))
        k = int(ref.shape[-1]) if ref is not None and ref.shape else 3
        if block.stride == 2:
            before = k // 2 - 1 if block.adjust else k // 2
            h, w = (h + before + k // 2 - k) // 2 + 1, (w + before + k // 2 - k) // 2 + 1
            how = f"stride 2, padded {before} above and left, {k // 2} below and right"
        else:
            how = f"padded {k // 2} on every side"
        y = conv(f"{scope}/dw", f"{p}.dw", y, f"{p}.dw", (1, ch, h, w),
                 f"Depthwise {k}x{k} convolution, {how}")  # fmt: skip
        inner = b.width(f"{p}.se_reduce.weight")
        y = b.add(
            f"{scope}/se", "SqueezeExcite", [y], f"{p}.se",
            [f"{p}.se_{a}.{s}" for a in ("reduce", "expand") for s in ("weight", "bias")],
            (1, ch, h, w), "",
            f"Squeeze and excitation: the pixels' mean through 1x1 convolutions to {inner} "
            f"channels ({act}) and back, a sigmoid scaling each channel {FROM}.",
        )  # fmt: skip
        out = b.width(f"{p}.project.weight")
        y = conv(f"{scope}/project", f"{p}.project", y,
                 f"{p}.project" if block.residual else f"{p}.output", (1, out, h, w),
                 f"1x1 projection to {out} channels, no activation"
                 + ("" if block.residual else ": the block's output (a stage's first block "
                    "adds no residual)"))  # fmt: skip
        if block.residual:
            y = b.add(
                f"{scope}/residual", "Add", [y, x], f"{p}.output", [], (1, out, h, w),
                "residual", "The residual add (a stage's later block): the block's output.",
            )  # fmt: skip
        x, ch = y, out
    ch = b.width("head.conv.weight")
    x = conv("head/conv", "head.conv", x, "head.conv", (1, ch, h, w),
             f"The top 1x1 convolution to {ch} channels (the last hidden state)")  # fmt: skip
    pooling = str(config.get("pooling_type") or "mean")
    x = b.add("pooler", "GlobalAveragePool" if pooling == "mean" else "GlobalMaxPool", [x],
              "pooler_output", [], (1, ch),
              f"The {pooling} over every pixel: the pooled output.")  # fmt: skip
    if "cls_out.weight" not in b.t:
        return x
    labels = b.width("cls_out.weight")
    return b.add(
        "classifier", "Linear", [x], "result_output", ["cls_out.weight", "cls_out.bias"],
        (1, 1, labels), "head",
        f"The classifier (dropout is the identity in eval): a linear layer to {labels} class "
        f"logits {FROM}.",
    )  # fmt: skip
