"""What a vision transformer reads: the image's size and patches (DecoderConfig.vision), and
the configuration every one of them shares.

Shared by decoder/vit.py (ViT, DeiT, DINOv2), decoder/beit.py and decoder/clip_vision.py
(CLIP's and SigLIP's towers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nneditor.decoder.unsupported import DecoderUnsupported

#: every vision transformer's first note
PIXELS_NOTE = (
    "the pixel values are read as given: an image is resized and normalised as "
    "preprocessor_config.json says before it reaches the model"
)


def image_and_patch(config: Mapping[str, Any], kind: str) -> tuple[int, int]:
    """config.json's (image size, patch size); ``kind`` names the model in the refusal of an
    image that is no whole number of patches."""
    size = config.get("image_size") or 224
    size = int(size[0] if isinstance(size, (list, tuple)) else size)
    patch = int(config.get("patch_size") or 16)
    if size % patch:
        raise DecoderUnsupported(
            f"this {kind}'s image size {size} is not a multiple of its patch {patch}"
        )
    return size, patch


def encoder_fields(common: Mapping[str, Any]) -> dict[str, Any]:
    """The DecoderConfig fields every vision transformer shares: LayerNorm, no rotation, an
    ungated feed-forward, attention both ways at 1/sqrt(head size), no vocabulary head."""
    return {
        "norm": "layer",
        "rope": "none",
        "gated": False,
        "causal": False,
        "head": False,
        "attn_scale": 1 / math.sqrt(int(common["head_dim"])),
    }


@dataclass(frozen=True)
class Vision:
    """The image a vision transformer reads: ``channels`` x ``size`` x ``size`` pixels in
    ``patch`` x ``patch`` patches; ``grid``: DINOv2's, whose position table holds ``grid`` x
    ``grid`` patches and is interpolated to any image's (0: the image must be ``size``);
    ``tower``: "clip" or "siglip" for those vision towers' own ends (clip_vision.py), which
    ``ends`` names; ``relative``: BEiT's relative-position bias, indexed for the window of
    ``size`` / ``patch`` patches (decoder/beit.py), so the image must be ``size``."""

    size: int
    patch: int
    channels: int
    grid: int = 0
    tower: str = ""
    ends: str = ""
    relative: bool = False


@dataclass(frozen=True)
class ConvNet:
    """A convolutional image classifier (decoder/convnets.py): ``family`` "resnet" or
    "convnext"; ``stages``: each block's stage, in block order; ``widths``: each stage's
    channels; ``size``: the (height, width) its image processor makes (any size is read);
    ResNet's ``bottleneck`` layers (else basic), ``first_strided``
    (downsample_in_first_stage) and ``strided_1x1`` (downsample_in_bottleneck: the
    bottleneck's 1x1 convolution strides, not its 3x3 one); ``activation``: ResNet's
    hidden_act (ConvNeXt's GELU is DecoderConfig.activation); MobileNetV2's ``tf_padding``
    (TensorFlow's "SAME" padding before every convolution) and ``bn_eps`` (its BatchNorms'
    eps, config.layer_norm_eps)."""

    family: str
    stages: tuple[int, ...]
    widths: tuple[int, ...]
    size: tuple[int, int]
    channels: int = 3
    bottleneck: bool = False
    first_strided: bool = False
    strided_1x1: bool = False
    activation: str = "relu"
    tf_padding: bool = False
    bn_eps: float = 1e-5
    #: EfficientNet's MBConv blocks (names_efficientnet.Block), its pooling_type and the
    #: pooling window (config.hidden_dim: the last hidden state may be no wider)
    blocks: tuple[Any, ...] = ()
    pooling: str = "mean"
    pool_window: int = 0

    def describe(self) -> str:
        height, width = self.size
        if self.family == "efficientnet":
            return (
                f"efficientnet convolutional network, {len(self.stages)} MBConv blocks with "
                f"squeeze and excitation ({self.activation}, {self.pooling} pooling), images "
                f"of any size ({height}x{width} as its processor makes them)"
            )
        if self.family == "mobilenet_v1":
            return (
                f"mobilenet_v1 convolutional network, {len(self.stages)} depthwise and "
                f"pointwise layers in turn ({self.widths[0]} to {self.widths[-1]} channels, "
                f"{self.activation}), images of any size ({height}x{width} as its processor "
                "makes them)"
            )
        if self.family == "mobilenet_v2":
            pad = "TensorFlow SAME padding" if self.tf_padding else "symmetric padding"
            return (
                f"mobilenet_v2 convolutional network, {len(self.stages)} inverted residual "
                f"blocks ({self.widths[0]} to {self.widths[-1]} channels, {self.activation}, "
                f"{pad}), images of any size ({height}x{width} as its processor makes them)"
            )
        depths = [self.stages.count(s) for s in range(len(self.widths))]
        kind = (
            f"{'bottleneck' if self.bottleneck else 'basic'} residual blocks"
            if self.family == "resnet"
            else "X or Y residual blocks"
            if self.family == "regnet"
            else "ConvNeXt V2 blocks (GRN)"
            if self.family == "convnextv2"
            else "ConvNeXt blocks"
        )
        return (
            f"{self.family} convolutional network, {len(self.widths)} stages of "
            f"{', '.join(map(str, depths))} {kind} ({', '.join(map(str, self.widths))} "
            f"channels), images of any size ({height}x{width} as its processor makes them)"
        )


@dataclass(frozen=True)
class Swin:
    """A Swin Transformer (decoder/swin.py): ``stages``: each block's stage, in block order;
    ``widths`` and ``heads``: each stage's channels and attention heads; ``window``: the
    window's side in tokens (its relative-position tables' too); ``patch``: the patch
    embedding's stride; ``size``: the (height, width) its image processor makes (other sizes
    are read, padded as transformers pads them); ``grid``: the patch grid of config.image_size,
    which absolute positions (where stored) are laid out for; ``mlp``: the MLP's width over the
    block's."""

    stages: tuple[int, ...]
    widths: tuple[int, ...]
    heads: tuple[int, ...]
    window: int
    patch: int
    size: tuple[int, int]
    grid: tuple[int, int]
    channels: int = 3
    mlp: float = 4.0
    #: Swinv2: cosine attention, the continuous position bias (its MLP's coordinates scaled
    #: by ``pretrained``, each stage's pretrained window, where above 0), norms after the
    #: residual branches, windows fixed by the configured grid
    v2: bool = False
    pretrained: tuple[int, ...] = ()

    def stage_window(self, s: int, grid: tuple[int, int], shifted: bool) -> tuple[int, int]:
        """(window, shift) of a block of stage ``s`` on ``grid``: Swin's from the image's grid,
        Swinv2's from config.image_size's (fixed when the model is built)."""
        from nneditor.semantic.names_swin import block_window

        if self.v2:
            grid = (self.grid[0] // 2**s, self.grid[1] // 2**s)
        return block_window(grid, self.window, shifted)

    def describe(self) -> str:
        depths = [self.stages.count(s) for s in range(len(self.widths))]
        height, width = self.size
        v2 = (
            "swinv2 transformer (cosine attention, a continuous position bias, norms after the "
            "residual branches), "
            if self.v2
            else "swin transformer, "
        )
        return (
            f"{v2}{len(self.widths)} stages of {', '.join(map(str, depths))} "
            f"windowed attention blocks ({', '.join(map(str, self.widths))} channels, "
            f"{', '.join(map(str, self.heads))} heads), {self.window}x{self.window} windows "
            f"shifted on every other block, {self.patch}x{self.patch} patches, patch merging "
            f"between stages, images of {height}x{width} as its processor makes them"
        )
