"""A pickle interpreter that never imports, looks up or calls anything a pickle names.

The standard unpickler resolves every GLOBAL with ``find_class`` (an import) and then calls
it; a pickle is therefore a program. This module runs the pickle virtual machine itself
(protocols 0-5) and gives every name an inert value instead:

- GLOBAL / STACK_GLOBAL / INST push a :class:`GlobalRef` (module, name): nothing is imported.
- REDUCE / NEWOBJ / NEWOBJ_EX / OBJ / INST on anything produce a :class:`Call` placeholder
  that records the target and arguments; BUILD records state on it. Nothing is called.
- A small allowlist, recognised *by name only*, is interpreted by our own code in
  :mod:`nneditor.artifacts.pickle_allowlist` (OrderedDict, torch tensor rebuild functions,
  set/frozenset/bytearray/complex/slice, ``_codecs.encode``...). Opcode handlers live in
  :mod:`nneditor.artifacts.pickle_opcodes`.
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
from dataclasses import dataclass, field
from typing import Any

from nneditor.errors import ArtifactError

#: Longest integer (in bytes) a LONG4 opcode may carry; str() of longer ints fails in Python.
MAX_LONG_BYTES = 1024
#: Highest pickle protocol understood.
HIGHEST_PROTOCOL = 5
#: Hashing a tuple recurses in C without a guard (a deep one crashes the interpreter) and
#: re-hashes shared parts (a DAG of tuples takes exponential time): keys are size-capped.
MAX_KEY_NODES = 10_000
MAX_KEY_DEPTH = 100

# Python 2 module names that mean the same as their Python 3 names (matching only).
_COMPAT_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg", "exceptions": "builtins"}


@dataclass(frozen=True, slots=True)
class GlobalRef:
    """A name a pickle referenced (GLOBAL/STACK_GLOBAL/INST). Never imported."""

    module: str
    name: str

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    def __repr__(self) -> str:
        return f"<global {self.qualname}>"


@dataclass(frozen=True, slots=True)
class ExtensionRef:
    """An EXT1/EXT2/EXT4 extension code (a copyreg registry index). Never looked up."""

    code: int

    @property
    def qualname(self) -> str:
        return f"copyreg.extension[{self.code}]"

    def __repr__(self) -> str:
        return f"<global {self.qualname}>"


@dataclass(frozen=True, eq=False, slots=True)
class PersistentRef:
    """A persistent id that no resolver claimed."""

    pid: Any

    def __repr__(self) -> str:
        return short(self)


class Call:
    """An inert placeholder for an object the pickle asked to construct or call.

    Attributes:
        target: what would have been called (usually a :class:`GlobalRef`).
        args: positional arguments; ``kwargs``: keyword arguments (NEWOBJ_EX) or None.
        kind: the opcode family: "reduce", "newobj", "inst" or "obj".
        state: the BUILD state, if any; ``items``: APPEND(S)/ADDITEMS values;
        ``entries``: SETITEM(S) key/value pairs; ``offset``: byte offset of the opcode.
    """

    __slots__ = ("target", "args", "kwargs", "kind", "state", "items", "entries", "offset")

    def __init__(
        self,
        target: Any,
        args: tuple[Any, ...],
        kind: str,
        offset: int,
        kwargs: dict[Any, Any] | None = None,
    ) -> None:
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.kind = kind
        self.offset = offset
        self.state: Any = None
        self.items: list[Any] = []
        self.entries: list[tuple[Any, Any]] = []

    @property
    def qualname(self) -> str:
        if isinstance(self.target, (GlobalRef, ExtensionRef)):
            return self.target.qualname
        return short(self.target, 60, 1)

    def __repr__(self) -> str:
        return short(self, 200)


@dataclass(eq=False, slots=True)
class StorageRef:
    """A torch storage named by a persistent id; ``source`` is filled in once located.

    ``dtype`` is the element type the storage was saved with ("uint8" for untyped storages)
    and ``numel`` the element count the persistent id declares.
    """

    key: str
    dtype: str
    numel: int
    location: str = "cpu"
    source: Any = None  # ByteSource of exactly numel * itemsize bytes once resolved
    big_endian: bool = False

    def __repr__(self) -> str:
        return short(self)


@dataclass(eq=False, slots=True)
class TensorRecord:
    """A tensor rebuilt by name from a torch rebuild function (no torch involved).

    ``offset`` and ``stride`` count elements of ``dtype``; ``storage`` is None for tensors
    saved without data (meta tensors).
    """

    storage: StorageRef | None
    dtype: str
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    requires_grad: bool = False
    parameter: bool = False
    rebuild: str = ""
    subclass: str = ""

    def __repr__(self) -> str:
        return short(self)


@dataclass
class PickleResult:
    """What one pickle produced: its value and what it referenced."""

    value: Any
    protocol: int
    globals: set[str]
    end: int
    notes: list[str] = field(default_factory=list)


#: persistent_load(pid, byte_offset) -> object
PersistentLoader = Callable[[Any, int], Any]
#: interpret(machine, global, args, kwargs, kind) -> value, or NotImplemented for a placeholder
Interpreter = Callable[["PickleMachine", "GlobalRef", tuple[Any, ...], Any, str], Any]


def short(value: Any, limit: int = 80, depth: int = 0) -> str:
    """A one-line description of ``value``, bounded in time and length whatever it holds.

    Pickled values are untrusted: 5,000 nested persistent ids or calls, or a tuple DAG whose
    ``repr`` would print 2**60 items. This is the one place that describes them: it never
    calls ``repr``/``str`` on a container or placeholder, descends at most ``_SHORT_DEPTH``
    levels and shows at most ``_SHORT_ITEMS`` items of each container.
    """
    return _clip(_describe(value, limit, depth), limit)


#: Levels :func:`short` descends into containers and placeholders; items shown per container.
_SHORT_DEPTH = 2
_SHORT_ITEMS = 6


def _describe(value: Any, limit: int, depth: int) -> str:  # noqa: C901 - one case per type
    if isinstance(value, (str, bytes)):
        return repr(value[:limit]) + ("…" if len(value) > limit else "")
    if isinstance(value, bool) or value is None or isinstance(value, (float, complex)):
        return repr(value)
    if isinstance(value, int):
        return f"<{value.bit_length()}-bit integer>" if value.bit_length() > 128 else repr(value)
    if isinstance(value, (GlobalRef, ExtensionRef)):
        return f"<global {value.qualname}>"
    if isinstance(value, StorageRef):
        return f"<storage {_describe(value.key, 60, depth)} {value.dtype} x{value.numel}>"
    if isinstance(value, TensorRecord):
        shape = ", ".join(str(d) for d in value.shape[:8]) + (", …" if len(value.shape) > 8 else "")
        return f"<tensor {value.dtype} [{shape}]>"
    deeper = depth < _SHORT_DEPTH
    if isinstance(value, (tuple, list)):
        if not deeper:
            return f"({len(value)} items)" if isinstance(value, tuple) else f"[{len(value)} items]"
        inner = _items(value, depth)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return f"{{… {len(value)} entries}}"
    if isinstance(value, (set, frozenset, bytearray)):
        return f"<{type(value).__name__} of {len(value)} items>"
    if isinstance(value, Call):
        target = value.target
        if isinstance(target, (GlobalRef, ExtensionRef)):
            name = target.qualname
        else:
            name = _describe(target, 60, depth + 1) if deeper else "<…>"
        return f"<{name}({_items(value.args, depth, 60) if deeper else '…'})>"
    if isinstance(value, PersistentRef):
        return f"<persistent id {_describe(value.pid, limit, depth + 1) if deeper else '…'}>"
    if isinstance(value, slice):
        parts = (value.start, value.stop, value.step)
        return "slice(" + ", ".join(_describe(p, 30, _SHORT_DEPTH) for p in parts) + ")"
    return f"<{type(value).__name__}>"


def _items(values: tuple[Any, ...] | list[Any], depth: int, limit: int = 30) -> str:
    shown = ", ".join(_clip(_describe(v, limit, depth + 1), limit) for v in values[:_SHORT_ITEMS])
    return shown + (", …" if len(values) > _SHORT_ITEMS else "")


def key_is_safe(value: Any) -> bool:
    """True when hashing ``value`` is cheap and cannot exhaust the C stack."""
    if not isinstance(value, (tuple, frozenset)):
        return True
    # Count every visit (shared parts are hashed again each time they occur); tuples and
    # frozensets cannot contain themselves, so the walk ends within MAX_KEY_NODES steps.
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        obj, depth = stack.pop()
        nodes += 1
        if depth > MAX_KEY_DEPTH or nodes > MAX_KEY_NODES:
            return False
        if isinstance(obj, (tuple, frozenset)):
            stack.extend((child, depth + 1) for child in obj)
    return True


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def canonical_global(module: str, name: str) -> GlobalRef:
    return GlobalRef(_COMPAT_MODULES.get(module, module), name)


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


def load(
    data: bytes | memoryview,
    *,
    start: int = 0,
    persistent_load: PersistentLoader | None = None,
    where: str = "pickle",
    base_offset: int = 0,
) -> PickleResult:
    """Interpret the pickle starting at ``start`` in ``data`` without executing anything.

    ``where`` names the pickle in error messages ("data.pkl"); ``base_offset`` is added to
    byte offsets so errors point into the outer file. Raises :class:`ArtifactError`.
    """
    m = PickleMachine(
        data,
        start=start,
        persistent_load=persistent_load,
        where=where,
        base_offset=base_offset,
        dispatch=pickle_opcodes.DISPATCH,
        interpret=pickle_allowlist.interpret,
    )
    value = m.run()
    return PickleResult(value, m.protocol, m.globals, m.pos, m.notes)


# The opcode table and the allowlist build on the types above, so they are imported last
# (module-level imports: nothing is imported while a pickle is being read).
from nneditor.artifacts import pickle_allowlist, pickle_opcodes  # noqa: E402
