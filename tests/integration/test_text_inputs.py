"""Models that take text (ONNX string inputs): skl2onnx's category and text pipelines.

`inputs --auto` fills a string input with words from the model's own tables (so the lookups
hit), a trace runs it, and every captured output equals ONNX Runtime's on the same text."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from nneditor_cli import nneditor_cli
from onnx import TensorProto, helper

import nneditor
from nneditor.inputs import detect_inputs
from nneditor.inputs.generate import automatic, pattern
from nneditor.inputs.picker import load_npz
from nneditor.inputs.spec import InputSpecError
from nneditor.tracing.capture_file import read_value

ROOT = Path(__file__).resolve().parents[2]
ort = pytest.importorskip("onnxruntime")


def run(*args: object) -> subprocess.CompletedProcess[str]:
    return nneditor_cli(*args, timeout=300)


@pytest.fixture(scope="module")
def onehot(tmp_path_factory) -> Path:  # noqa: ANN001
    """OneHotEncoder + LogisticRegression on a string column, converted by skl2onnx."""
    skl2onnx = pytest.importorskip("skl2onnx")
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    x = np.array([["red"], ["green"], ["blue"], ["red"], ["blue"], ["green"]])
    pipe = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression())
    pipe.fit(x, np.array([1, 0, 1, 1, 1, 0]))
    model = skl2onnx.to_onnx(
        pipe,
        initial_types=[("color", StringTensorType([None, 1]))],
        options={id(pipe.steps[-1][1]): {"zipmap": False}},
    )
    path = tmp_path_factory.mktemp("onehot") / "onehot.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_a_category_input_gets_the_models_categories_and_traces_as_ort(onehot, tmp_path) -> None:  # noqa: ANN001
    out = run("inputs", onehot, "--auto", "--out", tmp_path / "in")
    assert out.returncode == 0, out.stderr
    plan = json.loads((tmp_path / "in" / "plan.json").read_text())
    assert (
        "input 'color' holds text: words from the model's own vocabulary (cats_strings of "
        "OneHotEncoder: 'blue', 'green', 'red')" in plan["assumptions"]
    )
    with np.load(tmp_path / "in" / "inputs.npz", allow_pickle=False) as npz:
        color = npz["color"]
    assert color.dtype.kind == "U" and color.tolist() == [["blue"]]
    traced = run(
        "trace",
        onehot,
        "--inputs",
        tmp_path / "in" / "inputs.npz",
        "--out",
        tmp_path / "t",
        "--yes",
    )
    assert traced.returncode == 0, traced.stderr
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    label, probabilities = ort.InferenceSession(str(onehot)).run(None, {"color": color})
    got = {v["name"]: read_value(tmp_path / "t", v) for v in manifest["values"]}
    np.testing.assert_array_equal(got["label"], label)
    np.testing.assert_allclose(got["probabilities"], probabilities, rtol=1e-6)
    # the encoder matched the word: one hot, not all zeros (an unknown word's encoding)
    onehots = [v for n, v in got.items() if v.dtype.kind == "f" and v.shape[-1] == 3]
    assert onehots and onehots[0].sum() == 1.0


def _tokenized_tfidf(path: Path) -> Path:
    """com.microsoft Tokenizer -> TfIdfVectorizer -> MatMul: a sentence in, scores out."""
    pool = ["awful", "bad", "film", "good", "great"]
    nodes = [
        helper.make_node(
            "Tokenizer",
            ["text"],
            ["tokens"],
            domain="com.microsoft",
            mark=0,
            mincharnum=1,
            pad_value="#",
            tokenexp="[a-z]+",
        ),
        helper.make_node(
            "TfIdfVectorizer",
            ["tokens"],
            ["tf"],
            max_gram_length=1,
            max_skip_count=0,
            min_gram_length=1,
            mode="TF",
            ngram_counts=[0],
            ngram_indexes=list(range(len(pool))),
            pool_strings=pool,
        ),
        helper.make_node("MatMul", ["tf", "w"], ["score"]),
    ]
    w = onnx.numpy_helper.from_array(np.array([[-1], [-1], [0], [1], [1]], np.float32), "w")
    graph = helper.make_graph(
        nodes,
        "tfidf",
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, None)],
        [w],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    onnx.save(model, path)
    return path


def test_a_sentence_input_gets_sentences_of_the_models_words(tmp_path) -> None:  # noqa: ANN001
    path = _tokenized_tfidf(tmp_path / "tfidf.onnx")
    with nneditor.open(path) as doc:
        plan = detect_inputs(doc)
    spec = plan["text"]
    assert spec.role == "sentences" and spec.words == ("awful", "bad", "film", "good", "great")
    values = automatic(spec)
    assert values.tolist() == ["awful bad film good"]
    (score,) = ort.InferenceSession(str(path)).run(None, {"text": values})
    assert score.tolist() == [[-1.0]]  # awful + bad - ... + good: every word was counted
    with pytest.raises(InputSpecError, match="this input holds text"):
        pattern("ramp", spec.shape, spec.numpy_dtype)


def test_without_a_word_table_a_placeholder_is_said(tmp_path) -> None:  # noqa: ANN001
    graph = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["t"])],
        "g",
        [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, [2])],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "s.onnx"
    )
    with nneditor.open(tmp_path / "s.onnx") as doc:
        spec = detect_inputs(doc)["s"]
    assert automatic(spec).tolist() == ["hello world", "hello world"]
    assert any("the placeholder 'hello world'" in a for a in spec.assumptions)


def test_byte_strings_from_a_file_are_read_as_text(tmp_path) -> None:  # noqa: ANN001
    np.savez(tmp_path / "b.npz", color=np.array([[b"red"]]))
    arrays = load_npz(tmp_path / "b.npz")
    assert arrays["color"].dtype.kind == "U" and arrays["color"].tolist() == [["red"]]
