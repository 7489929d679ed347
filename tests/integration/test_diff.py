"""nneditor diff: an ONNX model and its quantized export (weight deltas equal numpy's on the
dequantized weights, per tensor and per channel), two traces of one model with one perturbed
weight (drift starts exactly in that block), two GGUF quantizations of one model matched
tensor by tensor (deltas equal numpy's on gguf-py's dequantization), and a snapshot against
its llama.cpp conversion (canonical names, exact)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from nneditor_cli import nneditor_cli
from onnx import numpy_helper

from nneditor.diff import diff_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return nneditor_cli(*args, timeout=300)


def _numpy_delta(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return {
        "max_abs": float(np.abs(a - b).max()),
        "rel_l2": float(np.linalg.norm(a - b) / np.linalg.norm(b)),
        "cosine": float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))),
    }


@pytest.mark.parametrize("per_channel", [False, True])
def test_quantized_export_deltas_equal_numpy(tmp_path: Path, per_channel: bool) -> None:
    q = tmp_path / "q.onnx"
    flags = ["--per-channel"] if per_channel else []
    assert _cli("quantize", EXAMPLE, "--out", q, *flags).returncode == 0
    out = _cli("diff", EXAMPLE, q, "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    a = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(EXAMPLE)).graph.initializer}
    mq = onnx.load(str(q))
    b = {t.name: numpy_helper.to_array(t) for t in mq.graph.initializer}
    dq = {n.output[0]: n for n in mq.graph.node if n.op_type == "DequantizeLinear"}
    compared = [t for t in r["tensors"] if t["b"] in dq]
    assert len(compared) == len(dq) > 5
    for t in compared:
        node = dq[t["b"]]
        qv, scale, zero = (b[i].astype(np.float64) for i in node.input)
        axis = next((at.i for at in node.attribute if at.name == "axis"), 1)
        if scale.ndim:  # per channel: broadcast along the quantization axis
            shape = [1] * qv.ndim
            shape[axis] = -1
            scale, zero = scale.reshape(shape), zero.reshape(shape)
        want = _numpy_delta(a[t["a"]], (qv - zero) * scale)
        for k, v in want.items():
            assert t["delta"][k] == pytest.approx(v, rel=1e-9, abs=1e-12), (t["a"], k)
        assert t["status"] == "changed"
    assert r["operators"]["changed"] == [] and len(r["operators"]["only_in_b"]) == len(dq)
    assert all(
        t["status"] == "equal" for t in r["tensors"] if t["a"] and t["b"] not in dq and "delta" in t
    )


def test_trace_drift_starts_at_the_perturbed_block(tmp_path: Path) -> None:
    model = onnx.load(str(EXAMPLE))
    target = "blocks.1.mlp.fc1.weight"
    init = next(t for t in model.graph.initializer if t.name == target)
    w = numpy_helper.to_array(init).copy()
    w[0, 0] += 0.5
    init.CopyFrom(numpy_helper.from_array(w, target))
    perturbed = tmp_path / "perturbed.onnx"
    onnx.save(model, str(perturbed))
    for name, path in (("a", perturbed), ("b", EXAMPLE)):
        done = _cli("trace", path, "--out", tmp_path / name, "--yes", "--dim", "seq=4")
        assert done.returncode == 0, done.stderr
    r = diff_paths(tmp_path / "a", tmp_path / "b")
    first = r["first_drift"]
    assert first is not None and first["block"] == "blocks.1", first
    order = [v["name"] for v in r["values"]]
    start = order.index(first["value"])
    assert all(
        v["status"] == "same" and v["max_abs"] == 0.0 for v in r["values"][:start] if "max_abs" in v
    )
    assert "fc1" in first["value"]  # the product with the perturbed weight
    text = _cli("diff", tmp_path / "a", tmp_path / "b")
    assert f"drift starts at {first['value']} (block blocks.1)" in text.stdout


@pytest.mark.realdata
def test_two_gguf_quantizations_match_tensor_by_tensor(zoo_artifact) -> None:  # noqa: ANN001
    import gguf

    f32, q8 = zoo_artifact("decoder-llama.gguf"), zoo_artifact("decoder-llama-q8_0.gguf")
    r = diff_paths(q8, f32)
    rows = {t["a"]: t for t in r["tensors"]}
    reader_a, reader_b = gguf.GGUFReader(str(q8)), gguf.GGUFReader(str(f32))
    b = {t.name: t for t in reader_b.tensors}
    assert r["summary"]["tensors_only_in_a"] == r["summary"]["tensors_only_in_b"] == 0
    quantized = 0
    for t in reader_a.tensors:
        row = rows[t.name]
        want = _numpy_delta(
            gguf.quants.dequantize(t.data, t.tensor_type),
            gguf.quants.dequantize(b[t.name].data, b[t.name].tensor_type),
        )
        for k, v in want.items():
            assert row["delta"][k] == pytest.approx(v, rel=1e-6, abs=1e-12), (t.name, k)
        quantized += t.tensor_type == gguf.GGMLQuantizationType.Q8_0
    assert quantized >= 10 and r["summary"]["largest_rel_l2"] < 0.02


@pytest.mark.realdata
def test_snapshot_and_its_conversion_are_equal_by_canonical_names(zoo_artifact) -> None:  # noqa: ANN001
    r = diff_paths(zoo_artifact("decoder-qwen2"), zoo_artifact("decoder-qwen2.gguf"))
    compared = [t for t in r["tensors"] if "delta" in t]
    assert len(compared) >= 20 and all(t["status"] == "equal" for t in compared)
    assert any("canonical names" in n for n in r["notes"])


def test_renamed_operators_match_by_structure(tmp_path: Path) -> None:
    """Another exporter's names: every operator renamed, one attribute changed; the diff
    pairs operators by name-free structure hashes and reports exactly that attribute."""
    model = onnx.load(str(EXAMPLE))
    for k, node in enumerate(model.graph.node):
        node.name = f"op_{k}"
    norm = next(n for n in model.graph.node if n.op_type == "LayerNormalization")
    for attr in norm.attribute:
        if attr.name == "epsilon":
            attr.f = 1e-3
    renamed = tmp_path / "renamed.onnx"
    onnx.save(model, str(renamed))
    r = diff_paths(renamed, EXAMPLE)
    ops = r["operators"]
    assert ops["matched_by"].startswith("structure") and ops["matched"] == len(model.graph.node)
    assert ops["only_in_a"] == [] and ops["only_in_b"] == []
    (change,) = ops["changed"]
    assert change["a"] == norm.name and change["b"].endswith("LayerNormalization_1")
    assert change["changes"][0].startswith("attribute epsilon")
