"""Hostile pickles, hand-written opcode by opcode, bare and inside torch-like zip archives.

Every payload would create a sentinel file if any part of it ran (``os.system("touch S")``,
``exec(...)``, ``subprocess.Popen``...). Each test asserts that:

- the sentinel never exists and no import / exec / process / find_class event was audited,
  and the only file opened is the artifact itself;
- the result is a readable report (``metadata["untrusted_globals"]`` names the globals) or an
  :class:`ArtifactError` sentence;
- tracemalloc's peak stays within a small multiple of the file size (declared sizes are
  never allocated).
"""

from __future__ import annotations

import json
import struct
import sys
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nneditor.artifacts.pytorch import checkpoint as torch_pickle
from nneditor.artifacts.pytorch.restricted_pickle import allowlist as pickle_allowlist
from nneditor.artifacts.pytorch.restricted_pickle import opcodes as pickle_opcodes
from nneditor.errors import ArtifactError
from nneditor.io import zipfile_members
from nneditor.model.document import summarise

# -- audit: prove nothing was imported, executed or spawned ----------------------------------

_WATCHED = (
    "import",
    "exec",
    "compile",
    "pickle.find_class",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "subprocess.Popen",
    "ctypes.dlopen",
    "open",
)
_EVENTS: list[tuple[str, tuple[Any, ...]]] = []
_ACTIVE = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _ACTIVE[0] and event in _WATCHED:
        _EVENTS.append((event, args))


sys.addaudithook(_audit)
b"warm".decode("cp437")  # zipfile decodes legacy member names with this codec (a stdlib import)

# -- opcode helpers -----------------------------------------------------------------------------


def P(n: int = 2) -> bytes:
    return b"\x80" + bytes([n])


def G(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def U(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def SU(text: str) -> bytes:  # protocol 4 short unicode
    raw = text.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


def I1(n: int) -> bytes:
    return b"K" + bytes([n])


def I4(n: int) -> bytes:
    """An integer opcode: BININT when it fits, LONG1 otherwise."""
    if -(2**31) <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


T1, T2, T3 = b"\x85", b"\x86", b"\x87"
R, B, STOP, MARK, TUP, EMPTY_DICT, EMPTY_LIST = b"R", b"b", b".", b"(", b"t", b"}", b"]"


def call(func: bytes, *args: bytes) -> bytes:
    return func + MARK + b"".join(args) + TUP + R


def storage_pid(key: str, numel: int, storage: str = "FloatStorage") -> bytes:
    return MARK + U("storage") + G("torch", storage) + U(key) + U("cpu") + I4(numel) + TUP + b"Q"


def rebuild(pid: bytes, size: tuple[int, ...], stride: tuple[int, ...], offset: int = 0) -> bytes:
    ints = lambda xs: MARK + b"".join(I4(x) for x in xs) + TUP  # noqa: E731
    return call(
        G("torch._utils", "_rebuild_tensor_v2"),
        pid,
        I4(offset),
        ints(size),
        ints(stride),
        b"\x89",
        call(G("collections", "OrderedDict")),
    )


# -- the corpus ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[str, str], bytes]  # (shell command, python code) -> pickle bytes
    bare: tuple[str, Any]  # ("report", [untrusted...]) or ("error", regex)
    zipped: tuple[str, Any] | None = None  # defaults to ``bare``


def report(*names: str) -> tuple[str, Any]:
    return ("report", sorted(names))


def error(pattern: str) -> tuple[str, Any]:
    return ("error", pattern)


def _billion_laughs(cmd: str, py: str) -> bytes:
    body = P() + call(G("os", "system"), U(cmd))
    for _ in range(60):
        body += b"2" + T2  # DUP, TUPLE2: each level doubles the logical size
    return body + STOP


def _deep_lists(cmd: str, py: str) -> bytes:
    return P() + EMPTY_LIST * 5000 + b"a" * 4999 + STOP


CASES = [
    Case("p0_os_system", lambda c, p: b"cos\nsystem\n(S'" + c.encode() + b"'\ntR.", report("os.system")),
    Case("p2_os_system", lambda c, p: P() + G("os", "system") + U(c) + T1 + R + STOP, report("os.system")),
    Case(
        "p4_stack_global",
        lambda c, p: P(4) + SU("os") + SU("system") + b"\x93" + SU(c) + T1 + R + STOP,
        report("os.system"),
    ),
    Case("posix_system", lambda c, p: P() + call(G("posix", "system"), U(c)) + STOP, report("posix.system")),
    Case("nt_system", lambda c, p: P() + call(G("nt", "system"), U(c)) + STOP, report("nt.system")),
    Case("builtins_eval", lambda c, p: P() + call(G("builtins", "eval"), U(p)) + STOP, report("builtins.eval")),
    Case("builtins_exec", lambda c, p: P() + call(G("builtins", "exec"), U(p)) + STOP, report("builtins.exec")),
    Case("py2_builtin_eval", lambda c, p: P() + call(G("__builtin__", "eval"), U(p)) + STOP, report("builtins.eval")),
    Case(
        "subprocess_popen_list",
        lambda c, p: P() + call(G("subprocess", "Popen"), EMPTY_LIST + MARK + U("sh") + U("-c") + U(c) + b"e") + STOP,
        report("subprocess.Popen"),
    ),
    Case(
        "getattr_import_chain",
        lambda c, p: P()
        + call(call(G("builtins", "getattr"), call(G("builtins", "__import__"), U("os")), U("system")), U(c))
        + STOP,
        report("builtins.getattr", "builtins.__import__"),
    ),
    Case(
        "importlib_chain",
        lambda c, p: P()
        + call(call(G("builtins", "getattr"), call(G("importlib", "import_module"), U("os")), U("system")), U(c))
        + STOP,
        report("builtins.getattr", "importlib.import_module"),
    ),
    Case("inst_opcode", lambda c, p: b"(S'" + c.encode() + b"'\nios\nsystem\n.", report("os.system")),
    Case("obj_opcode", lambda c, p: P() + MARK + G("os", "system") + U(c) + b"o" + STOP, report("os.system")),
    Case(
        "newobj_popen",
        lambda c, p: P() + G("subprocess", "Popen") + U(c) + T1 + b"\x81" + STOP,
        report("subprocess.Popen"),
    ),
    Case(
        "newobj_ex_popen",
        lambda c, p: P(4) + G("subprocess", "Popen") + U(c) + T1 + EMPTY_DICT + U("shell") + b"\x88s" + b"\x92" + STOP,
        report("subprocess.Popen"),
    ),
    Case(
        "build_setstate_on_placeholder",
        lambda c, p: P() + G("subprocess", "Popen") + b")" + b"\x81" + EMPTY_DICT + U("args") + U(c) + b"s" + B + STOP,
        report("subprocess.Popen"),
    ),
    Case(
        "build_on_global",
        lambda c, p: P() + G("os", "system") + EMPTY_DICT + U("__call__") + G("builtins", "exec") + b"s" + B + STOP,
        report("os.system", "builtins.exec"),
    ),
    Case(
        "build_slotstate_reduce",
        lambda c, p: P()
        + G("collections", "UserDict")
        + b")\x81"
        + b"N"
        + EMPTY_DICT
        + U("__reduce__")
        + call(G("os", "system"), U(c))
        + b"s"
        + T2
        + B
        + STOP,
        report("collections.UserDict", "os.system"),
    ),
    Case("ext1", lambda c, p: P() + b"\x82\x01" + U(c) + T1 + R + STOP, report("copyreg.extension[1]")),
    Case("ext2", lambda c, p: P() + b"\x83\x01\x02" + U(c) + T1 + R + STOP, report("copyreg.extension[513]")),
    Case("ext4", lambda c, p: P() + b"\x84" + struct.pack("<i", 7777) + U(c) + T1 + R + STOP, report("copyreg.extension[7777]")),
    Case(
        "persid_path_outside",
        lambda c, p: b"P../../../../etc/passwd\n.",
        report(),
        error(r"persistent id '\.\./\.\./\.\./\.\./etc/passwd' is not a torch storage reference"),
    ),
    Case(
        "binpersid_storage_outside_archive",
        lambda c, p: P() + storage_pid("../../etc/passwd", 4) + STOP,
        report(),
        error(r"refers to storage '\.\./\.\./etc/passwd', but the archive has no member"),
    ),
    Case("memo_get_missing", lambda c, p: P() + b"h\x07" + STOP, error(r"memo key 7 is read before it is written")),
    Case(
        "memo_long_get_missing",
        lambda c, p: P() + b"j" + struct.pack("<I", 10**6) + STOP,
        error(r"memo key 1000000 is read before it is written"),
    ),
    Case("stack_underflow", lambda c, p: P() + R + STOP, error(r"REDUCE needs a value but the stack is empty")),
    Case("pop_mark_without_mark", lambda c, p: P() + b"1" + STOP, error(r"POP_MARK needs a MARK but none is open")),
    Case("unknown_opcode", lambda c, p: P() + b"\xff" + STOP, error(r"unknown pickle opcode 0xff")),
    Case(
        "huge_binunicode",
        lambda c, p: P() + b"X" + struct.pack("<I", 0xFFFFFFF0) + b"abc" + STOP,
        error(r"BINUNICODE declares 4294967280 bytes but only 4 remain"),
    ),
    Case(
        "huge_binbytes8",
        lambda c, p: P(4) + b"\x8e" + struct.pack("<Q", 2**62) + b"x" + STOP,
        error(r"BINBYTES8 declares 4611686018427387904 bytes"),
    ),
    Case(
        "huge_frame",
        lambda c, p: P(4) + b"\x95" + struct.pack("<Q", 2**60) + b"N." + STOP,
        error(r"FRAME declares 1152921504606846976 bytes"),
    ),
    Case(
        "huge_long4",
        lambda c, p: P() + b"\x8b" + struct.pack("<i", 2**31 - 1) + b"\x00" * 16 + STOP,
        error(r"LONG4 declares a 2147483647-byte integer; at most 1024 allowed"),
    ),
    Case("huge_text_int", lambda c, p: b"I" + b"9" * 100_000 + b"\n.", error(r"INT argument b'9999.* is not a usable integer")),
    Case("deep_list_nesting", _deep_lists, error(r"nests containers more than 1000 levels deep")),
    Case(
        "deep_tuple_dict_key",
        lambda c, p: P() + EMPTY_DICT + b")" + T1 * 50_000 + b"N" + b"s" + STOP,
        error(r"SETITEM uses a dict key or set member nested more than 100 levels deep"),
    ),
    Case(
        "tuple_dag_as_frozenset_member",
        lambda c, p: P(4) + MARK + b")" + (b"2" + T2) * 40 + b"\x91" + STOP,
        error(r"FROZENSET uses a dict key or set member nested more than 100 levels deep or with more than 10000 parts"),
    ),
    Case("billion_laughs", _billion_laughs, report("os.system")),
    Case("self_cycle", lambda c, p: P() + EMPTY_LIST + b"q\x00" + b"h\x00" + b"a" + STOP, report()),
    Case(
        "rebuild_huge_numel",
        lambda c, p: P() + rebuild(storage_pid("0", 10**15), (4,), (1,)) + STOP,
        report(),
        error(r"storage '0' declares 1000000000000000 float32 elements \(4000000000000000 bytes\)"),
    ),
    Case(
        "rebuild_out_of_bounds",
        lambda c, p: P() + EMPTY_DICT + U("w") + rebuild(storage_pid("0", 4), (100,), (1,), 2) + b"s" + STOP,
        report(),
        error(r"tensor 'w' \(float32 \[100\], storage offset 2, stride \[1\]\) reaches byte 408 of storage '0'"),
    ),
    Case(
        "rebuild_negative_size",
        lambda c, p: P() + rebuild(storage_pid("0", 4), (-1,), (1,)) + STOP,
        report(),
        error(r"_rebuild_tensor_v2: the size \[-1\] has a negative entry"),
    ),
    Case(
        "rebuild_storage_is_a_call",
        lambda c, p: P() + rebuild(call(G("os", "system"), U(c)), (4,), (1,)) + STOP,
        report("os.system"),
    ),
    Case(
        "codecs_rot13",
        lambda c, p: P() + call(G("_codecs", "encode"), U(c), U("rot13")) + STOP,
        report(),
    ),
    Case("bytearray_huge_int", lambda c, p: P() + call(G("builtins", "bytearray"), b"\x8a\x05" + b"\x00" * 4 + b"\x01") + STOP, report()),
    Case(
        "set_of_huge_range",
        lambda c, p: P() + call(G("builtins", "set"), call(G("builtins", "range"), b"\x8a\x05\x00\x00\x00\x00\x01")) + STOP,
        report("builtins.range"),
    ),
    Case(
        "copyreg_reconstructor",
        lambda c, p: P() + call(G("copy_reg", "_reconstructor"), G("os", "system"), G("builtins", "object"), U(c)) + STOP,
        report("copyreg._reconstructor", "os.system", "builtins.object"),
    ),
    Case("protocol_6", lambda c, p: b"\x80\x06N.", error(r"unsupported pickle protocol 6")),
    Case("next_buffer", lambda c, p: P(5) + b"\x97" + STOP, error(r"NEXT_BUFFER refers to an out-of-band buffer")),
    Case("setitems_on_int", lambda c, p: P() + I1(1) + MARK + U("a") + U("b") + b"u" + STOP, error(r"SETITEMS cannot set items on a int")),
    Case("unhashable_key", lambda c, p: P() + EMPTY_DICT + EMPTY_LIST + b"N" + b"s" + STOP, error(r"SETITEM uses an unhashable dict key")),
    Case("no_stop", lambda c, p: P() + b"N", error(r"the pickle ends before its STOP opcode")),
    Case("nested_pickle_loads", lambda c, p: P() + call(G("pickle", "loads"), b"C\x03abc") + STOP, report("pickle.loads")),
    Case("torch_load_inside", lambda c, p: P() + call(G("torch.serialization", "load"), U("/tmp/x")) + STOP, report("torch.serialization.load")),
]  # fmt: skip


def _zip(payload: bytes, path: Path) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", b"\x00" * 16)
        zf.writestr("archive/version", "3\n")


def _run(path: Path, sentinel: Path) -> tuple[ArtifactError | None, Any, int, float]:
    """Open ``path`` under audit and tracemalloc: (error or None, document, peak, seconds)."""
    _EVENTS.clear()
    tracemalloc.start()
    _ACTIVE[0] = True
    start = time.perf_counter()
    doc = err = None
    try:
        doc = torch_pickle.open_document(path)
    except ArtifactError as exc:
        err = exc
    finally:
        _ACTIVE[0] = False
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert not sentinel.exists(), "a payload ran"
    others = [
        (e, str(a[0])[:80])
        for e, a in _EVENTS
        if not (e == "open" and Path(a[0]) == path and a[1] == "r")
    ]
    assert others == [], f"audited side effects: {others}"
    return err, doc, peak, elapsed


@pytest.mark.parametrize("container", ["bare", "zip"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_pickle(case: Case, container: str, tmp_path: Path, unchanged: Any) -> None:
    sentinel = tmp_path / "SENTINEL"
    cmd = f"touch {sentinel}"
    py = f"open({str(sentinel)!r}, 'w').close()"
    payload = case.build(cmd, py)
    path = tmp_path / f"{case.name}.pt"
    if container == "bare":
        path.write_bytes(payload)
    else:
        _zip(payload, path)
    check = unchanged(path)
    expected = case.bare if container == "bare" or case.zipped is None else case.zipped
    assert pickle_allowlist.HANDLERS and pickle_opcodes.DISPATCH  # imported before auditing
    err, doc, peak, elapsed = _run(path, sentinel)
    size = path.stat().st_size
    assert peak < 2 * 1024 * 1024 + 64 * size, f"peak {peak} bytes for a {size}-byte file"
    assert elapsed < 20
    check()
    kind, detail = expected
    if kind == "error":
        assert err is not None, f"expected an error matching {detail!r}"
        message = str(err)
        assert message.startswith(f"PYTORCH {path}"), message
        assert __import__("re").search(detail, message), message
        assert message.endswith(".")
        return
    assert err is None, f"unexpected error: {err}"
    with doc:
        assert doc.metadata["untrusted_globals"] == detail
        json.dumps(summarise(doc.tree))  # the report is plain, printable data
        if detail:
            assert any("never imported or run" in n for n in doc.notes)
            assert any(name in json.dumps(summarise(doc.tree)) for name in detail)


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30


# -- legacy-format and zip-level attacks ---------------------------------------------------------


def _legacy(main: bytes, keys: bytes, tail: bytes) -> bytes:
    magic = P() + b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + STOP
    version = P() + b"M" + struct.pack("<H", 1001) + STOP
    sysinfo = P() + EMPTY_DICT + STOP
    return magic + version + sysinfo + main + keys + tail


def test_legacy_hostile_main_pickle(tmp_path: Path) -> None:
    sentinel = tmp_path / "SENTINEL"
    main = P() + call(G("os", "system"), U(f"touch {sentinel}")) + STOP
    path = tmp_path / "legacy.pt"
    path.write_bytes(_legacy(main, P() + EMPTY_LIST + STOP, b""))
    err, doc, _, _ = _run(path, sentinel)
    assert err is None
    with doc:
        assert doc.metadata["container"] == "legacy"
        assert doc.metadata["untrusted_globals"] == ["os.system"]


@pytest.mark.parametrize(
    ("count", "numel", "message"),
    [
        (
            2**60,
            4,
            r"storage '1' is stored with 1152921504606846976 elements but the object pickle declares 4",
        ),
        (2**40, 2**40, r"storage '1' of 4398046511104 bytes at offset \d+ runs past the end"),
    ],
)
def test_legacy_huge_storage_counts(tmp_path: Path, count: int, numel: int, message: str) -> None:
    main = P() + EMPTY_DICT + U("w") + rebuild(storage_pid("1", numel), (4,), (1,)) + b"s" + STOP
    keys = P() + EMPTY_LIST + U("1") + b"a" + STOP
    path = tmp_path / "legacy.pt"
    path.write_bytes(_legacy(main, keys, struct.pack("<Q", count) + b"\x00" * 16))
    err, _, peak, _ = _run(path, tmp_path / "SENTINEL")
    assert err is not None and __import__("re").search(message, str(err)), err
    assert peak < 2 * 1024 * 1024


def test_legacy_unknown_key(tmp_path: Path) -> None:
    keys = P() + EMPTY_LIST + U("ghost") + b"a" + STOP
    path = tmp_path / "legacy.pt"
    path.write_bytes(_legacy(P() + EMPTY_DICT + STOP, keys, b""))
    with pytest.raises(
        ArtifactError,
        match="the storage-key list names 'ghost', which the object pickle never uses",
    ):
        torch_pickle.open_document(path)


def test_tensor_next_to_payload_stays_readable(tmp_path: Path) -> None:
    sentinel = tmp_path / "SENTINEL"
    payload = (
        P()
        + EMPTY_DICT
        + MARK
        + U("weight")
        + rebuild(storage_pid("0", 4), (2, 2), (2, 1))
        + U("hook")
        + call(G("os", "system"), U(f"touch {sentinel}"))
        + b"u"
        + STOP
    )
    path = tmp_path / "mixed.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/data/0", struct.pack("<4f", 1, 2, 3, 4))
    err, doc, _, _ = _run(path, sentinel)
    assert err is None
    with doc:
        assert doc.tensors["weight"].read().tolist() == [[1, 2], [3, 4]]
        assert doc.metadata["untrusted_globals"] == ["os.system"]
        assert doc.tree["hook"].startswith("<os.system('touch ")


def _patch_central(data: bytearray, name: bytes, field_offset: int, value: int, fmt: str) -> None:
    """Overwrite one field of the central-directory entry for ``name``."""
    at = data.rfind(b"PK\x01\x02", 0, data.rfind(name))
    struct.pack_into(fmt, data, at + field_offset, value)


def test_zip_member_header_outside_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.pt"
    _zip(P() + b"N" + STOP, path)
    data = bytearray(path.read_bytes())
    _patch_central(data, b"archive/data.pkl", 42, 0x7FFFFFF0, "<I")  # local header offset
    path.write_bytes(bytes(data))
    with pytest.raises(
        ArtifactError, match=r"local header of zip member 'archive/data.pkl' lies outside"
    ):
        torch_pickle.open_document(path)


def test_zip_duplicate_members(tmp_path: Path) -> None:
    path = tmp_path / "dup.pt"
    with pytest.warns(UserWarning), zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", P() + b"N" + STOP)
        zf.writestr("archive/data.pkl", P() + G("os", "system") + STOP)
    with pytest.raises(ArtifactError, match="more than one member named 'archive/data.pkl'"):
        torch_pickle.open_document(path)


def test_zip_bomb_member_is_cut_at_declared_size(tmp_path: Path) -> None:
    path = tmp_path / "bomb.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02N." + b"\x00" * 50_000_000)
    data = bytearray(path.read_bytes())
    _patch_central(data, b"archive/data.pkl", 24, 4, "<I")  # uncompressed size: 4 bytes
    path.write_bytes(bytes(data))
    err, doc, peak, _ = _run(path, tmp_path / "SENTINEL")
    assert peak < 8 * 1024 * 1024
    assert err is not None and "cannot be inflated" in str(err) and "CRC" in str(err)


def test_zip_declared_size_above_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zipfile_members, "MAX_INFLATE", 1000)
    path = tmp_path / "big.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", P() + U("x" * 5000) + STOP)
    with pytest.raises(
        ArtifactError, match=r"declares 5008 bytes; NNEditor inflates at most 1000 bytes"
    ):
        torch_pickle.open_document(path)
