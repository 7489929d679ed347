#!/usr/bin/env python3
"""Generate the ready-made trace inputs in this folder (deterministic; numpy only, plus Pillow
for the PNG if it is installed).

    python examples/trace-inputs/make_trace_inputs.py

- ``image_1x3x64x64.npy``: a synthetic RGB picture (gradients and a disc), float32 NCHW,
  ImageNet-normalised; ``image_64x64.png`` is the same picture for the image source.
- ``text_line_1x3x48x192.npy``: a synthetic dark-on-light text line, float32 NCHW, scaled to
  -1..1 (the PP-OCR recognizer's preprocessing); height 48 then width 192.
- ``timeseries_1x512.npy``: 32 ms of a 16 kHz signal (two tones plus noise), float32.
- ``silero_vad_16k.npz``: a complete input set for the Silero VAD models: ``input`` (1, 512)
  float32, ``state`` (2, 1, 128) float32 zeros, ``sr`` int64 16000.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def picture(height: int = 64, width: int = 64) -> np.ndarray:
    """uint8 RGB (height, width, 3): horizontal/vertical gradients and a bright disc."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    r = x / (width - 1)
    g = y / (height - 1)
    b = 1.0 - (r + g) / 2
    disc = ((x - width * 0.6) ** 2 + (y - height * 0.4) ** 2) < (min(height, width) * 0.2) ** 2
    rgb = np.stack([r, g, b], axis=-1)
    rgb[disc] = [1.0, 0.9, 0.2]
    return np.round(rgb * 255).astype(np.uint8)


def text_line(height: int = 48, width: int = 192, seed: int = 7) -> np.ndarray:
    """uint8 RGB (height, width, 3): light background with dark glyph-like strokes."""
    rng = np.random.default_rng(seed)
    img = np.full((height, width), 235, np.uint8)
    x = 6
    while x < width - 10:
        w = int(rng.integers(3, 9))
        top, bottom = int(rng.integers(10, 18)), int(rng.integers(30, 38))
        img[top:bottom, x : x + 2] = 30  # stem
        if rng.random() < 0.6:
            img[top : top + 2, x : x + w] = 30  # bar
        if rng.random() < 0.4:
            img[bottom - 2 : bottom, x : x + w] = 30
        x += w + int(rng.integers(3, 7))
    return np.repeat(img[:, :, None], 3, axis=2)


def main() -> None:
    pic = picture()
    nchw = ((pic.astype(np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)
    np.save(HERE / "image_1x3x64x64.npy", np.ascontiguousarray(nchw[None], np.float32))
    line = text_line().astype(np.float32) / 255.0
    np.save(HERE / "text_line_1x3x48x192.npy", ((line - 0.5) / 0.5).transpose(2, 0, 1)[None])
    t = np.arange(512) / 16000.0
    rng = np.random.default_rng(3)
    signal = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 1250 * t)
    series = (signal + rng.normal(0, 0.02, t.shape)).astype(np.float32)[None]
    np.save(HERE / "timeseries_1x512.npy", series)
    np.savez(
        HERE / "silero_vad_16k.npz",
        input=series,
        state=np.zeros((2, 1, 128), np.float32),
        sr=np.array(16000, np.int64),
    )
    try:
        from PIL import Image
    except ImportError:
        print("Pillow is not installed; image_64x64.png was not written")
    else:
        Image.fromarray(pic, "RGB").save(HERE / "image_64x64.png", optimize=True)
    for p in sorted(HERE.glob("*.np[yz]")):
        print(f"{p.name}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
