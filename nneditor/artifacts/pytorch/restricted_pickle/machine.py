"""A pickle interpreter that never imports, looks up or calls anything a pickle names.

The standard unpickler resolves every GLOBAL with ``find_class`` (an import) and then calls
it; a pickle is therefore a program. This module runs the pickle virtual machine itself
(protocols 0-5) and gives every name an inert value instead:

- GLOBAL / STACK_GLOBAL / INST push a :class:`GlobalRef` (module, name): nothing is imported.
- REDUCE / NEWOBJ / NEWOBJ_EX / OBJ / INST on anything produce a :class:`Call` placeholder
  that records the target and arguments; BUILD records state on it. Nothing is called.
- A small allowlist, recognised *by name only*, is interpreted by our own code in
  :mod:`nneditor.artifacts.pytorch.restricted_pickle.allowlist` (OrderedDict, torch tensor rebuild functions,
  set/frozenset/bytearray/complex/slice, ``_codecs.encode``...). Opcode handlers live in
  :mod:`nneditor.artifacts.pytorch.restricted_pickle.opcodes`.
- Persistent ids go to a caller-supplied resolver (torch storages) or become placeholders;
  EXT1/2/4 extension codes become :class:`ExtensionRef` placeholders (no copyreg lookup).

Invariants:
- Every length read from the pickle is checked against the bytes that remain before any
  allocation; integers and text lines are size-capped.
- Each opcode creates at most one object, so memory and time are linear in the pickle size.
- Malformed input (unknown opcode, stack underflow, missing MARK, memo read before write,
  truncation, oversized values) raises :class:`ArtifactError` naming the byte offset.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from nneditor.artifacts.pytorch.restricted_pickle.records import (
    MAX_KEY_DEPTH,
    MAX_KEY_NODES,
    Call,
    GlobalRef,
    PersistentLoader,
    PersistentRef,
    TensorRecord,
    canonical_global,
    key_is_safe,
    short,
)
from nneditor.errors import ArtifactError

#: an allowlist: (machine, the global called, arguments, keyword arguments, call kind) -> value
Interpreter = Callable[["PickleMachine", GlobalRef, tuple[Any, ...], Any, str], Any]


class PickleMachine:
    """Runs one pickle. Use :func:`load` rather than this class directly."""

    def __init__(
        self,
        data: bytes | memoryview,
        *,
        start: int,
        persistent_load: PersistentLoader | None,
        where: str,
        base_offset: int,
        dispatch: list[Any],
        interpret: Interpreter,
    ) -> None:
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.dispatch = dispatch
        self.interpret = interpret
        self.end = len(self.data)
        self.pos = start
        self.op_pos = start
        self.persistent_load = persistent_load
        self.where = where
        self.base = base_offset
        self.stack: list[Any] = []
        self.metastack: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.globals: set[str] = set()
        self.protocol = 0
        self.notes: list[str] = []
        self.opname = ""

    # -- errors and raw reads -------------------------------------------------------------

    def fail(self, detail: str, offset: int | None = None) -> ArtifactError:
        at = self.op_pos if offset is None else offset
        return ArtifactError(f"{self.where}: {detail}", offset=self.base + at)

    def take(self, n: int) -> memoryview | bytes:
        if n < 0 or n > self.end - self.pos:
            raise self.fail(
                f"{self.opname} declares {n} bytes but only {self.end - self.pos} remain; "
                "the pickle is truncated or hostile"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: struct.Struct) -> Any:
        pos = self.pos
        if fmt.size > self.end - pos:
            self.take(fmt.size)  # raises the truncation error
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.data, pos)[0]

    def byte(self) -> int:
        """One unsigned byte argument."""
        pos = self.pos
        if pos >= self.end:
            self.take(1)  # raises the truncation error
        self.pos = pos + 1
        return self.data[pos]

    def readline(self) -> bytes:
        """Bytes up to (not including) the next newline; the newline is consumed."""
        pieces: list[bytes] = []
        pos = self.pos
        window = 256  # lines are short; grow the window for long ones (linear overall)
        while pos < self.end:
            chunk = bytes(self.data[pos : min(self.end, pos + window)])
            nl = chunk.find(b"\n")
            if nl >= 0:
                pieces.append(chunk[:nl])
                self.pos = pos + nl + 1
                return b"".join(pieces)
            pieces.append(chunk)
            pos += len(chunk)
            window = min(window * 2, 1 << 20)
        raise self.fail(f"{self.opname} expects a newline-terminated argument but the pickle ends")

    def text_line(self) -> str:
        line = self.readline()
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{self.opname} argument is not valid UTF-8") from None

    def int_line(self) -> int:
        line = self.readline().strip()
        try:
            return int(line)
        except ValueError:
            raise self.fail(
                f"{self.opname} argument {short(line, 40)} is not a (reasonably sized) integer"
            ) from None

    # -- stack ----------------------------------------------------------------------------

    def pop(self) -> Any:
        if not self.stack:
            raise self.fail(f"{self.opname} needs a value but the stack is empty")
        return self.stack.pop()

    def top(self) -> Any:
        if not self.stack:
            raise self.fail(f"{self.opname} needs a value but the stack is empty")
        return self.stack[-1]

    def pop_mark(self) -> list[Any]:
        if not self.metastack:
            raise self.fail(f"{self.opname} needs a MARK but none is open")
        items = self.stack
        self.stack = self.metastack.pop()
        return items

    def memo_get(self, key: int) -> None:
        try:
            self.stack.append(self.memo[key])
        except KeyError:
            raise self.fail(f"memo key {key} is read before it is written") from None

    def memo_put(self, key: int) -> None:
        if key < 0:
            raise self.fail(f"negative memo key {key}")
        self.memo[key] = self.top()

    # -- object construction --------------------------------------------------------------

    def add_global(self, module: str, name: str) -> GlobalRef:
        ref = canonical_global(module, name)
        self.globals.add(ref.qualname)
        return ref

    def construct(
        self, target: Any, args: Any, kind: str, kwargs: dict[Any, Any] | None = None
    ) -> Any:
        if not isinstance(args, tuple):
            if isinstance(args, list) and kind in ("obj", "inst"):
                args = tuple(args)
            else:
                raise self.fail(
                    f"{self.opname} arguments must be a tuple, not {type(args).__name__}"
                )
        if kwargs is not None and not isinstance(kwargs, dict):
            raise self.fail(f"{self.opname} keyword arguments must be a dict")
        if isinstance(target, GlobalRef):
            result = self.interpret(self, target, args, kwargs, kind)
            if result is not NotImplemented:
                return result
        return Call(target, args, kind, self.base + self.op_pos, kwargs)

    def build(self, obj: Any, state: Any) -> None:
        if isinstance(obj, Call):
            if isinstance(obj.state, dict) and isinstance(state, dict):
                obj.state.update(state)
            else:
                obj.state = state
        elif isinstance(obj, (dict, TensorRecord)):
            pass  # e.g. OrderedDict._metadata, Parameter state: nothing to execute or keep
        else:
            self.notes.append(
                f"BUILD at byte {self.base + self.op_pos} on {short(obj, 60)} was ignored"
            )

    def append_items(self, target: Any, items: list[Any]) -> None:
        if isinstance(target, list):
            target.extend(items)
        elif isinstance(target, Call):
            target.items.extend(items)
        else:
            raise self.fail(f"{self.opname} cannot append to a {type(target).__name__}")

    def set_items(self, target: Any, flat: list[Any]) -> None:
        if len(flat) % 2:
            raise self.fail(f"{self.opname} needs key/value pairs but got an odd item count")
        pairs = list(zip(flat[::2], flat[1::2], strict=True))
        if isinstance(target, dict):
            try:
                for k, v in pairs:
                    self.check_key(k)
                    target[k] = v
            except TypeError:
                raise self.fail(f"{self.opname} uses an unhashable dict key") from None
        elif isinstance(target, Call):
            target.entries.extend(pairs)
        else:
            raise self.fail(f"{self.opname} cannot set items on a {type(target).__name__}")

    def check_key(self, value: Any) -> None:
        if not key_is_safe(value):
            raise self.fail(
                f"{self.opname} uses a dict key or set member nested more than "
                f"{MAX_KEY_DEPTH} levels deep or with more than {MAX_KEY_NODES} parts"
            )

    def persistent(self, pid: Any) -> Any:
        if self.persistent_load is None:
            return PersistentRef(pid)
        return self.persistent_load(pid, self.base + self.op_pos)

    # -- main loop ------------------------------------------------------------------------

    def run(self) -> Any:
        table = self.dispatch
        data = self.data
        while True:
            if self.pos >= self.end:
                raise self.fail("the pickle ends before its STOP opcode", self.pos)
            self.op_pos = self.pos
            code = data[self.pos]
            self.pos += 1
            entry = table[code]
            if entry is None:
                raise self.fail(f"unknown pickle opcode 0x{code:02x}")
            self.opname, handler = entry
            if handler(self):
                return self.pop()
