"""Embedding encoders the NumPy decoder runs (XLM-RoBERTa, nomic-embed-text, EmbeddingGemma):
every block's hidden state and the last one against transformers' fp32 forward, for the zoo's
snapshot and llama.cpp's own conversion of it (tools/zoo_encoders.py). The real MiniLM BERT is
checked in test_decoder_numerics.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.decoder.config import DecoderConfig
from nneditor.tokenize import load_tokenizer

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

FORMS = ["snapshot", "gguf"]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _paths(zoo_artifact: Any, name: str, form: str) -> tuple[Path, Path]:  # noqa: ANN401
    snap = zoo_artifact(name)
    return snap, snap if form == "snapshot" else zoo_artifact(f"{name}.gguf")


def _compare(model: Any, path: Path, ids: np.ndarray, blocks: int, **variants: dict) -> Any:  # noqa: ANN401
    """Ours against ``model`` on ``ids``: every block's output and the last hidden state
    within 1e-5; returns (config, our values, transformers' last hidden state, the last hidden
    state of each variant, a dict of DecoderConfig fields replaced)."""
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    want = out.last_hidden_state.numpy()
    values: dict[str, np.ndarray] = {}
    others: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg: DecoderConfig = decoder_config(doc)
        result = run_forward(doc, cfg, ids, values.__setitem__)
        for name, change in variants.items():
            other = dataclasses.replace(cfg, **change)
            others[name] = run_forward(doc, other, ids, lambda n, v: None)
    assert not cfg.head and cfg.causal == (cfg.arch == "clip-text")  # (CLIP's text is causal)
    for i in range(blocks):
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(result, want) < 1e-5
    assert "result_output" not in values  # no head: the trace ends at the hidden states
    return cfg, values, out, {k: _rel(v, want) for k, v in others.items()}


@pytest.mark.realdata
@pytest.mark.parametrize("form", FORMS)
def test_an_xlm_roberta_encoder_equals_transformers(form: str, zoo_artifact) -> None:  # noqa: ANN001
    """XLM-RoBERTa (bge-m3, multilingual-e5) runs BERT's blocks with positions counted from
    the padding id on: the snapshot computes them so (also around a padding token inside the
    prompt), llama.cpp's conversion drops the table's first rows instead (prompts without
    padding). NNEditor's tokenizer gives the snapshot's ids."""
    snap, path = _paths(zoo_artifact, "encoder-xlm-roberta", form)
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    text = "the model écrit 层 和 weights"
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert load_tokenizer(snap).encode(text) == want_ids
    prompts = [want_ids]
    if form == "snapshot":  # a padding token (id 1) inside: its position is the padding id's
        prompts.append([*want_ids[:3], 1, *want_ids[3:]])
    for prompt in prompts:
        _compare(model, path, np.array([prompt], dtype=np.int64), 2)


@pytest.mark.realdata
@pytest.mark.parametrize("form", FORMS)
def test_a_nomic_bert_encoder_equals_transformers(form: str, zoo_artifact) -> None:  # noqa: ANN001
    """nomic-embed-text v1.5 in Nomic's own layout (Wqkv, fc11/fc12/fc2, norm1/norm2), which
    transformers' NomicBertModel maps onto its own, and llama.cpp's nomic-bert conversion:
    post-norm blocks with RoPE (base 1000) and SwiGLU, no position table. The GGUF's WordPiece
    ids equal the snapshot tokenizer's. A RoPE of another base moves the values by about 5e-5
    (random weights attend almost uniformly), some 200 times the difference from transformers."""
    snap, path = _paths(zoo_artifact, "encoder-nomic-bert", form)
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    text = "search_query: what is a tensor?"
    ids = np.array([load_tokenizer(path).encode(text)], dtype=np.int64)
    assert ids[0].tolist() == tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    cfg, values, out, moved = _compare(model, path, ids, 2, rope={"rope_theta": 10000.0})
    assert not cfg.head and cfg.rope_theta == 1000.0
    assert _rel(values["inp_norm"], out.hidden_states[0].numpy()) < 1e-5
    assert moved["rope"] > 2e-5


@pytest.mark.realdata
@pytest.mark.parametrize("form", FORMS)
def test_an_embeddinggemma_encoder_equals_transformers(form: str, zoo_artifact) -> None:  # noqa: ANN001
    """EmbeddingGemma (Gemma3TextModel with use_bidirectional_attention) and llama.cpp's
    gemma-embedding conversion: Gemma 3's blocks attending both ways, each local layer's window
    half its width each way (6: three positions either side of 12), the final norm's output
    as the embedding, no head. Attending causally, or without the windows, gives other values."""
    snap, path = _paths(zoo_artifact, "encoder-embeddinggemma", form)
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([[2, 5, 17, 300, 42, 42, 8, 61, 99, 3, 123, 77]], dtype=np.int64)
    variants = {"causal": {"causal": True}, "whole": {"sliding_window": 0}}
    cfg, _values, _out, moved = _compare(model, path, ids, 6, **variants)
    assert not cfg.head and cfg.sliding_window == 6
    assert moved["causal"] > 1e-2 and moved["whole"] > 1e-3


@pytest.mark.realdata
@pytest.mark.parametrize("form", FORMS)
def test_a_modernbert_encoder_equals_transformers(form: str, zoo_artifact) -> None:  # noqa: ANN001
    """ModernBERT (gte-, nomic- and Granite embedding R2 build on it): the first block without
    a norm, windowed layers between every third global one, each kind with its RoPE base, the
    [input; gate] GeGLU with the exact GELU; llama.cpp's file states the window pattern as a
    period and the LayerNorm epsilon under the RMS key."""
    snap, path = _paths(zoo_artifact, "encoder-modernbert", form)
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([[49153, 5, 17, 300, 42, 42, 8, 61, 999, 3, 12345, 49154]], dtype=np.int64)
    cfg, values, _out, changed = _compare(
        model,
        path,
        ids,
        5,  # (transformers' last hidden state is after the final norm)
        global_everywhere={"local_layers": (False,) * 6},
        swapped_bases={"rope_theta": 10000.0, "rope_theta_local": 160000.0},
        tanh_gelu={"activation": "gelu_tanh"},
    )
    assert cfg.local_layers == (False, True, True, False, True, True)
    assert "blk.0.attn_norm" not in values and "blk.1.attn_norm" in values
    assert changed["global_everywhere"] > 0.1 and changed["swapped_bases"] > 0.01
    assert changed["tanh_gelu"] > 1e-5  # the exact GELU, not llama.cpp's approximation


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "form"), [("encoder-t5", f) for f in FORMS] + [("encoder-umt5", "snapshot")]
)
def test_a_t5_encoder_equals_transformers(name: str, form: str, zoo_artifact) -> None:  # noqa: ANN001
    """T5 v1.1's encoder (FLUX's and SD3's text encoder): RMS norms, attention without the
    1/sqrt(d) scale whose scores add the first layer's relative-position table (logarithmic
    buckets past 8 positions each way: the 80-token prompt reaches them), gated GELU-tanh; the
    snapshot and llama.cpp's t5encoder conversion. NNEditor's tokenizer gives the snapshot's
    ids (its SentencePiece unigram through llama.cpp's rules, EOS at the end). UMT5 (Wan's
    text encoder) has a table in every layer."""
    snap, path = _paths(zoo_artifact, name, form)
    cls = tf.UMT5EncoderModel if name == "encoder-umt5" else tf.T5EncoderModel
    model = cls.from_pretrained(str(snap), dtype=torch.float32).eval()
    text = "a photo of the red cat on the mountain under the sky " * 6
    ids = np.array([load_tokenizer(path).encode(text)], dtype=np.int64)
    theirs = tf.AutoTokenizer.from_pretrained(str(snap))(text).input_ids
    assert ids[0].tolist() == theirs and ids.shape[1] > 64
    cfg, values, _out, changed = _compare(
        model,
        path,
        ids,
        1,  # (transformers' last hidden state is after the final norm)
        no_position_bias={"rel_buckets": 0},
        scaled={"attn_scale": 0.25},
    )
    assert cfg.rel_buckets == 32 and cfg.attn_scale == 1.0
    assert changed["no_position_bias"] > 0.01 and changed["scaled"] > 0.01


@pytest.mark.realdata
def test_a_t5_decoder_missing_its_layers_is_refused(zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    """A T5 snapshot with a decoder's tensors is run as an encoder-decoder model
    (test_t5_seq2seq.py); one whose decoder lacks its layers is refused with the tensor it
    lacks, not run without them."""
    import shutil

    from safetensors.numpy import load_file, save_file

    from nneditor.decoder import DecoderUnsupported

    snap = shutil.copytree(zoo_artifact("encoder-t5"), tmp_path / "t5")
    weights = load_file(snap / "model.safetensors")
    weights["decoder.final_layer_norm.weight"] = np.ones(64, np.float32)
    save_file(weights, snap / "model.safetensors")
    lacks = "lacks its decoder's dec.blk.0.attn_norm.weight"
    with nneditor.open(snap) as doc, pytest.raises(DecoderUnsupported, match=lacks):
        decoder_config(doc)


@pytest.mark.realdata
@pytest.mark.parametrize("projection", [False, True])
def test_a_clip_text_encoder_equals_transformers(
    projection: bool, zoo_artifact, tmp_path: Path
) -> None:  # noqa: ANN001
    """CLIP's text encoder (Stable Diffusion's and FLUX's clip_l): GPT-2's pre-norm blocks
    with a causal mask and QuickGELU, ending at the final norm's hidden states. SDXL's second
    encoder (CLIPTextModelWithProjection) also stores the pooled output's projection: it is
    left out with a note, the hidden states the same."""
    import shutil

    from safetensors.numpy import load_file, save_file

    snap = zoo_artifact("encoder-clip-text")
    if projection:
        snap = shutil.copytree(snap, tmp_path / "with-projection")
        weights = load_file(snap / "model.safetensors")
        weights["text_projection.weight"] = np.eye(64, dtype=np.float32)
        save_file(weights, snap / "model.safetensors")
    model = tf.CLIPTextModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([load_tokenizer(snap).encode("A photo of the red cat on the mountain!")])
    assert ids[0, 0] == 0 and ids[0, -1] == 1  # framed by the start and end tokens
    cfg, _values, _out, changed = _compare(
        model, snap, ids, 1, bidirectional={"causal": False}, exact_gelu={"activation": "gelu"}
    )
    assert changed["bidirectional"] > 0.01 and changed["exact_gelu"] > 1e-4
    assert "causal attention" in cfg.describe()
    assert (
        any("pooled output" in n for n in cfg.notes)
        and any("text_projection" in n for n in cfg.notes) == projection
    )
