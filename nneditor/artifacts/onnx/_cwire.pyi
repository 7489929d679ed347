from collections.abc import Callable
from typing import Any

from nneditor.artifacts.onnx.raw_headers import RawHeader

Ranges = list[tuple[int, int]]

def split(
    buf: memoryview,
    start: int,
    end: int,
    node_field: int,
    graph: bool,
    threshold: int,
    passed: Callable[[int], None] | None,
) -> tuple[Ranges, Ranges, list[int], Ranges, list[int], Ranges, Ranges] | None: ...
def raw_headers(
    buf: memoryview,
    entries: Ranges,
    types: dict[int, tuple[str, int]],
    header_cls: type[RawHeader],
    passed: Callable[[int], None] | None,
) -> list[RawHeader | None]: ...
def nodes(
    buf: memoryview, entries: Ranges, left_out: frozenset[int] | set[int], cls: type, decode: Any
) -> list[Any] | None: ...
def candidates(
    buf: memoryview, runs: Ranges, tags: list[int], patterns: tuple[bytes, ...]
) -> set[int]: ...
def raw_refs(
    headers: list[RawHeader | None],
    ref_cls: type,
    loader_cls: type,
    source: Any,
    in_file: bool,
    graph: str,
) -> list[Any]: ...
