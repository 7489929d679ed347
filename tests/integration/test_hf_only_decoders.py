"""Decoders llama.cpp does not convert, run from their snapshots (tools/zoo_hf_only.py): OPT,
GPT-Neo, GPT-J, CodeGen, XGLM.
Every block, the logits and the tokenizer's ids against transformers' fp32 forward and
AutoTokenizer, and the headline path through the CLI."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from headline import assert_top_equals, perturbed, prompt_trace_predict

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.tokenize import load_tokenizer

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.realdata
def test_opt_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    """OPT as facebook/opt-125m ships: positions read from row 2 of the table, ReLU, a head
    tied to the embedding; its GPT-2 pair puts </s> before the text as transformers'
    GPT2Tokenizer does (add_bos_token). Reading positions from row 0 moves every value."""
    snap = zoo_artifact("decoder-opt")
    text = "the model reads every layer and writes its weights to Paris."
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert want_ids[0] == 2 and load_tokenizer(snap).encode(text) == want_ids
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([want_ids], dtype=np.int64)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        shifted = run_forward(
            doc, dataclasses.replace(cfg, position_offset=0), ids, lambda n, v: None
        )
        head = doc.graph.nodes[-1]
    assert cfg.arch == "opt" and cfg.head and cfg.causal and cfg.activation == "relu"
    assert head.op_type == "LMHead" and head.outputs == ("result_output",)
    # transformers' OPT lists the first layer's output, then the final norm's (not the last
    # layer's own)
    assert len(out.hidden_states) == 3
    assert _rel(values["blk.0.output"], out.hidden_states[1].numpy()) < 1e-5
    assert _rel(values["result_norm"], out.hidden_states[2].numpy()) < 1e-5
    want = out.logits.numpy()
    assert _rel(logits, want) < 1e-5
    assert _rel(shifted, want) > 1e-3


VARIANTS = {
    # GPT-Neo: local layers see 6 positions, scores are not scaled
    "decoder-gpt-neo": {"window": {"sliding_window": 0}, "scaled": {"attn_scale": 0.25}},
    # GPT-J: a quarter of each head rotates, in adjacent pairs
    "decoder-gptj": {"halves": {"rope": "neox"}, "whole": {"rope_dim": 16}},
    # CodeGen: GPT-J's block with q, v, k fused in four groups; half of each head rotates
    "decoder-codegen": {"ungrouped": {"qkv_groups": 0}, "halves": {"rope": "neox"}},
    # XGLM: scaled embeddings, fairseq's sinusoids (sines, then cosines) from row 2
    "decoder-xglm": {
        "unscaled": {"embed_scale": 1.0},
        "from row 0": {"position_offset": 0},
        "interleaved": {"fairseq_layout": False},
    },
}


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_hf_only_decoders_equal_transformers(name: str, zoo_artifact) -> None:  # noqa: ANN001
    """GPT-Neo, GPT-J and CodeGen (GPT-2's tokenizer pair), XGLM (its tokenizer.json) as
    released: the ids, every block and the logits on a prompt of 17 tokens or more; each of
    their particulars, undone, moves the logits. The graph draws every value the pass emits."""
    snap = zoo_artifact(name)
    text = "the model reads every layer and writes its weights to Paris, and Paris reads."
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert len(want_ids) > 12 and load_tokenizer(snap).encode(text) == want_ids
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([want_ids], dtype=np.int64)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    moved = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        for key, change in VARIANTS[name].items():
            other = run_forward(doc, dataclasses.replace(cfg, **change), ids, lambda n, v: None)
            moved[key] = _rel(other, out.logits.numpy())
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert set(values) == drawn  # every traced value has its place in the graph, and back
    n = cfg.n_layers
    for i in range(n - 1):  # (transformers' last hidden state is after the final norm)
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(values["result_norm"], out.hidden_states[n].numpy()) < 1e-5
    assert _rel(logits, out.logits.numpy()) < 1e-5
    assert all(v > 1e-4 for v in moved.values()), moved  # (some 300 times the difference)


@pytest.mark.realdata
def test_xglm_positions_count_every_token(zoo_artifact) -> None:  # noqa: ANN001
    """transformers' XGLM reads position p's sinusoids at row p + 2 whatever the ids: a padding
    id inside the prompt is counted (fairseq's make_positions, as M2M100 runs, would not)."""
    snap = zoo_artifact("decoder-xglm")
    ids = np.array([[2, 9, 14, 1, 1, 22, 5, 30, 1, 17, 8, 3]], dtype=np.int64)  # (<pad> is 1)
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).logits.numpy()
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, lambda n, v: None)
        fairseq = dataclasses.replace(cfg, fairseq_positions=True)
        counted = run_forward(doc, fairseq, ids, lambda n, v: None)
    assert cfg.position_pad == 1 and cfg.embed_scale == 8.0
    assert _rel(logits, want) < 1e-5 and _rel(counted, want) > 1e-3


def test_xglm_model_ends_at_its_final_norm(tmp_path) -> None:  # noqa: ANN001
    """An XGLMModel (no head) is drawn and traced to its final layer_norm, which equals
    transformers' last hidden state."""
    config = tf.XGLMConfig(vocab_size=60, d_model=32, ffn_dim=64, num_layers=2, attention_heads=4)
    torch.manual_seed(0)
    model = perturbed(tf.XGLMModel(config).eval())
    model.save_pretrained(str(tmp_path / "xglm"))
    ids = np.array([[2, 5, 17, 30, 42, 42, 8, 59, 9, 3]], dtype=np.int64)
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).last_hidden_state.numpy()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path / "xglm") as doc:
        cfg = decoder_config(doc)
        out = run_forward(doc, cfg, ids, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert not cfg.head and set(values) == drawn and "result_output" not in drawn
    assert _rel(out, want) < 1e-5 and _rel(values["result_norm"], want) < 1e-5


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["decoder-codegen", "decoder-xglm"])
def test_prompt_trace_predict(name: str, zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """tokenize -> trace -> predict through the CLI: predict's top 3 are transformers'."""
    snap = zoo_artifact(name)
    ids, got = prompt_trace_predict(snap, "the model reads every layer", tmp_path)
    assert (
        ids
        == tf.AutoTokenizer.from_pretrained(str(snap))("the model reads every layer")["input_ids"]
    )
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        assert_top_equals(got, model(torch.tensor([ids])).logits[0, -1])


def test_opt_350m_layout_equals_transformers(tmp_path) -> None:  # noqa: ANN001
    """OPT-350m's layout: norms after each residual, no final norm, 16-wide embeddings
    projected in (before the positions are added) and out (before the tied head)."""
    config = tf.OPTConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        ffn_dim=64,
        num_attention_heads=4,
        word_embed_proj_dim=16,
        do_layer_norm_before=False,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = perturbed(tf.OPTForCausalLM(config).eval())
    model.save_pretrained(str(tmp_path / "opt350"))
    ids = np.array([[2, 5, 17, 30, 42, 42, 8, 61, 9, 3]], dtype=np.int64)
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).logits.numpy()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path / "opt350") as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert set(values) == drawn and "result_norm" not in values
    assert values["inp_in_proj"].shape == (1, 10, 32) and values["result_proj"].shape == (1, 10, 16)
    assert _rel(logits, want) < 1e-5


@pytest.mark.realdata
def test_opt_prompt_trace_predict(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    snap = zoo_artifact("decoder-opt")
    ids, got = prompt_trace_predict(snap, "the model reads", tmp_path)
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        assert_top_equals(got, model(torch.tensor([ids])).logits[0, -1])


def test_biogpt_equals_transformers(tmp_path) -> None:  # noqa: ANN001
    """BioGPT: OPT's blocks under its own names (biogpt., layer_norm, output_projection), GELU,
    embeddings scaled by sqrt(hidden); its LayerNorms use torch's epsilon (1e-5), not the
    config's layer_norm_eps, which BioGPT's layers never read."""
    config = tf.BioGptConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        intermediate_size=64,
        num_attention_heads=4,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = perturbed(tf.BioGptForCausalLM(config).eval())
    model.save_pretrained(str(tmp_path / "biogpt"))
    ids = np.array([[2, 5, 17, 30, 42, 42, 8, 61, 9, 3]], dtype=np.int64)
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).logits.numpy()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path / "biogpt") as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        plain = run_forward(doc, dataclasses.replace(cfg, embed_scale=1.0), ids, lambda n, v: None)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert cfg.arch == "biogpt" and cfg.embed_scale == np.sqrt(32) and cfg.norm_eps == 1e-5
    assert set(values) == drawn
    assert _rel(logits, want) < 1e-5 and _rel(plain, want) > 1e-2
