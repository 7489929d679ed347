"""Per-user file-type registration: the model extensions NNEditor opens, for Linux (XDG
desktop entry + shared-mime-info with content magic), Windows (per-user ProgID and
OpenWithProgids, never a default) and macOS (the bundle's document types).

Nothing here needs Qt. Linux writes files under ``$XDG_DATA_HOME`` (default
``~/.local/share``) and runs ``update-mime-database`` / ``update-desktop-database`` when they
are installed; Windows writes through a small :class:`RegistryWriter` so the exact data is
testable on any system; macOS registration is the ``CFBundleDocumentTypes`` of the app
bundle's Info.plist (:func:`mac_document_types`, used by packaging/).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from xml.sax.saxutils import escape

APP_ID = "nneditor"
PROG_ID = "NNEditor.Model"


@dataclass(frozen=True)
class FileType:
    extension: str
    mime: str
    description: str
    #: shared-mime-info magic: (offset, kind, value) matches, any of which identifies the type
    magic: tuple[tuple[int, str, str], ...] = ()


FILE_TYPES = (
    FileType(".onnx", "application/x-onnx", "ONNX model"),
    FileType(".pb", "application/x-protobuf-model", "TensorFlow / ONNX protobuf model"),
    FileType(".pt2", "application/x-pytorch-export", "PyTorch exported program"),
    FileType(".pt", "application/x-pytorch", "PyTorch checkpoint"),
    FileType(".pth", "application/x-pytorch", "PyTorch checkpoint"),
    FileType(".ckpt", "application/x-model-checkpoint", "Model checkpoint"),
    FileType(".bin", "application/x-model-weights", "Model weights"),
    FileType(
        ".safetensors",
        "application/x-safetensors",
        "safetensors weights",
        ((8, "string", "{"),),  # 8-byte header length, then the JSON header
    ),
    FileType(".mlir", "text/x-mlir", "MLIR / StableHLO text"),
    FileType(".stablehlo", "application/x-stablehlo", "StableHLO module"),
    FileType(".dlc", "application/x-snpe-dlc", "Qualcomm DLC model"),
    FileType(".gguf", "application/x-gguf", "GGUF model", ((0, "string", "GGUF"),)),
)
EXTENSIONS = tuple(t.extension for t in FILE_TYPES)


def _mimes() -> list[str]:
    return sorted({t.mime for t in FILE_TYPES})


# ------------------------------------------------------------------------------ Linux


def xdg_data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def launch_command() -> str:
    """The command a file manager runs: the installed ``nneditor`` script when on PATH (or a
    frozen bundle's executable), else this interpreter with ``-m nneditor``."""
    if getattr(sys, "frozen", False):
        return f'"{sys.executable}"'
    script = shutil.which("nneditor")
    return f'"{script}"' if script else f'"{sys.executable}" -m nneditor'


def mime_xml() -> str:
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<mime-info xmlns="http://www.freedesktop.org/standards/shared-mime-info">',
    ]
    by_mime: dict[str, list[FileType]] = {}
    for t in FILE_TYPES:
        by_mime.setdefault(t.mime, []).append(t)
    for mime, types in sorted(by_mime.items()):
        lines.append(f'  <mime-type type="{mime}">')
        lines.append(f"    <comment>{escape(types[0].description)}</comment>")
        for t in types:
            lines.append(f'    <glob pattern="*{t.extension}"/>')
            if t.magic:
                lines.append('    <magic priority="60">')
                for offset, kind, value in t.magic:
                    lines.append(
                        f'      <match type="{kind}" offset="{offset}" value="{escape(value)}"/>'
                    )
                lines.append("    </magic>")
        lines.append("  </mime-type>")
    lines.append("</mime-info>")
    return "\n".join(lines) + "\n"


def desktop_entry(command: str | None = None) -> str:
    return (
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Name=NNEditor\n"
        "GenericName=Neural network model workbench\n"
        "Comment=Inspect, edit and trace neural-network models\n"
        f"Exec={command or launch_command()} %f\n"
        f"Icon={APP_ID}\n"
        "Terminal=false\n"
        "Categories=Development;Science;\n"
        f"MimeType={';'.join(_mimes())};\n"
    )


@dataclass(frozen=True)
class LinuxPaths:
    mime: Path
    desktop: Path
    icon: Path

    def all(self) -> tuple[Path, ...]:
        return (self.mime, self.desktop, self.icon)


def linux_paths(home: Path | None = None) -> LinuxPaths:
    base = home or xdg_data_home()
    return LinuxPaths(
        base / "mime" / "packages" / f"{APP_ID}.xml",
        base / "applications" / f"{APP_ID}.desktop",
        base / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg",
    )


def register_linux(icon: Path, home: Path | None = None) -> list[str]:
    """Write the MIME package, desktop entry and icon; refresh the caches when the tools
    exist. Returns sentences saying what was done."""
    paths = linux_paths(home)
    for p in paths.all():
        p.parent.mkdir(parents=True, exist_ok=True)
    paths.mime.write_text(mime_xml(), "utf-8")
    paths.desktop.write_text(desktop_entry(), "utf-8")
    shutil.copyfile(icon, paths.icon)
    done = [f"wrote {p}" for p in paths.all()]
    return done + _refresh(paths)


def unregister_linux(home: Path | None = None) -> list[str]:
    paths = linux_paths(home)
    done = []
    for p in paths.all():
        if p.exists():
            p.unlink()
            done.append(f"removed {p}")
    return (done or ["nothing was registered"]) + _refresh(paths)


def _refresh(paths: LinuxPaths) -> list[str]:
    out = []
    for tool, folder in (
        ("update-mime-database", paths.mime.parent.parent),
        ("update-desktop-database", paths.desktop.parent),
    ):
        exe = shutil.which(tool)
        if exe is None:
            out.append(f"{tool} is not installed; the desktop picks the change up on its own")
            continue
        done = subprocess.run([exe, str(folder)], capture_output=True, text=True, check=False)
        out.append(
            f"ran {tool}" if done.returncode == 0 else f"{tool} failed: {done.stderr.strip()[:200]}"
        )
    return out


# ---------------------------------------------------------------------------- Windows


class RegistryWriter(Protocol):
    def set_value(self, key: str, name: str, value: str) -> None: ...

    def delete_tree(self, key: str) -> None: ...

    def delete_value(self, key: str, name: str) -> None: ...


def windows_entries(command: str | None = None) -> list[tuple[str, str, str]]:
    """(key under HKEY_CURRENT_USER, value name, data): a ProgID and an OpenWithProgids entry
    per extension. The extension's own default value is never written, so a protected
    default stays the user's choice (Default apps)."""
    exe = command or launch_command()
    classes = r"Software\Classes"
    out = [
        (rf"{classes}\{PROG_ID}", "", "Neural network model"),
        (rf"{classes}\{PROG_ID}", "FriendlyTypeName", "Neural network model (NNEditor)"),
        (rf"{classes}\{PROG_ID}\DefaultIcon", "", f"{exe.split(' -m ')[0]},0"),
        (rf"{classes}\{PROG_ID}\shell\open\command", "", f'{exe} "%1"'),
    ]
    out += [(rf"{classes}\{t.extension}\OpenWithProgids", PROG_ID, "") for t in FILE_TYPES]
    return out


def register_windows(writer: RegistryWriter, command: str | None = None) -> list[str]:
    for key, name, value in windows_entries(command):
        writer.set_value(key, name, value)
    return [
        f"registered {len(FILE_TYPES)} extensions for NNEditor under HKEY_CURRENT_USER; "
        "choose NNEditor for them in Default apps"
    ]


def unregister_windows(writer: RegistryWriter) -> list[str]:
    writer.delete_tree(rf"Software\Classes\{PROG_ID}")
    for t in FILE_TYPES:
        writer.delete_value(rf"Software\Classes\{t.extension}\OpenWithProgids", PROG_ID)
    return ["removed NNEditor's per-user ProgID and Open with entries"]


class WinregWriter:  # pragma: no cover - Windows only
    """The real HKEY_CURRENT_USER writer (``winreg``)."""

    def set_value(self, key: str, name: str, value: str) -> None:
        import winreg

        with winreg.CreateKey(winreg.HKEY_CURRENT_USER, key) as k:  # type: ignore[attr-defined]
            winreg.SetValueEx(k, name, 0, winreg.REG_SZ, value)  # type: ignore[attr-defined]

    def delete_value(self, key: str, name: str) -> None:
        import winreg

        with (
            contextlib.suppress(OSError),
            winreg.OpenKey(winreg.HKEY_CURRENT_USER, key, 0, winreg.KEY_SET_VALUE) as k,  # type: ignore[attr-defined]
        ):
            winreg.DeleteValue(k, name)  # type: ignore[attr-defined]

    def delete_tree(self, key: str) -> None:
        import winreg

        for sub in list(self._children(key)):
            self.delete_tree(rf"{key}\{sub}")
        with contextlib.suppress(OSError):
            winreg.DeleteKey(winreg.HKEY_CURRENT_USER, key)  # type: ignore[attr-defined]

    @staticmethod
    def _children(key: str) -> Iterator[str]:
        import winreg

        try:
            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, key) as k:  # type: ignore[attr-defined]
                i = 0
                while True:
                    try:
                        yield winreg.EnumKey(k, i)  # type: ignore[attr-defined]
                    except OSError:
                        return
                    i += 1
        except OSError:
            return


# ------------------------------------------------------------------------------ macOS


def mac_document_types() -> list[dict[str, object]]:
    """``CFBundleDocumentTypes`` for the app bundle's Info.plist (packaging/)."""
    return [
        {
            "CFBundleTypeName": t.description,
            "CFBundleTypeExtensions": [t.extension.lstrip(".")],
            "CFBundleTypeRole": "Editor",
            "LSHandlerRank": "Alternate",
        }
        for t in FILE_TYPES
    ]


# ------------------------------------------------------------------------------ entry


def register(icon: Path) -> list[str]:
    """Register for this user on this system; sentences say what was done."""
    if sys.platform.startswith("linux"):
        return register_linux(icon)
    if os.name == "nt":  # pragma: no cover - Windows only
        done = register_windows(WinregWriter())
        os.startfile("ms-settings:defaultapps")  # type: ignore[attr-defined]
        return done
    if sys.platform == "darwin":  # pragma: no cover - macOS only
        return [
            "on macOS the NNEditor app bundle declares its document types (Info.plist); "
            "install the app from packaging/ and use Get Info > Open with"
        ]
    return [f"file-type registration is not available on {sys.platform}"]


def unregister() -> list[str]:
    if sys.platform.startswith("linux"):
        return unregister_linux()
    if os.name == "nt":  # pragma: no cover - Windows only
        return unregister_windows(WinregWriter())
    return ["nothing to unregister on this system"]
