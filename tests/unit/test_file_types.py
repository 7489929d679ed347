"""Per-user file types: Linux registration into a temporary XDG home read back (and, where
update-mime-database runs, resolved by the compiled MIME database); the Windows registry data
through a recording writer; the macOS document types; the CLI flags."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nneditor.platform import file_types as ft
from nneditor.platform.resources import icon_path

ROOT = Path(__file__).resolve().parents[2]
NS = "{http://www.freedesktop.org/standards/shared-mime-info}"


def test_linux_registration_writes_and_removes_the_files(tmp_path: Path) -> None:
    done = ft.register_linux(icon_path(), tmp_path)
    paths = ft.linux_paths(tmp_path)
    assert all(p.is_file() for p in paths.all()) and f"wrote {paths.desktop}" in done
    entry = configparser.ConfigParser(interpolation=None)
    entry.read(paths.desktop)
    de = entry["Desktop Entry"]
    assert de["Type"] == "Application" and de["Exec"].endswith(" %f") and de["Icon"] == "nneditor"
    mimes = set(filter(None, de["MimeType"].split(";")))
    root = ET.parse(paths.mime).getroot()
    declared = {m.get("type"): m for m in root.iter(f"{NS}mime-type")}
    assert set(declared) == mimes
    globs = {g.get("pattern") for g in root.iter(f"{NS}glob")}
    assert globs == {f"*{e}" for e in ft.EXTENSIONS} and len(globs) == 12
    gguf = declared["application/x-gguf"].find(f"{NS}magic/{NS}match")
    assert gguf is not None and (gguf.get("offset"), gguf.get("value")) == ("0", "GGUF")
    assert paths.icon.read_bytes() == icon_path().read_bytes()
    if shutil.which("update-mime-database"):  # the compiled database resolves our globs
        globs2 = (tmp_path / "mime" / "globs2").read_text()
        assert "application/x-gguf:*.gguf" in globs2 and "application/x-onnx:*.onnx" in globs2
        assert b"GGUF" in (tmp_path / "mime" / "magic").read_bytes()
    removed = ft.unregister_linux(tmp_path)
    assert not any(p.exists() for p in paths.all()) and f"removed {paths.mime}" in removed


class Recorder:
    def __init__(self) -> None:
        self.values: dict[tuple[str, str], str] = {}
        self.trees: list[str] = []

    def set_value(self, key: str, name: str, value: str) -> None:
        self.values[(key, name)] = value

    def delete_value(self, key: str, name: str) -> None:
        self.values.pop((key, name), None)

    def delete_tree(self, key: str) -> None:
        self.trees.append(key)
        self.values = {k: v for k, v in self.values.items() if not k[0].startswith(key)}


def test_windows_registration_never_touches_an_extension_default() -> None:
    reg = Recorder()
    ft.register_windows(reg, r'"C:\NNEditor\nneditor.exe"')
    prog = r"Software\Classes\NNEditor.Model"
    assert reg.values[(rf"{prog}\shell\open\command", "")] == r'"C:\NNEditor\nneditor.exe" "%1"'
    assert reg.values[(rf"{prog}\DefaultIcon", "")] == r'"C:\NNEditor\nneditor.exe",0'
    for ext in ft.EXTENSIONS:
        assert reg.values[(rf"Software\Classes\{ext}\OpenWithProgids", "NNEditor.Model")] == ""
        assert (rf"Software\Classes\{ext}", "") not in reg.values  # the default stays theirs
    assert all(k.startswith("Software\\Classes\\") for k, _ in reg.values)  # HKCU only
    ft.unregister_windows(reg)
    assert reg.values == {} and reg.trees == [prog]


def test_mac_document_types_cover_every_extension() -> None:
    types = ft.mac_document_types()
    assert [t["CFBundleTypeExtensions"] for t in types] == [[e[1:]] for e in ft.EXTENSIONS]
    assert {t["LSHandlerRank"] for t in types} == {"Alternate"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG registration")
def test_cli_flags_register_and_unregister(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "nneditor"]
    done = subprocess.run(
        [*cmd, "--register-file-types"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "applications" / "nneditor.desktop").is_file()
    undone = subprocess.run(
        [*cmd, "--unregister-file-types"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert undone.returncode == 0 and "removed" in undone.stdout
    assert not (tmp_path / "applications" / "nneditor.desktop").exists()
