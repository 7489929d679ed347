"""A small, bounds-checked FlatBuffers reader (tables, vectors, strings) over a byte source.

Hand-written because the generated Python code of a schema is tied to one schema version and
trusts its input. Only what schema-driven indexing needs: root table, vtable field lookup,
scalars, offsets to tables, vectors and strings.

Invariants:
- Every read is checked against the buffer size first; a bad offset raises ArtifactError naming
  the byte offset, never IndexError or struct.error.
- Vector lengths are checked against the bytes that remain before anything is allocated.
- A work budget counts every vector element and string byte visited. FlatBuffers may share
  sub-objects, so a small hostile file could otherwise make a reader visit the same million-
  entry vector a million times; the budget (a multiple of the file size) turns that into an
  error instead of a hang. Tables are visited only along the schema, so cycles cannot loop.
"""

from __future__ import annotations

import struct

from nneditor.errors import ArtifactError

_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")


class FlatBuffer:
    """A read-only flatbuffer. ``fmt``/``label`` name the format and file in errors."""

    def __init__(self, buf: memoryview | bytes, fmt: str, label: str, budget: int | None = None):
        self.buf = buf
        self.size = len(buf)
        self.fmt = fmt
        self.label = label
        self.budget = budget if budget is not None else 8 * self.size + 1_000_000

    def error(self, detail: str, offset: int | None = None) -> ArtifactError:
        return ArtifactError(detail, format=self.fmt, path=self.label, offset=offset)

    def check(self, pos: int, length: int, what: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise self.error(
                f"{what} at offset {pos} ({length} bytes) lies outside the {self.size}-byte "
                "flatbuffer; the file is truncated or corrupt",
                pos,
            )

    def charge(self, n: int, pos: int) -> None:
        self.budget -= n
        if self.budget < 0:
            raise self.error(
                "the flatbuffer makes the reader revisit the same data far more often than its "
                "size allows (shared or cyclic offsets); the file is corrupt or hostile",
                pos,
            )

    def unpack(self, st: struct.Struct, pos: int, what: str = "a field") -> int | float:
        self.check(pos, st.size, what)
        value: int | float = st.unpack_from(self.buf, pos)[0]
        return value

    def u32(self, pos: int, what: str = "an offset") -> int:
        return int(self.unpack(_U32, pos, what))

    def deref(self, pos: int, what: str) -> int:
        """Follow the unsigned offset stored at ``pos``."""
        target = pos + self.u32(pos, what)
        self.check(target, 4, what)
        return target

    def root(self) -> Table:
        return self.table(self.deref(0, "the root table offset"), "the root table")

    def table(self, pos: int, what: str = "a table") -> Table:
        vt = pos - int(self.unpack(_I32, pos, what))
        self.check(vt, 4, f"the vtable of {what}")
        vt_len = int(self.unpack(_U16, vt))
        obj_len = int(self.unpack(_U16, vt + 2))
        if vt_len < 4 or vt_len % 2:
            raise self.error(f"the vtable of {what} has an invalid size of {vt_len} bytes", vt)
        self.check(vt, vt_len, f"the vtable of {what}")
        self.check(pos, max(obj_len, 4), what)
        self.charge(1, pos)
        return Table(self, pos, vt, vt_len, what)


class Table:
    """One table: fields are looked up by slot number (declaration order, unions take two)."""

    __slots__ = ("fb", "pos", "vt", "vt_len", "what")

    def __init__(self, fb: FlatBuffer, pos: int, vt: int, vt_len: int, what: str) -> None:
        self.fb = fb
        self.pos = pos
        self.vt = vt
        self.vt_len = vt_len
        self.what = what

    def field(self, slot: int) -> int:
        """Absolute offset of field ``slot``, or 0 when it is absent (default value)."""
        off = 4 + 2 * slot
        if off + 2 > self.vt_len:
            return 0
        rel = int(self.fb.unpack(_U16, self.vt + off))
        return self.pos + rel if rel else 0

    def scalar(self, slot: int, fmt: str, default: int | float = 0) -> int | float:
        pos = self.field(slot)
        if not pos:
            return default
        return self.fb.unpack(struct.Struct("<" + fmt), pos, f"a field of {self.what}")

    def integer(self, slot: int, fmt: str, default: int = 0) -> int:
        return int(self.scalar(slot, fmt, default))

    def table(self, slot: int, what: str) -> Table | None:
        pos = self.field(slot)
        return self.fb.table(self.fb.deref(pos, what), what) if pos else None

    def vector(self, slot: int, elem_size: int, what: str, charge: bool = True) -> tuple[int, int]:
        """(start, count) of a vector field; (0, 0) when absent. Length checked vs. file size."""
        pos = self.field(slot)
        if not pos:
            return 0, 0
        vec = self.fb.deref(pos, what)
        count = self.fb.u32(vec, what)
        start = vec + 4
        if count * elem_size > self.fb.size - start:
            raise self.fb.error(
                f"{what} claims {count} elements of {elem_size} bytes but only "
                f"{self.fb.size - start} bytes remain in the file; the file is corrupt",
                vec,
            )
        if charge:
            self.fb.charge(count, vec)
        return start, count

    def numbers(self, slot: int, fmt: str, what: str) -> list[int | float]:
        """A vector of scalars (``fmt`` is a struct code such as 'i', 'f', 'q')."""
        size = struct.calcsize("<" + fmt)
        start, count = self.vector(slot, size, what)
        if not count:
            return []
        return list(struct.unpack_from(f"<{count}{fmt}", self.fb.buf, start))

    def tables(self, slot: int, what: str) -> list[Table]:
        start, count = self.vector(slot, 4, what)
        return [self.fb.table(self.fb.deref(start + 4 * i, what), what) for i in range(count)]

    def string(self, slot: int, what: str, limit: int = 4096) -> str:
        start, count = self.vector(slot, 1, what, charge=False)
        if not count:
            return ""
        n = min(count, limit)
        self.fb.charge(n, start)
        text = bytes(self.fb.buf[start : start + n]).decode("utf-8", "replace")
        return text if count <= limit else f"{text}… ({count} bytes)"
