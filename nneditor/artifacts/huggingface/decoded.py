"""Weights a snapshot stores in parts (packed words or float8 values, plus scales) listed as
the float32 matrix the parts stand for. One constructor for every such layout (mlx.py,
fp8.py) records which tensors were folded in, so the decoder knows, without knowing the
layouts, which listed tensors a decoded matrix already applies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.model.tensor import TensorRef
from nneditor.tensors.loaders import TensorLoader

#: info key of a decoded matrix: the names of the tensors besides its own that it folds in
PARTS = "decoded_from"
#: names quantization layouts give such parts (the decoder refuses any it finds unused)
PART_SUFFIXES = (".scales", ".biases", ".weight_scale_inv", ".weight_scale", ".input_scale")


def decoded_matrix(
    stored: TensorRef,
    shape: tuple[int, int],
    encoding: str,
    loader: TensorLoader,
    parts: list[str],
    info: dict[str, Any],
) -> TensorRef:
    """The float32 ``shape`` matrix ``loader`` decodes, listed under ``stored``'s name and
    bytes (its hex view shows what the file holds)."""
    return TensorRef(
        stored.name,
        "float32",
        shape,
        stored.nbytes,
        encoding,
        loader,
        offset=stored.offset,
        location=stored.location,
        info={**info, PARTS: parts},
    )


def decoded_parts(refs: Mapping[str, TensorRef]) -> set[str]:
    """Every tensor a decoded matrix of ``refs`` folds in."""
    return {p for ref in refs.values() for p in (ref.info or {}).get(PARTS, ())}
