"""The values a restricted pickle run produces instead of objects, and the one bounded way to
describe them: placeholders for globals, calls, extension codes and persistent ids, the storage
and tensor records torch's rebuild functions become, and the run's result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
    #: a quantized tensor's scheme: ("per_tensor_affine", scale, zero_point) or
    #: ("per_channel_affine" | "per_channel_affine_float_qparams", scales, zero_points, axis)
    #: with the per-channel values as TensorRecords; empty for other tensors
    quantizer: tuple[Any, ...] = ()

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
