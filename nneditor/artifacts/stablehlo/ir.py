"""Intermediate form of a parsed MLIR module (StableHLO family) and tensor-type decoding.

The parser builds these small dataclasses; ``stablehlo.py`` turns them into the document model.
Types keep their source text; ``dtype``/``shape`` are filled for ranked tensors (``None`` dims
are dynamic) and builtin scalars. ``DenseLit`` holds only the byte range of a literal.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from nneditor.model.graph import Dim

MAX_DEPTH = 200
#: Largest tensor dimension MLIR can express (dimensions are signed 64-bit).
MAX_DIM = 2**63 - 1


class DimensionError(ValueError):
    """A tensor type with a dimension MLIR cannot hold (the parser adds the position)."""


#: Element type spelling -> NNEditor dtype name.
ELEMENT_DTYPES: dict[str, str] = {
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "bf16": "bfloat16",
    "i1": "bool",
    "i2": "int2",
    "i4": "int4",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "si2": "int2",
    "si4": "int4",
    "si8": "int8",
    "si16": "int16",
    "si32": "int32",
    "si64": "int64",
    "ui2": "uint2",
    "ui4": "uint4",
    "ui8": "uint8",
    "ui16": "uint16",
    "ui32": "uint32",
    "ui64": "uint64",
    "complex<f32>": "complex64",
    "complex<f64>": "complex128",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E5M2": "float8_e5m2",
    "f8E4M3FNUZ": "float8_e4m3fnuz",
    "f8E5M2FNUZ": "float8_e5m2fnuz",
    "f8E8M0FNU": "float8_e8m0fnu",
    "f4E2M1FN": "float4_e2m1fn",
}

_SPACE = re.compile(r"\s+")
_TENSOR_BODY = re.compile(r"^\s*((?:(?:[0-9]+|\?)\s*x\s*)*)(.*?)\s*$", re.S)


@dataclass(slots=True)
class TypeRef:
    """A parsed type: its text, and dtype/shape when it is a (ranked) tensor or scalar."""

    text: str
    dtype: str | None = None
    shape: tuple[Dim, ...] | None = None

    @property
    def count(self) -> int | None:
        if self.shape is None or any(not isinstance(d, int) for d in self.shape):
            return None
        n = 1
        for d in self.shape:
            n *= int(d)  # type: ignore[arg-type]
        return n


@dataclass(slots=True)
class FuncType:
    inputs: list[TypeRef]
    results: list[TypeRef]

    def __str__(self) -> str:
        ins = ", ".join(t.text for t in self.inputs)
        outs = ", ".join(t.text for t in self.results)
        return f"({ins}) -> ({outs})"


@dataclass(slots=True)
class DenseLit:
    """A ``dense<...>``/``dense_resource<...>`` literal: kind and byte range of its payload.

    kind: "hex" (``start:end`` are the hex digits), "list", "splat", "string", "resource"
    (``resource`` names the blob). ``type`` is the literal's tensor type once known.
    """

    kind: str
    start: int
    end: int
    type: TypeRef | None = None
    resource: str = ""


@dataclass(slots=True)
class Block:
    label: str
    args: list[tuple[str, TypeRef | None]]
    ops: list[Op] = field(default_factory=list)


@dataclass(slots=True)
class Region:
    blocks: list[Block]


@dataclass(slots=True)
class Op:
    name: str
    results: list[str]
    offset: int
    operands: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[tuple[str, Region]] = field(default_factory=list)
    types: list[TypeRef] = field(default_factory=list)  # plain type list (no arrow)
    functype: FuncType | None = None
    positional: list[Any] = field(default_factory=list)
    generic: bool = False
    line: int = 0
    col: int = 0

    @property
    def result_types(self) -> list[TypeRef]:
        if self.functype is not None:
            return self.functype.results
        if not self.results or not self.types:
            return []
        if len(self.types) == 1:
            return self.types * len(self.results)
        # Custom printers list operand types first (select: pred type, result type).
        return self.types[-len(self.results) :]

    @property
    def operand_types(self) -> list[TypeRef]:
        if self.functype is not None:
            return self.functype.inputs
        return self.types

    @property
    def dense(self) -> DenseLit | None:
        value = self.attrs.get("value")
        if isinstance(value, DenseLit):
            return value
        for item in self.positional:
            if isinstance(item, DenseLit):
                return item
        return None


@dataclass(slots=True)
class Func:
    name: str
    visibility: str
    args: list[tuple[str, TypeRef, dict[str, Any]]]
    results: list[tuple[TypeRef, dict[str, Any]]]
    body: Region | None
    attrs: dict[str, Any]
    offset: int


@dataclass(slots=True)
class Module:
    name: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    funcs: list[Func] = field(default_factory=list)
    other_ops: list[Op] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    resources: dict[str, tuple[int, int]] = field(default_factory=dict)


@functools.lru_cache(maxsize=4096)
def parse_tensor_type(name: str, body: str) -> TypeRef:
    """TypeRef for ``name<body>`` (tensor/vector/memref/complex/tuple)."""
    text = f"{name}<{body}>"
    if name == "complex":
        return TypeRef(text, ELEMENT_DTYPES.get(text), ())
    if name not in ("tensor", "vector", "memref"):
        return TypeRef(text)
    main = _split_top_level(body)[0] if "," in body else body
    if main.lstrip().startswith("*"):
        elem = main.split("x", 1)[1].strip() if "x" in main else ""
        return TypeRef(text, ELEMENT_DTYPES.get(elem), None)
    m = _TENSOR_BODY.match(main)
    if m is None:
        return TypeRef(text)
    dims_text, elem = m.group(1), m.group(2)
    dims: list[Dim] = []
    for part in _SPACE.sub("", dims_text).split("x"):  # "4 x\n16x": any white space
        if part == "?":
            dims.append(None)
        elif part:
            if len(part) > 19 or int(part) > MAX_DIM:  # int() of 5,000 digits would raise
                raise DimensionError(
                    f"a {name} type has the dimension {_clip(part, 24)} ({len(part)} digits), "
                    "more than MLIR's signed 64-bit dimensions hold"
                )
            dims.append(int(part))
    return TypeRef(text, ELEMENT_DTYPES.get(elem), tuple(dims))


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}" and not (ch == ">" and i and text[i - 1] == "-"):
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
