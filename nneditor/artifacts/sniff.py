"""Content detection: decide an artifact's format from its bytes (or folder layout).

Extensions are only a tie-breaker, never the decision: a ``.bin`` holding ONNX opens as ONNX.
Detection reads at most the first 64 KiB plus the zip central directory; it never parses a
whole file. The result names a format; ``registry`` maps it to a reader (or to a "recognised,
not supported yet" error).
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

from nneditor.artifacts.wire import protobuf as protowire
from nneditor.io.zipfile_members import ZIP_ERRORS

HEAD_BYTES = 64 * 1024

# ONNX ModelProto field number -> wire type.
_ONNX_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2}


def sniff_path(path: Path) -> str | None:
    """Format name for a file or folder, or None when nothing matches."""
    if path.is_dir():
        return sniff_folder(path)
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        fh.seek(0, 2)
        size = fh.tell()
    return sniff_bytes(head, size, path)


def sniff_folder(path: Path) -> str | None:
    names = {p.name for p in path.iterdir()}
    if "config.json" in names and (
        any(n.endswith(".safetensors") or n.endswith(".safetensors.index.json") for n in names)
        or any(
            n.startswith("pytorch_model") and n.endswith((".bin", ".bin.index.json")) for n in names
        )
        or "model.safetensors" in names
    ):
        return "huggingface"
    if "saved_model.pb" in names or "saved_model.pbtxt" in names:
        return "tf_savedmodel"
    if "Manifest.json" in names and (path / "Data").is_dir():
        return "coreml"
    if "config.json" in names:
        return "huggingface"
    return None


def sniff_bytes(head: bytes, size: int, path: Path | None = None) -> str | None:
    suffix = path.suffix.lower() if path else ""
    if head[:4] == b"GGUF":
        return "gguf"
    if head[:4] == b"PK\x03\x04" or (head[:4] == b"PK\x05\x06" and size == 22):
        return _sniff_zip(path, suffix) if path else "zip"
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "tflite"
    if head[:4] == b"ML\xefR":
        return "mlir_bytecode"
    if _is_safetensors(head, size) or _is_safetensors_index(head, size, path):
        return "safetensors"
    if _is_pickle(head):
        return "pytorch"
    if _is_stablehlo_text(head):
        return "stablehlo"
    if _is_coreml(head):
        return "coreml"
    proto = _sniff_protobuf(head, size)
    if proto:
        return proto
    return None


def _is_coreml(head: bytes) -> bool:
    """Core ML Model: specificationVersion (1), description (2), isUpdatable (10), then the
    model-type field (>= 200) whose payload may run far past the head (large weights)."""
    pos = 0
    seen: list[tuple[int, int]] = []
    try:
        while pos < len(head) and len(seen) < 8:
            tag, pos = protowire.read_varint(head, pos, len(head))
            seen.append((tag >> 3, tag & 7))
            if tag >> 3 >= 200 or tag & 7 not in (0, 2):
                break
            value, pos = protowire.read_varint(head, pos, len(head))
            pos += value if tag & 7 == 2 else 0
    except protowire.WireError:
        return False
    return (
        len(seen) >= 2
        and seen[0] == (1, 0)
        and seen[-1][0] >= 200
        and seen[-1][1] == 2
        and all(f in (1, 2, 10) for f, _ in seen[:-1])
    )


def _is_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= size - 8 and head[8:9] == b"{"


def _is_safetensors_index(head: bytes, size: int, path: Path | None) -> bool:
    # A sharded checkpoint's index: a small JSON object with a "weight_map" near its start.
    if path is None or not path.name.endswith(".safetensors.index.json"):
        return False
    return size <= 64 * 1024 * 1024 and head.lstrip()[:1] == b"{" and b'"weight_map"' in head


def _is_pickle(head: bytes) -> bool:
    # Protocol 2+ pickles start with PROTO <version>; legacy torch.save writes a magic number
    # pickle first. Protocol 0/1 pickles of dicts start with '(' or '}' / ']' markers.
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return True
    # Legacy torch.save with pickle_protocol 0/1: the magic number as a text LONG.
    return head.startswith(b"L119547037146038801333356L\n.")


def _is_stablehlo_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        text = head[: len(head) - 4].decode("utf-8", errors="ignore")
        if not text:
            return False
    stripped = "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("//")
    ).lstrip()
    starts = ("module", "func.func", "#", "!", '"builtin.module"', '"func.func"')
    if not stripped.startswith(starts):
        return False
    return any(m in text for m in ("stablehlo.", "mhlo.", "chlo.", "func.func"))


def _sniff_protobuf(head: bytes, size: int) -> str | None:
    end = min(len(head), size)
    fields = protowire.shallow_fields(head, end) if head[:1] not in (b"", b"{", b"[") else []
    if not fields and len(head) == size:
        return None
    if fields and all(_ONNX_FIELDS.get(f) == wt for f, wt in fields):
        numbers = {f for f, _ in fields}
        if numbers & {7, 8} or (1 in numbers and len(head) < size):
            return "onnx"
    if not fields:
        # A huge first field (graph > 64 KiB) truncates the walk; try the first field alone.
        return _sniff_first_field(head)
    numbers = {f for f, _ in fields}
    if numbers <= {1, 2} and (2, 2) in fields and (1, 0) in fields:
        return "tf_savedmodel"
    if fields[0] == (1, 2) and numbers <= {1, 2, 3, 4}:
        return "tf_graphdef"
    if (1, 0) in fields and any(f >= 200 for f in numbers):
        return "coreml"
    return None


def _sniff_first_field(head: bytes) -> str | None:
    try:
        tag, pos = protowire.read_varint(head, 0, len(head))
    except protowire.WireError:
        return None
    field_no, wt = tag >> 3, tag & 7
    if _ONNX_FIELDS.get(field_no) == wt and field_no in (1, 7, 8):
        return "onnx"
    return None


#: Zip-based formats named by their usual suffix, for archives whose member list cannot be
#: read: their reader then explains what is wrong instead of "a zip archive of unknown content".
_ZIP_SUFFIXES = {
    ".pt": "pytorch",
    ".pth": "pytorch",
    ".ckpt": "pytorch",
    ".bin": "pytorch",
    ".pt2": "pt2",
}


def _sniff_zip(path: Path, suffix: str) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except ZIP_ERRORS:
        return _ZIP_SUFFIXES.get(suffix, "zip")
    tops = {n.split("/", 1)[1] if "/" in n else n for n in names}
    if (
        any(
            n.endswith("serialized_exported_program.json")
            or n.startswith("models/")
            and n.endswith(".json")
            for n in tops
        )
        or "archive_format" in tops
    ):
        return "pt2"
    if "data.pkl" in tops:
        if "constants.pkl" in tops or any(t.startswith("code/") for t in tops):
            return "torchscript"
        return "pytorch"
    if suffix == ".dlc" or "dlc.metadata" in tops:
        return "dlc"
    if suffix == ".npz" or (names and all(n.endswith(".npy") for n in names)):
        return "npz"
    if suffix == ".mlpackage":
        return "coreml"
    return "zip"


def read_json_file(path: Path, limit: int = 64 * 1024 * 1024) -> object:
    """Read a small JSON file with a size cap (config.json, index files)."""
    if path.stat().st_size > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return json.loads(path.read_text(encoding="utf-8"))
