"""Qwen-VL vision inputs: pixel_values [patches, 3*2*P*P] beside image_grid_thw get a patch
grid whose product is the row count, with h and w multiples of the merge size (2); ONNX
Runtime checks the pair inside a model the way the vision encoder's reshape needs it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import nneditor
from nneditor.inputs import build_inputs, detect_inputs
from nneditor.inputs.patches import grid_for


def _model(path: Path, rows: int | str, width: int) -> Path:
    """out = (prod(grid) == rows of pixel_values) and (h, w even): what the encoder needs."""
    nodes = [
        helper.make_node("Shape", ["pixel_values"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
        helper.make_node("ReduceProd", ["image_grid_thw"], ["cells"], keepdims=0),
        helper.make_node("Equal", ["cells", "rows"], ["same"]),
        helper.make_node("Mod", ["image_grid_thw", "two"], ["odd"]),
        helper.make_node("Slice", ["odd", "s1", "s3", "ax1"], ["odd_hw"]),
        helper.make_node("ReduceSum", ["odd_hw"], ["odd_sum"], keepdims=0),
        helper.make_node("Equal", ["odd_sum", "zero"], ["even"]),
        helper.make_node("And", ["same", "even"], ["ok"]),
        helper.make_node("ReduceSum", ["pixel_values"], ["total"], keepdims=0),
    ]
    consts = [
        helper.make_tensor("zero", TensorProto.INT64, [], [0]),
        helper.make_tensor("two", TensorProto.INT64, [], [2]),
        helper.make_tensor("s1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("s3", TensorProto.INT64, [1], [3]),
        helper.make_tensor("ax1", TensorProto.INT64, [1], [1]),
    ]
    g = helper.make_graph(
        nodes,
        "vision",
        [
            helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [rows, width]),
            helper.make_tensor_value_info("image_grid_thw", TensorProto.INT64, [1, 3]),
        ],
        [
            helper.make_tensor_value_info("ok", TensorProto.BOOL, []),
            helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
        ],
        consts,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def _run(path: Path, arrays: dict[str, np.ndarray]) -> bool:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return bool(sess.run(["ok"], arrays)[0])


@pytest.mark.parametrize(("width", "side"), [(1176, 14), (1536, 16)])
def test_an_open_patch_count_gets_a_consistent_grid(tmp_path: Path, width: int, side: int) -> None:
    path = _model(tmp_path / "v.onnx", "num_patches", width)
    with nneditor.open(path) as doc:
        plan = detect_inputs(doc)
    pixels, grid = plan["pixel_values"], plan["image_grid_thw"]
    assert (pixels.role, grid.role) == ("patches", "grid_thw")
    assert pixels.shape == (256, width) and pixels.ready
    assert any(f"{side} x {side} patches" in a for a in pixels.assumptions)
    arrays = build_inputs(plan)
    np.testing.assert_array_equal(arrays["image_grid_thw"], [[1, 16, 16]])
    assert _run(path, arrays)


def test_a_fixed_count_is_factored_or_refused(tmp_path: Path) -> None:
    path = _model(tmp_path / "v.onnx", 6 * 40, 1176)
    with nneditor.open(path) as doc:
        plan = detect_inputs(doc)
    arrays = build_inputs(plan)
    np.testing.assert_array_equal(arrays["image_grid_thw"], [[1, 12, 20]])
    assert _run(path, arrays)
    odd = _model(tmp_path / "odd.onnx", 26, 1176)  # 2 x 13: no even grid
    with nneditor.open(odd) as doc:
        plan = detect_inputs(doc)
    assert plan["pixel_values"].problem and "26 patches" in plan["pixel_values"].problem


def test_grid_for_prefers_square_even_grids() -> None:
    assert grid_for(256) == (16, 16)
    assert grid_for(64 * 36) == (48, 48)
    assert grid_for(8) == (2, 4)
    assert grid_for(26) is None and grid_for(9) is None
