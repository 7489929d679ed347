"""Shared by the vision-transformer tests (ViT, DINOv2, BEiT, CLIP/SigLIP towers): the
relative difference they bound, and the random pixel values they feed both sides."""

from __future__ import annotations

import numpy as np


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference over the reference's largest magnitude."""
    return float(np.abs(a - b).max() / np.abs(b).max())


def image_pixels(height: int, width: int | None = None) -> np.ndarray:
    """[1, 3, height, width] standard-normal pixel values (seed 0; square by default)."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((1, 3, height, width or height)).astype(np.float32)
