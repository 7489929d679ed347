"""CTC speech recognizers of Hugging Face snapshots (wav2vec2, HuBERT): the graph drawn for
them reads a waveform and ends in per-frame character logits; the NumPy decoder's feature
encoder, projection, every encoder layer and the logits equal transformers' (eval mode) for
both layer-norm layouts at two lengths, and each part is shown to matter; the WAV reader gives
the samples written; the normalisation equals Wav2Vec2FeatureExtractor's; greedy CTC decoding
equals Wav2Vec2CTCTokenizer's; WavLM is refused by name; and the CLI path a user takes on the
zoo's speech-wav2vec2 (inspect, inputs --audio, trace, predict)."""

from __future__ import annotations

import dataclasses
import json
import struct
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nneditor_cli import nneditor_cli
from vision_refs import rel

import nneditor
from nneditor.decoder import conv_ops, decoder_config, run_forward, speech
from nneditor.inputs import audio
from nneditor.inputs.spec import InputSpecError
from nneditor.tokenize.ctc import CtcVocab

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

SMALL = {
    "vocab_size": 32,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "conv_dim": (16, 12, 16),
    "conv_stride": (5, 2, 2),
    "conv_kernel": (10, 3, 3),
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 4,
}
#: model class, config: post-norm with GroupNorm (wav2vec2-base's layout), stable pre-norm with
#: LayerNorm (wav2vec2-large-lv60's, HuBERT-large's), convolution biases, an odd positional
#: kernel, HuBERT without the projection's LayerNorm, a base model
LAYOUTS: dict[str, tuple[str, dict[str, Any]]] = {
    "wav2vec2 group post-norm": ("Wav2Vec2ForCTC", {}),
    "wav2vec2 layer stable": (
        "Wav2Vec2ForCTC",
        {"feat_extract_norm": "layer", "do_stable_layer_norm": True, "conv_bias": True},
    ),
    "hubert group post-norm": ("HubertForCTC", {"conv_bias": True}),
    "hubert layer stable, odd kernel": (
        "HubertForCTC",
        {"feat_extract_norm": "layer", "do_stable_layer_norm": True, "num_conv_pos_embeddings": 15},
    ),
    "hubert without projection norm": ("HubertForCTC", {"feat_proj_layer_norm": False}),
    "wav2vec2 base model": ("Wav2Vec2Model", {}),
}
VOCAB = ["<pad>", "<s>", "</s>", "<unk>", "|", *"ETAONIHSRDLUMWCFGYPBVK'XJQZ"]


def moved(model: Any) -> Any:  # noqa: ANN401
    """``model`` with norms, biases and the weight norm's magnitudes (weight_g) moved off
    their initialisation (ones, zeros, the kernel's norm), as a trained model's are."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias") or name.endswith("original0"):
                p.add_(torch.randn_like(p) * 0.2)
    return model


def save(path: Path, layout: str) -> Any:  # noqa: ANN401
    cls, extra = LAYOUTS[layout]
    config = (tf.HubertConfig if cls.startswith("Hubert") else tf.Wav2Vec2Config)(
        **{**SMALL, **extra}
    )
    torch.manual_seed(0)
    model = moved(getattr(tf, cls)(config).eval())
    model.save_pretrained(str(path))
    return model


def waveform(samples: int) -> np.ndarray:
    return np.random.default_rng(samples).standard_normal((1, samples)).astype(np.float32)


def traced(path: Path, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    got: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        out = run_forward(doc, decoder_config(doc), x, lambda n, v: got.__setitem__(n, v))
    return out, got


def reference(model: Any, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], Any]:  # noqa: ANN401
    """transformers' output, each feature-encoder layer's output (hooks) and the output."""
    base = getattr(model, "wav2vec2", None) or getattr(model, "hubert", None) or model
    convs: list[np.ndarray] = []
    hooks = [
        layer.register_forward_hook(lambda _m, _i, o: convs.append(o.numpy()))
        for layer in base.feature_extractor.conv_layers
    ]
    with torch.no_grad():
        out = model(torch.from_numpy(x), output_hidden_states=True)
    for h in hooks:
        h.remove()
    final = out.logits if hasattr(out, "logits") else out.last_hidden_state
    return final.numpy(), convs, out


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_graph_reads_a_waveform_and_names_every_value_traced(tmp_path, layout: str) -> None:  # noqa: ANN001
    """Input [1, samples], per-frame logits; the graph's values are the ones the decoder
    publishes, each of the rank transformers' tensor has."""
    save(tmp_path, layout)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None and "synthesized from config.json and tensor names" in g.name
        assert [(v.name, v.shape) for v in g.inputs] == [("input_values", (1, "samples"))]
        head = layout != "wav2vec2 base model"  # (its vocabulary and hidden size are 32)
        assert g.outputs[0].shape == (1, "frames", 32)
        assert g.outputs[0].name == ("result_output" if head else "blk.1.output")
        drawn = {o for n in g.nodes for o in n.outputs}
        ops = [n.op_type for n in g.nodes]
    _, got = traced(tmp_path, waveform(3000))
    assert drawn == set(got)
    assert ops.count("Attention") == 2 and sum(op.startswith("Conv1d") for op in ops) == 3
    for name, value in got.items():  # [1, C, T] for the convolutions, [1, frames, width] after
        assert value.ndim == 3 and value.shape[0] == 1, name


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("samples", [4000, 5321])
def test_stages_and_logits_equal_transformers(tmp_path, layout: str, samples: int) -> None:  # noqa: ANN001
    model = save(tmp_path, layout)
    x = waveform(samples)
    want, convs, out = reference(model, x)
    got_out, got = traced(tmp_path, x)
    assert got_out.shape == want.shape and rel(got_out, want) < 1e-5
    for i, conv in enumerate(convs):
        assert got[f"conv.{i}"].shape == conv.shape and rel(got[f"conv.{i}"], conv) < 1e-5
    if "feat_norm" in got:  # the projection's LayerNorm: extract_features
        base = out if hasattr(out, "extract_features") else None
        if base is not None:
            assert rel(got["feat_norm"], out.extract_features.numpy()) < 1e-5
    stable = "stable" in layout
    hidden = [h.numpy() for h in out.hidden_states]
    assert rel(got["inp_embd_pos" if stable else "inp_norm"], hidden[0]) < 1e-5
    for i in range(2):
        assert rel(got[f"blk.{i}.output"], hidden[i + 1]) < 1e-5
    if stable:  # the encoder's final LayerNorm: the last hidden state
        base = model if layout.endswith("model") else getattr(model, model.base_model_prefix)
        with torch.no_grad():
            last = base(torch.from_numpy(x)).last_hidden_state.numpy()
        assert rel(got["enc_output"], last) < 1e-5


MUTATIONS = [
    "group norm as a layer norm",
    "layer norms as group norms",
    "first frame dropped for the last",
    "no weight norm",
    "stable layers run post-norm",
]


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_part_matters(tmp_path, monkeypatch, mutation: str) -> None:  # noqa: ANN001
    """The comparison fails when the decoder normalises the feature encoder as the other
    layout does (over the channels per step instead of over time per channel, or the
    reverse), drops the even positional kernel's first frame instead of its last, reads
    weight_v without the weight norm, or runs a stable layout's layers post-norm."""
    stable = mutation in ("layer norms as group norms", "stable layers run post-norm")
    model = save(tmp_path, "wav2vec2 layer stable" if stable else "wav2vec2 group post-norm")
    x = waveform(4000)
    want, _, _ = reference(model, x)
    if mutation == "group norm as a layer norm":
        monkeypatch.setattr(
            conv_ops,
            "group_norm_per_channel",
            lambda h, wt, b, eps: speech.ops.layer_norm(h.T, wt, b, eps).T,
        )
    elif mutation == "layer norms as group norms":

        def grouped(w: Any, sp: Any, i: int, h: np.ndarray) -> np.ndarray:  # noqa: ANN401
            wt, b = w.get(f"conv.{i}.norm.weight"), w.get(f"conv.{i}.norm.bias")
            return conv_ops.group_norm_per_channel(h, wt, b, speech.CONV_NORM_EPS)

        monkeypatch.setattr(speech, "conv_norm", grouped)
    elif mutation == "first frame dropped for the last":

        def shifted(w: Any, sp: Any, h: np.ndarray) -> np.ndarray:  # noqa: ANN401
            weight = speech.weight_normed(w.get("pos_conv.weight_g"), w.get("pos_conv.weight_v"))
            pad, groups = sp.pos_kernel // 2, sp.pos_groups
            y = conv_ops.conv1d(h.T, weight, w.get("pos_conv.bias"), 1, pad, groups)
            return np.ascontiguousarray(y[:, 1:].T)

        monkeypatch.setattr(speech, "positional_conv", shifted)
    elif mutation == "no weight norm":
        monkeypatch.setattr(speech, "weight_normed", lambda g, v: v)
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        if mutation == "stable layers run post-norm":
            post = {".attn_norm.": ".attn_output_norm.", ".ffn_norm.": ".layer_output_norm."}
            names = {}
            for key, name in cfg.names.items():
                for old, new in post.items():
                    key = key.replace(old, new)
                names[key] = name
            cfg = dataclasses.replace(
                cfg, speech=dataclasses.replace(cfg.speech, stable=False), names=names
            )
        got = run_forward(doc, cfg, x, lambda n, v: None)
    assert got.shape == want.shape and rel(got, want) > 1e-3, mutation


# ------------------------------------------------------------------------------ WAV and norm


def _wav(path: Path, samples: np.ndarray, width: int, rate: int = 16000) -> Path:
    """A PCM WAV of integer ``samples`` [frames, channels] written by the standard library."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        if width == 3:
            raw = samples.astype("<i4").tobytes()
            data = b"".join(raw[i : i + 3] for i in range(0, len(raw), 4))
        else:
            data = samples.astype({1: "u1", 2: "<i2", 4: "<i4"}[width]).tobytes()
        w.writeframes(data)
    return path


def _float_wav(path: Path, samples: np.ndarray, rate: int = 16000) -> Path:
    """A 32-bit IEEE-float WAV (format 3), its header packed by hand."""
    data = samples.astype("<f4").tobytes()
    channels = samples.shape[1]
    fmt = struct.pack("<HHIIHH", 3, channels, rate, rate * 4 * channels, 4 * channels, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


@pytest.mark.parametrize(
    ("width", "ints", "want"),
    [
        (1, [0, 64, 128, 192, 255], [-1.0, -0.5, 0.0, 0.5, 127 / 128]),
        (2, [-32768, -16384, 0, 1, 32767], [-1.0, -0.5, 0.0, 1 / 32768, 32767 / 32768]),
        (3, [-(1 << 23), -(1 << 22), 0, 1, (1 << 23) - 1], [-1.0, -0.5, 0.0, 2**-23, 1 - 2**-23]),
        (4, [-(1 << 31), 1 << 30, 0, -1, (1 << 31) - 1], [-1.0, 0.5, 0.0, -(2**-31), 1.0]),
    ],
)
def test_wav_reader_gives_the_samples_written(tmp_path, width: int, ints, want) -> None:  # noqa: ANN001
    """Each integer width as audio libraries read it (value / 2^(bits - 1); 8-bit unsigned,
    centred on 128), and the raw samples as scipy reads them."""
    path = _wav(tmp_path / "a.wav", np.array(ints)[:, None], width)
    got, rate = audio.read_wav(path)
    assert rate == 16000 and got.dtype == np.float32 and got.shape == (5, 1)
    assert np.array_equal(got[:, 0], np.array(want, np.float32))
    wavfile = pytest.importorskip("scipy.io.wavfile")
    _, raw = wavfile.read(path)
    if width != 1:  # (scipy widens 24-bit samples to int32, shifted left by 8)
        full = 2.0 ** (31 if width in (3, 4) else 15)
        assert np.allclose(got[:, 0], raw.astype(np.float64) / full, rtol=0, atol=1e-7)


def test_float_and_stereo_wav(tmp_path) -> None:  # noqa: ANN001
    """32-bit float samples as stored; stereo averaged into one channel (the mean users take)."""
    x = np.random.default_rng(0).uniform(-1, 1, (50, 2)).astype(np.float32)
    got, _ = audio.read_wav(_float_wav(tmp_path / "f.wav", x))
    assert np.array_equal(got, x)
    assert np.array_equal(audio.waveform(got, False), x.mean(axis=1))
    ints = np.array([[1000, -3000], [32767, 32767], [-32768, 0]])
    stereo, _ = audio.read_wav(_wav(tmp_path / "s.wav", ints, 2))
    assert np.array_equal(audio.waveform(stereo, False), (ints / 32768).mean(axis=1).astype("f4"))


def test_another_rate_is_refused_with_the_conversion(tmp_path) -> None:  # noqa: ANN001
    path = _wav(tmp_path / "a8k.wav", np.zeros((800, 1), int), 2, rate=8000)
    plan_spec = _spec()
    with pytest.raises(InputSpecError) as err:
        audio.audio_for_input(plan_spec, path, audio.Processing(16000, True))
    said = str(err.value)
    assert "8000 Hz" in said and "16000 Hz" in said and "ffmpeg" in said and "sox" in said


def _spec() -> Any:  # noqa: ANN401
    from nneditor.inputs.spec import InputSpec

    return InputSpec("input_values", "float32", (1, "samples"), (1, 16000), "waveform", None, ())


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_normalisation_equals_the_feature_extractor(tmp_path, scale: float) -> None:  # noqa: ANN001
    """do_normalize: zero mean, unit variance (and the 1e-7 floor, felt by quiet audio) as
    Wav2Vec2FeatureExtractor computes it; without it the samples pass as read."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(7001) * scale + 0.01).astype(np.float32)
    for normalize in (True, False):
        fe = tf.Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=normalize)
        want = fe(x, sampling_rate=16000, return_tensors="np")["input_values"][0]
        got = audio.waveform(x[:, None], normalize)
        assert got.dtype == want.dtype and np.abs(got - want).max() <= 1e-7


# ----------------------------------------------------------------------------- CTC decoding


@pytest.mark.parametrize("lower", [False, True])
def test_greedy_ctc_equals_the_tokenizers_decode(tmp_path, lower: bool) -> None:  # noqa: ANN001
    """Repeats merged, blanks (<pad>) splitting a double letter, delimiters as spaces (doubled,
    leading and trailing ones), special tokens kept, an id outside the vocabulary."""
    (tmp_path / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(VOCAB)}))
    tok = tf.Wav2Vec2CTCTokenizer(str(tmp_path / "vocab.json"), do_lower_case=lower)
    tok.save_pretrained(str(tmp_path))
    from nneditor.tokenize.ctc import load_ctc_vocab

    vocab = load_ctc_vocab(tmp_path)
    assert isinstance(vocab, CtcVocab) and vocab.blank_id == 0
    cases = [
        [11, 11, 5, 0, 15, 15, 0, 15, 8, 4, 4, 18, 8, 13, 15, 14, 0, 0],
        [4, 4, 6, 6, 6, 11, 5, 4, 0, 4, 7, 9, 9, 4],
        [0, 0, 0],
        [3, 1, 2, 27, 12, 4, 31, 31, 0, 31],
        [5, 40, 5],
    ]
    for ids in cases:
        assert vocab.decode(ids) == tok.decode(ids), ids
    assert vocab.decode(cases[0]) == ("hello world" if lower else "HELLO WORLD")


# ---------------------------------------------------------------------------------- refusals


def test_wavlm_is_refused_by_name(tmp_path) -> None:  # noqa: ANN001
    config = tf.WavLMConfig(**{**SMALL, "num_buckets": 8, "max_bucket_distance": 20})
    torch.manual_seed(0)
    tf.WavLMForCTC(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is None
        why = doc.graph_unavailable_reason
        assert "WavLM (wavlm)" in why and "gated relative-position bias" in why
        assert "wav2vec2 and HuBERT" in why and len(doc.tensors) > 5


def test_conv1d_equals_torch() -> None:
    """Plain, strided and grouped 1-D convolutions with padding, as torch computes them."""
    rng = np.random.default_rng(2)
    for channels, out, k, stride, pad, groups in [(1, 8, 10, 5, 0, 1), (8, 8, 3, 2, 0, 1),
                                                  (8, 8, 16, 1, 8, 4), (6, 6, 5, 1, 2, 6)]:  # fmt: skip
        x = rng.standard_normal((channels, 101)).astype(np.float32)
        w = rng.standard_normal((out, channels // groups, k)).astype(np.float32)
        b = rng.standard_normal(out).astype(np.float32)
        want = torch.nn.functional.conv1d(
            torch.from_numpy(x)[None], torch.from_numpy(w), torch.from_numpy(b), stride, pad, 1,
            groups,
        )[0].numpy()  # fmt: skip
        got = conv_ops.conv1d(x, w, b, stride, pad, groups)
        assert got.shape == want.shape and rel(got, want) < 1e-6


# ------------------------------------------------------------------------------------ the CLI


@pytest.mark.realdata
def test_a_recording_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """`nneditor inspect` shows a speech recognizer reading input_values; `nneditor inputs
    --audio` reads a 16-bit WAV (a tone and noise, made here) as the snapshot's feature
    extractor does; `nneditor trace` captures every stage; `nneditor predict` prints the
    transcription transformers' processor decodes from its own logits; another rate is
    refused."""
    snap = zoo_artifact("speech-wav2vec2")
    r = nneditor_cli("inspect", str(snap))
    assert r.returncode == 0, r.stderr
    assert "Inputs: input_values float32 [1, samples]" in r.stdout
    assert "Outputs: result_output float32 [1, frames, 32]" in r.stdout
    assert "yes trace — NumPy decoder on CPU: wav2vec2 speech encoder" in r.stdout
    t = np.arange(19000) / 16000
    tone = 0.4 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t)
    tone += 0.05 * np.random.default_rng(0).standard_normal(t.size)
    ints = np.round(tone * 32767).astype(np.int64)[:, None]
    wav = _wav(tmp_path / "speech.wav", ints, 2)
    r = nneditor_cli(
        "inputs", str(snap), "--audio", f"input_values={wav}", "--out", str(tmp_path / "in")
    )
    assert r.returncode == 0, r.stderr
    values = np.load(tmp_path / "in" / "inputs.npz")["input_values"]
    processor = tf.Wav2Vec2Processor.from_pretrained(str(snap))
    want = processor(ints[:, 0] / 32768, sampling_rate=16000, return_tensors="np").input_values
    assert values.shape == (1, 19000) and np.abs(values - want).max() <= 1e-7
    trace = tmp_path / "trace"
    r = nneditor_cli(
        "trace", str(snap), "--inputs", str(tmp_path / "in"), "--out", str(trace), "--yes"
    )
    assert r.returncode == 0, r.stderr
    manifest = json.loads((trace / "manifest.json").read_text())
    captured = {v["name"]: v for v in manifest["values"]}
    assert all(v["status"] == "captured" for v in captured.values())
    assert {"conv.3", "feat_proj", "pos_conv", "blk.1.output", "result_output"} <= set(captured)
    model = tf.Wav2Vec2ForCTC.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(values)).logits
    from nneditor.tracing.capture_file import read_value

    assert rel(read_value(trace, captured["result_output"]), logits.numpy()) < 1e-5
    r = nneditor_cli("predict", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    ids = logits.argmax(-1)
    assert got["ids"] == ids[0].tolist() and got["frames"] == 474
    assert got["text"] == processor.batch_decode(ids)[0] and got["text"]
    r = nneditor_cli("predict", str(trace))
    assert r.returncode == 0 and json.dumps(got["text"]) in r.stdout
    slow = _wav(tmp_path / "slow.wav", ints[::2], 2, rate=8000)
    r = nneditor_cli(
        "inputs", str(snap), "--audio", f"input_values={slow}", "--out", str(tmp_path / "x")
    )
    assert r.returncode == 2 and "resample it first" in r.stderr, r.stderr
