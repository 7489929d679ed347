"""Real TFLite models (MediaPipe, openWakeWord, microWakeWord) against Google's own runtime,
LiteRT (``ai-edge-litert``): every weight NNEditor decodes equals what the interpreter holds,
including block-sparse weights, which LiteRT densifies with its DENSIFY operator."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nneditor

litert = pytest.importorskip("ai_edge_litert.interpreter")


def _interpreter(path):  # noqa: ANN001, ANN202
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = litert.Interpreter(
            model_path=str(path),
            experimental_preserve_all_tensors=True,
            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
    it.allocate_tensors()
    return it


@pytest.mark.realdata
def test_sparse_weights_equal_litert_densify(zoo_artifact) -> None:  # noqa: ANN001
    path = zoo_artifact("mp-face_detection_full_range_sparse.tflite")
    it = _interpreter(path)
    inp = it.get_input_details()[0]
    it.set_tensor(inp["index"], np.zeros(inp["shape"], np.float32))
    it.invoke()
    names = {d["index"]: d["name"] for d in it.get_tensor_details()}
    densify = [o for o in it._get_ops_details() if o["op_name"] == "DENSIFY"]
    assert len(densify) == 46
    with nneditor.open(path) as doc:
        for op in densify:
            ref = doc.tensors[names[op["inputs"][0]]]
            assert ref.encoding == "sparse" and ref.info["sparsity"]["traversal_order"]
            want = it.get_tensor(op["outputs"][0])
            got = ref.read()
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            assert np.count_nonzero(want) * want.itemsize <= ref.nbytes  # stored: non-zeros


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["microww-okay_nabu.tflite", "oww-hey_jarvis_v0.1.tflite"])
def test_constant_tensors_equal_litert(zoo_artifact, name: str) -> None:  # noqa: ANN001
    path = zoo_artifact(name)
    it = _interpreter(path)
    compared = 0
    with nneditor.open(path) as doc:
        for d in it.get_tensor_details():
            ref = doc.tensors.get(d["name"])
            if ref is None or ref.encoding != "raw":
                continue
            want = it.get_tensor(d["index"])
            np.testing.assert_array_equal(ref.read(), want, err_msg=d["name"])
            compared += 1
    assert compared >= 5
