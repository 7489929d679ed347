"""qwen35 configuration from GGUF metadata: the layer pattern, multi-token-prediction layers,
and the sentences for what the decoder does not run."""

from __future__ import annotations

from typing import Any

import pytest

from nneditor.decoder import qwen35
from nneditor.decoder.config import DecoderUnsupported
from nneditor.decoder.config_gguf import gguf_common
from nneditor.decoder.config_hf import hf_common

A = "qwen35"


def _meta(**over: Any) -> dict[str, Any]:
    meta = {
        "general.architecture": A,
        f"{A}.block_count": 4,
        f"{A}.embedding_length": 128,
        f"{A}.attention.head_count": 4,
        f"{A}.attention.head_count_kv": 2,
        f"{A}.attention.key_length": 64,
        f"{A}.vocab_size": 100,
        f"{A}.ssm.group_count": 2,
        f"{A}.ssm.time_step_rank": 4,
        f"{A}.ssm.state_size": 32,
        f"{A}.ssm.inner_size": 384,
        f"{A}.ssm.conv_kernel": 4,
        f"{A}.rope.dimension_count": 16,
        f"{A}.full_attention_interval": 2,
    }
    meta.update({f"{A}.{k}": v for k, v in over.items()})
    return {k: v for k, v in meta.items() if v is not None}


def _names(n: int = 4, interval: int = 2) -> list[str]:
    out = ["token_embd.weight", "output_norm.weight"]
    for i in range(n):
        kind = "attention" if (i + 1) % interval == 0 else "recurrent"
        out += [f"blk.{i}.{k}" for k in qwen35.NEEDS[kind]]
    return out


def _config(meta: dict[str, Any], names: list[str]) -> Any:
    cfg = qwen35.from_gguf(meta, gguf_common(meta, names))
    qwen35.check_layers(cfg, list(cfg.names))
    return cfg


def test_layer_pattern_sizes_and_rope_from_metadata() -> None:
    cfg = _config(_meta(), _names())
    assert cfg.layer_kinds == ("recurrent", "attention", "recurrent", "attention")
    assert cfg.ssm is not None and (cfg.ssm.d_v, cfg.ssm.tiled, cfg.ssm.a_log) == (96, True, False)
    assert (cfg.rope, cfg.rope_dim, cfg.attn_gate, cfg.norm_offset) == ("neox", 16, True, 0.0)
    flags = _meta(**{"attention.recurrent_layers": [True, False, False, True]})
    names = _names(4, 2)  # a pattern that does not match the tensors is caught
    with pytest.raises(DecoderUnsupported, match="layer 2 is an attention layer but lacks"):
        _config(flags, names)


def test_multi_token_prediction_layers_are_left_out_with_a_note() -> None:
    names = [*_names(4), "blk.4.nextn.eh_proj.weight", "blk.4.attn_norm.weight"]
    cfg = _config(_meta(block_count=5, nextn_predict_layers=1), names)
    assert cfg.n_layers == 4 and not any(k.startswith("blk.4.") for k in cfg.names)
    assert "multi-token prediction" in cfg.notes[0]


@pytest.mark.parametrize(
    ("over", "drop", "words"),
    [
        ({"ssm.group_count": None}, "", "lacks qwen35.ssm.group_count"),
        ({"ssm.time_step_rank": 3}, "", "not a multiple of key heads"),
        ({}, "blk.0.ssm_out.weight", "layer 0 is a recurrent layer but lacks"),
    ],
)
def test_incomplete_checkpoints_are_refused(over: dict[str, Any], drop: str, words: str) -> None:
    names = [n for n in _names() if n != drop]
    with pytest.raises(DecoderUnsupported, match=words):
        _config(_meta(**over), names)


def test_an_extra_tensor_is_refused_not_dropped() -> None:
    with pytest.raises(DecoderUnsupported, match="also holds blk.1.ssm_out.weight"):
        _config(_meta(), [*_names(), "blk.1.ssm_out.weight"])


def test_other_hybrids_and_multimodal_snapshots_are_refused() -> None:
    other = {**_meta(), "general.architecture": "plamo2"}
    with pytest.raises(DecoderUnsupported, match="does not run .plamo2. GGUF files"):
        gguf_common(other, _names())
    vl = {"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text"}}
    with pytest.raises(DecoderUnsupported, match="takes images or audio as well as text"):
        hf_common(vl, [])


def test_hunyuan_ntk_alpha_reads_both_config_formats() -> None:
    """Tencent's own config.json (rope_scaling with type dynamic and alpha, rope_theta at the
    top) and transformers 5's (rope_parameters) stretch the same base:
    theta * alpha ** (d / (d - 2))."""
    from nneditor.decoder.rope_scaling import hf_rope

    base = {"hidden_size": 64, "num_attention_heads": 4, "head_dim": 128}
    legacy = {
        **base,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0, "mscale": 1.0},
    }
    modern = {
        **base,
        "rope_parameters": {
            "rope_type": "dynamic",
            "alpha": 1000.0,
            "factor": 1.0,
            "rope_theta": 10000.0,
        },
    }
    want = 10000.0 * 1000.0 ** (128 / 126)
    for config in (legacy, modern):
        theta, scaling = hf_rope(config)["full"]
        assert theta == pytest.approx(want) and scaling.kind == "none"


def test_granite4_models_map_to_llama_cpps_architectures() -> None:
    """Attention-only dense: granite; with Mamba-2 layers: granitehybrid (as llama.cpp's
    converter decides); attention-only mixtures: none the decoder runs."""
    from nneditor.semantic.checkpoint_names import llama_cpp_arch

    dense = {"layer_types": ["attention"] * 4, "num_local_experts": 0}
    assert llama_cpp_arch("granitemoehybrid", dense) == "granite"
    assert llama_cpp_arch("granitemoehybrid", {**dense, "num_local_experts": 64}) is None
    hybrid = {"layer_types": ["mamba", "mamba", "mamba", "attention"], "num_local_experts": 0}
    assert llama_cpp_arch("granitemoehybrid", hybrid) == "granitehybrid"
    assert llama_cpp_arch("granitemoehybrid", {**hybrid, "num_local_experts": 64}) == (
        "granitehybrid"
    )
    assert llama_cpp_arch("granitemoehybrid") is None  # without its config: not known
