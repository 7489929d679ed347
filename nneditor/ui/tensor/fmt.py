"""Compact text for tensor values, sizes and shapes (Qt-free).

Invariants: every function returns a short ``str`` for any numpy scalar, including bool,
integers, extension floats (bfloat16, float8), complex, bytes and strings; nothing raises on
NaN or ±Inf.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Longest string value shown in a cell before it is cut with an ellipsis.
MAX_TEXT = 80


def format_value(value: Any) -> str:
    """One value as a table cell shows it: floats as ``%.6g``, the rest exactly."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (complex, np.complexfloating)):
        c = complex(value)
        return f"{c.real:.6g}{c.imag:+.6g}j"
    if isinstance(value, (bytes, np.bytes_)):
        return _cut(repr(bytes(value)))
    if isinstance(value, str):
        return _cut(value)
    try:
        return f"{float(value):.6g}"
    except (TypeError, ValueError):
        return _cut(str(value))


def _cut(text: str) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def human_size(nbytes: int | None) -> str:
    """``1536`` -> ``"1.5 KiB"``; exact bytes below 1 KiB."""
    if nbytes is None:
        return "—"
    if nbytes < 1024:
        return f"{nbytes} B"
    size = float(nbytes)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}" if size < 100 else f"{size:.0f} {unit}"
    return f"{nbytes} B"  # pragma: no cover


def shape_text(shape: tuple[int, ...] | list[int]) -> str:
    """``(2, 3)`` -> ``"[2 × 3]"``; a scalar is ``"[] (scalar)"``."""
    if not shape:
        return "[] (scalar)"
    return "[" + " × ".join(str(int(d)) for d in shape) + "]"


def count_text(n: int) -> str:
    return f"{n:,}"


def stat_text(value: Any) -> str:
    """A statistic: integers with thousands separators, floats with 7 significant digits."""
    if value is None:
        return "—"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return f"{int(value):,}"
    f = float(value)
    if math.isnan(f) or math.isinf(f):
        return str(f)
    return f"{f:.7g}"
