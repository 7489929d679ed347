"""A non-editable install finds what a checkout keeps beside the package: the wheel carries
resources/ and plugins/ inside the package (setup.py), and an installed copy lists the
bundled tracers and the icon from there."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_resources_and_plugins(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", reason="building a wheel without isolation needs it")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("nneditor-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for want in (
        "nneditor/_resources/icons/nneditor.svg",
        "nneditor/_plugins/mamba/nneditor-tracer.json",
        "nneditor/_plugins/diffusion-unet/tracer.py",
        "nneditor/_plugins/modalities/tracer.py",
        "nneditor/py.typed",
    ):
        assert want in names, want
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "tools/"))]
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with zipfile.ZipFile(wheel) as z:  # an install is an unpacked wheel (no network, no pip)
        z.extractall(site)
    listed = subprocess.run(
        [str(python), "-m", "nneditor", "--list-tracers"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert f"{site}/nneditor/_plugins/mamba" in listed.stdout
    probe = "from nneditor.platform.resources import icon_path as i; print(i(), i().is_file())"
    icon = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path
    ).stdout
    assert icon.strip() == f"{site}/nneditor/_resources/icons/nneditor.svg True"
