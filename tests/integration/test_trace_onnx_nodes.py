"""onnx's own Scan/Loop/If node test cases (built by onnx.backend.test.case, since onnx 1.23 no
longer ships the .pb data), traced by both backends through the worker's execute(): graph
outputs equal onnx's expected outputs, the reference backend agrees with ONNX Runtime, and
Scan cases moved to a nonzero (or negative) axis give the moved expected outputs."""

from __future__ import annotations

import copy
import functools
import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from nneditor.tracing.capture import write_npy
from nneditor.tracing.capture_file import read_value
from nneditor.tracing.worker import execute

ort = pytest.importorskip("onnxruntime")
NAMES = ("test_scan9_sum", "test_scan9_multi_state", "test_scan9_scalar", "test_loop11", "test_if")


@functools.cache
def _cases() -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        return {c.name: c for c in collect_testcases(None) if c.name in NAMES}


def _run(tmp: Path, model: onnx.ModelProto, feeds: dict, backend: str) -> dict[str, np.ndarray]:
    run_dir = tmp / backend
    (run_dir / "inputs").mkdir(parents=True)
    path = tmp / "model.onnx"
    onnx.save(model, path)
    files = {}
    for i, (name, arr) in enumerate(feeds.items()):
        files[name] = f"inputs/{i}.npy"
        write_npy(run_dir / files[name], np.asarray(arr), 1 << 20)
    request = {
        "run_dir": str(run_dir),
        "model": str(path),
        "inputs": files,
        "backend": backend,
        "backend_request": backend,
        "providers": [["CPUExecutionProvider", {}]],
        "limits": {"timeout_s": 60, "max_ram_mb": 4096, "capture_mb": 64, "chunk_mb": 1},
    }
    execute(request, lambda *a, **k: None, [])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {
        v["name"]: read_value(run_dir, v) for v in manifest["values"] if v["status"] == "captured"
    }


def _feeds(case) -> tuple[dict, dict]:
    inputs, outputs = case.data_sets[0]
    g = case.model.graph
    return dict(zip([i.name for i in g.input], inputs, strict=False)), dict(
        zip([o.name for o in g.output], outputs, strict=False)
    )


def _check(tmp: Path, model: onnx.ModelProto, feeds: dict, expected: dict) -> None:
    a = _run(tmp, model, feeds, "onnxruntime")
    b = _run(tmp, model, feeds, "reference")
    for name, want in expected.items():
        np.testing.assert_allclose(a[name], want, rtol=1e-5, err_msg=f"onnxruntime {name}")
        np.testing.assert_allclose(b[name], want, rtol=1e-5, err_msg=f"reference {name}")
    for name, x in a.items():
        if name in b and x.dtype.kind == "f":
            np.testing.assert_allclose(b[name], x, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", NAMES)
def test_onnx_node_cases(tmp_path, name):
    case = _cases()[name]
    feeds, expected = _feeds(case)
    _check(tmp_path, case.model, feeds, expected)


def _move_scan_axes(case, axis: int) -> tuple[onnx.ModelProto, dict, dict]:
    """The same computation with scan inputs/outputs stacked on ``axis`` instead of 0."""
    model = copy.deepcopy(case.model)
    feeds, expected = _feeds(case)
    scan = next(n for n in model.graph.node if n.op_type == "Scan")
    m = next(a.i for a in scan.attribute if a.name == "num_scan_inputs")
    n_state = len(scan.input) - m
    n_out = len(scan.output) - n_state
    scan.attribute.extend(
        [
            helper.make_attribute("scan_input_axes", [axis] * m),
            helper.make_attribute("scan_output_axes", [axis] * n_out),
        ]
    )
    for name in scan.input[n_state:]:
        feeds[name] = np.ascontiguousarray(np.moveaxis(feeds[name], 0, 1))
    for name in scan.output[n_state:]:
        expected[name] = np.moveaxis(expected[name], 0, 1)
    for vi in (*model.graph.input, *model.graph.output):
        arr = feeds.get(vi.name, expected.get(vi.name))
        vi.type.tensor_type.shape.Clear()
        for d in np.shape(arr):
            vi.type.tensor_type.shape.dim.add().dim_value = d
    return model, feeds, expected


@pytest.mark.parametrize("name", ["test_scan9_sum", "test_scan9_multi_state"])
@pytest.mark.parametrize("axis", [1, -1])
def test_scan_cases_over_a_nonzero_axis(tmp_path, name, axis):
    model, feeds, expected = _move_scan_axes(_cases()[name], axis)
    _check(tmp_path, model, feeds, expected)
