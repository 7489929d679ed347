"""The graph of a RegNet image classifier (names_regnet.py's tensors), drawn on
checkpoint_convnets.py's builder as transformers' RegNet runs it; the NumPy decoder
(decoder/regnet.py) publishes every value drawn here:

    pixel_values → stem.conv (hidden_states[0])
                 → blk.{i}.conv1 → blk.{i}.conv2 → blk.{i}.se (Y layers) → blk.{i}.conv3,
                   blk.{i}.shortcut (where there is one) → blk.{i}.output (the residual add
                   and the activation; each stage's last is hidden_states[s + 1])
                 → pooler_output [1, C, 1, 1] → result_output
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.semantic.image_builder import FROM


def _side(n: int, kernel: int, stride: int) -> int:
    return (n + 2 * (kernel // 2) - kernel) // stride + 1


def regnet(b: Any, config: Mapping[str, Any], height: int, width: int) -> str:  # noqa: ANN401 - checkpoint_convnets._ConvBuilder
    """Draw the stem, the stages' X or Y blocks, the pooling and the classifier; the last
    value's name."""
    act = str(config.get("hidden_act") or "relu")
    bn = "BatchNorm (eps 1e-5)"

    def conv(scope: str, p: str, k: str, x: str, shape: tuple[int, ...], what: str) -> str:
        last = k in ("3", "short")
        names = ("short", "short_bn") if k == "short" else (f"conv{k}", f"bn{k}")
        keys = [f"{p}.{names[0]}.weight"]
        keys += [f"{p}.{names[1]}.{s}" for s in ("weight", "bias", "mean", "var")]
        out = f"{p}.shortcut" if k == "short" else f"{p}.conv{k}"
        return b.add(
            scope, "ConvBN" if last else "ConvBNAct", [x], out, keys, shape, "conv",
            f"{what}; {bn}" + ("" if last else f"; {act}") + f" {FROM}.",
        )  # fmt: skip

    h, w = _side(height, 3, 2), _side(width, 3, 2)
    ch = b.width("stem.conv.weight")
    x = conv("stem/conv", "stem", "", "pixel_values", (1, ch, h, w),
             f"The stem: a 3x3 convolution, stride 2, to {ch} channels")  # fmt: skip
    first_strided = bool(config.get("downsample_in_first_stage", True))
    stages = b.stages
    for i, s in enumerate(stages):
        first = i == 0 or stages[i - 1] != s
        stride = 2 if first and (s > 0 or first_strided) else 1
        p, scope = f"blk.{i}", f"stage.{s}/blk.{i}"
        out = b.width(f"{p}.conv1.weight")
        ref = b._doc.tensors.get(b.t.get(f"{p}.conv2.weight", ""))
        groups = out // int(ref.shape[1]) if ref is not None and ref.shape else 1
        h0, w0 = h, w
        y = conv(f"{scope}/conv1", p, "1", x, (1, out, h, w), f"1x1 convolution to {out} channels")
        h, w = _side(h, 3, stride), _side(w, 3, stride)
        y = conv(f"{scope}/conv2", p, "2", y, (1, out, h, w),
                 f"3x3 convolution in {groups} groups" + (f", stride {stride}" if stride > 1 else ""))  # fmt: skip
        if f"{p}.se_reduce.weight" in b.t:
            inner = b.width(f"{p}.se_reduce.weight")
            y = b.add(
                f"{scope}/se", "SqueezeExcite", [y], f"{p}.se",
                [f"{p}.se_{a}.{t}" for a in ("reduce", "expand") for t in ("weight", "bias")],
                (1, out, h, w), "",
                f"Squeeze and excitation: the pixels' mean through 1x1 convolutions to {inner} "
                f"channels (ReLU) and back, a sigmoid scaling each channel {FROM}.",
            )  # fmt: skip
        y = conv(f"{scope}/conv3", p, "3", y, (1, out, h, w), "1x1 convolution, no activation")
        skip = x
        if f"{p}.short.weight" in b.t:
            skip = conv(f"{scope}/shortcut", p, "short", x,
                        (1, out, _side(h0, 1, stride), _side(w0, 1, stride)),
                        f"The projection shortcut: a 1x1 convolution, stride {stride}")  # fmt: skip
        x = b.add(
            f"{scope}/residual", "AddAct", [y, skip], f"{p}.output", [], (1, out, h, w),
            "residual", f"The residual add, then {act}: the block's output.",
        )  # fmt: skip
    x = b.add("pooler", "GlobalAveragePool", [x], "pooler_output", [], (1, out, 1, 1),
              "Average over every pixel of the last stage: the pooled output.")  # fmt: skip
    return b.classifier(x)
