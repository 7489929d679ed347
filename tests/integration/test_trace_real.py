"""Traces of the real ONNX models: every checked capture equals ONNX Runtime's own output for
that value (exposed alone as a graph output, same graph optimisation setting), and the
reference backend agrees with ONNX Runtime on every fp32 value both captured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import nneditor
from nneditor.inputs import assign_file, detect_inputs
from nneditor.tracing import TraceRunner, approve, make_plan
from nneditor.tracing.capture import BRANCH_REASON, SUBGRAPH_REASON
from nneditor.tracing.capture_file import read_value

ort = pytest.importorskip("onnxruntime")
INPUTS = Path(__file__).resolve().parents[2] / "examples" / "trace-inputs"
CASES = {
    "silero_vad.onnx": ("silero_vad_16k.npz", None, 0),
    "silero_vad_16k_op15.onnx": ("silero_vad_16k.npz", None, 0),
    "ch_PP-OCRv4_rec_infer.onnx": ("text_line_1x3x48x192.npy", "x", 30),
    "ch_PP-OCRv4_det_infer.onnx": ("image_1x3x64x64.npy", "x", 30),
}
#: reference vs ONNX Runtime: max |difference| <= 1e-4 x the tensor's largest magnitude (at
#: least 1e-3, because ONNX Runtime's fast Sigmoid flushes results below ~1e-8 to zero).
REL = 1e-4


def _trace(path: Path, name: str, backend: str, out: Path):
    file, target, _ = CASES[name]
    with nneditor.open(path) as doc:
        arrays = assign_file(detect_inputs(doc), INPUTS / file, target)
        plan = make_plan(doc, arrays, backend=backend)
    result = TraceRunner().run(plan, approve(plan), out)
    assert result.published, result.message + result.log_tail
    return arrays, result


def _ort_alone(model: onnx.ModelProto, name: str, feeds: dict) -> np.ndarray:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if name not in [o.name for o in m.graph.output]:
        m.graph.output.append(onnx.ValueInfoProto(name=name))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run([name], feeds)[0]


@pytest.mark.realdata
@pytest.mark.parametrize("name", list(CASES))
def test_real_model_traces(realdata, unchanged, tmp_path, name):
    path = realdata(name)
    check = unchanged(path)
    feeds, a = _trace(path, name, "onnxruntime", tmp_path / "ort")
    assert a.status == "ok" and a.provider == "CPUExecutionProvider"
    values = a.manifest["values"]
    graph_outputs = {o.name for o in onnx.load(str(path), load_external_data=False).graph.output}
    produced = [v for v in values if v["status"] == "captured" and v["producer"]]
    sample = CASES[name][2]
    picked = produced
    if sample and len(produced) > sample:
        idx = np.linspace(0, len(produced) - 1, sample).astype(int)
        picked = [produced[i] for i in idx] + [v for v in produced if v["name"] in graph_outputs]
    model = onnx.load(str(path))
    for rec in picked:
        got = read_value(tmp_path / "ort", rec)
        np.testing.assert_array_equal(
            got, _ort_alone(model, rec["name"], feeds), err_msg=rec["name"]
        )
    for rec in values:
        if not rec["producer"]:
            np.testing.assert_array_equal(read_value(tmp_path / "ort", rec), feeds[rec["name"]])
        elif rec["graph"]:
            assert rec["status"] == "dropped" and rec["reason"] == SUBGRAPH_REASON
        else:
            assert rec["status"] == "captured", rec

    _, b = _trace(path, name, "reference", tmp_path / "ref")
    ref = {v["name"]: v for v in b.manifest["values"]}
    compared = 0
    for rec in values:
        other = ref[rec["name"]]
        if rec["status"] != "captured":
            if rec["graph"]:  # the reference backend captures If bodies that ran
                assert other["status"] == "captured" or other["reason"] == BRANCH_REASON
            continue
        x = read_value(tmp_path / "ort", rec)
        y = read_value(tmp_path / "ref", other)
        assert x.shape == y.shape and x.dtype == y.dtype, rec["name"]
        if x.dtype == np.float32 and x.size:
            bound = REL * max(float(np.abs(x).max()), 1e-3)
            assert float(np.abs(x.astype(np.float64) - y).max()) <= bound, rec["name"]
            compared += 1
        elif x.dtype.kind in "iub":
            np.testing.assert_array_equal(x, y, err_msg=rec["name"])
    assert compared >= min(5, len(produced))
    check()
