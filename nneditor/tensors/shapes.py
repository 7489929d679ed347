"""Declared tensor shapes checked against what a numpy array can have.

numpy refuses an array, even an empty one, with more than 64 dimensions or whose non-zero
dimensions multiply (times the item size) past its 63-bit byte range:
``np.empty((0, 2**62), np.float32)`` raises. Files can declare such shapes (a corrupt
``[0, 18446744073709551615]`` holds no bytes, so size checks pass). Readers refuse them when
the file is opened, with :func:`shape_problem`'s phrase, so that every listed tensor can be
read: a shape with a zero dimension reads as an empty array of exactly that shape.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Most dimensions a numpy array can have (numpy 2).
MAX_NDIM = 64
#: Largest product of the non-zero dimensions accepted: numpy's 2**63 - 1 bytes for 16-byte
#: elements (complex128, the widest dtype a reader decodes to), so it holds for every dtype.
MAX_ELEMENTS = (2**63 - 1) // 16


def shape_problem(shape: Sequence[int]) -> str | None:
    """Why no array can have ``shape``, as a phrase that follows "shape [...]"; else None."""
    if len(shape) > MAX_NDIM:
        return f"has {len(shape)} dimensions; NNEditor reads tensors of at most {MAX_NDIM}"
    product = 1
    for dim in shape:
        if dim < 0:
            return "has a negative dimension"
        if dim:
            product *= dim
            if product > MAX_ELEMENTS:
                empty = ", even though a zero dimension leaves it empty" if 0 in shape else ""
                return (
                    "is too large for any array: its non-zero dimensions multiply to more "
                    f"than 2**59 elements{empty}"
                )
    return None


def shape_text(shape: Sequence[int], dims: int = 8) -> str:
    """``[2, 3]``; a long shape shows its first ``dims`` dimensions and its rank."""
    if len(shape) <= dims:
        return str(list(shape))
    head = ", ".join(str(d) for d in shape[:dims])
    return f"[{head}, … ({len(shape)} dimensions)]"
