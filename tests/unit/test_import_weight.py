"""Commands import only what they use: heavy modules (runtimes, plotting, Qt, torch) cost
a command's user seconds before anything happens (issue: 0.3 s to a command's answer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"
HEAVY = [
    "onnxruntime",
    "scipy",
    "pyqtgraph",
    "PySide6",
    "torch",
    "matplotlib",
    "sklearn",
    "PIL",
    "transformers",
    "tokenizers",
]

_PROBE = """
import contextlib, io, json, sys
from nneditor.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[2:])
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)))
"""


def _imported(*args: str, watch: list[str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(watch), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_version_imports_nothing_heavy() -> None:
    assert _imported("--version", watch=[*HEAVY, "onnx", "ml_dtypes"]) == []


@pytest.mark.parametrize("command", ["inspect", "tensors"])
def test_inspecting_onnx_imports_no_runtime_plotting_or_qt(command: str) -> None:
    assert _imported(command, str(EXAMPLE), "--json", watch=HEAVY) == []


def test_inspecting_safetensors_does_not_import_onnx(tmp_path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    path = tmp_path / "w.safetensors"
    save_file({"w": np.zeros((2, 3), np.float32)}, str(path))
    assert _imported("inspect", str(path), "--json", watch=[*HEAVY, "onnx"]) == []


def test_the_slow_ml_dtypes_release_is_excluded() -> None:
    """ml_dtypes 0.7.0 takes 0.45-1.3 s to import with numpy 2.4 (0.6.0: 0.06 s)."""
    from importlib.metadata import version

    assert version("ml_dtypes") != "0.7.0"
