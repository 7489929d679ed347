"""Opcode handlers of the restricted pickle machine (protocols 0-5).

Each handler reads its argument bytes through :meth:`PickleMachine.take` (bounds-checked
against the bytes that remain), and pushes at most one new object. Handlers never import,
look up or call anything named by the pickle: constructing opcodes go through
:meth:`PickleMachine.construct`, which returns inert placeholders or allowlisted values.
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable
from typing import Any

from nneditor.artifacts.pytorch.restricted_pickle.machine import PickleMachine
from nneditor.artifacts.pytorch.restricted_pickle.records import (
    HIGHEST_PROTOCOL,
    MAX_LONG_BYTES,
    Call,
    ExtensionRef,
    short,
)

Handler = Callable[[PickleMachine], Any]


def _text_string(m: PickleMachine, raw: bytes | memoryview) -> str | bytes:
    """A Python 2 ``str``: UTF-8 text when it decodes, bytes otherwise (torch uses utf-8)."""
    data = bytes(raw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _unicode(m: PickleMachine, raw: bytes | memoryview) -> str:
    try:
        return bytes(raw).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise m.fail(f"{m.opname} text is not valid UTF-8") from None


_I4 = struct.Struct("<i")
_U4 = struct.Struct("<I")
_U2 = struct.Struct("<H")
_U8 = struct.Struct("<Q")
_F8 = struct.Struct(">d")


def _op_mark(m: PickleMachine) -> None:
    m.metastack.append(m.stack)
    m.stack = []


def _op_stop(m: PickleMachine) -> bool:
    return True


def _op_pop(m: PickleMachine) -> None:
    if m.stack:
        m.stack.pop()
    else:
        m.pop_mark()


def _op_dup(m: PickleMachine) -> None:
    m.stack.append(m.top())


def _op_proto(m: PickleMachine) -> None:
    version = m.byte()
    if version > HIGHEST_PROTOCOL:
        raise m.fail(f"unsupported pickle protocol {version} (NNEditor reads 0-5)")
    m.protocol = max(m.protocol, version)


def _op_frame(m: PickleMachine) -> None:
    size = m.unpack(_U8)
    if size > m.end - m.pos:
        raise m.fail(
            f"FRAME declares {size} bytes but only {m.end - m.pos} remain; "
            "the pickle is truncated or hostile"
        )


def _op_int(m: PickleMachine) -> None:
    line = m.readline().strip()
    if line == b"00":
        m.stack.append(False)
    elif line == b"01":
        m.stack.append(True)
    else:
        try:
            m.stack.append(int(line))
        except ValueError:
            raise m.fail(f"INT argument {short(line, 40)} is not a usable integer") from None


def _op_long(m: PickleMachine) -> None:
    line = m.readline().strip().rstrip(b"L")
    try:
        m.stack.append(int(line))
    except ValueError:
        raise m.fail(f"LONG argument {short(line, 40)} is not a usable integer") from None


def _long_bytes(m: PickleMachine, n: int) -> None:
    if n > MAX_LONG_BYTES:
        raise m.fail(f"{m.opname} declares a {n}-byte integer; at most {MAX_LONG_BYTES} allowed")
    m.stack.append(int.from_bytes(m.take(n), "little", signed=True))


def _op_long4(m: PickleMachine) -> None:
    n = m.unpack(_I4)
    if n < 0:
        raise m.fail(f"LONG4 declares a negative length {n}")
    _long_bytes(m, n)


def _op_float(m: PickleMachine) -> None:
    line = m.readline().strip()
    try:
        m.stack.append(float(line))
    except ValueError:
        raise m.fail(f"FLOAT argument {short(line, 40)} is not a number") from None


def _op_string(m: PickleMachine) -> None:
    line = m.readline().rstrip()
    if len(line) < 2 or line[0] != line[-1] or line[:1] not in (b"'", b'"'):
        raise m.fail("STRING argument is not a quoted string")
    try:
        raw = codecs.escape_decode(line[1:-1])[0]  # type: ignore[attr-defined]
    except ValueError:
        raise m.fail("STRING argument has an invalid escape") from None
    m.stack.append(_text_string(m, raw))


def _op_binstring(m: PickleMachine) -> None:
    n = m.unpack(_I4)
    if n < 0:
        raise m.fail(f"BINSTRING declares a negative length {n}")
    m.stack.append(_text_string(m, m.take(n)))


def _op_unicode(m: PickleMachine) -> None:
    try:
        m.stack.append(m.readline().decode("raw-unicode-escape"))
    except UnicodeDecodeError:
        raise m.fail("UNICODE argument cannot be decoded") from None


def _op_global(m: PickleMachine) -> None:
    module = m.text_line()
    name = m.text_line()
    m.stack.append(m.add_global(module, name))


def _op_stack_global(m: PickleMachine) -> None:
    name = m.pop()
    module = m.pop()
    if not isinstance(module, str) or not isinstance(name, str):
        raise m.fail("STACK_GLOBAL needs two strings (module and name)")
    m.stack.append(m.add_global(module, name))


def _op_inst(m: PickleMachine) -> None:
    module = m.text_line()
    name = m.text_line()
    ref = m.add_global(module, name)
    args = m.pop_mark()
    m.stack.append(m.construct(ref, tuple(args), "inst"))


def _op_obj(m: PickleMachine) -> None:
    args = m.pop_mark()
    if not args:
        raise m.fail("OBJ needs a class after its MARK")
    cls = args.pop(0)
    m.stack.append(m.construct(cls, tuple(args), "obj"))


def _op_reduce(m: PickleMachine) -> None:
    args = m.pop()
    func = m.pop()
    m.stack.append(m.construct(func, args, "reduce"))


def _op_newobj(m: PickleMachine) -> None:
    args = m.pop()
    cls = m.pop()
    m.stack.append(m.construct(cls, args, "newobj"))


def _op_newobj_ex(m: PickleMachine) -> None:
    kwargs = m.pop()
    args = m.pop()
    cls = m.pop()
    m.stack.append(m.construct(cls, args, "newobj", kwargs))


def _op_build(m: PickleMachine) -> None:
    state = m.pop()
    m.build(m.top(), state)


def _op_ext(size: struct.Struct | None) -> Callable[[PickleMachine], None]:
    def op(m: PickleMachine) -> None:
        code = m.byte() if size is None else m.unpack(size)
        m.globals.add(f"copyreg.extension[{code}]")
        m.stack.append(ExtensionRef(code))

    return op


def _op_persid(m: PickleMachine) -> None:
    line = m.readline()
    try:
        pid = line.decode("ascii")
    except UnicodeDecodeError:
        raise m.fail("PERSID argument is not ASCII") from None
    m.stack.append(m.persistent(pid))


def _op_binpersid(m: PickleMachine) -> None:
    m.stack.append(m.persistent(m.pop()))


def _op_list(m: PickleMachine) -> None:
    items = m.pop_mark()  # replaces m.stack: read it only afterwards
    m.stack.append(items)


def _op_tuple(m: PickleMachine) -> None:
    items = tuple(m.pop_mark())
    m.stack.append(items)


def _op_dict(m: PickleMachine) -> None:
    out: dict[Any, Any] = {}
    m.set_items(out, m.pop_mark())
    m.stack.append(out)


def _op_setitem(m: PickleMachine) -> None:
    value = m.pop()
    key = m.pop()
    m.set_items(m.top(), [key, value])


def _op_setitems(m: PickleMachine) -> None:
    items = m.pop_mark()
    m.set_items(m.top(), items)


def _op_append(m: PickleMachine) -> None:
    value = m.pop()
    m.append_items(m.top(), [value])


def _op_appends(m: PickleMachine) -> None:
    items = m.pop_mark()
    m.append_items(m.top(), items)


def _op_additems(m: PickleMachine) -> None:
    items = m.pop_mark()
    target = m.top()
    if isinstance(target, set):
        for item in items:
            m.check_key(item)
        try:
            target.update(items)
        except TypeError:
            raise m.fail("ADDITEMS adds an unhashable value to a set") from None
    elif isinstance(target, Call):
        target.items.extend(items)
    else:
        raise m.fail(f"ADDITEMS cannot add to a {type(target).__name__}")


def _op_frozenset(m: PickleMachine) -> None:
    items = m.pop_mark()
    for item in items:
        m.check_key(item)
    try:
        m.stack.append(frozenset(items))
    except TypeError:
        raise m.fail("FROZENSET contains an unhashable value") from None


def _op_tuple_n(n: int) -> Callable[[PickleMachine], None]:
    def op(m: PickleMachine) -> None:
        if len(m.stack) < n:
            raise m.fail(f"{m.opname} needs {n} values but the stack has {len(m.stack)}")
        items = tuple(m.stack[len(m.stack) - n :])
        del m.stack[len(m.stack) - n :]
        m.stack.append(items)

    return op


def _push(value_factory: Callable[[], Any]) -> Callable[[PickleMachine], None]:
    def op(m: PickleMachine) -> None:
        m.stack.append(value_factory())

    return op


def _sized(size: struct.Struct | None, convert: Callable[[PickleMachine, Any], Any]):  # type: ignore[no-untyped-def]
    def op(m: PickleMachine) -> None:
        n = m.byte() if size is None else m.unpack(size)
        m.stack.append(convert(m, m.take(n)))

    return op


def _fixed(fmt: struct.Struct) -> Callable[[PickleMachine], None]:
    def op(m: PickleMachine) -> None:
        m.stack.append(m.unpack(fmt))

    return op


def _op_next_buffer(m: PickleMachine) -> None:
    raise m.fail("NEXT_BUFFER refers to an out-of-band buffer, which a file cannot provide")


def _op_noop(m: PickleMachine) -> None:
    m.top()


def _op_get(m: PickleMachine) -> None:
    m.memo_get(m.int_line())


def _op_put(m: PickleMachine) -> None:
    m.memo_put(m.int_line())


def _op_memoize(m: PickleMachine) -> None:
    m.memo[len(m.memo)] = m.top()


def _op_binput(m: PickleMachine) -> None:
    if not m.stack:
        raise m.fail("BINPUT needs a value but the stack is empty")
    m.memo[m.byte()] = m.stack[-1]


def _op_binget(m: PickleMachine) -> None:
    m.memo_get(m.byte())


def _op_long_binput(m: PickleMachine) -> None:
    if not m.stack:
        raise m.fail("LONG_BINPUT needs a value but the stack is empty")
    m.memo[m.unpack(_U4)] = m.stack[-1]


def _op_long_binget(m: PickleMachine) -> None:
    m.memo_get(m.unpack(_U4))


def _op_binint1(m: PickleMachine) -> None:
    m.stack.append(m.byte())


def _build_dispatch() -> list[tuple[str, Handler] | None]:
    ops: dict[bytes, tuple[str, Handler]] = {
        b"(": ("MARK", _op_mark),
        b".": ("STOP", _op_stop),
        b"0": ("POP", _op_pop),
        b"1": ("POP_MARK", lambda m: m.pop_mark()),
        b"2": ("DUP", _op_dup),
        b"F": ("FLOAT", _op_float),
        b"I": ("INT", _op_int),
        b"J": ("BININT", _fixed(_I4)),
        b"K": ("BININT1", _op_binint1),
        b"L": ("LONG", _op_long),
        b"M": ("BININT2", _fixed(_U2)),
        b"N": ("NONE", _push(lambda: None)),
        b"P": ("PERSID", _op_persid),
        b"Q": ("BINPERSID", _op_binpersid),
        b"R": ("REDUCE", _op_reduce),
        b"S": ("STRING", _op_string),
        b"T": ("BINSTRING", _op_binstring),
        b"U": ("SHORT_BINSTRING", _sized(None, _text_string)),
        b"V": ("UNICODE", _op_unicode),
        b"X": ("BINUNICODE", _sized(_U4, _unicode)),
        b"a": ("APPEND", _op_append),
        b"b": ("BUILD", _op_build),
        b"c": ("GLOBAL", _op_global),
        b"d": ("DICT", _op_dict),
        b"}": ("EMPTY_DICT", _push(dict)),
        b"e": ("APPENDS", _op_appends),
        b"g": ("GET", _op_get),
        b"h": ("BINGET", _op_binget),
        b"i": ("INST", _op_inst),
        b"j": ("LONG_BINGET", _op_long_binget),
        b"l": ("LIST", _op_list),
        b"]": ("EMPTY_LIST", _push(list)),
        b"o": ("OBJ", _op_obj),
        b"p": ("PUT", _op_put),
        b"q": ("BINPUT", _op_binput),
        b"r": ("LONG_BINPUT", _op_long_binput),
        b"s": ("SETITEM", _op_setitem),
        b"t": ("TUPLE", _op_tuple),
        b")": ("EMPTY_TUPLE", _push(tuple)),
        b"u": ("SETITEMS", _op_setitems),
        b"G": ("BINFLOAT", _fixed(_F8)),
        b"\x80": ("PROTO", _op_proto),
        b"\x81": ("NEWOBJ", _op_newobj),
        b"\x82": ("EXT1", _op_ext(None)),
        b"\x83": ("EXT2", _op_ext(_U2)),
        b"\x84": ("EXT4", _op_ext(_I4)),
        b"\x85": ("TUPLE1", _op_tuple_n(1)),
        b"\x86": ("TUPLE2", _op_tuple_n(2)),
        b"\x87": ("TUPLE3", _op_tuple_n(3)),
        b"\x88": ("NEWTRUE", _push(lambda: True)),
        b"\x89": ("NEWFALSE", _push(lambda: False)),
        b"\x8a": ("LONG1", lambda m: _long_bytes(m, m.byte())),
        b"\x8b": ("LONG4", _op_long4),
        b"B": ("BINBYTES", _sized(_U4, lambda m, raw: bytes(raw))),
        b"C": ("SHORT_BINBYTES", _sized(None, lambda m, raw: bytes(raw))),
        b"\x8c": ("SHORT_BINUNICODE", _sized(None, _unicode)),
        b"\x8d": ("BINUNICODE8", _sized(_U8, _unicode)),
        b"\x8e": ("BINBYTES8", _sized(_U8, lambda m, raw: bytes(raw))),
        b"\x8f": ("EMPTY_SET", _push(set)),
        b"\x90": ("ADDITEMS", _op_additems),
        b"\x91": ("FROZENSET", _op_frozenset),
        b"\x92": ("NEWOBJ_EX", _op_newobj_ex),
        b"\x93": ("STACK_GLOBAL", _op_stack_global),
        b"\x94": ("MEMOIZE", _op_memoize),
        b"\x95": ("FRAME", _op_frame),
        b"\x96": ("BYTEARRAY8", _sized(_U8, lambda m, raw: bytearray(raw))),
        b"\x97": ("NEXT_BUFFER", _op_next_buffer),
        b"\x98": ("READONLY_BUFFER", _op_noop),
    }
    table: list[tuple[str, Handler] | None] = [None] * 256
    for key, entry in ops.items():
        table[key[0]] = entry
    return table


#: opcode byte -> (name, handler); None for bytes that are not opcodes.
DISPATCH = _build_dispatch()
