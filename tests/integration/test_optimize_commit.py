"""Quantization and pruning committed as revisions and exported through the validated path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"
FEEDS = {"input_ids": np.array([[3, 14, 15, 92, 65, 35, 89, 79]], np.int64)}


def _run(path: Path) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC  # no int8 fusions
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, FEEDS)[
        0
    ]


def _cli(*args: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nneditor", *args], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr


def _fake_quantized_reference(tmp_path: Path, per_channel: bool) -> Path:
    """The float model with every MatMul weight replaced by dequantize(quantize(w)), in numpy."""
    m = onnx.load(str(EXAMPLE))
    weights = {
        n.input[1] for n in m.graph.node if n.op_type == "MatMul" and n.input[1].endswith(".weight")
    }
    for t in m.graph.initializer:
        if t.name in weights:
            w = numpy_helper.to_array(t).astype(np.float32)
            amax = np.abs(w).max(axis=0, keepdims=True) if per_channel else np.abs(w).max()
            scale = (amax / 127.0).astype(np.float32)
            q = np.clip(np.rint(w / scale), -127, 127)
            t.CopyFrom(numpy_helper.from_array((q * scale).astype(np.float32), t.name))
    ref = tmp_path / "fake_quant.onnx"
    onnx.save(m, ref)
    return ref


def test_quantize_cli_export_matches_numpy_fake_quantization(tmp_path):
    out, report = tmp_path / "q.onnx", tmp_path / "q.json"
    _cli("quantize", str(EXAMPLE), "--out", str(out), "--per-channel", "--report", str(report))
    onnx.checker.check_model(str(out), full_check=True)
    r = json.loads(report.read_text())
    assert r["preview"]["claims"]["runtime_acceleration"] == "not measured"
    assert r["preview"]["totals"]["bytes_after"] < r["preview"]["totals"]["bytes_before"]
    assert out.stat().st_size < EXAMPLE.stat().st_size * 0.6
    got = _run(out)
    want = _run(_fake_quantized_reference(tmp_path, per_channel=True))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # and the previewed error is an honest description of the weights we stored
    m = onnx.load(str(out))
    types = {t.data_type for t in m.graph.initializer}
    assert onnx.TensorProto.INT8 in types
    lm = next(t for t in r["preview"]["tensors"] if t["name"] == "lm_head.weight")
    w = numpy_helper.to_array(
        next(t for t in onnx.load(str(EXAMPLE)).graph.initializer if t.name == "lm_head.weight")
    )
    scale = np.abs(w).max(axis=0) / 127
    deq = np.clip(np.rint(w / scale), -127, 127) * scale
    np.testing.assert_allclose(lm["max_abs_error"], np.abs(deq - w).max(), rtol=1e-5)
    np.testing.assert_allclose(lm["mse"], np.mean((deq - w) ** 2), rtol=1e-4)


def test_nm_pruning_is_exact_in_the_export(tmp_path):
    out = tmp_path / "p.onnx"
    _cli("prune", str(EXAMPLE), "--out", str(out), "--nm", "2:4")
    m = onnx.load(str(out))
    src = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(EXAMPLE)).graph.initializer}
    checked = 0
    for t in m.graph.initializer:
        if t.name.endswith(("proj.weight", "fc1.weight", "fc2.weight")):
            w = numpy_helper.to_array(t)  # [K, N]: groups of 4 along K
            groups = w.reshape(w.shape[0] // 4, 4, w.shape[1])
            assert np.all((groups != 0).sum(axis=1) == 2), t.name
            kept_src = np.abs(src[t.name].reshape(groups.shape))
            kept = groups != 0
            smallest_kept = np.where(kept, kept_src, np.inf).min(axis=1)
            largest_dropped = np.where(~kept, kept_src, -np.inf).max(axis=1)
            assert np.all(smallest_kept >= largest_dropped)
            checked += 1
    assert checked == 12
    assert out.stat().st_size >= EXAMPLE.stat().st_size * 0.95  # logical sparsity: not smaller


def test_channel_pruning_keeps_outputs_of_kept_channels(tmp_path):
    out = tmp_path / "c.onnx"
    _cli("prune", str(EXAMPLE), "--out", str(out), "--prune-channels", "/lm_head/MatMul=0,5,7")
    full, pruned = _run(EXAMPLE), _run(out)
    keep = [c for c in range(full.shape[-1]) if c not in (0, 5, 7)]
    assert pruned.shape[-1] == full.shape[-1] - 3
    np.testing.assert_allclose(pruned, full[..., keep], rtol=1e-6, atol=1e-6)
    out_vi = onnx.load(str(out)).graph.output[0]
    assert out_vi.type.tensor_type.shape.dim[-1].dim_value == 93
