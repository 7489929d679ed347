"""Image source: PNG/JPEG -> a normalised tensor in NCHW or NHWC layout.

Invariants:

- Sizes are always given and reported as height then width, like tensor shapes; only the
  call into Pillow (which takes width, height) swaps them, in one place.
- Pillow is optional: without it every entry point raises :class:`InputSpecError` saying how to
  install it, never an ImportError.
- The image's pixel count is checked against a ceiling before it is decoded (decompression
  bombs are refused, not allocated).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.inputs.spec import InputSpec, InputSpecError

LAYOUTS = ("NCHW", "NHWC")
#: name -> (mean, std) per RGB channel, applied to values already scaled to 0..1.
NORMALIZATIONS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "0..1": ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
    "-1..1": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    # the raw pixel bytes (TensorFlow detectors take uint8 images); computed exactly, not
    # through this mean and std
    "0..255": ((0.0, 0.0, 0.0), (1 / 255, 1 / 255, 1 / 255)),
}
MAX_PIXELS = 100_000_000


def model_normalization(model: str | os.PathLike[str]) -> str | None:
    """The named normalisation a snapshot's preprocessor_config.json states (its image_mean and
    image_std; do_normalize false: 0..1), None when it states none NNEditor names."""
    import json

    p = Path(model)
    folder = p if p.is_dir() else p.parent
    try:
        config = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    if config.get("do_normalize") is False:
        return "0..1" if config.get("do_rescale", True) else None
    mean, std = config.get("image_mean"), config.get("image_std")
    if not isinstance(mean, list) or not isinstance(std, list):
        return None
    for name, (m, s) in NORMALIZATIONS.items():
        if name == "0..255" or len(mean) != len(m) or len(std) != len(s):
            continue
        if np.allclose(mean, m, atol=1e-3) and np.allclose(std, s, atol=1e-3):
            return name
    return None


@dataclass(frozen=True)
class ImageLayout:
    """Where the image goes in a tensor: layout, height, width, channels and batch size."""

    layout: str
    height: int
    width: int
    channels: int
    batch: int = 1

    def shape(self) -> tuple[int, ...]:
        if self.layout == "NCHW":
            return (self.batch, self.channels, self.height, self.width)
        return (self.batch, self.height, self.width, self.channels)


def layout_for(spec: InputSpec, layout: str | None = None) -> ImageLayout:
    """Infer the image layout of a rank-4 input (channels 1 or 3 decide NCHW vs NHWC)."""
    shape = spec.shape
    if shape is None or len(shape) != 4:
        raise InputSpecError(
            f"input {spec.name!r} ({spec.declared_text()}) is not a rank-4 image tensor"
        )
    if layout is None:
        if shape[1] in (1, 3):
            layout = "NCHW"
        elif shape[3] in (1, 3):
            layout = "NHWC"
        else:
            raise InputSpecError(
                f"input {spec.name!r} has shape {list(shape)}: neither axis 1 nor axis 3 holds "
                "1 or 3 channels; choose the layout explicitly"
            )
    if layout not in LAYOUTS:
        raise InputSpecError(f"unknown layout {layout!r}; choose NCHW or NHWC")
    if layout == "NCHW":
        return ImageLayout(layout, shape[2], shape[3], shape[1], shape[0])
    return ImageLayout(layout, shape[1], shape[2], shape[3], shape[0])


def load_image(
    path: str | os.PathLike[str],
    height: int,
    width: int,
    layout: str = "NCHW",
    normalization: str = "imagenet",
    channels: int = 3,
    batch: int = 1,
    dtype: str | np.dtype = "float32",
) -> np.ndarray:
    """Read an image, resize it to ``height`` x ``width`` and lay it out as a tensor."""
    if layout not in LAYOUTS:
        raise InputSpecError(f"unknown layout {layout!r}; choose NCHW or NHWC")
    if normalization not in NORMALIZATIONS:
        raise InputSpecError(
            f"unknown normalisation {normalization!r}; choose one of {', '.join(NORMALIZATIONS)}"
        )
    if channels not in (1, 3):
        raise InputSpecError(f"images have 1 or 3 channels, not {channels}")
    if height <= 0 or width <= 0:
        raise InputSpecError(f"image size must be positive, got height {height}, width {width}")
    pil = _pillow()
    p = Path(path)
    try:
        with warnings.catch_warnings():  # the size is checked below, with a clearer message
            warnings.simplefilter("ignore", pil.DecompressionBombWarning)
            opened = pil.open(p)
        with opened as img:
            if img.width * img.height > MAX_PIXELS:
                raise InputSpecError(
                    f"{p} is {img.height} x {img.width} pixels (height x width), more than the "
                    f"{MAX_PIXELS:,} NNEditor decodes; downscale it first"
                )
            img = img.convert("RGB" if channels == 3 else "L")
            resample = getattr(pil, "Resampling", pil).BILINEAR
            img = img.resize((width, height), resample)  # Pillow takes (width, height)
            pixels: np.ndarray = np.asarray(img, dtype=np.float32) / np.float32(255.0)
    except pil.DecompressionBombError:
        raise InputSpecError(
            f"{p} has more than the {MAX_PIXELS:,} pixels NNEditor decodes; downscale it first"
        ) from None
    except OSError as exc:
        raise InputSpecError(f"{p} could not be read as an image ({exc})") from exc
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if normalization == "0..255":  # the bytes themselves, exactly
        pixels = np.rint(pixels * np.float32(255.0))
    else:
        mean, std = NORMALIZATIONS[normalization]
        mean_arr = np.asarray(mean[:channels], dtype=np.float32)
        std_arr = np.asarray(std[:channels], dtype=np.float32)
        pixels = (pixels - mean_arr) / std_arr
    if layout == "NCHW":
        pixels = pixels.transpose(2, 0, 1)
    out = np.broadcast_to(pixels[None], (batch, *pixels.shape))
    return np.ascontiguousarray(out, dtype=np.dtype(dtype))


def image_for_input(
    spec: InputSpec,
    path: str | os.PathLike[str],
    normalization: str = "imagenet",
    layout: str | None = None,
) -> np.ndarray:
    """An image tensor shaped for ``spec`` (layout inferred from its channel axis)."""
    lay = layout_for(spec, layout)
    dtype = spec.numpy_dtype
    if dtype == np.uint8:  # TensorFlow's detectors take the pixel bytes
        normalization = "0..255"
    elif dtype.kind != "f":
        raise InputSpecError(
            f"input {spec.name!r} is {spec.dtype}; image sources produce floating-point or "
            "uint8 (pixel byte) tensors"
        )
    return load_image(
        path, lay.height, lay.width, lay.layout, normalization, lay.channels, lay.batch, dtype
    )


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise InputSpecError(
            "reading images needs Pillow, which is not installed; install it with "
            "`python -m pip install Pillow` or provide the tensor as .npy"
        ) from None
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    return Image
