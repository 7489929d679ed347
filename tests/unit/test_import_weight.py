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


def test_inspecting_onnx_imports_only_onnx_message_classes() -> None:
    """The reader needs onnx's protobuf classes, not the 45-60 ms package (its helpers,
    checker bindings and tables)."""
    watch = ["onnx", "onnx.onnx_ml_pb2", "onnx.helper", "ml_dtypes", "numpy"]
    found = _imported("inspect", str(EXAMPLE), "--json", "--no-cache", watch=watch)
    # (ml_dtypes too only for its types: a float model; numpy not at all: a look at names,
    # shapes and offsets reads no array, platform/lazy_numpy.py)
    assert found == ["onnx.onnx_ml_pb2"]


def test_onnx_imported_after_the_reader_shares_its_message_classes() -> None:
    probe = (
        "import sys;"
        "from nneditor.artifacts.onnx import protos;"
        "assert 'onnx' not in sys.modules;"
        "import onnx, onnx.helper, onnx.checker;"
        "assert onnx.ModelProto is protos.ModelProto;"
        "assert onnx.onnx_ml_pb2.NodeProto is protos.NodeProto;"
        f"m = onnx.load({str(EXAMPLE)!r}); onnx.checker.check_model(m);"
        "assert isinstance(m, protos.ModelProto); print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


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
