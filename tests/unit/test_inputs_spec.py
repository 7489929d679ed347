"""Input presets, generators and sources (automatic, patterns, masks, series, CSV, images) and
Generate & assign all, on models generated with onnx.helper."""

from __future__ import annotations

import json
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.inputs import (
    InputSpecError,
    automatic,
    build_inputs,
    detect_inputs,
    generate_and_assign_all,
    mask,
    pattern,
    time_series,
)
from nneditor.inputs.csv_source import csv_for_input, read_csv
from nneditor.inputs.image import image_for_input, load_image
from nneditor.inputs.spec import parse_shape


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def make_model(path: Path, vocab: int = 50) -> Path:
    """Token ids (via Cast) into an embedding, a mask, an image, a sample rate, a bf16 input and
    an input without a shape."""
    emb = numpy_helper.from_array(np.zeros((vocab, 4), np.float32), "emb")
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32),
        helper.make_node("Gather", ["emb", "ids32"], ["h"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Relu", ["pixel_values"], ["p"]),
        helper.make_node("Identity", ["sr"], ["sr_out"]),
        helper.make_node("Identity", ["half"], ["half_out"]),
        helper.make_node("Identity", ["free"], ["free_out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            _vi("input_ids", TensorProto.INT64, [1, "seq"]),
            _vi("attention_mask", TensorProto.INT64, [1, "seq"]),
            _vi("pixel_values", TensorProto.FLOAT, ["batch", 3, 8, 6]),
            _vi("sr", TensorProto.INT64, []),
            _vi("half", TensorProto.BFLOAT16, [2]),
            helper.make_tensor_value_info("free", TensorProto.FLOAT, None),
        ],
        [_vi(n, TensorProto.FLOAT, None) for n in ("h", "m", "p")]
        + [_vi("sr_out", TensorProto.INT64, None)]
        + [_vi("half_out", TensorProto.BFLOAT16, None), _vi("free_out", TensorProto.FLOAT, None)],
        [emb],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture
def model(tmp_path):
    return make_model(tmp_path / "m.onnx")


def _plan(path, **kw):
    with nneditor.open(path) as doc:
        return detect_inputs(doc, **kw)


def test_every_input_becomes_a_preset_with_stated_assumptions(model, unchanged):
    check = unchanged(model)
    plan = _plan(model)
    assert plan.names() == ["input_ids", "attention_mask", "pixel_values", "sr", "half", "free"]
    ids = plan["input_ids"]
    assert (ids.role, ids.vocab_size, ids.shape) == ("tokens", 50, (1, 1))
    assert "dim 'seq' of input 'input_ids' (axis 1) set to 1" in plan.assumptions
    assert "dim 'batch' of input 'pixel_values' (axis 0) set to 1" in plan.assumptions
    assert plan["attention_mask"].role == "mask"
    assert plan["pixel_values"].shape == (1, 3, 8, 6)
    assert plan["sr"].role == "sample_rate"
    assert "declares no shape" in (plan["free"].problem or "")
    assert "bfloat16" in (plan["half"].problem or "") and not plan.ready
    check()


def test_dim_and_shape_overrides(model):
    plan = _plan(model, dims={"seq": 7}, shapes={"pixel_values": (2, 3, 8, 6), "free": (3,)})
    assert plan["input_ids"].shape == (1, 7) and plan["attention_mask"].shape == (1, 7)
    assert "dim 'seq' of input 'input_ids' set to 7 by request" in plan.assumptions
    assert plan["pixel_values"].shape == (2, 3, 8, 6)
    assert plan["free"].ready and plan["free"].shape == (3,)


def test_shape_override_contradicting_a_fixed_extent_is_refused(model):
    with pytest.raises(InputSpecError) as exc:
        _plan(model, shapes={"pixel_values": (1, 4, 8, 6)})
    assert str(exc.value) == (
        "shape [1, 4, 8, 6] for input 'pixel_values' has 4 at axis 1 but the model fixes it "
        "to 3 ([batch, 3, 8, 6])"
    )
    with pytest.raises(InputSpecError, match="has 2 axes but the model declares 4"):
        _plan(model, shapes={"pixel_values": (1, 3)})
    with pytest.raises(InputSpecError, match=r"--shape names \['nope'\]"):
        _plan(model, shapes={"nope": (1,)})


def test_automatic_values_follow_the_preset(model):
    plan = _plan(model, dims={"seq": 64}, shapes={"free": (5,)})
    provided = {"half": np.zeros(2, np.float32)}  # bf16 cannot be generated: refused below
    with pytest.raises(InputSpecError, match="dtype bfloat16"):
        build_inputs(plan, {}, seed=0)
    ids = automatic(plan["input_ids"])
    assert ids.dtype == np.int64 and ids.shape == (1, 64)
    assert ids.min() >= 0 and ids.max() < 50 and len(np.unique(ids)) > 10
    np.testing.assert_array_equal(ids, automatic(plan["input_ids"]))  # deterministic
    assert not np.array_equal(ids, automatic(plan["input_ids"], seed=1))
    np.testing.assert_array_equal(automatic(plan["attention_mask"]), np.ones((1, 64), np.int64))
    assert automatic(plan["sr"]).tolist() == 16000
    px = automatic(plan["pixel_values"])
    assert px.dtype == np.float32 and abs(float(px.mean())) < 0.5 and 0.5 < float(px.std()) < 1.5
    with pytest.raises(InputSpecError, match="half"):
        build_inputs(plan, {"half": provided["half"]})  # float32 given for a bfloat16 input


def test_token_ids_without_an_embedding_use_small_ids(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["tokens"], ["t"])],
        "g",
        [_vi("tokens", TensorProto.INT32, [1, 32])],
        [_vi("t", TensorProto.INT32, [1, 32])],
    )
    path = tmp_path / "t.onnx"
    onnx.save(helper.make_model(graph), path)
    plan = _plan(path)
    assert plan["tokens"].vocab_size is None
    assert "no vocabulary found, values in [0, 10)" in plan.assumptions[0]
    ids = automatic(plan["tokens"])
    assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < 10


def test_patterns_match_numpy():
    np.testing.assert_array_equal(pattern("zeros", (2, 3), "float32"), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(pattern("ones", (4,), "int8"), np.ones(4, np.int8))
    np.testing.assert_array_equal(
        pattern("ramp", (2, 5), "float32"), np.linspace(0, 1, 10, dtype=np.float32).reshape(2, 5)
    )
    np.testing.assert_array_equal(pattern("ramp", (300,), "uint8")[-1], 255)  # clipped, not wrapped
    ref = np.random.default_rng(3).normal(2.0, 0.5, (3, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        pattern("normal", (3, 4), "float32", seed=3, mean=2, std=0.5), ref
    )
    u = pattern("uniform", (1000,), "float64", seed=1, low=-2, high=3)
    assert u.min() >= -2 and u.max() < 3
    with pytest.raises(InputSpecError, match="unknown pattern 'spiral'; choose one of zeros, ones"):
        pattern("spiral", (1,), "float32")
    with pytest.raises(InputSpecError, match="needs low < high"):
        pattern("uniform", (1,), "float32", low=1, high=1)


def test_time_series_and_masks():
    t = np.arange(160) / 16000.0
    ref = (0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    got = time_series("sine", (2, 160), "float32")
    np.testing.assert_allclose(got, np.stack([ref, ref]), rtol=0, atol=1e-7)
    steps = time_series("steps", (8,), "float32", step_length=2, levels=(0, 1, 5))
    np.testing.assert_array_equal(steps, [0, 0, 1, 1, 5, 5, 0, 0])
    noise = time_series("noise", (3, 100), "float32", seed=4, amplitude=2.0)
    np.testing.assert_array_equal(
        noise, np.random.default_rng(4).normal(0, 2.0, (3, 100)).astype(np.float32)
    )
    with pytest.raises(InputSpecError, match="unknown time series 'saw'"):
        time_series("saw", (4,))
    np.testing.assert_array_equal(mask((2, 4), "int64", valid=3), [[1, 1, 1, 0], [1, 1, 1, 0]])
    with pytest.raises(InputSpecError, match="mask valid length 9 is outside 0..4"):
        mask((1, 4), valid=9)


def test_csv_source(model, tmp_path):
    plan = _plan(model, shapes={"free": (2, 3)})
    good = tmp_path / "v.csv"
    good.write_text("a,b,c\n1,2,3\n4,5,6.5\n")
    np.testing.assert_array_equal(
        csv_for_input(plan["free"], good), np.array([[1, 2, 3], [4, 5, 6.5]], np.float32)
    )
    np.testing.assert_array_equal(read_csv(good, column="b"), [2, 5])
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n4,x,6\n")
    with pytest.raises(InputSpecError) as exc:
        read_csv(bad)
    assert str(exc.value) == f"{bad} row 2, column 2 holds 'x', which is not a number"
    short = tmp_path / "short.csv"
    short.write_text("1,2\n3,4\n")
    with pytest.raises(InputSpecError) as exc:
        csv_for_input(plan["free"], short)
    assert "holds 4 values (2 rows x 2 columns) but input 'free' needs shape [2, 3] = 6" in str(
        exc.value
    )
    with pytest.raises(InputSpecError, match="has no column named 'z'"):
        read_csv(good, column="z")


def _png(path: Path, pixels: np.ndarray) -> Path:
    pil = pytest.importorskip("PIL.Image")
    pil.fromarray(pixels.astype(np.uint8), "RGB").save(path)
    return path


def test_image_layouts_and_normalisation(model, tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (8, 6, 3))  # height 8, width 6 (not square on purpose)
    img = _png(tmp_path / "i.png", pixels)
    scaled = pixels.astype(np.float32) / 255.0
    nchw = load_image(img, 8, 6, "NCHW", "0..1")
    np.testing.assert_allclose(nchw[0], scaled.transpose(2, 0, 1), atol=1e-6)
    nhwc = load_image(img, 8, 6, "NHWC", "-1..1")
    np.testing.assert_allclose(nhwc[0], scaled * 2 - 1, atol=1e-6)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    net = load_image(img, 8, 6, "NHWC", "imagenet")
    np.testing.assert_allclose(net[0], (scaled - mean) / std, atol=1e-5)
    assert load_image(img, 3, 5).shape == (1, 3, 3, 5)  # height then width
    plan = _plan(model)
    got = image_for_input(plan["pixel_values"], img, "0..1")
    assert got.shape == (1, 3, 8, 6) and got.dtype == np.float32


def test_a_byte_image_input_gets_the_pixel_bytes(tmp_path):
    """TensorFlow's detectors take uint8 NHWC images: an image file gives its bytes exactly
    (whatever normalisation was chosen), laid out as the input declares."""
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (8, 6, 3))
    img = _png(tmp_path / "i.png", pixels)
    path = _images(
        tmp_path / "tf.onnx", [_vi("image_tensor:0", TensorProto.UINT8, [1, "h", "w", 3])]
    )
    spec = _plan(path, dims={"h": 8, "w": 6})["image_tensor:0"]
    got = image_for_input(spec, img, "imagenet")
    assert got.dtype == np.uint8 and got.shape == (1, 8, 6, 3)
    np.testing.assert_array_equal(got[0], pixels)
    raw = load_image(img, 8, 6, "NCHW", "0..255")
    np.testing.assert_array_equal(raw[0], pixels.transpose(2, 0, 1).astype(np.float32))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_header(path: Path, height: int, width: int) -> Path:
    """A PNG whose header claims height x width pixels but holds no pixel data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"")) + _chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)
    return path


def test_image_refusals(model, tmp_path, monkeypatch):
    pytest.importorskip("PIL")
    bomb = _png_header(tmp_path / "bomb.png", 12000, 10000)
    with pytest.raises(InputSpecError) as exc:
        load_image(bomb, 4, 4)
    assert str(exc.value) == (
        f"{bomb} is 12000 x 10000 pixels (height x width), more than the 100,000,000 NNEditor "
        "decodes; downscale it first"
    )
    huge = _png_header(tmp_path / "huge.png", 20000, 20000)  # beyond Pillow's own bomb check
    with pytest.raises(InputSpecError) as exc:
        load_image(huge, 4, 4)
    assert str(exc.value) == (
        f"{huge} has more than the 100,000,000 pixels NNEditor decodes; downscale it first"
    )
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not an image")
    with pytest.raises(InputSpecError, match="could not be read as an image"):
        load_image(junk, 4, 4)
    plan = _plan(model)
    with pytest.raises(InputSpecError, match="'input_ids' .* is not a rank-4 image tensor"):
        image_for_input(plan["input_ids"], junk)
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(InputSpecError) as exc:
        load_image(junk, 4, 4)
    assert str(exc.value) == (
        "reading images needs Pillow, which is not installed; install it with "
        "`python -m pip install Pillow` or provide the tensor as .npy"
    )


def test_generate_and_assign_all_writes_a_validated_set(model, tmp_path, unchanged):
    check = unchanged(model)
    plan = _plan(model, dims={"seq": 5}, shapes={"free": (3,)})
    half = np.zeros(2, np.float32)
    with pytest.raises(InputSpecError):
        generate_and_assign_all(plan, tmp_path / "x", {"half": half})
    assert not (tmp_path / "x" / "inputs.npz").exists()  # all or nothing
    # drop the bf16 input from the plan to emulate a model whose inputs are all supported
    plan.inputs = [s for s in plan.inputs if s.name != "half"]
    out = tmp_path / "set"
    doc = generate_and_assign_all(plan, out, seed=2)
    with np.load(out / "inputs.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == sorted(plan.names())
        for entry in doc["inputs"]:
            arr = np.load(out / entry["file"], allow_pickle=False)
            np.testing.assert_array_equal(arr, npz[entry["name"]])
            assert arr.dtype.name == entry["dtype"] and list(arr.shape) == entry["shape"]
    written = json.loads((out / "plan.json").read_text())
    assert written["validated"] is True and written["seed"] == 2
    assert "dim 'seq' of input 'input_ids' set to 5 by request" in written["assumptions"]
    assert {e["source"] for e in written["inputs"]} == {"automatic"}
    assert not list(out.glob("*.part"))
    check()


def test_parse_shape():
    assert parse_shape("1x3x48x320") == (1, 3, 48, 320)
    assert parse_shape("[2, 4]") == (2, 4) and parse_shape("[]") == ()
    with pytest.raises(InputSpecError, match="is not a list of integers"):
        parse_shape("1xa")


def test_a_float_signal_beside_a_sample_rate_is_a_waveform_frame(tmp_path):
    """Silero VAD takes [batch, samples] audio and a sample rate; one sample (the generic
    default) fails inside the model, a 512-sample frame runs."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["input"], ["m"], keepdims=0),
            helper.make_node("Identity", ["sr"], ["sr_out"]),
            helper.make_node("Identity", ["other"], ["other_out"]),
        ],
        "g",
        [
            _vi("input", TensorProto.FLOAT, ["batch", "samples"]),
            _vi("sr", TensorProto.INT64, []),
            _vi("other", TensorProto.FLOAT, [None, None, 4]),
        ],
        [
            _vi("m", TensorProto.FLOAT, None),
            _vi("sr_out", TensorProto.INT64, []),
            _vi("other_out", TensorProto.FLOAT, None),
        ],
    )
    path = tmp_path / "vad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with nneditor.open(path) as doc:
        plan = detect_inputs(doc)
        assert plan["input"].shape == (1, 512) and plan["input"].role == "waveform"
        assert plan["other"].shape == (1, 1, 4) and plan["other"].role == "generic"
        assert "512 samples (32 ms at 16000 Hz)" in plan["input"].assumptions[-1]
        assert not any("'input' at axis 1" in a for a in plan["input"].assumptions)
        assert detect_inputs(doc, dims={"samples": 100})["input"].shape == (1, 100)
        assert detect_inputs(doc, shapes={"input": (2, 7)})["input"].shape == (2, 7)


def _images(path, inputs):
    graph = helper.make_graph(
        [helper.make_node("Identity", [inputs[0].name], ["y"])],
        "g",
        inputs,
        [_vi("y", TensorProto.FLOAT, None)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_images_open_height_and_width_get_an_ordinary_pictures_size(tmp_path):
    """PaddleOCR-style [?, 3, ?, ?] -> 224 x 224; a text line [?, 1, 64, ?] -> 256 wide (four
    times its height, a multiple of 32); NHWC too; a symbol another input shares, one the user
    sets and a non-float input keep their rule; every choice is stated with its option."""
    path = _images(
        tmp_path / "i.onnx",
        [
            _vi("det", TensorProto.FLOAT, ["n", 3, "DynamicDimension.1", "DynamicDimension.2"]),
            _vi("line", TensorProto.FLOAT, ["n", 1, 48, "w"]),
            _vi("strip", TensorProto.FLOAT, [1, 1, 64, None]),
            _vi("nhwc", TensorProto.FLOAT, [1, "h2", "w2", 3]),
            _vi("big", TensorProto.FLOAT, [1, 3, 320, "w3"]),
            _vi("a", TensorProto.FLOAT, [1, 3, "side", "side2"]),
            _vi("b", TensorProto.FLOAT, [1, "side"]),
            _vi("ints", TensorProto.INT64, [1, 3, "h4", "w4"]),
        ],
    )
    plan = _plan(path)
    assert plan["det"].shape == (1, 3, 224, 224)
    assert plan["line"].shape == (1, 1, 48, 192)
    assert plan["strip"].shape == (1, 1, 64, 256)
    assert plan["nhwc"].shape == (1, 224, 224, 3)
    assert plan["big"].shape == (1, 3, 320, 320)
    assert plan["a"].shape == (1, 3, 1, 1)  # 'side' is shared with input b
    assert plan["b"].shape == (1, 1)
    assert plan["ints"].shape == (1, 3, 1, 1)
    assert (
        "dim 'DynamicDimension.1' of input 'det' (axis 2) set to 224: the height of an ordinary "
        "image (set it with --dim DynamicDimension.1=N)" in plan.assumptions
    )
    assert (
        "the unknown extent of input 'strip' (axis 3) set to 256: the width of an ordinary image "
        "(set it with --shape strip=...)" in plan.assumptions
    )
    asked = _plan(path, dims={"w": 100, "DynamicDimension.2": 64})
    assert asked["line"].shape == (1, 1, 48, 100)
    assert asked["det"].shape == (1, 3, 64, 64)


def test_unbatched_and_byte_images_get_an_ordinary_pictures_size_too(tmp_path):
    """torchvision's detectors (the ONNX zoo's Faster/Mask R-CNN) take one [3, H, W] image;
    TensorFlow's detectors (tf2onnx) take uint8 NHWC [?, ?, ?, 3]. A rank-3 input with one
    channel first is as often [batch, seq, features] and keeps the general rule."""
    path = _images(
        tmp_path / "i.onnx",
        [
            _vi("image", TensorProto.FLOAT, [3, "height", "width"]),
            _vi("image_tensor:0", TensorProto.UINT8, ["unk__1", "unk__2", "unk__3", 3]),
            _vi("frames", TensorProto.FLOAT, [1, "t", "d"]),
            _vi("signed", TensorProto.INT8, [1, 3, "h", "w"]),
        ],
    )
    plan = _plan(path)
    assert plan["image"].shape == (3, 224, 224)
    assert plan["image_tensor:0"].shape == (1, 224, 224, 3)
    assert plan["frames"].shape == (1, 1, 1)
    assert plan["signed"].shape == (1, 3, 1, 1)


def test_a_paddleocr_recognizer_gets_paddleocrs_text_line_size(tmp_path):
    """Its CTC alphabet in the `character` metadata marks a PaddleOCR recognizer: an open
    height and width become PaddleOCR's 48 x 320 (PP-OCRv4's declares both open, yet needs 48);
    a failed trace's hint names the sizes chosen and the option that changes them."""
    path = _images(tmp_path / "rec.onnx", [_vi("x", TensorProto.FLOAT, ["n", 3, None, "w"])])
    model = onnx.load(path)
    helper.set_model_props(model, {"character": "a\nb\nc"})
    onnx.save(model, path)
    plan = _plan(path)
    assert plan["x"].shape == (1, 3, 48, 320)
    assert (
        "dim 'w' of input 'x' (axis 3) set to 320: the width of a PaddleOCR text line (48 x 320) "
        "(set it with --dim w=N)" in plan.assumptions
    )
    hint = plan.open_extents_hint({"x": np.zeros((1, 3, 48, 320), np.float32)})
    assert hint == (
        "the inputs chose the extents the model leaves open ('x' axis 2 (?) = 48, 'x' axis 3 "
        "('w') = 320); the model may need other sizes (a text recognizer a fixed height, for "
        "example): generate them again with `nneditor inputs MODEL --auto --shape x=1x3x48x320 "
        "--dim w=N`, changing the sizes"
    )


def test_an_input_named_as_a_waveform_gets_one_second(tmp_path):
    """wav2vec2's input_values [batch, samples] with an open length: 16000 samples (1 s at
    16 kHz), not 1; a name that says nothing, or a length the user sets, keeps its rule."""
    path = _images(
        tmp_path / "a.onnx",
        [
            _vi("input_values", TensorProto.FLOAT, ["batch", "samples"]),
            _vi("features", TensorProto.FLOAT, ["batch", "frames"]),
        ],
    )
    plan = _plan(path)
    assert plan["input_values"].shape == (1, 16000) and plan["input_values"].role == "waveform"
    assert (
        "input 'input_values' is a waveform (its name says so): 16000 samples (1000 ms at "
        "16000 Hz)" in plan.assumptions
    )
    assert plan["features"].shape == (1, 1)
    assert _plan(path, dims={"samples": 400})["input_values"].shape == (1, 400)
