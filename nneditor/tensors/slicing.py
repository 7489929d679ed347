"""Parsing and applying slice expressions such as ``"0:2,:,5"`` or ``"...,-1"``."""

from __future__ import annotations

from nneditor.errors import SliceError

Key = tuple[slice | int, ...]


def parse_slice(text: str, shape: tuple[int, ...]) -> Key:
    """Parse a numpy-style slice expression for ``shape`` into a normalised key.

    The key has exactly ``len(shape)`` entries: ints (in range, non-negative) and slices with
    explicit non-negative bounds. ``...`` expands to full slices. Errors name the axis.
    """
    text = text.strip()
    parts = [p.strip() for p in text.split(",")] if text else []
    if parts.count("...") > 1:
        raise SliceError("a slice may contain '...' only once")
    if "..." in parts:
        i = parts.index("...")
        fill = len(shape) - (len(parts) - 1)
        if fill < 0:
            raise SliceError(f"slice {text!r} has more axes than the tensor's {len(shape)}")
        parts = parts[:i] + [":"] * fill + parts[i + 1 :]
    if len(parts) > len(shape):
        raise SliceError(
            f"slice {text!r} has {len(parts)} axes but the tensor has shape {list(shape)}"
        )
    parts += [":"] * (len(shape) - len(parts))
    key: list[slice | int] = []
    for axis, (part, dim) in enumerate(zip(parts, shape, strict=True)):
        key.append(_parse_one(part, dim, axis, text))
    return tuple(key)


def _parse_one(part: str, dim: int, axis: int, text: str) -> slice | int:
    if ":" not in part:
        try:
            idx = int(part)
        except ValueError:
            raise SliceError(f"cannot read {part!r} (axis {axis}) in slice {text!r}") from None
        if idx < -dim or idx >= dim:
            raise SliceError(
                f"index {idx} is out of range for axis {axis} of size {dim} in {text!r}"
            )
        return idx % dim
    try:
        fields = part.split(":")
        if len(fields) > 3:
            raise ValueError
        start, stop, step = (
            int(f) if f.strip() else None for f in fields + [""] * (3 - len(fields))
        )
    except ValueError:
        raise SliceError(f"cannot read {part!r} (axis {axis}) in slice {text!r}") from None
    if step == 0:
        raise SliceError(f"slice step cannot be zero (axis {axis}) in {text!r}")
    s = slice(start, stop, step)
    a, b, c = s.indices(dim)
    if c < 0:
        raise SliceError(f"negative steps are not supported (axis {axis}) in {text!r}")
    return slice(a, max(a, b), c)


def key_shape(key: Key, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Shape of the result of applying a normalised key."""
    out = []
    for k, dim in zip(key, shape, strict=True):
        if isinstance(k, slice):
            out.append(len(range(*k.indices(dim))))
    return tuple(out)


def leading_rows(key: Key, shape: tuple[int, ...]) -> tuple[int, int]:
    """Half-open range of flat "rows" of the leading axis that the key touches."""
    if not shape:
        return (0, 1)
    k = key[0]
    if isinstance(k, int):
        return (k, k + 1)
    a, b, _ = k.indices(shape[0])
    return (a, max(a, b))
