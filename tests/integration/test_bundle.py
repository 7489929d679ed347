"""The Linux app bundle: PyInstaller builds it from packaging/pyinstaller/nneditor.spec, and
the frozen executable answers --version, inspects the example as JSON, renders it offscreen,
lists the bundled tracers and runs a trace (its worker is the same executable with -m)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("PyInstaller", reason="pip install pyinstaller to build the app bundle")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux bundle")
def test_linux_bundle_runs_headless(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "ERROR"]
        + ["--distpath", str(tmp_path / "dist"), "--workpath", str(tmp_path / "work")]
        + [str(ROOT / "packaging" / "pyinstaller" / "nneditor.spec")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    app = tmp_path / "dist" / "nneditor" / "nneditor"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "NNEDITOR_HOME": str(tmp_path / "h")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(app), *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
        )

    from nneditor import __version__

    assert run("--version").stdout.strip() == f"nneditor {__version__}"
    example = str(ROOT / "examples" / "tiny_transformer.onnx")
    report = json.loads(run("inspect", example, "--json").stdout)
    assert report["format"] == "onnx"
    shot = tmp_path / "shot.png"
    drawn = run(example, "--screenshot", str(shot))
    assert drawn.returncode == 0 and shot.stat().st_size > 10_000, drawn.stderr
    listed = run("--list-tracers").stdout
    assert "nneditor.mamba-ssm" in listed and "_internal/nneditor/_plugins" in listed
    traced = run("trace", example, "--out", str(tmp_path / "t"), "--yes")
    assert traced.returncode == 0, traced.stderr
    assert (tmp_path / "t" / "manifest.json").is_file()
    files = app.parent.rglob("*")
    size = sum(f.stat().st_size for f in files if f.is_file() and not f.is_symlink())
    print(f"bundle {size / 2**20:.0f} MiB")
