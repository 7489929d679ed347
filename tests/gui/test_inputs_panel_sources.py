"""The Generate test input panel's sources: every pattern and time-series kind, the image
layout and normalisation, the written set's files, the token input of a GGUF file preselected
on Text tokens, and the tokenizer picker's filter. References are the generator functions
(nneditor.inputs.generate / .image) and the model's own tokenizer, called directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
onnx = pytest.importorskip("onnx")

from nneditor.inputs.generate import pattern, time_series  # noqa: E402
from nneditor.inputs.image import image_for_input  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: input name -> (onnx element type, shape)
INPUTS = {
    "x": (onnx.TensorProto.FLOAT, [1, 3, 8, 8]),  # an image, NCHW by its channel axis
    "tile": (onnx.TensorProto.FLOAT, [1, 3, 3, 3]),  # NCHW inferred, NHWC possible
    "signal": (onnx.TensorProto.FLOAT, [2, 16]),
    "counts": (onnx.TensorProto.INT32, [3, 4]),
}


def _model(path: Path) -> Path:
    """Identity of every input, so each input is used and has its declared shape."""
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Identity", [n], [f"{n}_out"]) for n in INPUTS],
        "sources",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in INPUTS.items()],
        [helper.make_tensor_value_info(f"{n}_out", t, s) for n, (t, s) in INPUTS.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _panel(window, open_model, tmp_path: Path):  # noqa: ANN001, ANN202
    open_model(_model(tmp_path / "sources.onnx"))
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    assert panel.plan is not None and panel.plan.names() == list(INPUTS)
    return panel


def _source(panel, name: str) -> str:  # noqa: ANN001
    """The key the input's Source combo shows."""
    row = panel.plan.names().index(name)
    return str(panel.table.cellWidget(row, 3).currentData())


def test_every_pattern_and_series_kind_is_offered_and_generated(
    qtbot, window, open_model, tmp_path
) -> None:  # noqa: ANN001
    from nneditor.inputs.generate import PATTERNS, SERIES

    panel = _panel(window, open_model, tmp_path)
    combo = panel.table.cellWidget(0, 3)
    offered = {str(combo.itemData(i)): combo.itemText(i) for i in range(combo.count())}
    for kind in PATTERNS:
        assert offered[f"pattern:{kind}"] == f"Pattern: {kind}"
    for kind in SERIES:
        assert offered[f"series:{kind}"] == f"Time series: {kind}"

    panel.set_source("signal", "series:steps")
    panel.set_source("counts", "pattern:uniform")
    panel.set_source("tile", "pattern:normal")
    panel.set_source("x", "pattern")  # the old key: an alias of the ramp
    assert _source(panel, "signal") == "series:steps" and _source(panel, "x") == "pattern:ramp"
    panel.folder.setText(str(tmp_path / "set"))
    assert panel.generate_and_assign(), panel.status.text()
    got = window.trace.panel.arrays  # what the next trace takes
    want = {
        "signal": time_series("steps", (2, 16), "float32"),
        "counts": pattern("uniform", (3, 4), "int32"),
        "tile": pattern("normal", (1, 3, 3, 3), "float32"),
        "x": pattern("ramp", (1, 3, 8, 8), "float32"),
    }
    for name, ref in want.items():
        assert got[name].dtype == ref.dtype and np.array_equal(got[name], ref), name
    assert got["signal"][0].tolist() == [0.0] * 4 + [1.0] * 4 + [0.0] * 4 + [1.0] * 4
    assert not np.array_equal(want["tile"], pattern("ramp", (1, 3, 3, 3), "float32"))

    panel.set_source("signal", "series")  # the old key: an alias of the sine
    assert panel.generate_and_assign(), panel.status.text()
    ref = time_series("sine", (2, 16), "float32")
    assert np.array_equal(window.trace.panel.arrays["signal"], ref)


def test_image_layout_and_normalisation_reach_every_image_input(
    qtbot, window, open_model, tmp_path
) -> None:  # noqa: ANN001
    from PIL import Image

    png = tmp_path / "picture.png"
    rng = np.random.default_rng(7)
    Image.fromarray(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8), "RGB").save(png)
    panel = _panel(window, open_model, tmp_path)
    plan = panel.plan
    assert panel.image_norm.currentData() == "imagenet"  # the CLI's default
    assert panel.image_layout.currentData() == ""  # from the input's shape

    panel.set_source("x", "image", str(png))
    panel.set_source("tile", "image", str(png))
    panel.image_norm.setCurrentIndex(panel.image_norm.findData("-1..1"))
    panel.folder.setText(str(tmp_path / "set"))
    assert panel.generate_and_assign(), panel.status.text()
    got = window.trace.panel.arrays
    for name in ("x", "tile"):
        ref = image_for_input(plan[name], png, "-1..1", None)
        assert got[name].dtype == np.float32 and np.array_equal(got[name], ref), name
        assert not np.allclose(got[name], image_for_input(plan[name], png))  # not imagenet
    assert got["x"].min() >= -1.0 and got["x"].max() <= 1.0 and got["x"].min() < 0.0

    # an explicit layout: the [1, 3, 3, 3] tile read as NHWC (3 x 3 pixels, 3 channels last)
    panel.set_source("x", "auto")
    panel.image_layout.setCurrentIndex(panel.image_layout.findData("NHWC"))
    panel.image_norm.setCurrentIndex(panel.image_norm.findData("0..1"))
    assert panel.generate_and_assign(), panel.status.text()
    tile = window.trace.panel.arrays["tile"]
    nhwc = image_for_input(plan["tile"], png, "0..1", "NHWC")
    assert np.array_equal(tile, nhwc)
    assert not np.array_equal(tile, image_for_input(plan["tile"], png, "0..1", "NCHW"))

    # the same layout for the [1, 3, 8, 8] image has 8 channels: the engine's sentence, and
    # the previous assignment stays
    panel.set_source("x", "image", str(png))
    assert not panel.generate_and_assign()
    assert "images have 1 or 3 channels, not 8" in panel.status.text()
    assert np.array_equal(window.trace.panel.arrays["tile"], nhwc)


def test_the_written_set_is_what_the_row_says(qtbot, window, open_model, tmp_path) -> None:  # noqa: ANN001
    from nneditor.inputs.picker import load_npy, load_npz

    panel = _panel(window, open_model, tmp_path)
    assert not hasattr(panel, "format")  # no npz/npy choice that would change nothing
    assert "inputs.npz" in panel.folder.toolTip() and "plan.json" in panel.folder.toolTip()
    out = tmp_path / "written set"
    panel.folder.setText(str(out))
    assert panel.generate_and_assign(), panel.status.text()
    names = {p.name for p in out.iterdir()}
    assert names == {"inputs.npz", "plan.json", *(f"{n}.npy" for n in INPUTS)}
    arrays = window.trace.panel.arrays
    archive = load_npz(out / "inputs.npz")
    for name in INPUTS:
        assert np.array_equal(archive[name], arrays[name])
        assert np.array_equal(load_npy(out / f"{name}.npy"), arrays[name])
    assert str(out) in panel.status.text() and panel.written == out


def test_an_onnx_token_input_stays_automatic(qtbot, window, open_model) -> None:  # noqa: ANN001
    open_model(EXAMPLE)
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    assert panel.token_input() is not None and panel.token_input().name == "input_ids"
    assert panel.sources["input_ids"][0] == "auto"
    assert _source(panel, "input_ids") == "auto"


def test_the_tokenizer_picker_accepts_the_vocab_pair(qtbot, window, monkeypatch) -> None:  # noqa: ANN001
    from PySide6.QtWidgets import QFileDialog

    seen: list[str] = []

    def pick(_parent, _title, _dir, flt):  # noqa: ANN001, ANN202
        seen.append(flt)
        return "/somewhere/vocab.json", flt

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(pick))
    panel = window.trace.inputs
    panel.tokenizer_choice.setCurrentIndex(panel.tokenizer_choice.findData("file"))
    panel._on_tokenizer()
    first = seen[0].split(";;")[0]
    assert all(n in first for n in ("tokenizer.json", "vocab.json", "merges.txt")), seen
    assert panel.tokenizer_file == "/somewhere/vocab.json"


@pytest.mark.realdata
def test_a_gguf_token_input_starts_on_text_tokens(
    qtbot, window, open_model, realdata, tmp_path
) -> None:  # noqa: ANN001
    from nneditor.tokenize import load_tokenizer

    path = realdata(SMOL)
    open_model(path)
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    spec = panel.token_input()
    assert spec is not None and spec.name == "tokens" and "'tokens'" in panel.text_box.title()
    assert panel.sources["tokens"][0] == "text" and _source(panel, "tokens") == "text"
    prompt = panel.prompt.currentText()
    assert prompt == "The capital of France is"  # the first sample prompt
    panel.folder.setText(str(tmp_path / "set"))
    assert panel.generate_and_assign(), panel.status.text()
    # as the panel encodes: special-token text stays plain text (the box's check is off) and
    # the tokenizer adds the BOS/EOS the file declares (SmolLM2 adds none)
    assert not panel.special.isChecked()
    want = load_tokenizer(path).encode(prompt, special=False)
    assert want == [504, 3575, 282, 4649, 314]  # llama.cpp's ids (tests/gui/test_decoder_ui.py)
    got = window.trace.panel.arrays["tokens"]
    assert got.dtype == np.int64 and got.tolist() == [want]


def test_the_image_options_show_only_for_models_with_image_inputs(
    qtbot, window, open_model, tmp_path
) -> None:  # noqa: ANN001
    """A token-only model hides Image layout / normalisation; a model with an image input
    shows them (and they still reach its inputs: the test above)."""
    open_model(EXAMPLE)
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    assert not panel.image_layout.isVisible() and not panel.image_norm.isVisible()
    open_model(_model(tmp_path / "sources.onnx"))
    window.trace.show_view("Trace")
    qtbot.waitUntil(lambda: panel.image_layout.isVisible(), timeout=3000)
    assert panel.image_norm.isVisible()


@pytest.mark.realdata
def test_a_vision_model_starts_on_its_stated_normalisation(
    qtbot, window, open_model, zoo_artifact
) -> None:  # noqa: ANN001
    """A ViT snapshot's preprocessor_config.json (mean and std 0.5) picks -1..1 for its image
    input, and says so; its input is the pixel values."""
    open_model(zoo_artifact("vision-vit"))
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    assert panel.image_norm.currentData() == "-1..1"
    assert "preprocessor_config.json" in panel.image_norm.toolTip()
    assert panel.plan is not None and panel.plan.names() == ["pixel_values"]


@pytest.mark.realdata
def test_a_text_pair_reaches_the_tokens_and_their_segments(
    qtbot, window, open_model, zoo_artifact, tmp_path
) -> None:  # noqa: ANN001
    """A cross-encoder (BERT with a two-row segment table) shows the Second text row; the
    prompt and the second text are framed as its tokenizer.json frames pairs, the ids go to
    the token input and the segments to token_types, in the saved .npz and in the written set
    (reference: the tokenizers library's own pair encoding)."""
    from tokenizers import Tokenizer

    snap = zoo_artifact("encoder-bert-cross-encoder")
    open_model(snap)
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    assert panel.text_form.isRowVisible(panel.pair)
    query, passage = "how many people live in berlin", "berlin has 3.5 million inhabitants"
    panel.prompt.setEditText(query)
    panel.pair.setText(passage)
    panel.folder.setText(str(tmp_path / "set"))
    assert panel.generate_text_tokens(), panel.text_status.text()
    reference = Tokenizer.from_file(str(snap / "tokenizer.json"))
    reference.no_padding()  # the file pads to 128; a trace reads the pair alone
    want = reference.encode(query, passage)
    assert 1 in want.type_ids and 0 in want.type_ids  # a real pair, both segments
    saved = np.load(tmp_path / "set" / f"{panel.token_input().name}.npz")
    assert saved[panel.token_input().name].tolist() == [want.ids]
    assert saved["token_types"].tolist() == [want.type_ids]
    assert panel.generate_and_assign(), panel.status.text()
    arrays = window.trace.panel.arrays
    assert arrays[panel.token_input().name].tolist() == [want.ids]
    assert arrays["token_types"].tolist() == [want.type_ids]


@pytest.mark.realdata
def test_the_second_text_shows_only_for_models_that_read_pairs(
    qtbot, window, open_model, zoo_artifact, realdata
) -> None:  # noqa: ANN001
    """An extractive QA model without segments reads pairs (question, context): shown; a
    language model: hidden."""
    open_model(zoo_artifact("encoder-distilbert-squad"))
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    assert panel.text_form.isRowVisible(panel.pair)
    open_model(realdata(SMOL))
    window.trace.show_view("Trace")
    assert not panel.text_form.isRowVisible(panel.pair)


def test_an_efficientnet_starts_on_its_processor_s_own_scaling(
    qtbot, window, open_model, tmp_path
) -> None:  # noqa: ANN001
    """An EfficientNet snapshot (EfficientNetImageProcessor: include_top's second division by
    the std) starts on "the model's processor", whose pixels are that processor's; another
    model's panel offers no such entry."""
    tf = pytest.importorskip("transformers")
    image_pil = pytest.importorskip("PIL.Image")
    from nneditor.inputs.image import load_image, model_sizing, stated_scaling

    snap = tmp_path / "eff"
    config = tf.EfficientNetConfig(width_coefficient=0.1, depth_coefficient=0.1, hidden_dim=128)
    tf.EfficientNetForImageClassification(config).save_pretrained(str(snap))
    processor = {
        "image_processor_type": "EfficientNetImageProcessor",
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.47853944, 0.4732864, 0.47434163],
        "include_top": True,
        "resample": 0,
        "size": {"height": 32, "width": 32},
    }
    (snap / "preprocessor_config.json").write_text(__import__("json").dumps(processor))
    open_model(snap)
    window.trace.show_view("Trace")
    panel = window.trace.inputs
    assert panel.image_norm.currentData() == "processor" and panel.scaling is not None
    png = tmp_path / "image.png"
    image_pil.fromarray(np.full((40, 36, 3), 200, np.uint8)).save(png)
    panel.set_source("pixel_values", "image", str(png))
    assert panel.generate_and_assign()
    want = load_image(png, 32, 32, normalization=stated_scaling(snap), sizing=model_sizing(snap))
    assert np.array_equal(panel.arrays["pixel_values"], want)
    open_model(_model(tmp_path / "sources.onnx"))
    window.trace.show_view("Trace")
    assert panel.image_norm.findData("processor") < 0
