"""End-to-end traces in worker processes on generated models: values against ONNX Runtime's own
outputs, the reference backend against ONNX Runtime, external data, limits (RAM, wall clock,
capture budget), cancellation, killed workers, approvals, strict devices and fallback."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import psutil
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.jobs import CancelToken
from nneditor.tracing import ApprovalError, Limits, RunError, TraceRunner, approve, make_plan
from nneditor.tracing.capture import BRANCH_REASON, SUBGRAPH_REASON
from nneditor.tracing.capture_file import read_value
from nneditor.tracing.providers import ProviderChoice

ort = pytest.importorskip("onnxruntime")
HOOKS = {"NNEDITOR_TRACE_TEST_HOOKS": "1"}


def _save(graph: onnx.GraphProto, path: Path, opset: int = 17, **kw) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save_model(model, str(path), **kw)
    return path


def mlp_graph() -> onnx.GraphProto:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
        helper.make_node("Add", ["h1", "b1"], ["h2"], name="bias"),
        helper.make_node("Relu", ["h2"], ["h3"], name="act"),
        helper.make_node("MatMul", ["h3", "w2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
    ]
    return helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["n", 4])],
        inits,
    )


def if_graph() -> onnx.GraphProto:
    one = numpy_helper.from_array(np.array([1.0], np.float32), "one")
    then = helper.make_graph(
        [
            helper.make_node("Add", ["x", "one"], ["t1"]),
            helper.make_node("Mul", ["t1", "t1"], ["t2"]),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("t2", TensorProto.FLOAT, [4])],
    )
    other = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["e1"])],
        "else",
        [],
        [helper.make_tensor_value_info("e1", TensorProto.FLOAT, [4])],
    )
    return helper.make_graph(
        [
            helper.make_node(
                "If", ["c"], ["branch"], name="choose", then_branch=then, else_branch=other
            ),
            helper.make_node("Relu", ["branch"], ["y"], name="relu"),
        ],
        "if",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [one],
    )


def loop_graph() -> onnx.GraphProto:
    """A Loop whose trip count is an input: 10^8 iterations keep any backend busy."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["s_in", "one"], ["s_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1]),
        ],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    return helper.make_graph(
        [
            helper.make_node("Loop", ["n", "c", "s0"], ["s"], body=body),
            helper.make_node("Relu", ["s"], ["y"]),
        ],
        "loop",
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s0", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )


def alloc_graph() -> onnx.GraphProto:
    """ConstantOfShape with the element count as an input: as much memory as asked for."""
    return helper.make_graph(
        [
            helper.make_node(
                "ConstantOfShape",
                ["count"],
                ["big"],
                value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
            ),
            helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
        ],
        "alloc",
        [helper.make_tensor_value_info("count", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
    )


def trace(path, arrays, out, backend="onnxruntime", limits=None, runner=None, **kw):
    with nneditor.open(path) as doc:
        plan = make_plan(doc, arrays, backend=backend, limits=limits or Limits(timeout_s=120))
    approval = approve(plan)
    return (runner or TraceRunner()).run(plan, approval, out, **kw)


def manifest_values(result) -> dict[str, dict]:
    assert result.published, result.message + "\n" + result.log_tail
    return {v["name"]: v for v in result.manifest["values"]}


def ort_value(model_path: Path, name: str, feeds: dict) -> np.ndarray:
    """ONNX Runtime's own output for one value, exposed alone as a graph output."""
    model = onnx.load(str(model_path))
    if name not in [o.name for o in model.graph.output]:
        model.graph.output.append(onnx.ValueInfoProto(name=name))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run([name], feeds)[0]


def _folder_state(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_every_capture_equals_onnxruntime_for_that_value(tmp_path, unchanged):
    (tmp_path / "model").mkdir()
    model = _save(mlp_graph(), tmp_path / "model" / "mlp.onnx")
    check, before = unchanged(model), _folder_state(model.parent)
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)}
    result = trace(model, feeds, tmp_path / "trace")
    values = manifest_values(result)
    assert result.status == "ok" and result.provider == "CPUExecutionProvider"
    assert list(values) == ["x", "h1", "h2", "h3", "logits", "probs", "shape"]
    for name, rec in values.items():
        got = read_value(result.out_dir, rec)
        expected = feeds["x"] if name == "x" else ort_value(model, name, feeds)
        assert rec["status"] == "captured" and rec["shape"] == list(expected.shape)
        assert got.dtype == expected.dtype and rec["dtype"] == str(expected.dtype)
        np.testing.assert_array_equal(got, expected, err_msg=name)
    run = result.manifest["run"]
    assert run["backend"] == "onnxruntime" and run["graph_optimization"] == "disabled"
    assert run["approval"]["digest"] and run["limits"]["timeout_s"] == 120
    assert result.manifest["partial"] is False
    assert not (result.out_dir / "work").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder left
    check()
    assert _folder_state(model.parent) == before  # nothing written beside the model


def test_reference_backend_agrees_with_onnxruntime(tmp_path):
    model = _save(mlp_graph(), tmp_path / "mlp.onnx")
    feeds = {"x": np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)}
    a = manifest_values(trace(model, feeds, tmp_path / "ort"))
    result = trace(model, feeds, tmp_path / "ref", backend="reference")
    b = manifest_values(result)
    assert result.manifest["run"]["provider"] == "reference" and list(a) == list(b)
    for name in a:
        x = read_value(tmp_path / "ort", a[name])
        y = read_value(tmp_path / "ref", b[name])
        if x.dtype.kind == "f":
            np.testing.assert_allclose(
                y, x, rtol=1e-4, atol=1e-6 * float(np.abs(x).max()), err_msg=name
            )
        else:
            np.testing.assert_array_equal(y, x)


def test_values_inside_if_branches(tmp_path):
    model = _save(if_graph(), tmp_path / "if.onnx")
    x = np.array([-3, -1, 0.5, 2], np.float32)
    feeds = {"x": x, "c": np.array(True)}
    ort_vals = manifest_values(trace(model, feeds, tmp_path / "ort"))
    assert ort_vals["t1"]["status"] == "dropped" and ort_vals["t1"]["reason"] == SUBGRAPH_REASON
    assert ort_vals["t1"]["graph"] == "choose/then_branch"
    np.testing.assert_array_equal(
        read_value(tmp_path / "ort", ort_vals["y"]), ort_value(model, "y", feeds)
    )
    ref = manifest_values(trace(model, feeds, tmp_path / "ref", backend="reference"))
    np.testing.assert_allclose(read_value(tmp_path / "ref", ref["t1"]), x + 1)
    np.testing.assert_allclose(read_value(tmp_path / "ref", ref["t2"]), (x + 1) ** 2)
    assert ref["e1"]["status"] == "dropped" and ref["e1"]["reason"] == BRANCH_REASON
    np.testing.assert_array_equal(
        read_value(tmp_path / "ref", ref["y"]), ort_value(model, "y", feeds)
    )


def test_external_data_models_trace_without_touching_their_folder(tmp_path):
    folder = tmp_path / "ext"
    folder.mkdir()
    model = _save(
        mlp_graph(),
        folder / "mlp.onnx",
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    before = _folder_state(folder)
    embedded = _save(mlp_graph(), tmp_path / "embedded.onnx")
    feeds = {"x": np.ones((1, 8), np.float32)}
    for backend in ("onnxruntime", "reference"):
        values = manifest_values(trace(model, feeds, tmp_path / backend, backend=backend))
        got = read_value(tmp_path / backend, values["probs"])
        np.testing.assert_allclose(got, ort_value(embedded, "probs", feeds), rtol=1e-5)
    assert _folder_state(folder) == before


def test_capture_budget_gives_an_honest_partial_trace(tmp_path):
    model = _save(mlp_graph(), tmp_path / "mlp.onnx")
    feeds = {"x": np.ones((64, 8), np.float32)}  # x: 2 KiB, h1/h2/h3: 4 KiB each
    budget_mb = 9000 / 2**20  # x + h1 fit, h2 gets the remaining 2808 bytes
    result = trace(model, feeds, tmp_path / "t", limits=Limits(timeout_s=120, capture_mb=budget_mb))
    values = manifest_values(result)
    assert result.status == "partial" and result.manifest["partial"] is True
    assert "the capture budget" in result.message and "so the trace is partial" in result.message
    statuses = {n: v["status"] for n, v in values.items()}
    assert statuses["x"] == "captured" and statuses["probs"] == "dropped"
    partial = [n for n, s in statuses.items() if s == "partial"]
    assert len(partial) == 1
    rec = values[partial[0]]
    full = ort_value(model, partial[0], feeds)
    prefix = read_value(result.out_dir, rec)
    assert rec["shape"] == list(full.shape) and prefix.ndim == 1 and 0 < prefix.size < full.size
    np.testing.assert_array_equal(prefix, full.reshape(-1)[: prefix.size])
    assert result.manifest["captured_bytes"] <= 9000


@pytest.mark.parametrize("elements", [250_000_000, 900_000_000])
def test_a_model_needing_more_than_the_ram_ceiling_fails_cleanly(tmp_path, elements):
    """1 GB (mapped, then stopped by the RSS watchdog) and 3.6 GB (refused by the address-space
    limit inside the worker)."""
    model = _save(alloc_graph(), tmp_path / "alloc.onnx")
    feeds = {"count": np.array([elements], np.int64)}
    result = trace(model, feeds, tmp_path / "t", limits=Limits(timeout_s=120, max_ram_mb=300))
    assert result.status == "memory", result.message + result.log_tail
    assert result.message in (
        "the trace worker used more than the RAM ceiling of 300 MB and was stopped; nothing was "
        "published",
        "the trace failed: ONNX Runtime could not allocate memory (Failed to allocate memory for "
        f"requested buffer of size {elements * 4}) (RAM ceiling 300 MB); nothing was published",
    )
    if elements == 900_000_000:
        assert "could not allocate memory" in result.message
    assert "nothing was published" in result.message
    assert not result.published and not (tmp_path / "t").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert _gone(result.worker_pid)


def _slow_feeds() -> dict:
    return {"n": np.array(10**8, np.int64), "c": np.array(True), "s0": np.zeros(1, np.float32)}


def test_timeout_ends_the_whole_process_tree(tmp_path):
    model = _save(loop_graph(), tmp_path / "loop.onnx")
    children: list[int] = []
    result = trace(
        model,
        _slow_feeds(),
        tmp_path / "t",
        limits=Limits(timeout_s=6),
        runner=TraceRunner(extra_env=HOOKS),
        test_hooks={"spawn_child": True},
        on_event=lambda e: children.append(e["child_pid"]) if e["event"] == "test" else None,
    )
    assert result.status == "timeout"
    assert result.message == (
        "the trace exceeded its wall-clock limit of 6 s and was stopped; nothing was published"
    )
    assert children and _gone(children[0]) and _gone(result.worker_pid)
    assert not (tmp_path / "t").exists()
    assert 6 <= result.elapsed_s < 30


def test_cancel_kills_the_worker_and_its_children(tmp_path):
    model = _save(loop_graph(), tmp_path / "loop.onnx")
    token = CancelToken()
    children: list[int] = []

    def on_event(e):
        if e["event"] == "test":
            children.append(e["child_pid"])
        if e["event"] == "stage" and e["stage"] == "running":
            threading.Timer(0.5, token.cancel).start()

    result = trace(
        model,
        _slow_feeds(),
        tmp_path / "t",
        backend="reference",
        token=token,
        runner=TraceRunner(extra_env=HOOKS),
        test_hooks={"spawn_child": True},
        on_event=on_event,
    )
    assert result.status == "cancelled"
    assert result.message == "the trace was cancelled; nothing was published"
    assert children and _gone(children[0]) and _gone(result.worker_pid)
    assert not (tmp_path / "t").exists()


def test_a_killed_worker_is_reported_and_the_caller_carries_on(tmp_path):
    model = _save(loop_graph(), tmp_path / "loop.onnx")

    def on_event(e):
        if e["event"] == "stage" and e["stage"] == "running":
            os.kill(pids[0], signal.SIGKILL)
        if e["event"] == "hello":
            pids.append(e["pid"])

    pids: list[int] = []
    result = trace(model, _slow_feeds(), tmp_path / "t", on_event=on_event)
    assert result.status == "crashed"
    assert result.message == (
        "the trace worker stopped unexpectedly (killed by SIGKILL); nothing was published"
    )
    assert not (tmp_path / "t").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    small = {"n": np.array(3, np.int64), "c": np.array(True), "s0": np.zeros(1, np.float32)}
    again = trace(model, small, tmp_path / "t")
    assert again.status == "ok"
    np.testing.assert_array_equal(read_value(again.out_dir, manifest_values(again)["y"]), [3.0])


def test_an_interrupted_caller_takes_its_worker_down(tmp_path):
    """Ctrl+C in the caller (a KeyboardInterrupt mid-run): the worker lives in its own session
    and never sees the signal, so the runner must end it; nothing is published."""
    model = _save(loop_graph(), tmp_path / "loop.onnx")
    pids: list[int] = []

    def on_event(e):
        if e["event"] == "hello":
            pids.append(e["pid"])
        if e["event"] == "stage" and e["stage"] == "running":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trace(model, _slow_feeds(), tmp_path / "t", on_event=on_event)
    assert pids and _gone(pids[0])
    assert not (tmp_path / "t").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_run_refuses_a_changed_or_reused_approval(tmp_path):
    model = _save(mlp_graph(), tmp_path / "mlp.onnx")
    with nneditor.open(model) as doc:
        plan = make_plan(doc, {"x": np.ones((1, 8), np.float32)})
    approval = approve(plan)
    plan.inputs.arrays["x"][0, 0] = 2.0
    with pytest.raises(ApprovalError, match="because the input tensors changed since"):
        TraceRunner().run(plan, approval, tmp_path / "t")
    assert not (tmp_path / "t").exists()
    plan.inputs.arrays["x"][0, 0] = 1.0
    assert TraceRunner().run(plan, approval, tmp_path / "t").status == "ok"
    with pytest.raises(ApprovalError, match="already used by a run"):
        TraceRunner().run(plan, approval, tmp_path / "t2")
    with pytest.raises(RunError, match="already exists and is not an empty folder"):
        TraceRunner().run(plan, approve(plan), tmp_path / "t")


def test_an_explicit_gpu_never_runs_on_cpu(tmp_path):
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("a CUDA provider is installed here")
    model = _save(mlp_graph(), tmp_path / "mlp.onnx")
    with nneditor.open(model) as doc:
        plan = make_plan(doc, {"x": np.ones((1, 8), np.float32)})
    # as if planning had found a CUDA provider that then fails to initialise in the worker
    plan.device = "gpu"
    plan.providers = ProviderChoice("gpu", (("CUDAExecutionProvider", {}),), strict=True)
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    assert result.status == "failed"
    assert "NVIDIA CUDA was requested but ONNX Runtime initialised CPUExecutionProvider" in (
        result.message
    )
    assert "does not fall back to CPU for an explicit device" in result.message
    assert not result.published


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_AS is POSIX only")
def test_an_accelerator_run_gets_no_address_space_ceiling(tmp_path):
    """CUDA reserves more virtual memory than any RAM ceiling: under RLIMIT_AS its provider
    does not start and ONNX Runtime runs on CPU (seen on an H200). A run that may start an
    accelerator is bounded by the RSS watchdog alone; a CPU run keeps its ceiling."""
    model = _save(mlp_graph(), tmp_path / "mlp.onnx")
    limits = Limits(timeout_s=120, max_ram_mb=1000)
    seen: dict[str, object] = {}
    for device, choice in [
        ("auto", (("CUDAExecutionProvider", {}), ("CPUExecutionProvider", {}))),
        ("cpu", (("CPUExecutionProvider", {}),)),
    ]:
        with nneditor.open(model) as doc:
            plan = make_plan(doc, {"x": np.ones((1, 8), np.float32)}, limits=limits)
        plan.device = device
        plan.providers = ProviderChoice(device, choice, strict=device == "cpu")
        events: list[dict] = []
        result = TraceRunner(extra_env=HOOKS).run(
            plan,
            approve(plan),
            tmp_path / device,
            test_hooks={"report_address_space": True},
            on_event=events.append,
        )
        assert result.status == "ok", result.message
        seen[device] = next(e["address_space"] for e in events if e["event"] == "test")
        notes = " ".join(result.manifest["run"]["notes"])
        assert ("no address-space ceiling on an accelerator" in notes) == (device == "auto")
    assert seen["auto"] is None
    assert seen["cpu"] == limits.address_space_bytes


def test_auto_backend_falls_back_to_reference_when_onnxruntime_refuses(tmp_path):
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node(
        "Adagrad",
        ["r", "t", "x", "g", "h"],
        ["x_new", "h_new"],
        domain="ai.onnx.preview.training",
        norm_coefficient=0.001,
        epsilon=1e-5,
        decay_factor=0.1,
    )
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x0"], ["x"]), node, helper.make_node("Neg", ["x_new"], ["y"])],
        "train",
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
            for n, s in [("r", []), ("x0", [2]), ("g", [2]), ("h", [2])]
        ]
        + [helper.make_tensor_value_info("t", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", 17),
            helper.make_opsetid("ai.onnx.preview.training", 1),
        ],
    )
    path = tmp_path / "adagrad.onnx"
    onnx.save(model, path)
    feeds = {
        "r": np.array(0.1, np.float32),
        "t": np.array(0, np.int64),
        "x0": np.array([1, 2], np.float32),
        "g": np.array([0.5, -1], np.float32),
        "h": np.array([1, 1], np.float32),
    }
    with nneditor.open(path) as doc:
        plan = make_plan(doc, feeds, backend="auto")
    assert plan.backend == "onnxruntime"
    result = TraceRunner().run(plan, approve(plan), tmp_path / "t")
    values = manifest_values(result)
    run = result.manifest["run"]
    assert run["backend"] == "reference" and run["backend_request"] == "auto"
    assert any("ONNX Runtime refused the model" in n for n in run["notes"])
    expected = ReferenceEvaluator(model).run(None, feeds, intermediate=True)
    for name in ("x", "x_new", "h_new", "y"):
        np.testing.assert_array_equal(read_value(result.out_dir, values[name]), expected[name])
    explicit = make_plan(nneditor.open(path), feeds, backend="onnxruntime")
    failed = TraceRunner().run(explicit, approve(explicit), tmp_path / "t2")
    assert failed.status == "failed" and "ONNX Runtime refused the model" in failed.message


def test_a_warm_worker_serves_one_run_each(tmp_path):
    model = _save(mlp_graph(), tmp_path / "mlp.onnx")
    feeds = {"x": np.ones((2, 8), np.float32)}
    with TraceRunner(keep_warm=True) as runner:
        runner.prestart()
        first = runner._warm
        assert first is not None
        a = trace(model, feeds, tmp_path / "a", runner=runner)
        assert a.status == "ok" and a.worker_pid == first.proc.pid
        b = trace(model, feeds, tmp_path / "b", runner=runner)
        assert b.status == "ok" and b.worker_pid != a.worker_pid
        deadline = time.monotonic() + 30  # the next worker is pre-started on a helper thread
        while runner._warm is None and time.monotonic() < deadline:
            time.sleep(0.01)
        idle = runner._warm
        assert idle is not None and idle.proc.pid not in (a.worker_pid, b.worker_pid)
    assert _gone(idle.proc.pid)
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["counts"]["captured"] == 7


def test_capture_selection_and_loop_bodies(tmp_path):
    from nneditor.tracing.capture import LOOP_REASON

    model = _save(loop_graph(), tmp_path / "loop.onnx")
    feeds = {"n": np.array(4, np.int64), "c": np.array(True), "s0": np.zeros(1, np.float32)}
    for backend, reason in (("onnxruntime", SUBGRAPH_REASON), ("reference", LOOP_REASON)):
        values = manifest_values(trace(model, feeds, tmp_path / backend, backend=backend))
        assert values["s_out"]["status"] == "dropped" and values["s_out"]["reason"] == reason
        np.testing.assert_array_equal(read_value(tmp_path / backend, values["y"]), [4.0])
    mlp = _save(mlp_graph(), tmp_path / "mlp.onnx")
    with nneditor.open(mlp) as doc:
        plan = make_plan(doc, {"x": np.ones((1, 8), np.float32)}, capture=["h3", "probs"])
    assert "capture: 2 selected values" in plan.describe()
    result = TraceRunner().run(plan, approve(plan), tmp_path / "sel")
    assert list(manifest_values(result)) == ["h3", "probs"]


def test_trace_job_reports_progress_through_the_job_protocol(tmp_path):
    from nneditor.jobs import SyncRunner
    from nneditor.tracing import trace_job

    model = _save(mlp_graph(), tmp_path / "mlp.onnx")
    with nneditor.open(model) as doc:
        plan = make_plan(doc, {"x": np.ones((1, 8), np.float32)})
    seen: list[tuple[int, int, str]] = []
    job = trace_job(TraceRunner(), plan, approve(plan), tmp_path / "t")
    outcome = SyncRunner().run(job, on_progress=lambda d, t, m: seen.append((d, t, m)))
    assert outcome.ok and outcome.value is not None and outcome.value.status == "ok"
    assert seen[-1][0] == seen[-1][1] == 7 and seen[-1][2] == "writing captures"
