"""Swin Transformer image classifiers (microsoft/swin-*: SwinModel,
SwinForImageClassification) on NumPy, as transformers' modules compute them, every value named
as the synthesized graph (semantic/checkpoint_swin.py) names it.

The patch embedding (a patch x patch convolution of stride patch over the image, padded at the
bottom and right to whole patches; LayerNorm, eps 1e-5, torch's default: the module states
none; absolute positions where stored) makes a grid of tokens. Each stage runs its blocks on
that grid: LayerNorm, attention within windows of window x window tokens (the grid padded
with zeros at the bottom and right to whole windows), each head's scores plus the block's
relative-position bias (a table of (2 window - 1)^2 rows read through the window's index);
every other block rolls the grid up and left by half a window first (and back after), its
windows then masking, by -100, the pairs of tokens that the roll brought together from
different regions; the residual; LayerNorm, the MLP (GELU), the residual. A grid whose shorter
side is no longer than the window is attended as one window, unshifted. Between stages, patch
merging concatenates each 2x2 group's four tokens (top-left, bottom-left, top-right,
bottom-right; an odd side padded), LayerNorm over the four (eps 1e-5), a linear map to twice
the channels. The final LayerNorm, the tokens' mean, the classifier.

Swinv2 (microsoft/swinv2-*: Swinv2Model, Swinv2ForImageClassification) on the same path:
cosine attention (queries and keys scaled to unit length) times exp(logit_scale), at most 100;
the bias 16 sigmoid of an MLP (2 -> 512, ReLU, -> heads) over log-spaced relative
coordinates; each LayerNorm after its branch (attention, MLP) before the residual add; patch
merging's LayerNorm after the reduction; windows and shifts set by config.image_size's grid,
whatever the image's, as Swinv2Layer sets them when built (the shifted mask, added twice by
transformers, is added twice here too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.decoder import conv_ops, ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.image_config import staged_image_config
from nneditor.decoder.vision import Swin
from nneditor.semantic.names_swin import SWIN_FAMILIES, patch_grid, stage_grids, swin_names

F32 = np.float32
#: nn.LayerNorm's default eps, which the patch embedding's and patch merging's norms keep
LN_EPS = 1e-5
#: the score given to pairs of tokens a shifted window brings together from different regions
MASKED = -100.0
#: patch merging's order of each 2x2 group's tokens, as (row, column) offsets: top-left,
#: bottom-left, top-right, bottom-right (the original Swin's x0, x1, x2, x3)
MERGE_ORDER = ((0, 0), (1, 0), (0, 1), (1, 1))
Emit = Callable[[str, np.ndarray], None]


def from_hf(config: Mapping[str, Any], names: Sequence[str], folder: Path) -> DecoderConfig:
    """The forward pass of a Swin snapshot in ``folder``, or a sentence."""
    from nneditor.semantic.checkpoint_convnets import sized

    kind = str(config.get("model_type") or "")
    family = SWIN_FAMILIES[kind]
    found = swin_names(kind, names)
    if found.unplaced:
        raise DecoderUnsupported(
            f"this {family} snapshot holds {found.unplaced[0]!r}, outside the image "
            "classifier's layout (masked image modelling's or a backbone's); the NumPy decoder "
            f"runs {family}Model and {family}ForImageClassification"
        )
    depths = [int(d) for d in config.get("depths") or []]
    if found.depths() != depths:
        raise DecoderUnsupported(
            f"config.json states {depths} blocks per stage, but the tensor names number "
            f"{found.depths()}; the snapshot does not fit its configuration"
        )
    act = str(config.get("hidden_act") or "gelu")
    if act not in ops.ACTIVATIONS:
        raise DecoderUnsupported(f"{family} activation {act!r} is not implemented")
    embed = int(config.get("embed_dim") or 96)
    heads = tuple(int(h) for h in config.get("num_heads") or [])
    if len(heads) != len(depths):
        raise DecoderUnsupported(
            f"config.json states {len(heads)} head counts for {len(depths)} stages"
        )
    patch = config.get("patch_size") or 4
    patch = int(patch[0] if isinstance(patch, (list, tuple)) else patch)
    image = config.get("image_size") or 224
    image = tuple(image) if isinstance(image, (list, tuple)) else (image, image)
    v2 = kind == "swinv2"
    if v2 and image[0] != image[1]:
        raise DecoderUnsupported(
            f"this Swinv2's image size {list(image)} is not square: its windows are set per "
            "side, which the NumPy decoder does not follow"
        )
    pretrained = [int(p) for p in config.get("pretrained_window_sizes") or [0] * len(depths)]
    net = Swin(
        stages=found.stages,
        widths=tuple(embed * 2**s for s in range(len(depths))),
        heads=heads,
        window=int(config.get("window_size") or 7),
        patch=patch,
        size=sized(folder),
        grid=(int(image[0]) // patch, int(image[1]) // patch),
        channels=int(config.get("num_channels") or 3),
        mlp=float(config.get("mlp_ratio") or 4.0),
        v2=v2,
        pretrained=tuple(pretrained),
    )
    return staged_image_config(
        kind,
        config,
        found.names,
        found.stages,
        hidden=net.widths[-1] if net.widths else 0,
        n_heads=heads[-1] if heads else 0,
        n_kv_heads=heads[-1] if heads else 0,
        head_dim=net.widths[-1] // heads[-1] if heads else 0,
        norm="layer",
        norm_eps=float(config.get("layer_norm_eps") or 1e-5),
        activation=act,
        swin=net,
    )


def forward(w: Any, cfg: DecoderConfig, pixels: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """The class logits [1, 1, labels] (a base model: its pooled output [1, channels]) of
    ``pixels`` [1, channels, height, width]."""
    net: Swin = cfg.swin
    shape = list(pixels.shape)
    if len(shape) != 4 or shape[:2] != [1, net.channels]:
        raise DecoderUnsupported(
            f"pixel values must be [1, {net.channels}, height, width] for this Swin, given {shape}"
        )
    grids = stage_grids(patch_grid(shape[2], shape[3], net.patch), len(net.widths))
    small = None if net.v2 else next((g for g in grids if min(g) < net.window), None)
    if small is not None:
        s = grids.index(small)
        raise DecoderUnsupported(
            f"the {shape[2]}x{shape[3]} image leaves stage {s} a {small[0]}x{small[1]} grid of "
            f"tokens, narrower than the {net.window}x{net.window} window its relative-position "
            f"tables are for (transformers fails on it too); give an image of at least "
            f"{net.window * net.patch * 2 ** (len(grids) - 1)} pixels a side, as its processor "
            f"makes {net.size[0]}x{net.size[1]}"
        )
    x = _embed(w, cfg, np.ascontiguousarray(pixels[0], dtype=F32), emit)
    act = ops.ACTIVATIONS[cfg.activation]
    for i, s in enumerate(net.stages):
        first = i == 0 or net.stages[i - 1] != s
        if first and s > 0:
            x = _merge(w, s - 1, x, emit, net.v2)
        shifted = (i - net.stages.index(s)) % 2 == 1  # every other block of the stage
        window, shift = net.stage_window(s, x.shape[:2], shifted)
        x = _block(w, cfg, f"blk.{i}", x, _Window(net.heads[s], window, shift, s), act, emit)
        w.done_with(i)
    rows, cols, channels = x.shape
    tokens = ops.layer_norm(
        x.reshape(rows * cols, channels),
        w.get("output_norm.weight"),
        w.get("output_norm.bias"),
        cfg.norm_eps,
    )
    emit("output_norm", tokens[None])
    pooled = tokens.mean(axis=0, keepdims=True, dtype=np.float64).astype(F32)
    emit("pooler_output", pooled)
    if cfg.classifier is None:
        return pooled
    labels = cfg.classifier.labels
    out = w.ref("cls_out.weight").shape[0]
    if labels and out != len(labels):
        raise DecoderUnsupported(
            f"the classifier has {out} outputs but config.json names {len(labels)} labels"
        )
    logits = w.linear("cls_out.weight", pooled, "cls_out.bias").astype(F32)
    emit("result_output", logits[None])
    return logits[None]


def _embed(w: Any, cfg: DecoderConfig, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401
    """The patch embedding's grid of tokens [rows, cols, channels]."""
    net: Swin = cfg.swin
    p = net.patch
    _, height, width = x.shape
    x = np.pad(x, ((0, 0), (0, -height % p), (0, -width % p)))
    x = conv_ops.conv2d(x, w.get("stem.conv.weight"), w.get("stem.conv.bias"), p)
    emit("stem.conv", x[None])
    x = x.transpose(1, 2, 0)
    x = ops.layer_norm(x, w.get("stem.norm.weight"), w.get("stem.norm.bias"), LN_EPS)
    if w.has("pos_embd.weight"):
        if x.shape[:2] != net.grid:
            raise DecoderUnsupported(
                f"this Swin's absolute positions are laid out for a {net.grid[0]}x{net.grid[1]} "
                f"grid of patches, not the image's {x.shape[0]}x{x.shape[1]}; give images of "
                f"{net.grid[0] * p}x{net.grid[1] * p} pixels"
            )
        x = (x + w.get("pos_embd.weight").reshape(x.shape)).astype(F32)
    emit("stem.norm", x.reshape(1, -1, x.shape[-1]))
    return np.ascontiguousarray(x)


def _merge(w: Any, s: int, x: np.ndarray, emit: Emit, v2: bool) -> np.ndarray:  # noqa: ANN401
    """Stage ``s``'s patch merging: [rows, cols, C] -> [rows / 2, cols / 2, 2 C]; Swin
    normalises the four tokens' channels before the reduction, Swinv2 the reduction's."""
    rows, cols, _ = x.shape
    x = np.pad(x, ((0, rows % 2), (0, cols % 2), (0, 0)))
    x = np.concatenate([x[r::2, c::2] for r, c in MERGE_ORDER], axis=-1)
    emit(f"merge.{s}.gather", x.reshape(1, -1, x.shape[-1]))
    weight, bias = w.get(f"merge.{s}.norm.weight"), w.get(f"merge.{s}.norm.bias")
    if not v2:
        x = ops.layer_norm(x, weight, bias, LN_EPS)
        emit(f"merge.{s}.norm", x.reshape(1, -1, x.shape[-1]))
    x = w.linear(f"merge.{s}.reduce.weight", x).astype(F32)
    emit(f"merge.{s}.reduce", x.reshape(1, -1, x.shape[-1]))
    if v2:
        x = ops.layer_norm(x, weight, bias, LN_EPS)
        emit(f"merge.{s}.norm", x.reshape(1, -1, x.shape[-1]))
    return x


@dataclass(frozen=True)
class _Window:
    """A block's attention: its heads, window side, shift (0: unshifted) and stage."""

    heads: int
    side: int
    shift: int
    stage: int


def _block(
    w: Any,  # noqa: ANN401 - weights.Weights
    cfg: DecoderConfig,
    p: str,
    x: np.ndarray,
    win: _Window,
    act: Callable[[np.ndarray], np.ndarray],
    emit: Emit,
) -> np.ndarray:
    """One block on the grid ``x`` [rows, cols, C]: Swin's norms before the attention and the
    MLP, Swinv2's after them (on the branch, before the residual add)."""
    rows, cols, channels = x.shape
    v2 = cfg.swin.v2

    def norm(key: str, y: np.ndarray) -> np.ndarray:
        y = ops.layer_norm(y, w.get(f"{p}.{key}.weight"), w.get(f"{p}.{key}.bias"), cfg.norm_eps)
        emit(f"{p}.{key}", y.reshape(1, -1, channels))
        return y

    y = x if v2 else norm("attn_norm", x)
    y = np.pad(y, ((0, -rows % win.side), (0, -cols % win.side), (0, 0)))
    if win.shift:
        y = np.roll(y, (-win.shift, -win.shift), axis=(0, 1))
    y = _window_attention(w, cfg, p, y, win)
    if win.shift:
        y = np.roll(y, (win.shift, win.shift), axis=(0, 1))
    y = np.ascontiguousarray(y[:rows, :cols])
    emit(f"{p}.attn", y.reshape(1, -1, channels))
    x = (x + (norm("attn_norm", y) if v2 else y)).astype(F32)
    emit(f"{p}.attn_residual", x.reshape(1, -1, channels))
    y = x if v2 else norm("ffn_norm", x)
    h = act(w.linear(f"{p}.ffn_up.weight", y, f"{p}.ffn_up.bias")).astype(F32)
    y = w.linear(f"{p}.ffn_down.weight", h, f"{p}.ffn_down.bias").astype(F32)
    emit(f"{p}.ffn", y.reshape(1, -1, channels))
    x = (x + (norm("ffn_norm", y) if v2 else y)).astype(F32)
    emit(f"{p}.output", x.reshape(1, -1, channels))
    return x


def _windows(x: np.ndarray, window: int) -> np.ndarray:
    """[rows, cols, ...] -> [windows, window * window, ...], windows row by row."""
    rows, cols = x.shape[:2]
    rest = x.shape[2:]
    x = x.reshape(rows // window, window, cols // window, window, *rest)
    return x.swapaxes(1, 2).reshape(-1, window * window, *rest)


def _unwindows(x: np.ndarray, window: int, rows: int, cols: int) -> np.ndarray:
    """The inverse of :func:`_windows`."""
    rest = x.shape[2:]
    x = x.reshape(rows // window, cols // window, window, window, *rest)
    return x.swapaxes(1, 2).reshape(rows, cols, *rest)


def relative_position_index(window: int) -> np.ndarray:
    """[window², window²]: the table row each (query, key) pair of a window reads: the pair's
    row and column distances, each shifted to count from 0, the row's times 2 window - 1."""
    coords = np.stack(np.meshgrid(np.arange(window), np.arange(window), indexing="ij"))
    flat = coords.reshape(2, -1)
    rel = flat[:, :, None] - flat[:, None, :] + (window - 1)
    return rel[0] * (2 * window - 1) + rel[1]


def shift_mask(rows: int, cols: int, window: int, shift: int) -> np.ndarray:
    """[windows, window², window²]: 0 for pairs of tokens from the same region of the rolled
    grid, :data:`MASKED` for pairs the roll brought together (three regions a side: the last
    window's part that stayed, and the part rolled in)."""

    def region(n: int) -> np.ndarray:
        at = np.arange(n)
        return (at >= n - window).astype(np.int64) + (at >= n - shift)

    label = region(rows)[:, None] * 3 + region(cols)[None, :]
    parts = _windows(label, window)
    return np.where(parts[:, None, :] != parts[:, :, None], F32(MASKED), F32(0))


def continuous_coords(window: int, pretrained: int) -> np.ndarray:
    """[(2 window - 1)², 2]: Swinv2's log-spaced relative coordinates, the input of its
    position bias MLP: each (row, column) distance over the pretrained window's reach (the
    window's where none was stated), times 8, then sign(d) log2(1 + |d|) / 3."""
    reach = pretrained - 1 if pretrained > 0 else max(window - 1, 1)
    steps = np.arange(-(window - 1), window, dtype=F32)
    grid = np.stack(np.meshgrid(steps, steps, indexing="ij"), axis=-1) / F32(reach) * F32(8)
    return (np.sign(grid) * np.log2(np.abs(grid) + F32(1)) / F32(3)).reshape(-1, 2).astype(F32)


def _bias(w: Any, cfg: DecoderConfig, p: str, win: _Window) -> np.ndarray:  # noqa: ANN401
    """[heads, window², window²]: the block's relative-position bias: Swin's table, Swinv2's
    MLP over the coordinates (16 sigmoid), read through the window's index."""
    side = 2 * win.side - 1
    if cfg.swin.v2:
        net = cfg.swin
        pretrained = net.pretrained[win.stage] if win.stage < len(net.pretrained) else 0
        coords = continuous_coords(win.side, pretrained)
        hidden = np.maximum(w.linear(f"{p}.attn_cpb_0.weight", coords, f"{p}.attn_cpb_0.bias"), 0)
        table = w.linear(f"{p}.attn_cpb_2.weight", hidden.astype(F32)).astype(F32)
        table = (F32(16) / (F32(1) + np.exp(-table))).astype(F32)
    else:
        table = w.get(f"{p}.attn_rel_b.weight")
    if table.shape != (side * side, win.heads):
        raise DecoderUnsupported(
            f"the relative-position table of {p} is {list(table.shape)}, not "
            f"[{side * side}, {win.heads}] (a {win.side}x{win.side} window and {win.heads} "
            "heads): the snapshot does not fit its configuration"
        )
    return table[relative_position_index(win.side)].transpose(2, 0, 1)


def _window_attention(
    w: Any,  # noqa: ANN401 - weights.Weights
    cfg: DecoderConfig,
    p: str,
    y: np.ndarray,
    win: _Window,
) -> np.ndarray:
    """Attention within each window of the (padded, rolled) grid ``y`` [rows, cols, C]:
    Swin's scaled dot products; Swinv2's cosines times exp(logit_scale) (at most 100)."""
    rows, cols, channels = y.shape
    tokens = _windows(y, win.side)  # [windows, n, C]
    count, n, _ = tokens.shape
    d = channels // win.heads

    def split(key: str) -> np.ndarray:
        bias = f"{p}.{key}.bias" if w.has(f"{p}.{key}.bias") else None
        out = w.linear(f"{p}.{key}.weight", tokens, bias).astype(F32)
        return out.reshape(count, n, win.heads, d).transpose(0, 2, 1, 3)

    q, k, v = split("attn_q"), split("attn_k"), split("attn_v")
    if cfg.swin.v2:
        q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), F32(1e-12))
        k = k / np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), F32(1e-12))
        scale = np.exp(np.minimum(w.get(f"{p}.attn_logit_scale.weight"), F32(np.log(100.0))))
        scores = (q @ k.transpose(0, 1, 3, 2)) * scale.reshape(1, -1, 1, 1).astype(F32)
    else:
        scores = (q @ k.transpose(0, 1, 3, 2)) * F32(d**-0.5)
    scores = scores + _bias(w, cfg, p, win)[None]
    if win.shift:  # (Swinv2's attention adds the mask twice, as transformers' does)
        mask = shift_mask(rows, cols, win.side, win.shift)[:, None]
        scores = scores + (2 * mask if cfg.swin.v2 else mask)
    scores = scores - scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    out = (scores @ v).transpose(0, 2, 1, 3).reshape(count, n, channels)
    out = w.linear(f"{p}.attn_out.weight", out, f"{p}.attn_out.bias").astype(F32)
    return _unwindows(out, win.side, rows, cols)
