"""Trace plans, limits, device/provider choice, inputs digest and approvals (no worker runs)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.inputs import InputSpecError
from nneditor.tracing import (
    ApprovalError,
    Limits,
    LimitsError,
    PlanError,
    approve,
    make_plan,
    verify,
)
from nneditor.tracing import providers as prov
from nneditor.tracing.identity import inputs_digest


def make_model(path: Path) -> Path:
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture
def model(tmp_path):
    return make_model(tmp_path / "m.onnx")


def _plan(model, arrays=None, **kw):
    arrays = arrays if arrays is not None else {"x": np.ones((2, 4), np.float32)}
    with nneditor.open(model) as doc:
        return make_plan(doc, arrays, **kw)


def test_limits_validate_and_serialise():
    lim = Limits(timeout_s=5, max_ram_mb=256, capture_mb=0.5, chunk_mb=1)
    assert lim.as_dict() == {"timeout_s": 5, "max_ram_mb": 256, "capture_mb": 0.5, "chunk_mb": 1}
    assert lim.capture_bytes == 524288
    assert Limits.from_dict(lim.as_dict()) == lim
    with pytest.raises(LimitsError, match="limit timeout_s must be a positive number, got 0"):
        Limits(timeout_s=0)
    with pytest.raises(LimitsError, match="limit max_ram_mb must be a positive number, got nan"):
        Limits(max_ram_mb=float("nan"))
    with pytest.raises(LimitsError, match="limit capture_mb must be a positive number, got inf"):
        Limits(capture_mb=float("inf"))


def test_provider_choice_per_device():
    avail = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")
    auto = prov.choose_providers("auto", avail)
    assert auto.names() == ["CUDAExecutionProvider", "CPUExecutionProvider"] and not auto.strict
    gpu = prov.choose_providers("gpu", avail)
    assert gpu.names() == ["CUDAExecutionProvider"] and gpu.strict
    assert prov.choose_providers("cpu", avail).names() == ["CPUExecutionProvider"]
    npu = prov.choose_providers("npu", ("OpenVINOExecutionProvider", "CPUExecutionProvider"))
    assert npu.as_list() == [["OpenVINOExecutionProvider", {"device_type": "NPU"}]]
    with pytest.raises(prov.DeviceError) as exc:
        prov.choose_providers("gpu", ("CPUExecutionProvider",))
    assert str(exc.value) == (
        "no GPU execution provider is installed (ONNX Runtime offers CPUExecutionProvider); "
        "install nneditor[cuda] (onnxruntime-gpu) for NVIDIA, nneditor[directml] "
        "(onnxruntime-directml) on Windows, or nneditor[openvino] (onnxruntime-openvino) for "
        "Intel GPUs. NNEditor does not fall back to CPU when a GPU is requested"
    )
    with pytest.raises(prov.DeviceError, match=r"install nneditor\[qnn\] \(onnxruntime-qnn\)"):
        prov.choose_providers("npu", ("CPUExecutionProvider",))
    with pytest.raises(prov.DeviceError) as exc:
        prov.choose_providers("auto", ())
    assert str(exc.value) == "ONNX Runtime is not installed; install nneditor[cpu] (onnxruntime)"


def test_plan_shows_everything_before_running(model):
    plan = _plan(model, limits=Limits(timeout_s=30, max_ram_mb=512, capture_mb=64, chunk_mb=4))
    text = "\n".join(plan.describe())
    assert plan.backend == "onnxruntime" and plan.value_count == 3
    assert "backend: ONNX Runtime" in text and "graph optimisations disabled" in text
    assert "device: automatic: tries" in text and "CPUExecutionProvider" in text
    assert "x float32 [2, 4]" in text and plan.inputs.digest[:16] in text
    assert "limits: wall clock 30 s, RAM ceiling 512 MB, capture budget 64 MB, chunk 4 MB" in text
    assert f"tracer: onnxruntime {plan.tracer.version} code {plan.tracer.code}" in text
    assert "capture: graph inputs and all node outputs (3 values)" in text


def test_missing_runtime_falls_back_or_fails_with_the_extra(model, monkeypatch):
    monkeypatch.setattr(prov, "installed_providers", lambda: ())
    plan = _plan(model)
    assert plan.backend == "reference"
    assert "ONNX Runtime is not installed, so the reference evaluator runs" in plan.backend_note
    with pytest.raises(PlanError) as exc:
        _plan(model, backend="onnxruntime")
    assert str(exc.value) == "ONNX Runtime is not installed; install nneditor[cpu] (onnxruntime)"
    with pytest.raises(PlanError, match=r"install nneditor\[cuda\] \(onnxruntime-gpu\)"):
        _plan(model, device="gpu")


def test_explicit_gpu_without_provider_is_refused(model, monkeypatch):
    monkeypatch.setattr(prov, "installed_providers", lambda: ("CPUExecutionProvider",))
    with pytest.raises(PlanError, match="does not fall back to CPU when a GPU is requested"):
        _plan(model, device="gpu")
    with pytest.raises(PlanError, match="does not fall back to CPU when an NPU is requested"):
        _plan(model, device="npu")
    with pytest.raises(PlanError, match="the reference evaluator runs on CPU only"):
        _plan(model, backend="reference", device="npu")


def test_plan_refusals(model, tmp_path):
    with pytest.raises(InputSpecError, match="the dtype differs"):
        _plan(model, {"x": np.ones((2, 4), np.float64)})
    with pytest.raises(PlanError) as exc:
        _plan(model, capture=["h", "nope"])
    assert str(exc.value) == "the capture selection names values the graph does not have: ['nope']"
    with pytest.raises(PlanError, match="unknown backend 'tvm'"):
        _plan(model, backend="tvm")
    from safetensors.numpy import save_file

    st = tmp_path / "w.safetensors"
    save_file({"a": np.zeros(2, np.float32)}, str(st))
    with (
        nneditor.open(st) as doc,
        pytest.raises(PlanError, match="traces ONNX models, GGUF files and Hugging Face snapshots"),
    ):
        make_plan(doc, {})


def test_inputs_digest_covers_names_dtypes_shapes_and_bytes():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    base = inputs_digest({"x": a})
    assert inputs_digest({"x": np.asfortranarray(a)}) == base  # layout does not matter
    assert inputs_digest({"x": a.astype(">f4")}) == base  # byte order does not matter
    assert inputs_digest({"y": a}) != base
    assert inputs_digest({"x": a.reshape(4, 3)}) != base
    assert inputs_digest({"x": a.view(np.int32)}) != base
    b = a.copy()
    b[2, 3] = 11.5
    assert inputs_digest({"x": b}) != base


def test_approval_binds_inputs_limits_revision_and_model(model):
    plan = _plan(model)
    approval = approve(plan)
    verify(approval, plan)  # unchanged: accepted
    plan.inputs.arrays["x"][0, 0] = 5.0
    with pytest.raises(ApprovalError) as exc:
        verify(approval, plan)
    assert str(exc.value) == (
        "the run was refused because the input tensors changed since it was approved; review "
        "the plan and approve it again"
    )
    plan.inputs.arrays["x"][0, 0] = 1.0
    verify(approval, plan)
    plan.limits = Limits(timeout_s=1)
    with pytest.raises(ApprovalError, match="because the limits changed since"):
        verify(approval, plan)
    plan.limits = Limits()
    plan.revision = "edit-1"
    with pytest.raises(ApprovalError, match="because the model revision changed since"):
        verify(approval, plan)
    plan.revision = "source"
    plan.device = "cpu"
    with pytest.raises(ApprovalError, match="the backend or device choice changed"):
        verify(approval, plan)


def test_approval_detects_a_changed_model_file(model):
    plan = _plan(model)
    approval = approve(plan)
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(ApprovalError, match="because the model file changed on disk since"):
        verify(approval, plan)
    with pytest.raises(ApprovalError, match="the plan is out of date because the model file"):
        approve(plan)


def test_an_approval_is_consumed_by_exactly_one_run(model):
    plan = _plan(model)
    approval = approve(plan)
    approval.consume("run-1")
    with pytest.raises(ApprovalError) as exc:
        approval.consume("run-2")
    assert str(exc.value) == (
        "this approval was already used by run run-1; an approval covers exactly one run, so "
        "approve the run again"
    )
    with pytest.raises(ApprovalError, match="already used by a run"):
        verify(approval, plan)


def test_cli_choices_match_the_core():
    from nneditor.cli import trace as cli
    from nneditor.tracing import plan

    assert cli.BACKENDS == plan.BACKENDS


def test_a_device_failure_quotes_onnx_runtimes_own_log_lines():
    from nneditor.cli.trace import runtime_log_lines

    log = (
        "... loading model\n"
        "\x1b[1;31m2026-12-04 12:07:18.02 [E:onnxruntime:Default, provider_bridge_ort.cc:2251 "
        "TryGetProviderInfo_CUDA] libcublasLt.so.13: cannot open shared object file\x1b[m\n"
        "\x1b[0;93m2026-12-04 12:07:18.03 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:"
        "1080 CreateExecutionProviderFactoryInstance] Failed to create CUDAExecutionProvider\x1b[m\n"
        "traceback noise\n"
    )
    lines = runtime_log_lines(log)
    assert len(lines) == 2
    assert lines[0].endswith("libcublasLt.so.13: cannot open shared object file")
    assert lines[1].startswith("2026-12-04 12:07:18.03 [W:onnxruntime")
    assert "\x1b" not in "".join(lines)
    assert runtime_log_lines("no runtime lines here") == []


def test_cuda_runs_float32_at_full_precision_where_the_runtime_allows():
    """TF32 is turned off on CUDA for ONNX Runtime 1.18+ (the key is unknown before), and the
    run's notes say which precision the values have; other providers keep their options."""
    from types import SimpleNamespace

    from nneditor.tracing import backend_ort

    seen: list[list[dict[str, str]]] = []

    class Session:
        def __init__(self, model, options, providers, provider_options):
            seen.append(provider_options)
            self.providers = providers

        def get_providers(self):
            return self.providers

    plist = [("CUDAExecutionProvider", {"device_id": "0"}), (prov.CPU, {})]
    new = SimpleNamespace(__version__="1.31.1", InferenceSession=Session)
    backend_ort._session(new, b"", None, plist, strict=False)
    assert seen[-1] == [{"device_id": "0", "use_tf32": "0"}, {}]
    assert "TF32 off" in backend_ort._precision_note(new, "CUDAExecutionProvider")
    assert backend_ort._precision_note(new, prov.CPU) == ""
    old = SimpleNamespace(__version__="1.17.3", InferenceSession=Session)
    backend_ort._session(old, b"", None, plist, strict=False)
    assert seen[-1] == [{"device_id": "0"}, {}]
    assert "may round" in backend_ort._precision_note(old, "CUDAExecutionProvider")
