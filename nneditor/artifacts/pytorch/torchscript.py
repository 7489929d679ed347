"""TorchScript archives (``torch.jit.save``): weights, module tree and code, never run.

Layout: ``<name>/data.pkl`` (the module object: ``__torch__.*`` classes whose BUILD state
holds attributes, parameters and submodules) with storages in ``<name>/data/<key>``;
``<name>/constants.pkl`` (a tuple of tensor constants the code calls ``CONSTANTS.c<i>``)
with storages in ``<name>/constants/<key>``; ``<name>/code/**/*.py`` TorchScript source (and
``.debug_pkl`` source maps); ``version``, ``byteorder``, optional ``extra/`` files.

Both pickles run on :mod:`restricted_pickle`; ``__torch__.*`` names are TorchScript classes
(compiled code inside the archive, not importable Python) and are listed separately from
other unrecognised names. Tensors are named by their attribute path, the way
``state_dict()`` names them ("conv.weight"); constants are "CONSTANTS.c0", ...

Invariants:
- Code members are decoded as text for display (size-capped); nothing is compiled or run.
- Tensor bytes are mapped in place (stored members), checked against storage sizes at open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nneditor.artifacts.pytorch.checkpoint import (
    archive_prefix,
    load_member_pickle,
    read_byteorder,
    read_small_text,
)
from nneditor.artifacts.pytorch.tensors import (
    StoragePool,
    collect_tensors,
    tensor_ref,
    to_tree,
    untrusted,
    untrusted_note,
    weights_document,
    with_context,
)
from nneditor.errors import ArtifactError
from nneditor.io.source import open_source
from nneditor.io.zipfile_members import ZipArchive
from nneditor.model.document import Document
from nneditor.model.tensor import TensorCatalog

FORMAT = "torchscript"
GRAPH_REASON = (
    "TorchScript stores its program as TorchScript source code (see the code files); "
    "NNEditor shows that code but never compiles or runs it"
)
TORCHSCRIPT_CLASSES = ("__torch__.",)
#: Largest single code file decoded for display, and the total decoded at open.
MAX_CODE_FILE = 4 * 1024 * 1024
MAX_CODE_TOTAL = 16 * 1024 * 1024


def open_document(path: str | Path) -> Document:
    """Open a TorchScript zip archive as a Document (weights, module tree, code text)."""
    p = Path(path)
    source = open_source(p)
    try:
        archive = ZipArchive(source)
        return _read(p, archive)
    except ArtifactError as exc:
        source.close()
        raise with_context(exc, FORMAT, str(p)) from exc
    except BaseException:
        source.close()
        raise


def read_code(path: str | Path, name: str) -> str:
    """The text of one code file listed in ``metadata["code_files"]`` (never executed)."""
    source = open_source(Path(path))
    try:
        archive = ZipArchive(source)
        prefix = archive_prefix(archive)
        return _code_text(archive, f"{prefix}code/{name}", MAX_CODE_FILE * 16)
    finally:
        source.close()


def _code_text(archive: ZipArchive, member: str, limit: int) -> str:
    return archive.read(member, limit).decode("utf-8", "replace")


def _read(path: Path, archive: ZipArchive) -> Document:
    prefix = archive_prefix(archive)
    order = read_byteorder(archive, prefix)
    big = order == "big"
    data_pool = StoragePool(archive, prefix + "data/", where="data.pkl", big_endian=big)
    module = load_member_pickle(archive, prefix + "data.pkl", data_pool, "data.pkl")
    globals_ = set(module.globals)
    notes = list(module.notes)
    records = collect_tensors(module.value)
    constants: Any = ()
    if prefix + "constants.pkl" in archive:
        directory = _constants_dir(archive, prefix)
        pool = StoragePool(archive, directory, where="constants.pkl", big_endian=big)
        loaded = load_member_pickle(archive, prefix + "constants.pkl", pool, "constants.pkl")
        constants = loaded.value
        globals_ |= loaded.globals
        notes += loaded.notes
        items = constants if isinstance(constants, (tuple, list)) else (constants,)
        for i, item in enumerate(items):
            records += collect_tensors(item, f"CONSTANTS.c{i}")
    catalog = TensorCatalog()
    for name, record in records:
        catalog.add(tensor_ref(name, record))
    code_files, code = _code(archive, prefix)
    bad = untrusted(globals_, TORCHSCRIPT_CLASSES)
    if bad:
        notes.append(untrusted_note(bad))
    version = read_small_text(archive, prefix + "version")
    metadata: dict[str, Any] = {
        "archive_version": version,
        "byteorder": order,
        "pickle_protocol": module.protocol,
        "globals": sorted(globals_),
        "untrusted_globals": bad,
        "torchscript_classes": sorted(g for g in globals_ if g.startswith(TORCHSCRIPT_CLASSES)),
        "code_files": code_files,
        "extra_files": _listing(archive, prefix + "extra/"),
        "storages": len(data_pool.storages),
    }
    source = archive.source
    return weights_document(
        FORMAT,
        version,
        path,
        source,
        metadata,
        catalog,
        GRAPH_REASON,
        {"module": to_tree(module.value), "constants": to_tree(constants), "code": code},
        notes,
    )


def _constants_dir(archive: ZipArchive, prefix: str) -> str:
    for directory in ("constants/", ".data/"):
        if any(n.startswith(prefix + directory) for n in archive.names()):
            return prefix + directory
    return prefix + "constants/"


def _listing(archive: ZipArchive, folder: str) -> list[dict[str, Any]]:
    return [
        {"name": name[len(folder) :], "size": member.file_size}
        for name, member in archive.members.items()
        if name.startswith(folder) and not name.endswith("/")
    ]


def _code(archive: ZipArchive, prefix: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Code files (name, size) and their text, decoded up to the size caps."""
    files = [f for f in _listing(archive, prefix + "code/") if f["name"].endswith(".py")]
    text: dict[str, str] = {}
    total = 0
    for entry in files:
        size = entry["size"]
        if size > MAX_CODE_FILE or total + size > MAX_CODE_TOTAL:
            text[entry["name"]] = f"<{size} bytes; read it with torchscript.read_code>"
            continue
        total += size
        text[entry["name"]] = _code_text(archive, f"{prefix}code/{entry['name']}", MAX_CODE_FILE)
    return files, text
