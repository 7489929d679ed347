"""Extents for the open spatial axes of an image input, instead of 1.

A detector or a text recognizer exported with dynamic height and width (PaddleOCR's det, rec
and cls models, ddddocr) declares ``[?, 3, ?, ?]`` or ``[?, 1, 64, ?]``. Filled with 1 it runs
on a 1-pixel image: the trace succeeds but every activation is degenerate. A user expects an
ordinary picture: 224 x 224 when both sides are open (a multiple of 32, so every stride of a
feature pyramid divides it), and for a strip whose fixed height is at most 64 (a text line, a
mel spectrogram) four times that height, rounded up to a multiple of 32, as its width.

A PaddleOCR text recognizer (its CTC alphabet stored as the ``character`` metadata entry, as
RapidOCR's exports do) gets PaddleOCR's own recognition size instead, 48 x 320: PP-OCRv4's
declares [?, 3, ?, ?] yet reshapes its features as if the height were 48.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nneditor.model.graph import Dim

SQUARE = 224
STRIP_HEIGHT_MAX = 64
STRIP_RATIO = 4
STRIDE = 32
_CHANNELS = (1, 3)
#: PaddleOCR's rec_image_shape (3, 48, 320), PP-OCRv3 onwards
TEXT_LINE = (48, 320)
_H, _W = "height of an ordinary image", "width of an ordinary image"


def _fixed(d: Dim) -> bool:
    return isinstance(d, int) and d >= 0


def image_extents(
    declared: tuple[Dim, ...],
    dtype: str | None,
    shared: Collection[str],
    given: Mapping[str, int],
    text_line: bool = False,
) -> dict[int, tuple[int, str]]:
    """axis -> (extent, what it is: "height of an ordinary image"...) for the open spatial
    axes of an image: float or uint8 (TensorFlow detectors take bytes), NCHW or NHWC with 1 or
    3 channels, or an unbatched CHW with 3 (torchvision's detectors). ``given`` holds the extents the user set by name;
    ``shared`` names symbols other inputs use too (left to the general rule, so every input
    agrees on them). ``text_line``: the model is a text recognizer (:data:`TEXT_LINE`)."""
    if len(declared) not in (3, 4) or not (dtype or "").startswith(("float", "bfloat", "uint8")):
        return {}
    if len(declared) == 3:  # [3, ?, ?]; a one-channel [1, ?, ?] is as often [batch, seq, dim]
        if not (_fixed(declared[0]) and declared[0] == 3):
            return {}
        height, width = 1, 2
    elif _fixed(declared[1]) and declared[1] in _CHANNELS:
        height, width = 2, 3
    elif _fixed(declared[3]) and declared[3] in _CHANNELS and not _fixed(declared[1]):
        height, width = 1, 2
    else:
        return {}

    def known(axis: int) -> int | None:
        d = declared[axis]
        if _fixed(d):
            return int(d)  # type: ignore[arg-type]
        return int(given[d]) if isinstance(d, str) and d in given else None

    def open_axis(axis: int) -> bool:
        d = declared[axis]
        return known(axis) is None and not (isinstance(d, str) and d in shared)

    h, w = known(height), known(width)
    if text_line:
        line = "of a PaddleOCR text line (48 x 320)"
        out = {height: (TEXT_LINE[0], f"height {line}")} if open_axis(height) else {}
        if open_axis(width):
            out[width] = (TEXT_LINE[1], f"width {line}")
        return out
    if open_axis(height) and open_axis(width):
        return {height: (SQUARE, _H), width: (SQUARE, _W)}
    if open_axis(width) and h is not None:
        return {width: (_beside(h), _W)}
    if open_axis(height) and w is not None:  # an upright strip is rare: a square
        return {height: (w, _H)}
    return {}


def _beside(height: int) -> int:
    """The open width next to a fixed height: a strip's length, or a square."""
    if height > STRIP_HEIGHT_MAX:
        return height
    return max(STRIDE, -(-STRIP_RATIO * height // STRIDE) * STRIDE)
