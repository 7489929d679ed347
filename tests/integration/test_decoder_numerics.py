"""The NumPy decoder against transformers' fp32 forward: every block output, the final norm
and the logits of each family, from its safetensors snapshot and from the GGUF llama.cpp's
own converter wrote (tools/zoo_decoders.py); quantized GGUFs against transformers running the
same weights dequantized by gguf-py; SmolLM2 Q4_1 against llama.cpp itself."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from gguf_reference import llama_model  # tools/: gguf-py + transformers, not NNEditor
from zoo_expect import DENSE_DECODERS, MOE_DECODERS

import nneditor
from nneditor.decoder import decoder_config, run_forward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

#: every decoder family of the zoo (qwen35, lfm2: hybrid; olmo3 and gemma2: sliding-window layers;
#: the mixtures of experts)
FAMILIES = [
    *DENSE_DECODERS,
    *MOE_DECODERS,
    "glm4_moe",
    "glm4_moe_air",
    "afmoe",
    "deepseek_v3",
    "deepseek_v3-yarn",
    "deepseek_v2",
    "glm4_moe_lite",
    "ernie4_5_moe",
    "dots1",
    "qwen35",
    "qwen35moe",
    "qwen3_next",
    "olmo3",
    "olmo3-yarn",
    "gemma2",
    "lfm2",
    "lfm2_moe",
    "mamba2",
    "mamba",
    "falcon_mamba",
    "jamba",
    "granite4h",
    "granite4h_moe",
    "nemotron_h",
    "nemotron_h_moe",
    "falcon_h1",
    "gemma4_moe",
    "llama4",
    "granitemoeshared",
]
#: 12 positions: past Gemma 3's sliding window of 4, so the local mask is exercised
IDS = np.array([[1, 5, 17, 300, 42, 42, 8, 61, 999, 3, 12345, 77]], dtype=np.int64)
REFS = Path(__file__).resolve().parents[1] / "data" / "llama_cpp_logit_refs.json"


def _ours(path: Path, ids: np.ndarray = IDS) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        run_forward(doc, decoder_config(doc), ids, values.__setitem__)
    return values


def _layers(model: object) -> list:
    inner = (
        getattr(model, "model", None)
        or getattr(model, "gpt_neox", None)
        or getattr(model, "backbone", None)  # Mamba-2
        or model.transformer  # type: ignore[attr-defined]
    )
    return list(getattr(inner, "layers", None) or getattr(inner, "blocks", None) or inner.h)


def _theirs(model: object, ids: np.ndarray = IDS) -> tuple[list[np.ndarray], np.ndarray]:
    """Each decoder layer's output (forward hooks) and the logits, fp32."""
    outs: list[np.ndarray] = []

    def hook(_m: object, _i: object, out: object) -> None:
        t = out[0] if isinstance(out, tuple) else out
        outs.append(t.detach().numpy())

    handles = [layer.register_forward_hook(hook) for layer in _layers(model)]
    with torch.no_grad():
        logits = model(torch.from_numpy(ids)).logits.numpy()  # type: ignore[operator]
    for h in handles:
        h.remove()
    return outs, logits


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _assert_matches(
    ours: dict[str, np.ndarray], blocks: list[np.ndarray], logits: np.ndarray
) -> None:
    """Every block output and the logits within 1e-4 relative of the reference's."""
    for i, want in enumerate(blocks):
        assert _rel(ours[f"blk.{i}.output"], want) < 1e-4, (i, _rel(ours[f"blk.{i}.output"], want))
    assert _rel(ours["result_output"], logits) < 1e-4


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["snapshot", "gguf"])
@pytest.mark.parametrize("family", FAMILIES)
def test_blocks_and_logits_equal_transformers(family: str, form: str, zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact(f"decoder-{family}")
    path = snap if form == "snapshot" else zoo_artifact(f"decoder-{family}.gguf")
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    blocks, logits = _theirs(model)
    ours = _ours(path)
    assert len(blocks) == model.config.num_hidden_layers
    for i, want in enumerate(blocks):
        assert _rel(ours[f"blk.{i}.output"], want) < 1e-4, (i, _rel(ours[f"blk.{i}.output"], want))
    assert ours["result_output"].shape == logits.shape
    assert _rel(ours["result_output"], logits) < 1e-4
    assert (ours["result_output"].argmax(-1) == logits.argmax(-1)).all()


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["decoder-llama-bin", "gpt2_bin"])
def test_pickle_shards_equal_transformers(name: str, zoo_artifact) -> None:  # noqa: ANN001
    """Snapshots that keep their weights in PyTorch pickle shards (older releases: bfloat16
    pytorch_model-0000N-of-0000M.bin with an index; GPT-2's single pytorch_model.bin) run
    through the restricted pickle reader, never unpickling code, as transformers loads them."""
    snap = zoo_artifact(name)
    assert not list(snap.glob("*.safetensors"))
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = IDS % model.config.vocab_size  # (GPT-2's tiny vocabulary)
    blocks, logits = _theirs(model, ids)
    _assert_matches(_ours(snap, ids), blocks, logits)


#: families whose llama.cpp conversion the zoo cannot make (HunYuan-A13B's converter reads
#: the release's own tiktoken vocabulary): snapshots only; their GGUFs' routing is refused
SNAPSHOT_FAMILIES = ["hunyuan_moe"]


@pytest.mark.realdata
@pytest.mark.parametrize("family", SNAPSHOT_FAMILIES)
def test_snapshot_blocks_and_logits_equal_transformers(family: str, zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact(f"decoder-{family}")
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    blocks, logits = _theirs(model)
    ours = _ours(snap)
    assert len(blocks) == model.config.num_hidden_layers
    _assert_matches(ours, blocks, logits)
    assert (ours["result_output"].argmax(-1) == logits.argmax(-1)).all()


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["snapshot", "gguf"])
def test_longrope_within_the_original_context_uses_the_short_factors(
    form: str, zoo_artifact
) -> None:  # noqa: ANN001
    """6 positions of an original 8: transformers picks the short factors (the 12-position
    test above, the long ones); ours must follow, from config.json or the GGUF's tensors."""
    snap = zoo_artifact("decoder-phi3-longrope")
    path = snap if form == "snapshot" else zoo_artifact("decoder-phi3-longrope.gguf")
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = IDS[:, :6]
    _, logits = _theirs(model, ids)
    ours = _ours(path, ids)["result_output"]
    assert _rel(ours, logits) < 1e-4


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["decoder-qwen2.5-vl", "decoder-qwen3-vl", "decoder-qwen3-vl-moe"])
def test_vision_language_text_models_equal_transformers_on_text(name: str, zoo_artifact) -> None:  # noqa: ANN001
    """llama.cpp converts Qwen2.5-VL's, Qwen3-VL's and Qwen3-VL-MoE's text models as qwen2vl /
    qwen3vl / qwen3vlmoe (its experts renormalised, as Qwen3-MoE's): every
    block and the logits equal the transformers vision-language model's forward of a text-only
    prompt (M-RoPE with three equal position rows)."""
    snap = zoo_artifact(name)
    config = json.loads((snap / "config.json").read_text())
    model = getattr(tf, config["architectures"][0]).from_pretrained(str(snap), dtype=torch.float32)
    model.eval()
    outs: list[np.ndarray] = []
    layers = model.model.language_model.layers
    hooks = [
        layer.register_forward_hook(
            lambda _m, _i, out: outs.append((out[0] if isinstance(out, tuple) else out).numpy())
        )
        for layer in layers
    ]
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(IDS)).logits.numpy()
    for h in hooks:
        h.remove()
    ours = _ours(zoo_artifact(f"{name}.gguf"))
    assert len(outs) == len(layers) == 2
    for i, want in enumerate(outs):
        assert _rel(ours[f"blk.{i}.output"], want) < 1e-4, i
    assert _rel(ours["result_output"], logits) < 1e-4


@pytest.mark.realdata
def test_an_mlx_community_snapshot_equals_transformers_on_mlxs_dequantized_weights(
    zoo_artifact,  # noqa: ANN001
) -> None:
    """mlx_lm's 4-bit conversion of the Llama snapshot: transformers runs the original model
    with every quantized weight replaced by MLX's own mx.dequantize of it."""
    mx = pytest.importorskip("mlx.core")
    from safetensors.numpy import load_file

    path = zoo_artifact("decoder-llama-mlx4")
    quant = json.loads((path / "config.json").read_text())["quantization"]
    stored: dict[str, np.ndarray] = {}
    for f in sorted(path.glob("*.safetensors")):
        stored |= load_file(str(f))
    model = tf.AutoModelForCausalLM.from_pretrained(
        str(zoo_artifact("decoder-llama")), dtype=torch.float32
    ).eval()
    state = model.state_dict()
    swapped = 0
    for name in stored:
        if name.endswith(".scales"):
            base = name.removesuffix(".scales")
            w = mx.dequantize(
                *(mx.array(stored[f"{base}.{k}"]) for k in ("weight", "scales", "biases")),
                group_size=quant["group_size"],
                bits=quant["bits"],
            )
            state[f"{base}.weight"] = torch.from_numpy(np.array(w, np.float32))
            swapped += 1
    model.load_state_dict(state)
    blocks, logits = _theirs(model)
    ours = _ours(path)
    assert swapped >= 15  # the embedding and every projection of both blocks
    _assert_matches(ours, blocks, logits)


@pytest.mark.realdata
def test_an_fp8_snapshot_equals_transformers_dequantizing_it(zoo_artifact) -> None:  # noqa: ANN001
    """quant_method "fp8" (float8_e4m3fn weights, a scale per 32 x 64 block): transformers'
    FineGrainedFP8 integration dequantizes it on CPU."""
    pytest.importorskip("accelerate")
    path = zoo_artifact("decoder-llama-fp8")
    model = tf.AutoModelForCausalLM.from_pretrained(
        str(path),
        quantization_config=tf.FineGrainedFP8Config(dequantize=True),
        dtype=torch.float32,
    ).eval()
    blocks, logits = _theirs(model)
    ours = _ours(path)
    with nneditor.open(path) as doc:
        q = doc.tensors["model.layers.0.mlp.down_proj.weight"]
        assert q.dtype == "float32" and q.encoding.startswith("float8_e4m3fn x scale per 32 x 64")
    _assert_matches(ours, blocks, logits)


@pytest.mark.realdata
def test_a_compressed_tensors_fp8_snapshot_equals_transformers_decompressing_it(
    zoo_artifact,  # noqa: ANN001
) -> None:
    """llm-compressor's FP8 format (compressed-tensors float-quantized, a scale per output
    channel): transformers decompresses it on CPU with the compressed-tensors library."""
    pytest.importorskip("compressed_tensors")
    path = zoo_artifact("decoder-llama-fp8-channel")
    model = tf.AutoModelForCausalLM.from_pretrained(
        str(path),
        quantization_config=tf.CompressedTensorsConfig(run_compressed=False),
        dtype=torch.float32,
    ).eval()
    blocks, logits = _theirs(model)
    ours = _ours(path)
    _assert_matches(ours, blocks, logits)


@pytest.mark.realdata
def test_q8_0_gguf_equals_transformers_on_the_dequantized_weights(zoo_artifact) -> None:  # noqa: ANN001
    path = zoo_artifact("decoder-llama-q8_0.gguf")
    with nneditor.open(path) as doc:
        assert {r.encoding for r in doc.tensors.values()} >= {"Q8_0"}
    blocks, logits = _theirs(llama_model(path))
    ours = _ours(path)
    _assert_matches(ours, blocks, logits)


@pytest.mark.realdata
@pytest.mark.parametrize("shard", [1, 3])
def test_split_gguf_traces_as_the_whole_model(shard: int, zoo_artifact) -> None:  # noqa: ANN001
    """llama.cpp's converter wrote the Llama snapshot as 3 files of at most 8 tensors; opening
    any one of them runs the whole model, equal to transformers' forward of the snapshot."""
    first = zoo_artifact("decoder-llama-00001-of-00003.gguf")
    path = first.with_name(f"decoder-llama-0000{shard}-of-00003.gguf")
    model = tf.AutoModelForCausalLM.from_pretrained(
        str(zoo_artifact("decoder-llama")), dtype=torch.float32
    ).eval()
    blocks, logits = _theirs(model)
    ours = _ours(path)
    _assert_matches(ours, blocks, logits)


@pytest.mark.realdata
def test_smollm2_q4_1_agrees_with_transformers_and_llama_cpp(realdata) -> None:  # noqa: ANN001
    """The top-20 logits are within 1e-3 of transformers' fp32 forward of the same weights
    dequantized by gguf-py, at every position of four prompts.

    Against llama.cpp (llama-cpp-python 0.3.36, logits_all; tools/llama_cpp_refs.py): its CPU
    path quantizes activations to Q8_1 before every Q4_1 product and keeps K/V in fp16, which
    moves its logits by up to ~0.9 from the exact fp32 values. So: the same next token wherever
    llama.cpp's choice leads by more than 1 logit, our choice always among its top 3, and its
    top-20 logits within 1.5 of ours."""
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    path = realdata(name)
    refs = json.loads(REFS.read_text("utf-8"))[name]
    model = llama_model(path)
    clear = 0
    for case in refs:
        ids = np.array([case["ids"]], np.int64)
        ours = _ours(path, ids)["result_output"][0]
        _, theirs = _theirs(model, ids)
        for p in range(ids.shape[1]):
            top = np.argsort(-theirs[0, p])[:20]
            assert np.abs(ours[p, top] - theirs[0, p, top]).max() < 1e-3, (case["text"], p)
            lc_ids, lc_logits = case["top20"][p], np.array(case["top20_logits"][p])
            assert int(ours[p].argmax()) in lc_ids[:3], (case["text"], p)
            assert np.abs(ours[p, lc_ids] - lc_logits).max() < 1.5, (case["text"], p)
            if lc_logits[0] - lc_logits[1] > 1.0:
                clear += 1
                assert int(ours[p].argmax()) == case["top1"][p], (case["text"], p)
    assert clear >= 20  # 23 of the 42 positions have a clear winner; all of those agree


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("packing", "encoding", "version"), [("pq2_0", "PQ2_0", 1), ("ptq1_0", "PTQ1_0", 2)]
)
def test_prism_packed_qwen35_equals_the_float_model_of_its_ternary_values(
    packing: str,
    encoding: str,
    version: int,
    zoo_artifact,  # noqa: ANN001
) -> None:
    """tools/prism_pack.py: transformers runs a qwen35 snapshot whose folded matrices are the
    unpacked ternary values (rotated back); the decoder runs the packed, Hadamard-folded GGUF
    (PQ2_0 with fold version 1, explicit head and grouped recurrent output columns; PTQ1_0
    with version 2, the tied head and the inversely folded embedding)."""
    snap = zoo_artifact(f"decoder-qwen35-ternary-{packing}")
    path = zoo_artifact(f"decoder-qwen35-{packing}.gguf")
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
        packed = [r for r in doc.tensors.values() if r.encoding == encoding]
        assert len(packed) >= 20 and cfg.hadamard is not None
        assert cfg.hadamard.version == version and len(cfg.hadamard.signs) == 4
        assert ("output.weight" in doc.tensors) == (version == 1)
        # the reader's decode is ternary codes times one float16 scale per 128 values
        w = packed[0].read().reshape(-1, 128)
        d = np.abs(w).max(axis=1, keepdims=True)
        assert np.isin(np.round(w / d), [-1.0, 0.0, 1.0]).all()
        assert (d.astype(np.float16).astype(np.float32) == d).all()
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    blocks, logits = _theirs(model)
    ours = _ours(path)
    assert len(blocks) == 4
    for i, want in enumerate(blocks):
        assert _rel(ours[f"blk.{i}.output"], want) < 1e-4, (i, _rel(ours[f"blk.{i}.output"], want))
    assert _rel(ours["result_output"], logits) < 1e-4
    assert (ours["result_output"].argmax(-1) == logits.argmax(-1)).all()


@pytest.mark.realdata
def test_mistral_sliding_window_equals_transformers(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """A Mistral snapshot (every layer attends within a window of 4 of the 12 positions)."""
    import shutil

    snap = shutil.copytree(zoo_artifact("decoder-llama"), tmp_path / "mistral")
    config = json.loads((snap / "config.json").read_text())
    config.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=4)
    (snap / "config.json").write_text(json.dumps(config))
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    assert type(model).__name__ == "MistralForCausalLM"
    blocks, logits = _theirs(model)
    ours = _ours(snap)
    for i, want in enumerate(blocks):
        assert _rel(ours[f"blk.{i}.output"], want) < 1e-4, i
    assert _rel(ours["result_output"], logits) < 1e-4
    # the window matters here: full attention gives other logits
    config["sliding_window"] = None
    (snap / "config.json").write_text(json.dumps(config))
    assert _rel(_ours(snap)["result_output"], logits) > 1e-3


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"alibi": True}, "ALiBi"),
        ({"apply_residual_connection_post_layernorm": True}, "normalised input back"),
        ({"activation": "relu"}, "activation 'relu'"),
    ],
)
def test_falcon_variants_the_decoder_does_not_compute_are_refused(
    change: dict, phrase: str, zoo_artifact, tmp_path
) -> None:  # noqa: ANN001
    import shutil

    from nneditor.decoder.unsupported import DecoderUnsupported

    snap = shutil.copytree(zoo_artifact("decoder-falcon"), tmp_path / "falcon")
    config = json.loads((snap / "config.json").read_text())
    (snap / "config.json").write_text(json.dumps({**config, **change}))
    with nneditor.open(snap) as doc, pytest.raises(DecoderUnsupported, match=phrase):
        decoder_config(doc)


@pytest.mark.realdata
def test_falcon_h1_snapshots_apply_their_multipliers(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """The zoo's Falcon-H1 sets every muP multiplier to a value other than 1 (llama.cpp's
    converter folds them into the GGUF, which equals transformers too): leaving them out moves
    the logits; a Mamba-2 norm before its gate is refused by name."""
    import dataclasses
    import shutil

    from nneditor.decoder.config import Mup
    from nneditor.decoder.unsupported import DecoderUnsupported

    snap = zoo_artifact("decoder-falcon_h1")
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        ours = run_forward(doc, cfg, IDS, lambda n, v: None)
        plain = dataclasses.replace(cfg, mup=Mup(), embed_scale=1.0, logit_scale=1.0)
        without = run_forward(doc, plain, IDS, lambda n, v: None)
    assert cfg.mup is not None and cfg.mup.ssm_parts == (0.9, 1.1, 0.8, 1.25, 0.6)
    assert _rel(without, ours) > 1e-2
    copy = shutil.copytree(snap, tmp_path / "norm-first")
    config = json.loads((copy / "config.json").read_text())
    config.update(mamba_rms_norm=True, mamba_norm_before_gate=True)
    (copy / "config.json").write_text(json.dumps(config))
    with nneditor.open(copy) as doc, pytest.raises(DecoderUnsupported, match="before the gate"):
        decoder_config(doc)


@pytest.mark.parametrize("multi_query", [False, True])
def test_starcoder_snapshots_with_and_without_multi_query_equal_transformers(
    multi_query: bool, tmp_path
) -> None:  # noqa: ANN001
    """gpt_bigcode stores [q | k | v] with one key/value head (multi-query) or each head's
    q, k and v together (multi-head); the second also leaves attention unscaled here."""
    config = tf.GPTBigCodeConfig(
        vocab_size=20000,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=64,
        multi_query=multi_query,
        scale_attn_weights=multi_query,
    )
    torch.manual_seed(1)
    model = tf.GPTBigCodeForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(tmp_path)
    blocks, logits = _theirs(model)
    ours = _ours(tmp_path)
    with nneditor.open(tmp_path) as doc:
        assert decoder_config(doc).n_kv_heads == (1 if multi_query else 4)
    _assert_matches(ours, blocks, logits)


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["snapshot", "gguf"])
def test_a_mixture_reads_only_the_experts_its_tokens_chose(form: str, zoo_artifact) -> None:  # noqa: ANN001
    """Each expert matrix read belongs to an expert some token routed to (its routing weight
    is non-zero), and every chosen expert is read once per matrix: a few tokens of a large
    mixture decode a small part of it."""
    from nneditor.decoder.weights import Weights

    snap = zoo_artifact("decoder-qwen3_moe")
    path = snap if form == "snapshot" else zoo_artifact("decoder-qwen3_moe.gguf")
    reads: list[tuple[int, str, int]] = []
    original = Weights.expert

    def counting(self, layer: int, part: str, e: int) -> np.ndarray:  # noqa: ANN001
        reads.append((layer, part, e))
        return original(self, layer, part, e)

    ids = IDS[:, :3]
    values: dict[str, np.ndarray] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Weights, "expert", counting)
        with nneditor.open(path) as doc:
            run_forward(doc, decoder_config(doc), ids, values.__setitem__)
    for layer in range(2):
        routing = values[f"blk.{layer}.ffn_moe_weights"][0]
        assert routing.shape == (3, 8)
        assert ((routing > 0).sum(-1) == 2).all()  # two experts per token
        chosen = sorted(set(np.nonzero(routing)[1].tolist()))
        for part in ("gate", "up", "down"):
            assert sorted(e for (i, p, e) in reads if i == layer and p == part) == chosen
        assert len(chosen) < 8


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["snapshot", "gguf"])
def test_a_bert_encoder_equals_transformers(form: str, realdata, zoo_artifact) -> None:  # noqa: ANN001
    """The real all-MiniLM-L6 snapshot and llama.cpp's F16 conversion of it: the embeddings'
    LayerNorm and every block's hidden state (bidirectional attention, post-norms, exact GELU)
    equal transformers' BertModel; for the GGUF, transformers runs the matrices llama.cpp
    stores in float16 (every 2-D weight but the position and segment tables) rounded so."""
    snap = realdata("minilm")
    path = snap if form == "snapshot" else zoo_artifact("minilm.gguf")
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    if form == "gguf":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.ndim >= 2 and "position" not in name and "token_type" not in name:
                    p.copy_(p.half().float())
    ids = np.array([[101, 7592, 2088, 1010, 2023, 2003, 1037, 3231, 1012, 102]], dtype=np.int64)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
        result = run_forward(doc, cfg, ids, values.__setitem__)
    assert not cfg.causal and not cfg.head
    hidden = [h.numpy() for h in out.hidden_states]
    assert _rel(values["inp_norm"], hidden[0]) < 1e-5
    for i in range(6):
        assert _rel(values[f"blk.{i}.output"], hidden[i + 1]) < 1e-5, i
    assert _rel(result, out.last_hidden_state.numpy()) < 1e-5
    assert "result_output" not in values  # no head: the trace ends at the last hidden state


@pytest.mark.realdata
def test_gemma4_as_released_runs_its_text_decoder(zoo_artifact) -> None:  # noqa: ANN001
    """Gemma4ForConditionalGeneration (image and audio towers beside the text decoder): the
    text decoder's blocks and logits equal transformers' on a text prompt, and the towers'
    tensors are said to be left out of the graph."""
    snap = zoo_artifact("decoder-gemma4-mm")
    model = tf.AutoModelForImageTextToText.from_pretrained(str(snap), dtype=torch.float32).eval()
    outs: list[np.ndarray] = []
    layers = model.model.language_model.layers
    handles = [
        layer.register_forward_hook(lambda _m, _i, o: outs.append(o.detach().numpy()))
        for layer in layers
    ]
    with torch.no_grad():
        logits = model(torch.from_numpy(IDS)).logits.numpy()
    for h in handles:
        h.remove()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        run_forward(doc, cfg, IDS, values.__setitem__)
        assert any("tensors of its image (or audio) side (" in n for n in doc.notes)
    assert cfg.text_of == "gemma4" and cfg.gemma4 is not None and cfg.gemma4.ple == 8
    _assert_matches(values, outs, logits)


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["snapshot", "gguf"])
def test_gemma3n_streams_and_logits_equal_transformers(form: str, zoo_artifact) -> None:  # noqa: ANN001
    """Gemma 3n (AltUp's four streams, LAuReL, activation sparsity on the first layers, shared
    keys and values, per-layer embeddings): every layer's streams, side by side, and the
    logits equal transformers'."""
    snap = zoo_artifact("decoder-gemma3n")
    path = snap if form == "snapshot" else zoo_artifact("decoder-gemma3n.gguf")
    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    streams, logits = _theirs(model)  # each [streams, 1, seq, hidden]
    ours = _ours(path)
    for i, want in enumerate(streams):
        n, _, seq, hidden = want.shape
        side = want[:, 0].transpose(1, 0, 2).reshape(1, seq, n * hidden)
        assert _rel(ours[f"blk.{i}.output"], side) < 1e-4, (i, _rel(ours[f"blk.{i}.output"], side))
    assert _rel(ours["result_output"], logits) < 1e-4
    assert (ours["result_output"].argmax(-1) == logits.argmax(-1)).all()


@pytest.mark.realdata
def test_a_gemma3n_release_layout_runs_its_text_decoder(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """Gemma3nForConditionalGeneration keeps its text decoder under model.language_model
    (transformers' Gemma3nModel) beside towers that need timm, which the zoo cannot build: the
    text-only snapshot rewritten in that layout, with a tower tensor beside it, traces to the
    same values and says the tower is not drawn."""
    import shutil

    from safetensors.numpy import load_file, save_file

    snap = zoo_artifact("decoder-gemma3n")
    mm = tmp_path / "gemma3n-mm"
    shutil.copytree(snap, mm)
    weights = load_file(str(snap / "model.safetensors"))
    renamed = {k.replace("model.", "model.language_model.", 1): v for k, v in weights.items()}
    renamed["model.vision_tower.timm_model.conv_stem.conv.weight"] = np.ones((4, 3, 3, 3), "f4")
    save_file(renamed, str(mm / "model.safetensors"), metadata={"format": "pt"})
    text = json.loads((snap / "config.json").read_text())
    config = {
        "architectures": ["Gemma3nForConditionalGeneration"],
        "model_type": "gemma3n",
        "text_config": text,
        "vision_config": {"model_type": "gemma3n_vision"},
    }
    (mm / "config.json").write_text(json.dumps(config))
    alone, released = _ours(snap), _ours(mm)
    assert set(alone) == set(released)
    assert all(np.array_equal(alone[k], released[k]) for k in alone)
    with nneditor.open(mm) as doc:
        assert any("image (or audio) side (1) are listed" in n for n in doc.notes), doc.notes
        assert decoder_config(doc).text_of == "gemma3n"


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["snapshot", "gguf"])
@pytest.mark.parametrize("family", ["minicpm", "minicpm4"])
def test_minicpm_equals_llama_with_its_scales(family: str, form: str, zoo_artifact) -> None:  # noqa: ANN001
    """MiniCPM's modeling code is the release's own (remote code; transformers has no class):
    Llama with the embeddings times scale_emb, each residual branch times scale_depth /
    sqrt(layers), the final states divided by hidden / dim_model_base. transformers' Granite
    with those multipliers, loading the same weights, is the reference; its snapshot and its
    llama.cpp conversion (the scales in the metadata) equal it; MiniCPM4's with LongRoPE."""
    snap = zoo_artifact(f"decoder-{family}")
    path = snap if form == "snapshot" else zoo_artifact(f"decoder-{family}.gguf")
    released = json.loads((snap / "config.json").read_text())
    own = ("architectures", "model_type", "scale_emb", "scale_depth", "dim_model_base")
    hidden, layers = released["hidden_size"], released["num_hidden_layers"]
    head_dim = hidden // released["num_attention_heads"]
    config = tf.GraniteConfig(
        **{k: v for k, v in released.items() if k not in own and k != "transformers_version"},
        embedding_multiplier=released["scale_emb"],
        residual_multiplier=released["scale_depth"] / math.sqrt(layers),
        logits_scaling=hidden / released["dim_model_base"],
        attention_multiplier=1 / math.sqrt(head_dim),
    )
    model = tf.GraniteForCausalLM.from_pretrained(str(snap), config=config, dtype=torch.float32)
    blocks, logits = _theirs(model.eval())
    assert len(blocks) == layers
    _assert_matches(_ours(path), blocks, logits)
    assert (_ours(path)["result_output"].argmax(-1) == logits.argmax(-1)).all()


#: InternLM2's names -> transformers' Llama's (within a layer)
_INTERNLM2_NAMES = {
    "attention.wo": "self_attn.o_proj",
    "feed_forward.w1": "mlp.gate_proj",
    "feed_forward.w3": "mlp.up_proj",
    "feed_forward.w2": "mlp.down_proj",
    "attention_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def _internlm2_as_llama(snap: Path) -> object:
    """transformers' Llama holding an InternLM2 snapshot's weights, unpacked as InternLM2's own
    modeling code reads its wqkv (per key/value head: its queries, its key, its value)."""
    from safetensors.numpy import load_file
    from zoo_remote_code import llama_config  # tools/: the config keys, renamed

    released = json.loads((snap / "config.json").read_text())
    config = tf.LlamaConfig(**llama_config(released))
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    hd, width = config.hidden_size // heads, config.hidden_size
    state: dict[str, np.ndarray] = {}
    for name, value in load_file(str(snap / "model.safetensors")).items():
        if name.endswith("attention.wqkv.weight"):
            p = name.removesuffix("attention.wqkv.weight")
            packed = value.reshape(kv, heads // kv + 2, hd, width)
            state[p + "self_attn.q_proj.weight"] = packed[:, :-2].reshape(-1, width)
            state[p + "self_attn.k_proj.weight"] = packed[:, -2].reshape(-1, width)
            state[p + "self_attn.v_proj.weight"] = packed[:, -1].reshape(-1, width)
            continue
        for own, llama in _INTERNLM2_NAMES.items():
            name = name.replace(f".{own}.", f".{llama}.")
        name = name.replace("model.tok_embeddings.", "model.embed_tokens.")
        state[name.replace("output.weight", "lm_head.weight")] = value
    model = tf.LlamaForCausalLM(config).eval()
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()}, strict=True)
    return model


@pytest.mark.realdata
@pytest.mark.parametrize(("form", "length"), [("snapshot", 12), ("gguf", 12), ("snapshot", 80)])
def test_internlm2_equals_llama_on_its_unpacked_weights(
    form: str, length: int, zoo_artifact
) -> None:  # noqa: ANN001
    """InternLM2's modeling code is the release's own: Llama's blocks under its names, each key/
    value head's queries, key and value packed into attention.wqkv, dynamic NTK RoPE. The
    reference is transformers' Llama with the unpacked weights and the same scaling. The
    snapshot equals it within its 64-position context and past it (the base stretched); the
    GGUF (llama.cpp unpacks at conversion and does not stretch) within it."""
    snap = zoo_artifact("decoder-internlm2")
    path = snap if form == "snapshot" else zoo_artifact("decoder-internlm2.gguf")
    model = _internlm2_as_llama(snap)
    ids = ((np.arange(length) * 37 + 3) % 300 + 4)[None].astype(np.int64)
    blocks, logits = _theirs(model, ids)
    _assert_matches(_ours(path, ids), blocks, logits)
