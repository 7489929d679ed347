"""One tracer plugin folder: its manifest, its limits and its code fingerprint.

Nothing here imports or executes plugin code: the manifest is JSON, the fingerprint is a hash
of the files' bytes. Every problem is a sentence naming the folder and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nneditor.errors import NNEditorError

MANIFEST = "nneditor-tracer.json"
API_VERSION = 1
MAX_BYTES = 32 * 1024 * 1024
MAX_FILES = 1024
#: the artifact kinds a manifest may name (document format -> kind)
ARTIFACT_KINDS = {
    "onnx": "onnx_model",
    "gguf": "gguf_model",
    "huggingface": "huggingface_model",
    "safetensors": "safetensors_model",
    "pytorch": "pytorch_model",
    "stablehlo": "stablehlo_model",
}
DEVICES = ("cpu", "gpu", "npu")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_ENTRY = re.compile(r"^(?P<file>[^:]+\.py):(?P<func>[A-Za-z_][A-Za-z0-9_]*)$")
#: skipped when fingerprinting and copying: bytecode caches the interpreter writes itself
_SKIP_DIRS = {"__pycache__"}


class PluginError(NNEditorError):
    """A plugin folder is not usable; the message says which and why."""


@dataclass(frozen=True)
class Manifest:
    id: str
    name: str
    version: str
    entry_file: str
    entry_function: str
    artifact_kinds: tuple[str, ...]
    architectures: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    streaming_weights: bool = False
    description: str = ""
    requires: tuple[str, ...] = ()  # importable module names the runtime needs
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def entry_point(self) -> str:
        return f"{self.entry_file}:{self.entry_function}"


def plugin_files(folder: Path) -> list[Path]:
    """The folder's files (relative, sorted), enforcing the limits: no symlinks, at most
    1,024 files and 32 MiB."""
    if folder.is_symlink():
        raise PluginError(f"{folder} is a symbolic link; a plugin folder must be a real folder")
    files: list[Path] = []
    total = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        base = Path(root)
        for d in dirs:
            if (base / d).is_symlink():
                raise PluginError(
                    f"{base / d} is a symbolic link; plugin folders cannot hold links"
                )
        for n in sorted(names):
            p = base / n
            if p.is_symlink():
                raise PluginError(f"{p} is a symbolic link; plugin folders cannot hold links")
            files.append(p.relative_to(folder))
            total += p.stat().st_size
            if len(files) > MAX_FILES:
                raise PluginError(
                    f"{folder} holds more than {MAX_FILES:,} files; keep model weights and "
                    "installed packages outside the plugin folder"
                )
            if total > MAX_BYTES:
                raise PluginError(
                    f"{folder} holds more than 32 MiB; keep model weights and installed "
                    "packages outside the plugin folder"
                )
    return sorted(files)


def fingerprint(folder: Path, files: list[Path] | None = None) -> str:
    """sha256 over every file's relative path and bytes (the code an approval binds)."""
    h = hashlib.sha256()
    for rel in files if files is not None else plugin_files(folder):
        h.update(rel.as_posix().encode("utf-8") + b"\0")
        h.update((folder / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def read_manifest(folder: Path) -> Manifest:
    """The validated manifest of ``folder`` (raises :class:`PluginError`)."""
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise PluginError(f"{folder} has no {MANIFEST}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PluginError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PluginError(f"{path} must hold a JSON object")

    def text(key: str, required: bool = True) -> str:
        v = data.get(key)
        if v is None and not required:
            return ""
        if not isinstance(v, str) or not v.strip():
            raise PluginError(f"{path}: {key!r} must be a non-empty string")
        return v.strip()

    def strings(key: str, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
        v = data.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise PluginError(f"{path}: {key!r} must be a list of strings")
        bad = [x for x in v if allowed is not None and x not in allowed]
        if bad:
            raise PluginError(
                f"{path}: {key!r} names {bad[0]!r}; known values: {', '.join(allowed or ())}"
            )
        return tuple(v)

    api = data.get("api_version")
    if api != API_VERSION:
        raise PluginError(
            f"{path}: api_version is {api!r}; this NNEditor runs tracing API version "
            f"{API_VERSION} plugins"
        )
    pid = text("id")
    if not _ID.match(pid):
        raise PluginError(
            f"{path}: id {pid!r} must be lowercase letters, digits, '.', '_' or '-' "
            "(for example mycompany.numpy-decoder)"
        )
    entry = text("entry_point")
    m = _ENTRY.match(entry)
    if not m:
        raise PluginError(f"{path}: entry_point {entry!r} must look like tracer.py:trace")
    rel = Path(m.group("file"))
    if rel.is_absolute() or ".." in rel.parts:
        raise PluginError(f"{path}: entry_point must name a file inside the plugin folder")
    if not (folder / rel).is_file():
        raise PluginError(f"{path}: entry_point file {rel.as_posix()} does not exist")
    kinds = strings("artifact_kinds", tuple(ARTIFACT_KINDS.values()))
    if not kinds:
        raise PluginError(f"{path}: artifact_kinds must name at least one kind of artifact")
    devices = strings("devices", DEVICES) or ("cpu",)
    streaming = data.get("streaming_weights", False)
    if not isinstance(streaming, bool):
        raise PluginError(f"{path}: streaming_weights must be true or false")
    return Manifest(
        id=pid,
        name=text("name"),
        version=text("version"),
        entry_file=rel.as_posix(),
        entry_function=m.group("func"),
        artifact_kinds=kinds,
        architectures=tuple(a.lower() for a in strings("architectures")),
        devices=devices,
        streaming_weights=streaming,
        description=text("description", required=False),
        requires=strings("requires"),
        raw=data,
    )
