"""What a vision transformer reads: the image's size and patches (DecoderConfig.vision).

Shared by decoder/vit.py (ViT, DeiT, DINOv2) and decoder/clip_vision.py (CLIP's and SigLIP's
towers), which both read it.
"""

from __future__ import annotations

from dataclasses import dataclass


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
