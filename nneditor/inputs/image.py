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
    # OpenAI CLIP's (its image processors and the models trained on its features)
    "clip": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
    # the raw pixel bytes (TensorFlow detectors take uint8 images); computed exactly, not
    # through this mean and std
    "0..255": ((0.0, 0.0, 0.0), (1 / 255, 1 / 255, 1 / 255)),
}
MAX_PIXELS = 100_000_000


def _processor_config(model: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The preprocessor_config.json beside (or in) ``model``, None when there is none."""
    import json

    p = Path(model)
    folder = p if p.is_dir() else p.parent
    try:
        config = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def model_normalization(model: str | os.PathLike[str]) -> str | None:
    """The named normalisation a snapshot's preprocessor_config.json states (its image_mean and
    image_std; do_normalize false: 0..1), None when it states none NNEditor names."""
    config = _processor_config(model)
    if config is None:
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
class StatedScaling:
    """A processor's own pixel scaling, stated in preprocessor_config.json, that no named
    normalisation gives (EfficientNetImageProcessor's): the bytes times ``factor`` (in
    float64, then float32), less 1 with ``offset`` (rescale_offset), then less ``mean`` over
    ``std`` where given (do_normalize), then over ``std`` once more with ``again``
    (include_top), each step in float32 as transformers' processor computes it."""

    mean: tuple[float, ...] | None
    std: tuple[float, ...]
    factor: float = 1 / 255
    offset: bool = False
    again: bool = False

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """``raw`` [H, W, C] pixel bytes scaled."""
        pixels = (raw.astype(np.float64) * self.factor).astype(np.float32)
        if self.offset:
            pixels -= np.float32(1)
        channels = pixels.shape[-1]
        std = np.asarray(self.std[:channels], dtype=np.float32)
        if self.mean is not None:
            pixels = (pixels - np.asarray(self.mean[:channels], dtype=np.float32)) / std
        if self.again:
            pixels = (pixels - np.zeros_like(std)) / std
        return pixels


def stated_scaling(model: str | os.PathLike[str]) -> StatedScaling | None:
    """EfficientNetImageProcessor's scaling where the snapshot's preprocessor_config.json
    names that processor (its defaults where a key is absent: include_top true,
    rescale_offset false, mean and std 0.5), None for other processors."""
    config = _processor_config(model)
    kind = str((config or {}).get("image_processor_type") or "")
    if config is None or not kind.startswith("EfficientNetImageProcessor"):
        return None
    mean = config.get("image_mean", [0.5, 0.5, 0.5])
    std = config.get("image_std", [0.5, 0.5, 0.5])
    factor = config.get("rescale_factor", 1 / 255)
    if not (isinstance(mean, list) and isinstance(std, list) and isinstance(factor, float)):
        return None
    return StatedScaling(
        tuple(float(m) for m in mean) if config.get("do_normalize", True) else None,
        tuple(float(v) for v in std),
        factor if config.get("do_rescale", True) else 1.0,
        bool(config.get("rescale_offset", False)),
        bool(config.get("include_top", True)),
    )


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


@dataclass(frozen=True)
class Sizing:
    """How an image processor sizes an image before the model (transformers' slow, Pillow
    processors, in their order): a resize, either to ``resize`` (height, width) or of the
    shorter side to ``shortest`` (the longer one in proportion, truncated, at most
    ``longest``), with Pillow filter ``resample``; then a centre crop to ``crop``."""

    resize: tuple[int, int] | None = None
    shortest: int | None = None
    longest: int | None = None
    resample: int = 2  # Pillow's BILINEAR
    crop: tuple[int, int] | None = None

    def resized(self, height: int, width: int) -> tuple[int, int]:
        """The size after the resize of an image of ``height`` x ``width``."""
        if self.resize is not None:
            return self.resize
        if self.shortest is None:
            return height, width
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.shortest, int(self.shortest * long / short)
        if self.longest is not None and new_long > self.longest:
            new_short, new_long = int(self.longest * new_short / new_long), self.longest
        return (new_long, new_short) if width <= height else (new_short, new_long)

    def output(self, height: int, width: int) -> tuple[int, int]:
        """The size the model receives from an image of ``height`` x ``width``."""
        return self.crop if self.crop is not None else self.resized(height, width)


def _pair(value: Any) -> tuple[int, int] | None:
    """(height, width) of a size entry: {"height", "width"} or one int for both."""
    if isinstance(value, dict) and {"height", "width"} <= value.keys():
        return int(value["height"]), int(value["width"])
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    return None


#: processors whose one-number ``size`` is the shorter side's (their default_to_square is
#: false), not a square's
_SHORTER_SIDE = ("MobileNetV1", "MobileNetV2")


def model_sizing(model: str | os.PathLike[str]) -> Sizing | None:
    """How the snapshot's preprocessor_config.json sizes images (resize, then centre crop),
    None when it states no sizing NNEditor follows (then an image is resized straight to the
    input's size)."""
    config = _processor_config(model)
    if config is None or config.get("do_resize", True) is False:
        return None
    size = config.get("size")
    kind = str(config.get("image_processor_type") or config.get("feature_extractor_type") or "")
    convnext = kind.startswith("ConvNext")  # (ResNet's releases name it too)
    resample = config.get("resample", 3 if convnext else 2)
    if not isinstance(resample, int) or resample not in (0, 1, 2, 3, 4, 5):
        return None
    if convnext:
        return _crop_pct_sizing(config, resample)
    crop = _pair(config.get("crop_size")) if config.get("do_center_crop") else None
    if config.get("do_center_crop") and crop is None:
        return None
    if kind.startswith(_SHORTER_SIDE) and isinstance(size, int) and not isinstance(size, bool):
        return Sizing(shortest=size, resample=resample, crop=crop)
    exact = _pair(size)
    if exact is not None:
        return Sizing(resize=exact, resample=resample, crop=crop)
    if isinstance(size, dict) and isinstance(size.get("shortest_edge"), int):
        longest = size.get("longest_edge")
        return Sizing(
            shortest=int(size["shortest_edge"]),
            longest=int(longest) if isinstance(longest, int) else None,
            resample=resample,
            crop=crop,
        )
    return None


def _crop_pct_sizing(config: dict[str, Any], resample: int) -> Sizing | None:
    """ConvNeXt's image processor: an edge ``size`` (shortest_edge) under 384 resizes the
    shorter side to ``int(size / crop_pct)`` and crops the centre ``size`` x ``size``; 384 and
    over resize straight to ``size`` x ``size``."""
    size = config.get("size")
    edge = size.get("shortest_edge") if isinstance(size, dict) else size
    if not isinstance(edge, int) or isinstance(edge, bool) or config.get("do_center_crop"):
        return None
    if edge >= 384:
        return Sizing(resize=(edge, edge), resample=resample)
    pct = config.get("crop_pct", 224 / 256)
    if not isinstance(pct, (int, float)) or not 0 < pct <= 1:
        return None
    return Sizing(shortest=int(edge / pct), resample=resample, crop=(edge, edge))


def load_image(
    path: str | os.PathLike[str],
    height: int,
    width: int,
    layout: str = "NCHW",
    normalization: str | StatedScaling = "imagenet",
    channels: int = 3,
    batch: int = 1,
    dtype: str | np.dtype = "float32",
    sizing: Sizing | None = None,
) -> np.ndarray:
    """Read an image, resize it to ``height`` x ``width`` and lay it out as a tensor.

    With ``sizing`` (a model's image processor) the image is resized and cropped as that
    processor does, where that gives ``height`` x ``width``; otherwise straight to it.
    ``normalization``: a name of :data:`NORMALIZATIONS` or a processor's
    :class:`StatedScaling`."""
    if layout not in LAYOUTS:
        raise InputSpecError(f"unknown layout {layout!r}; choose NCHW or NHWC")
    if not isinstance(normalization, StatedScaling) and normalization not in NORMALIZATIONS:
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
            if sizing is not None and sizing.output(img.height, img.width) == (height, width):
                h, w = sizing.resized(img.height, img.width)
                img = img.resize((w, h), sizing.resample)  # Pillow takes (width, height)
                raw = _centre_crop(np.asarray(img), sizing.crop)
            else:
                resample = getattr(pil, "Resampling", pil).BILINEAR
                raw = np.asarray(img.resize((width, height), resample))
            if raw.ndim == 2:
                raw = raw[:, :, None]
            if isinstance(normalization, StatedScaling):
                pixels = normalization.apply(raw)
            else:
                pixels = raw.astype(np.float32) / np.float32(255.0)
    except pil.DecompressionBombError:
        raise InputSpecError(
            f"{p} has more than the {MAX_PIXELS:,} pixels NNEditor decodes; downscale it first"
        ) from None
    except OSError as exc:
        raise InputSpecError(f"{p} could not be read as an image ({exc})") from exc
    if isinstance(normalization, StatedScaling):
        pass
    elif normalization == "0..255":  # the bytes themselves, exactly
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


def _centre_crop(pixels: np.ndarray, crop: tuple[int, int] | None) -> np.ndarray:
    """The centre ``crop`` (height, width) of ``pixels`` [H, W(, C)], zero-padded where the
    image is smaller, as transformers' center_crop places it."""
    if crop is None:
        return pixels
    height, width = pixels.shape[:2]
    ch, cw = crop
    top, left = (height - ch) // 2, (width - cw) // 2
    if top >= 0 and left >= 0 and top + ch <= height and left + cw <= width:
        return pixels[top : top + ch, left : left + cw]
    nh, nw = max(ch, height), max(cw, width)
    padded = np.zeros((nh, nw, *pixels.shape[2:]), dtype=pixels.dtype)
    top_pad, left_pad = -(-(nh - height) // 2), -(-(nw - width) // 2)
    padded[top_pad : top_pad + height, left_pad : left_pad + width] = pixels
    top, left = top + top_pad, left + left_pad
    return padded[max(0, top) : min(nh, top + ch), max(0, left) : min(nw, left + cw)]


def image_for_input(
    spec: InputSpec,
    path: str | os.PathLike[str],
    normalization: str | StatedScaling = "imagenet",
    layout: str | None = None,
    sizing: Sizing | None = None,
) -> np.ndarray:
    """An image tensor shaped for ``spec`` (layout inferred from its channel axis), sized as
    ``sizing`` (the model's image processor, :func:`model_sizing`) says where given."""
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
        path,
        lay.height,
        lay.width,
        lay.layout,
        normalization,
        lay.channels,
        lay.batch,
        dtype,
        sizing,
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
