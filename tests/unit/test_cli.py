"""The headless CLI contract: JSON shape, .npy output, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nneditor", *args], capture_output=True, text=True, timeout=120
    )


def test_inspect_json_contract_on_example():
    out = run("inspect", str(EXAMPLE), "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    ref = onnx.load(str(EXAMPLE))
    assert r["format"] == "onnx" and r["format_version"] == str(ref.ir_version)
    assert r["size_bytes"] == EXAMPLE.stat().st_size
    assert r["tensors"]["count"] == len(ref.graph.initializer)
    assert r["graph"]["node_count"] == len(ref.graph.node)
    assert r["graph"]["top_level_node_count"] == len(ref.graph.node)
    assert r["graph"]["inputs"] == [{"name": "input_ids", "dtype": "int64", "shape": [1, "seq"]}]
    assert r["graph"]["outputs"][0]["name"] == "logits"
    assert r["graph"]["opsets"] == {"ai.onnx": 20}
    assert r["graph_unavailable_reason"] == ""
    assert r["capabilities"]["read_tensors"] == {"available": True, "reason": ""}
    h = r["hierarchy"]
    assert h["levels"] == {
        "architecture": 4,
        "blocks": 2,
        "layers": 8,
        "operators": len(ref.graph.node),
    }
    assert [b["name"] for b in h["blocks"]] == ["blocks.0", "blocks.1"]
    assert {"kind": "attention", "count": 2} in h["patterns"]


def test_inspect_text_summary():
    out = run("inspect", str(EXAMPLE))
    assert out.returncode == 0, out.stderr
    assert "tiny_transformer.onnx: onnx" in out.stdout
    assert "Inputs: input_ids int64 [1, seq]" in out.stdout


def test_tensors_and_tensor_slice(tmp_path):
    out = run("tensors", str(EXAMPLE), "--json")
    rows = json.loads(out.stdout)
    names = {r["name"] for r in rows}
    assert "embed_tokens.weight" in names
    ref = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(EXAMPLE)).graph.initializer}
    row = next(r for r in rows if r["name"] == "embed_tokens.weight")
    assert row["shape"] == list(ref["embed_tokens.weight"].shape) and row["dtype"] == "float32"
    dest = tmp_path / "emb.npy"
    out = run(
        "tensor", str(EXAMPLE), "embed_tokens.weight", "--out", str(dest), "--slice", "3:5,::4"
    )
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(np.load(dest), ref["embed_tokens.weight"][3:5, ::4])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("inspect", "/nonexistent/model.onnx"), "no such file or folder"),
        (("tensor", str(EXAMPLE), "nope", "--out", "x.npy"), "no tensor named 'nope'"),
        (
            ("tensor", str(EXAMPLE), "lm_head.weight", "--out", "x.txt"),
            "--out must name a .npy file",
        ),
        (
            ("tensor", str(EXAMPLE), "lm_head.weight", "--out", "x.npy", "--slice", "0,0,0"),
            "has 3 axes",
        ),
    ],
)
def test_errors_are_one_line_exit_2(args, needle, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "nneditor", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nneditor: "), out.stderr
    assert needle in lines[0]
    assert "Traceback" not in out.stderr


def test_unknown_and_unsupported_formats(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01garbage" * 10)
    out = run("inspect", str(junk))
    assert out.returncode == 2 and "not a model format NNEditor recognises" in out.stderr
    npz = tmp_path / "arrays.npz"
    np.savez(npz, a=np.zeros(3))
    out = run("inspect", str(npz))
    assert out.returncode == 2 and "recognised as a NumPy .npz archive" in out.stderr


def test_onnx_named_bin_opens_as_onnx(tmp_path):
    dest = tmp_path / "weights.bin"
    dest.write_bytes(EXAMPLE.read_bytes())
    out = run("inspect", str(dest), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["format"] == "onnx"


def test_window_on_a_missing_path_names_the_path_even_without_a_display(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "QT_QPA_PLATFORM")}
    missing = tmp_path / "does-not-exist.onnx"
    out = subprocess.run(
        [sys.executable, "-m", "nneditor", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == f"nneditor: {missing}: no such file or folder; check the path"


def test_help_lists_the_window_flags():
    out = run("--help")
    assert out.returncode == 0
    for flag in ("--screenshot", "--level", "--select", "--open-trace", "--size", "--dark"):
        assert flag in out.stdout


def test_each_command_is_parsed_by_its_own_group_alone():
    """A command line naming a command builds the parser of that command's group only; the
    map must name every command the groups register, and the right group for each."""
    import argparse
    import importlib

    from nneditor.cli import COMMANDS, GROUPS

    registered: dict[str, str] = {}
    for group in GROUPS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"nneditor.cli.{group}").register(sub)
        registered.update(dict.fromkeys(sub.choices, group))
    assert registered == COMMANDS
    code = (
        "import sys; from nneditor.cli import main; main(['inspect', sys.argv[1], '--json']); "
        "print(sorted(m for m in sys.modules if m.startswith('nneditor.cli.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLE)], capture_output=True, text=True, check=True
    ).stdout
    loaded = out.strip().splitlines()[-1]
    assert "nneditor.cli.inspection" in loaded
    assert not any(f"nneditor.cli.{g}'" in loaded for g in ("trace", "tokens", "optimize", "diff"))
