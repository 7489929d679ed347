"""CSV source: numeric text tables -> a tensor of the input's shape.

Invariants:

- Only numbers are parsed (``float`` per cell); a first row that is not numeric is treated as
  a header and skipped; anything else non-numeric is refused with its row and column.
- The table must hold exactly the number of values the target shape needs (rows x columns in
  reading order), or a single chosen column must; nothing is padded or truncated silently.
- Files larger than ``max_bytes`` are refused before they are read.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from nneditor.inputs.spec import InputSpec, InputSpecError

MAX_CSV_BYTES = 256 * 1024 * 1024


def read_csv(
    path: str | os.PathLike[str], column: str | int | None = None, max_bytes: int = MAX_CSV_BYTES
) -> np.ndarray:
    """The table as float64, shape (rows, columns), or (rows,) when ``column`` picks one."""
    p = Path(path)
    size = p.stat().st_size
    if size > max_bytes:
        raise InputSpecError(
            f"{p} is {size:,} bytes, more than the {max_bytes:,} NNEditor reads as CSV"
        )
    with open(p, newline="", encoding="utf-8-sig") as fh:
        rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    if not rows:
        raise InputSpecError(f"{p} holds no rows")
    header: list[str] | None = None
    if not _numeric(rows[0]):
        header, rows = [c.strip() for c in rows[0]], rows[1:]
    if not rows:
        raise InputSpecError(f"{p} holds a header but no numeric rows")
    width = len(rows[0])
    table = np.empty((len(rows), width), np.float64)
    for i, row in enumerate(rows):
        if len(row) != width:
            raise InputSpecError(
                f"{p} row {i + 1 + (header is not None)} has {len(row)} columns, expected {width}"
            )
        for j, cell in enumerate(row):
            try:
                table[i, j] = float(cell)
            except ValueError:
                raise InputSpecError(
                    f"{p} row {i + 1 + (header is not None)}, column {j + 1} holds {cell!r}, "
                    "which is not a number"
                ) from None
    if column is None:
        return table
    return table[:, _column_index(p, column, header, width)]


def _numeric(row: list[str]) -> bool:
    try:
        for cell in row:
            float(cell)
    except ValueError:
        return False
    return True


def _column_index(p: Path, column: str | int, header: list[str] | None, width: int) -> int:
    if isinstance(column, int) or (isinstance(column, str) and column.isdigit()):
        idx = int(column)
        if not 0 <= idx < width:
            raise InputSpecError(f"{p} has {width} columns; column index {idx} is out of range")
        return idx
    if header is None or column not in header:
        names = header or []
        raise InputSpecError(f"{p} has no column named {column!r} (columns: {names})")
    return header.index(column)


def csv_for_input(
    spec: InputSpec, path: str | os.PathLike[str], column: str | int | None = None
) -> np.ndarray:
    """CSV values reshaped (row-major) to ``spec``'s shape and cast to its dtype."""
    if spec.problem:
        raise InputSpecError(spec.problem)
    assert spec.shape is not None
    values = read_csv(path, column)
    need = int(np.prod(spec.shape, dtype=np.int64))
    if values.size != need:
        what = (
            f"{values.shape[0]} rows"
            if values.ndim == 1
            else (f"{values.shape[0]} rows x {values.shape[1]} columns")
        )
        raise InputSpecError(
            f"{Path(path)} holds {values.size} values ({what}) but input {spec.name!r} needs "
            f"shape {list(spec.shape)} = {need} values"
        )
    dtype = spec.numpy_dtype
    if dtype.kind in "iub" and not np.all(np.isfinite(values) & (values == np.rint(values))):
        raise InputSpecError(
            f"input {spec.name!r} is {spec.dtype} but {Path(path)} holds non-integer values"
        )
    return values.reshape(spec.shape).astype(dtype)
