"""Graphs of Swin Transformer image classifiers in Hugging Face snapshots
(SwinForImageClassification, SwinModel; Swinv2's), synthesized from config.json and the tensor names
(names_swin.py), as transformers' modules run them; the NumPy decoder (decoder/swin.py)
publishes every value drawn here:

    pixel_values → stem.conv (the patch embedding) → stem.norm (hidden_states[0])
                 → blk.{i}.attn_norm, blk.{i}.attn (windowed attention, shifted on every other
                   block of a stage), blk.{i}.attn_residual, blk.{i}.ffn_norm, blk.{i}.ffn,
                   blk.{i}.output (Swinv2: each norm after its branch, before the add)
                 → merge.{s}.gather, merge.{s}.norm, merge.{s}.reduce (patch merging at the
                   end of every stage but the last: hidden_states[s + 1]; Swinv2 normalises
                   after the reduction)
                 → output_norm → pooler_output (the tokens' mean) → result_output

Tokens are [1, rows * cols, channels] as transformers' hidden_states are, their grid that of
the image the snapshot's image processor makes (preprocessor_config.json; 224x224 without
one). Swinv2's attention (cosine, a logit scale, the continuous position bias) is drawn as
what it is, its windows those of config.image_size's grid.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nneditor.model.document import Document
from nneditor.model.graph import Graph
from nneditor.semantic.image_builder import FROM, ShapedBuilder
from nneditor.semantic.names_swin import (
    SWIN_FAMILIES,
    SwinNames,
    block_window,
    patch_grid,
    stage_grids,
    swin_names,
)


def is_swin(config: Mapping[str, Any]) -> bool:
    return str(config.get("model_type") or "") in SWIN_FAMILIES


def swin_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str]:
    """The graph of a Swin or Swinv2 snapshot, or (None, the reason) for layouts not laid
    out here."""
    kind = str(config.get("model_type") or "")
    family = SWIN_FAMILIES[kind]
    found = swin_names(kind, doc.tensors.keys())
    if found.unplaced or not found.stages:
        other = found.unplaced[0] if found.unplaced else "no numbered block"
        return None, (
            f"this {family} snapshot holds tensors outside the image classifier's layout "
            f"({other!r}: masked image modelling's or a backbone's, not drawn); NNEditor draws "
            f"{family}Model and {family}ForImageClassification; its weights are listed by name"
        )
    from nneditor.semantic.checkpoint_convnets import sized

    folder = Path(doc.path)
    height, width = sized(folder if folder.is_dir() else folder.parent)
    channels = int(config.get("num_channels") or 3)
    b = _SwinBuilder(f"{kind} {FROM}", found, doc)
    b.v2 = kind == "swinv2"
    b.input((1, channels, height, width))
    x = b.swin(config, height, width)
    return b.shaped_graph(x), ""


class _SwinBuilder(ShapedBuilder):
    """ShapedBuilder's nodes (tokens [1, rows * cols, channels]) for Swin and Swinv2."""

    def __init__(self, title: str, found: SwinNames, doc: Document) -> None:
        super().__init__(title, found, doc)
        self.v2 = False

    def swin(self, config: Mapping[str, Any], height: int, width: int) -> str:
        patch = config.get("patch_size") or 4
        patch = int(patch[0] if isinstance(patch, (list, tuple)) else patch)
        window = int(config.get("window_size") or 7)
        heads = [int(h) for h in config.get("num_heads") or []]
        dim = self.width("stem.conv.weight")
        grids = stage_grids(patch_grid(height, width, patch), max(self.stages) + 1)
        image = config.get("image_size") or 224
        image = int(image[0] if isinstance(image, (list, tuple)) else image)
        trained = [(image // patch) // 2**s for s in range(len(grids))]
        rows, cols = grids[0]
        x = self.add(
            "stem/conv",
            "PatchConv",
            ["pixel_values"],
            "stem.conv",
            ["stem.conv.weight", "stem.conv.bias"],
            (1, dim, rows, cols),
            "conv",
            f"The patch embedding: a {patch}x{patch} convolution, stride {patch} (each patch "
            f"projected; the image padded to whole patches), to {dim} channels {FROM}.",
        )
        positions = " plus the absolute positions" if "pos_embd.weight" in self.t else ""
        x = self.add(
            "stem/norm",
            "LayerNorm",
            [x],
            "stem.norm",
            ["stem.norm.weight", "stem.norm.bias", "pos_embd.weight"],
            (1, rows * cols, dim),
            "norm",
            f"LayerNorm over each patch's {dim} channels{positions}: the {rows}x{cols} grid of "
            "tokens, the embedding output (hidden_states[0]).",
        )
        for i, s in enumerate(self.stages):
            first = i == 0 or self.stages[i - 1] != s
            if first and s > 0:
                x = self._merge(s - 1, x, grids[s - 1], dim)
                dim *= 2
            shifted = (i - self.stages.index(s)) % 2 == 1
            at = (trained[s], trained[s]) if self.v2 else grids[s]  # (Swinv2: as built)
            side, shift = block_window(at, window, shifted)
            heads_s = heads[s] if s < len(heads) else 0
            x = self._block(i, s, x, grids[s], dim, heads_s, side, shift)
        return self._head(x, grids[-1], dim)

    def _merge(self, s: int, x: str, grid: tuple[int, int], dim: int) -> str:
        rows, cols = (grid[0] + 1) // 2, (grid[1] + 1) // 2
        scope = f"stage.{s}/patch_merging"
        tokens = rows * cols
        x = self.add(
            f"{scope}/gather",
            "PatchMerge",
            [x],
            f"merge.{s}.gather",
            [],
            (1, tokens, 4 * dim),
            f"Patch merging: each 2x2 group of tokens concatenated (top-left, bottom-left, "
            f"top-right, bottom-right; an odd side padded), {dim} channels to {4 * dim}, the "
            f"grid to {rows}x{cols}.",
        )
        out = f"stage {s}'s output (hidden_states[{s + 1}])"

        def norm(y: str, width: int, what: str) -> str:
            return self.add(
                f"{scope}/norm",
                "LayerNorm",
                [y],
                f"merge.{s}.norm",
                [f"merge.{s}.norm.weight", f"merge.{s}.norm.bias"],
                (1, tokens, width),
                "norm",
                f"LayerNorm over the {width} {what}.",
            )

        def reduce(y: str) -> str:
            return self.add(
                f"{scope}/reduction",
                "Linear",
                [y],
                f"merge.{s}.reduce",
                [f"merge.{s}.reduce.weight"],
                (1, tokens, 2 * dim),
                "merge",
                f"A linear map (no bias) from {4 * dim} to {2 * dim} channels"
                + ("" if self.v2 else f": {out}")
                + f" {FROM}.",
            )

        if self.v2:  # (Swinv2 normalises the reduction's output)
            return norm(reduce(x), 2 * dim, f"reduced channels: {out}")
        return reduce(norm(x, 4 * dim, "merged channels"))

    def _block(
        self,
        i: int,
        s: int,
        x: str,
        grid: tuple[int, int],
        dim: int,
        heads: int,
        window: int,
        shift: int,
    ) -> str:
        p = f"blk.{i}"
        scope = f"stage.{s}/{p}"
        tokens = (1, grid[0] * grid[1], dim)

        def norm(key: str, y: str, what: str) -> str:
            return self.add(
                f"{scope}/{key}",
                "LayerNorm",
                [y],
                f"{p}.{key}",
                [f"{p}.{key}.weight", f"{p}.{key}.bias"],
                tokens,
                "norm",
                f"LayerNorm {what}.",
            )

        y = x if self.v2 else norm("attn_norm", x, "before the attention (layernorm_before)")
        shifted = (
            f"the grid rolled up and left by {shift} tokens first (and back after), each "
            "window masking the pairs of tokens the roll brought together from different "
            "regions"
            if shift
            else "the windows unshifted"
        )
        windows = -(-grid[0] // window) * -(-grid[1] // window)
        if self.v2:
            scores = (
                "each head's cosine similarities times exp(logit_scale) plus its continuous "
                "position bias (an MLP over log-spaced relative coordinates, 16 sigmoid)"
            )
            bias = [f"{p}.attn_logit_scale.weight", f"{p}.attn_cpb_0.weight"]
            bias += [f"{p}.attn_cpb_0.bias", f"{p}.attn_cpb_2.weight"]
        else:
            scores = (
                "each head's scores plus its relative-position bias (a table of "
                f"{(2 * window - 1) ** 2} rows read through the window's index)"
            )
            bias = [f"{p}.attn_rel_b.weight"]
        y = self.add(
            f"{scope}/attention",
            "ShiftedWindowAttention" if shift else "WindowAttention",
            [y],
            f"{p}.attn",
            [
                *(f"{p}.attn_{k}.{b}" for k in ("q", "k", "v") for b in ("weight", "bias")),
                *bias,
                f"{p}.attn_out.weight",
                f"{p}.attn_out.bias",
            ],
            tokens,
            "attention",
            f"Self-attention within {windows} windows of {window}x{window} tokens ({heads} "
            f"heads; the grid padded to whole windows), {scores}; {shifted} {FROM}.",
        )
        if self.v2:
            y = norm("attn_norm", y, "over the attention's output, before the residual add")
        x = self.add(
            f"{scope}/attn_residual",
            "Add",
            [x, y],
            f"{p}.attn_residual",
            [],
            tokens,
            "residual",
            "The residual add after the attention.",
        )
        inner = self.width(f"{p}.ffn_up.weight")
        y = x if self.v2 else norm("ffn_norm", x, "before the MLP (layernorm_after)")
        y = self.add(
            f"{scope}/ffn",
            "FeedForward",
            [y],
            f"{p}.ffn",
            [
                f"{p}.ffn_up.weight",
                f"{p}.ffn_up.bias",
                f"{p}.ffn_down.weight",
                f"{p}.ffn_down.bias",
            ],
            tokens,
            "ffn",
            f"The MLP at each token: {dim} -> {inner} channels, GELU, back to {dim} {FROM}.",
        )
        if self.v2:
            y = norm("ffn_norm", y, "over the MLP's output, before the residual add")
        return self.add(
            f"{scope}/residual",
            "Add",
            [x, y],
            f"{p}.output",
            [],
            tokens,
            "residual",
            "The residual add after the MLP: the block's output.",
        )

    def _head(self, x: str, grid: tuple[int, int], dim: int) -> str:
        x = self.add(
            "output_norm",
            "LayerNorm",
            [x],
            "output_norm",
            ["output_norm.weight", "output_norm.bias"],
            (1, grid[0] * grid[1], dim),
            "norm",
            "The final LayerNorm over every token of the last stage (last_hidden_state).",
        )
        x = self.add(
            "pooler",
            "GlobalAveragePool",
            [x],
            "pooler_output",
            [],
            (1, dim),
            "The mean of every token: the pooled output.",
        )
        return self.classifier(x)
