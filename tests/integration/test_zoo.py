"""The public model zoo (tools/zoo.py): every real artifact opens, reports what its model is,
and (ONNX) traces to what ONNX Runtime computes. The window side is tests/gui/test_zoo_window.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zoo
from nneditor_cli import nneditor_cli
from zoo_expect import expect

from nneditor.tracing.capture_file import read_value

ROOT = Path(__file__).resolve().parents[2]
ONNX = [n for n in zoo.names() if n.endswith(".onnx")]


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return nneditor_cli(*args, timeout=300)


@pytest.mark.realdata
@pytest.mark.parametrize("name", zoo.names())
def test_inspect_json(name: str, zoo_artifact, unchanged) -> None:  # noqa: ANN001
    path = zoo_artifact(name)
    check = unchanged(path) if path.is_file() else (lambda: None)
    out = _cli("inspect", path, "--json")
    e = expect(name)
    if e["refused"]:  # recognised or not, the sentence says what the file is and exits 2
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and e["refused"] in lines[0], out.stderr
        assert lines[0].startswith("nneditor: ") and str(path) in lines[0]
        check()
        return
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["format"] == e["format"]
    if e.get("tensors") == 0:
        assert report["tensors"]["count"] == 0
    else:
        assert report["tensors"]["count"] > 0
    h = report["hierarchy"]
    if e["graph"]:
        assert report["graph"]["node_count"] > 0 and report["graph"]["outputs"]
        assert h is not None and h["levels"]["architecture"] >= 1
    else:
        assert report["graph"] is None and report["graph_unavailable_reason"]
        assert h is None or h["mode"] == "tensor-names"
    if e["blocks"] is not None:
        assert h["levels"]["blocks"] == e["blocks"], h
    found = {p["kind"]: p["count"] for p in (h or {}).get("patterns", [])}
    for kind, least in e["patterns"].items():
        assert found.get(kind, 0) >= least, (kind, found)
    if e["format"] in ("gguf", "huggingface") and e["graph"]:  # what traces it, or why not
        cap, refusal = report["capabilities"]["trace"], e.get("trace")
        if refusal is None:
            assert cap["available"] and cap["reason"].startswith("NumPy decoder on CPU"), cap
        elif cap["available"]:  # the decoder refuses, a bundled plugin runs it
            assert cap["reason"].startswith("with the tracer plugin nneditor."), cap
        else:
            assert refusal in cap["reason"], cap
    if "calls" in e:  # a shared module: one block per call, each saying so
        calls = [b["call"] for b in h["blocks"] if "call" in b]
        assert [c["index"] for c in calls] == list(range(1, e["calls"] + 1))
    check()


@pytest.mark.realdata
@pytest.mark.parametrize("name", ONNX)
def test_automatic_input_trace_equals_onnxruntime(name: str, zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    ort = pytest.importorskip("onnxruntime")
    path = zoo_artifact(name)
    dims = [f"--dim={k}={v}" for k, v in expect(name)["dims"].items()]
    made = _cli("inputs", path, "--auto", "--out", tmp_path / "in", *dims)
    assert made.returncode == 0, made.stderr
    traced = _cli("trace", path, "--inputs", tmp_path / "in", "--out", tmp_path / "t", "--yes")
    assert traced.returncode == 0, traced.stderr
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    values = {v["name"]: v for v in manifest["values"]}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    with np.load(tmp_path / "in" / "inputs.npz", allow_pickle=False) as npz:
        feeds = {i.name: npz[i.name] for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    for out_name, want in zip(names, session.run(names, feeds), strict=True):
        if not isinstance(want, np.ndarray):  # a ZipMap's list of dicts: said, not stored
            assert values[out_name]["status"] == "dropped", out_name
            assert "only tensors are stored" in values[out_name]["reason"]
            if values[out_name]["op_type"] == "ZipMap":  # the scores are in its input
                assert "that tensor is captured" in values[out_name]["reason"]
            continue
        got = read_value(tmp_path / "t", values[out_name])
        assert got.shape == want.shape and got.dtype == want.dtype, out_name
        rtol = expect(name)["rtol"]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol / 10, err_msg=out_name)


CHECKPOINTS = [n for n in zoo.names() if expect(n).get("format") in ("gguf", "huggingface")]


def manifest_output(manifest: dict) -> str:
    """The last value of a trace without logits (an encoder: its last block's output)."""
    outputs = [v["name"] for v in manifest["values"] if v["name"].endswith(".output")]
    return max(outputs, key=lambda n: int(n.split(".")[1]))


@pytest.mark.realdata
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_checkpoint_traces_or_says_why_not(name: str, zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """Every GGUF and snapshot of the zoo traces on the NumPy decoder with automatic inputs
    (4 tokens), its logits finite and one row per vocabulary entry (an encoder's: its last
    hidden state, one row per token), or is refused with the sentence its kind deserves
    (tests/zoo_expect.py ``trace``)."""
    path = zoo_artifact(name)
    out = _cli("trace", path, "--out", tmp_path / "t", "--yes", "--dim", "seq=4")
    refusal = expect(name).get("trace")
    if refusal:
        assert out.returncode == 2 and refusal in out.stderr.strip().splitlines()[-1], out.stderr
        return
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    values = {v["name"]: v for v in manifest["values"]}
    ends = ("result_output", "logits_per_image")  # (CLIPModel: [1, prompts])
    last = next((n for n in ends if n in values), None) or manifest_output(manifest)
    logits = read_value(tmp_path / "t", values[last])
    # (a T5's: its decoder's first step; a sequence classifier's: its first position's)
    positions = expect(name).get("positions", 4)
    assert logits.shape[:2] == (1, positions) and np.isfinite(logits).all()
    assert all(v["status"] == "captured" for v in values.values())
