"""Tracing checkpoints as a user does: ``tokenize --out``, ``trace --yes``, ``predict`` on GGUF
files and Hugging Face snapshots, and the sentences for checkpoints the decoder refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from nneditor_cli import nneditor_cli

from nneditor.tracing.capture_file import read_value

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return nneditor_cli(*args, timeout=600)


def _graph_values(path: Path) -> list[str]:
    import nneditor

    with nneditor.open(path) as doc:
        assert doc.graph is not None
        return [vi.name for vi in doc.graph.inputs] + [n.outputs[0] for n in doc.graph.nodes]


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["gguf", "snapshot"])
def test_prompt_trace_predict(form: str, zoo_artifact, tmp_path, unchanged) -> None:  # noqa: ANN001
    snap = zoo_artifact("decoder-gemma3")
    path = zoo_artifact("decoder-gemma3.gguf") if form == "gguf" else snap
    check = unchanged(path) if path.is_file() else (lambda: None)
    text = "The capital of France is Paris, and the capital of Italy is"
    made = cli("tokenize", path, "--text", text, "--out", tmp_path / "p.npz", "--json")
    assert made.returncode == 0, made.stderr
    ids = json.loads(made.stdout)["ids"]
    assert json.loads(made.stdout)["input"] == "tokens" and len(ids) > 4  # past the window
    out = cli("trace", path, "--inputs", tmp_path / "p.npz", "--out", tmp_path / "t", "--yes")
    assert out.returncode == 0, out.stderr
    assert "NumPy decoder" in out.stderr and "device: CPU (NumPy)" in out.stderr
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert manifest["run"]["backend"] == "numpy" and manifest["run"]["provider"] == "numpy"
    values = {v["name"]: v for v in manifest["values"]}
    names = _graph_values(path)
    assert list(values) == names  # every value of the synthesized graph, in graph order
    assert all(v["status"] == "captured" for v in values.values())
    assert {"inp_scaled", "blk.0.attn_post_norm", "blk.6.ffn_post_norm"} <= set(values)
    assert values["result_output"]["shape"] == [1, len(ids), 49152]

    model = tf.AutoModelForCausalLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits.numpy()
    got = read_value(tmp_path / "t", values["result_output"])
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4
    pred = cli("predict", tmp_path / "t", "--top", "5", "--json")
    assert pred.returncode == 0, pred.stderr
    p = json.loads(pred.stdout)
    assert p["value"] == "result_output" and p["position"] == len(ids) - 1
    assert [t["id"] for t in p["top"]] == np.argsort(-want[0, -1])[:5].tolist()
    assert p["complete"] is True and all(isinstance(t["text"], str) for t in p["top"])
    check()


def _write_gguf(path: Path, arch: str, tensors: dict[str, np.ndarray], **meta: object) -> Path:
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_head_count(2)
    w.add_context_length(64)
    w.add_feed_forward_length(16)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(16)])
    w.add_token_types([1] * 16)
    for key, value in meta.items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_float32(key, value)  # type: ignore[arg-type]
    for name, arr in tensors.items():
        w.add_tensor(name, arr.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _dense(i: int = 0) -> dict[str, np.ndarray]:
    z = np.zeros
    return {
        f"blk.{i}.attn_norm.weight": z(8),
        f"blk.{i}.attn_q.weight": z((8, 8)),
        f"blk.{i}.attn_k.weight": z((8, 8)),
        f"blk.{i}.attn_v.weight": z((8, 8)),
        f"blk.{i}.attn_output.weight": z((8, 8)),
        f"blk.{i}.ffn_norm.weight": z(8),
    }


def _refused(path: Path, tmp_path: Path, phrase: str, *extra: str) -> None:
    out = cli("trace", path, "--out", tmp_path / "never", "--yes", *extra)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and phrase in lines[-1], out.stderr
    assert lines[-1].startswith("nneditor: ") and "Traceback" not in out.stderr
    assert not (tmp_path / "never").exists()


def test_mixtures_of_experts_llama_cpp_does_not_route_as_we_do_are_refused(tmp_path) -> None:  # noqa: ANN001
    """A routed GGUF traces (tests/integration/test_decoder_numerics.py checks its numbers);
    one without an expert count, with a sigmoid router, scaled expert weights or shared
    experts outside Qwen2-MoE is refused with what it lacks."""
    z = np.zeros
    tensors = {"token_embd.weight": z((16, 8)), "output_norm.weight": z(8), **_dense()}
    tensors |= {
        "blk.0.ffn_gate_inp.weight": z((4, 8)),
        "blk.0.ffn_up_exps.weight": z((4, 16, 8)),
        "blk.0.ffn_gate_exps.weight": z((4, 16, 8)),
        "blk.0.ffn_down_exps.weight": z((4, 8, 16)),
    }
    routed = {"llama.expert_count": 4, "llama.expert_used_count": 2}
    path = _write_gguf(tmp_path / "moe.gguf", "llama", tensors)
    _refused(path, tmp_path, "is a mixture of experts but states no expert count")
    path = _write_gguf(
        tmp_path / "sig.gguf", "llama", tensors, **routed, **{"llama.expert_gating_func": 2}
    )
    _refused(path, tmp_path, "gates its experts with function 2")
    path = _write_gguf(
        tmp_path / "scaled.gguf", "llama", tensors, **routed, **{"llama.expert_weights_scale": 2.5}
    )
    _refused(path, tmp_path, "scales its expert weights by 2.5")
    path = _write_gguf(
        tmp_path / "many.gguf",
        "llama",
        tensors,
        **{"llama.expert_count": 4, "llama.expert_used_count": 5},
    )
    _refused(path, tmp_path, "states 5 experts used of 4")
    shared = tensors | {"blk.0.ffn_up_shexp.weight": z((16, 8))}
    path = _write_gguf(tmp_path / "shared.gguf", "llama", shared, **routed)
    _refused(path, tmp_path, "has shared experts")
    narrow = tensors | {"blk.0.ffn_gate_inp.weight": z((3, 8))}  # a router for 3 of 4 experts
    path = _write_gguf(tmp_path / "narrow.gguf", "llama", narrow, **routed)
    out = cli("trace", path, "--out", tmp_path / "never", "--yes", "--dim", "seq=3")
    assert out.returncode != 0 and "router scores 3 experts" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "never").exists()
    path = _write_gguf(tmp_path / "ok.gguf", "llama", tensors, **routed)
    out = cli("trace", path, "--out", tmp_path / "t", "--yes", "--json", "--dim", "seq=3")
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    weights = next(v for v in manifest["values"] if v["name"] == "blk.0.ffn_moe_weights")
    assert weights["status"] == "captured" and weights["shape"] == [1, 3, 4]


def test_other_architectures_and_rope_scalings_are_refused(tmp_path) -> None:  # noqa: ANN001
    z = np.zeros
    base = {"token_embd.weight": z((16, 8)), "output_norm.weight": z(8), **_dense()}
    base |= {"blk.0.ffn_up.weight": z((16, 8)), "blk.0.ffn_down.weight": z((8, 16))}
    rwkv = _write_gguf(tmp_path / "rwkv6.gguf", "rwkv6", base)
    _refused(rwkv, tmp_path, "the NumPy decoder does not run 'rwkv6' GGUF files")
    longrope = _write_gguf(
        tmp_path / "phi3.gguf", "phi3", {**base, "rope_factors_long.weight": z(4)}
    )
    _refused(longrope, tmp_path, "extends its context with LongRoPE but lacks its short")
    scaled = _write_gguf(  # YaRN and LongRoPE's factor tensors run (test_decoder_numerics)
        tmp_path / "longrope.gguf",
        "llama",
        {**base, "blk.0.ffn_gate.weight": z((16, 8))},
        **{"llama.rope.scaling.type": "longrope", "llama.rope.scaling.factor": 4.0},
    )
    _refused(scaled, tmp_path, "RoPE scaling 'longrope' is not implemented")
    missing = _write_gguf(tmp_path / "missing.gguf", "llama", base)  # no ffn_gate
    _refused(missing, tmp_path, "lacks blk.0.ffn_gate.weight")


@pytest.mark.realdata
def test_snapshots_the_decoder_cannot_compute_exactly_are_refused(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    snap = shutil.copytree(zoo_artifact("decoder-llama"), tmp_path / "snap")
    config = json.loads((snap / "config.json").read_text())
    # (every kind transformers defines is implemented; a future one is refused by name)
    config["rope_parameters"] = {"rope_type": "ntk-by-parts", "factor": 4.0, "rope_theta": 1e4}
    (snap / "config.json").write_text(json.dumps(config))
    _refused(snap, tmp_path, "RoPE scaling 'ntk-by-parts' is not implemented")
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    config["model_type"] = "llava"
    config["text_config"] = {"model_type": "llama"}
    (snap / "config.json").write_text(json.dumps(config))
    _refused(snap, tmp_path, "takes images or audio as well as text")
    config.pop("text_config")
    config["model_type"] = "llama"
    (snap / "config.json").write_text(json.dumps(config))
    from safetensors.numpy import load_file, save_file

    weights = load_file(snap / "model.safetensors")
    weights["model.layers.0.self_attn.sinks"] = np.zeros(4, np.float32)
    save_file(weights, snap / "model.safetensors")
    _refused(snap, tmp_path, "'model.layers.0.self_attn.sinks' has no place in a llama decoder")


@pytest.mark.realdata
def test_quantized_snapshots_it_cannot_decode_are_refused(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """GPTQ/AWQ-style configs name their method; an FP8 model with static activation scales
    (input_scale) is refused although its weights decode."""
    snap = shutil.copytree(zoo_artifact("decoder-llama"), tmp_path / "gptq")
    config = json.loads((snap / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    (snap / "config.json").write_text(json.dumps(config))
    _refused(snap, tmp_path, "quantized with gptq (quantization_config) in a way the NumPy")
    fp8 = shutil.copytree(zoo_artifact("decoder-llama-fp8-channel"), tmp_path / "static")
    torch = pytest.importorskip("torch")  # numpy has no float8 to rewrite the file with
    from safetensors.torch import load_file, save_file

    weights = load_file(fp8 / "model.safetensors")
    weights["model.layers.0.self_attn.q_proj.input_scale"] = torch.ones(1)
    save_file(weights, fp8 / "model.safetensors")
    _refused(fp8, tmp_path, "quantized with compressed-tensors")


@pytest.mark.realdata
def test_gpu_and_onnx_backends_are_refused_for_checkpoints(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    path = zoo_artifact("decoder-qwen3.gguf")
    _refused(path, tmp_path, "the NumPy decoder runs on CPU only", "--device", "gpu")
    _refused(
        path, tmp_path, "GGUF files trace with NNEditor's NumPy decoder", "--backend", "reference"
    )


def test_a_type_nobody_decodes_is_refused_before_running(tmp_path) -> None:  # noqa: ANN001
    import gguf

    z = np.zeros
    tensors = {"token_embd.weight": z((16, 8)), "output_norm.weight": z(8), **_dense()}
    tensors |= {
        "blk.0.ffn_up.weight": z((16, 8)),
        "blk.0.ffn_down.weight": z((8, 16)),
        "blk.0.ffn_gate.weight": z((16, 8)),
    }
    path = _write_gguf(tmp_path / "q8_1.gguf", "llama", tensors)
    # rewrite attn_q as Q8_1 (ggml's activation format, which NNEditor refuses to decode)
    w = gguf.GGUFWriter(str(tmp_path / "q8_1b.gguf"), "llama")
    reader = gguf.GGUFReader(str(path))
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        w.add_key_value(field.name, field.contents(), field.types[0], field.types[-1])
    for t in reader.tensors:
        if t.name == "blk.0.attn_q.weight":
            raw = np.zeros((8, 40), np.uint8)  # 8 rows of one 32-element Q8_1 block
            w.add_tensor(t.name, raw, raw_dtype=gguf.GGMLQuantizationType.Q8_1)
        else:
            w.add_tensor(t.name, np.array(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    _refused(tmp_path / "q8_1b.gguf", tmp_path, "blk.0.attn_q.weight cannot be decoded: Q8_1")


@pytest.mark.realdata
def test_a_small_capture_budget_gives_an_honest_partial_trace(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    path = zoo_artifact("decoder-llama.gguf")
    out = cli(
        "trace", path, "--out", tmp_path / "t", "--yes", "--dim", "seq=8", "--capture-mb", "0.05"
    )
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    status = [v["status"] for v in manifest["values"]]
    assert manifest["partial"] is True and status[0] == "captured"
    assert status[-1] == "partial" and set(status[:-1]) == {"captured"}  # the logits: 1.5 MB
    logits = manifest["values"][-1]
    assert logits["name"] == "result_output" and logits["shape"] == [1, 8, 49152]
    assert logits["reason"] and logits["bytes"] < 1.5e6


@pytest.mark.realdata
def test_stablelm_variants_it_does_not_compute_are_refused(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    snap = shutil.copytree(zoo_artifact("decoder-stablelm"), tmp_path / "snap")
    config = json.loads((snap / "config.json").read_text())
    for key, phrase in (
        ("use_parallel_residual", "computes attention and feed-forward in parallel"),
        ("qk_layernorm", "normalises queries and keys per head"),
    ):
        (snap / "config.json").write_text(json.dumps({**config, key: True}))
        _refused(snap, tmp_path, phrase)


@pytest.mark.realdata
def test_gemma2_gguf_prompt_tokens_equal_sentencepiece(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """The SentencePiece vocabulary llama.cpp's converter embedded (no space prefix, BOS 2)
    gives the ids SentencePiece itself gives for the snapshot's tokenizer.model."""
    spm = pytest.importorskip("sentencepiece")
    gguf = zoo_artifact("decoder-gemma2.gguf")
    model = spm.SentencePieceProcessor(
        model_file=str(zoo_artifact("decoder-gemma2") / "tokenizer.model")
    )
    text = "the model reads weights and writes tensors"
    out = cli("tokenize", gguf, "--text", text, "--out", tmp_path / "t.npz")
    assert out.returncode == 0, out.stderr
    with np.load(tmp_path / "t.npz") as npz:
        ids = npz["tokens"][0].tolist()
    assert ids == [model.bos_id(), *model.encode(text)]


def test_a_gemma_config_saying_gelu_runs_the_tanh_gelu(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """Gemma's own config.json files say hidden_act "gelu" and mean the tanh approximation
    (transformers reads it so): the decoder runs such a snapshot exactly as transformers does."""
    import nneditor
    from nneditor.decoder import decoder_config, run_forward

    snap = tmp_path / "gemma"
    shutil.copytree(zoo_artifact("decoder-gemma"), snap)
    config = json.loads((snap / "config.json").read_text())
    assert config["model_type"] == "gemma"
    (snap / "config.json").write_text(json.dumps({**config, "hidden_act": "gelu"}))
    ids = np.array([[2, 17, 40, 99, 5, 63]])
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        assert cfg.activation == "gelu_tanh"
        ours = run_forward(doc, cfg, ids, lambda name, value: None)
    model = tf.AutoModelForCausalLM.from_pretrained(snap, dtype=torch.float32).eval()
    with torch.no_grad():
        want = model(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"num_local_experts": 4}, "is a mixture of 4 experts in attention-only layers"),
        ({"mamba_proj_bias": True}, "biases on its Mamba-2 projections"),
        (
            {"layer_types": ["mamba", "attention"]},
            "layer 0 is a mamba2 layer but lacks blk.0.ssm_a",
        ),
    ],
)
def test_granite4_models_it_does_not_compute_are_refused(
    change: dict,
    phrase: str,
    zoo_artifact,  # noqa: ANN001
    tmp_path,  # noqa: ANN001
) -> None:
    """Granite 4.0's attention-only mixtures, Mamba-2 projections with biases, and a layer
    pattern its tensors do not follow are refused with a sentence (the dense model and the H
    models trace: test_zoo, test_decoder_numerics)."""
    base = "decoder-granite4h" if "mamba_proj_bias" in change else "decoder-granite4"
    snap = shutil.copytree(zoo_artifact(base), tmp_path / "granite4")
    config = json.loads((snap / "config.json").read_text())
    (snap / "config.json").write_text(json.dumps({**config, **change}))
    _refused(snap, tmp_path, phrase)


@pytest.mark.realdata
def test_nemotron_3_latent_experts_are_refused(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """Nemotron 3 Super routes its experts through a latent projection (moe_latent_size): refused
    with a sentence, not run without it (Nano's experts trace: test_decoder_numerics)."""
    snap = shutil.copytree(zoo_artifact("decoder-nemotron_h_moe"), tmp_path / "nemotron_h_moe")
    config = json.loads((snap / "config.json").read_text())
    config["moe_latent_size"] = 16
    (snap / "config.json").write_text(json.dumps(config))
    _refused(snap, tmp_path, "through a latent projection (moe_latent_size)")
