"""Mixture-of-experts and latent-attention configurations: the routing and YaRN scale each
source states (DeepSeek-V3's sigmoid router, scaled; YaRN's softmax factor), and what the
decoder refuses, with the sentence a user gets (DeepSeek-V2's group-limited greedy routing,
expert groups that do not divide the experts, RoPE scalings other than YaRN)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from nneditor.decoder.config import DecoderUnsupported
from nneditor.decoder.config_gguf import from_gguf, gguf_common
from nneditor.decoder.config_hf import from_hf, hf_common

D = "deepseek2"
_NAMES = [
    "token_embd.weight",
    "output_norm.weight",
    "blk.0.ffn_gate_inp.weight",
    "blk.0.ffn_gate_exps.weight",
    "blk.0.ffn_up_exps.weight",
    "blk.0.ffn_down_exps.weight",
]


def _meta(**over: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "general.architecture": D,
        f"{D}.block_count": 1,
        f"{D}.embedding_length": 64,
        f"{D}.attention.head_count": 4,
        f"{D}.attention.head_count_kv": 1,
        f"{D}.attention.key_length": 24,
        f"{D}.attention.key_length_mla": 16,
        f"{D}.attention.value_length_mla": 12,
        f"{D}.attention.kv_lora_rank": 16,
        f"{D}.rope.dimension_count": 8,
        f"{D}.vocab_size": 100,
        f"{D}.expert_count": 8,
        f"{D}.expert_used_count": 2,
    }
    meta.update({f"{D}.{k}": v for k, v in over.items()})
    return meta


def _gguf(**over: Any) -> Any:
    meta = _meta(**over)
    return from_gguf(meta, gguf_common(meta, _NAMES))


def test_deepseek_files_read_their_latent_widths_and_router() -> None:
    cfg = _gguf(
        expert_gating_func=2,
        expert_group_count=4,
        expert_group_used_count=2,
        expert_weights_scale=2.5,
        expert_weights_norm=True,
    )
    assert cfg.mla is not None and (cfg.mla.qk_nope, cfg.mla.qk_rope, cfg.mla.v_head) == (8, 8, 12)
    assert cfg.head_dim == 16 and cfg.n_kv_heads == 4 and cfg.attn_scale == pytest.approx(0.25)
    assert cfg.moe is not None
    assert (cfg.moe.gating, cfg.moe.n_group, cfg.moe.topk_group, cfg.moe.scale) == (
        "sigmoid",
        4,
        2,
        2.5,
    )
    assert cfg.moe.norm_topk
    v2 = _gguf(expert_weights_scale=1.5)  # no gating stated: llama.cpp's softmax (V2)
    assert v2.moe is not None and (v2.moe.gating, v2.moe.scale, v2.moe.norm_topk) == (
        "softmax",
        1.5,
        False,
    )


@pytest.mark.parametrize(
    "over, words",
    [
        (
            {"rope.scaling.type": "linear", "rope.scaling.factor": 2.0},
            "'linear' is not implemented",
        ),
        ({"expert_group_count": 4, "expert_group_used_count": 2}, "group-limited greedy"),
        ({"expert_gating_func": 2, "expert_group_count": 3}, "3 expert groups"),
        ({"attention.kv_lora_rank": None}, "latent attention's widths"),
    ],
)
def test_deepseek_files_the_decoder_does_not_run_are_refused(over: dict, words: str) -> None:
    with pytest.raises(DecoderUnsupported, match=words):
        _gguf(**{k: v for k, v in over.items()})


def _hf(**over: Any) -> Any:
    config = {
        "model_type": "deepseek_v2",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 1,
        "vocab_size": 100,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 8,
        "kv_lora_rank": 16,
        "v_head_dim": 12,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        **over,
    }
    names = [
        "model.embed_tokens.weight",
        "model.norm.weight",
        "model.layers.0.mlp.gate.weight",
        *(
            f"model.layers.0.mlp.experts.{e}.{p}_proj.weight"
            for e in range(8)
            for p in ("gate", "up", "down")
        ),
    ]
    return from_hf(config, hf_common(config, names))


def test_deepseek_yarn_scales_the_softmax_by_mscale_squared() -> None:
    """transformers' yarn_apply_mscale: (0.1 mscale_all_dim ln factor + 1)^2 / sqrt(d_qk);
    llama.cpp's files carry 0.1 mscale_all_dim as yarn_log_multiplier."""
    want = (0.1 * 0.707 * math.log(40.0) + 1) ** 2 / 4.0  # d_qk = 16
    yarn = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 32}
    yarn |= {"mscale": 0.707, "mscale_all_dim": 0.707, "rope_theta": 10000.0}
    cfg = _hf(rope_parameters=yarn)
    assert cfg.attn_scale == pytest.approx(want) and cfg.rope_scaling.attention == pytest.approx(
        1.0
    )
    gguf = _gguf(
        **{
            "rope.scaling.type": "yarn",
            "rope.scaling.factor": 40.0,
            "rope.scaling.original_context_length": 32,
            "rope.scaling.yarn_log_multiplier": 0.0707,
        }
    )
    assert gguf.attn_scale == pytest.approx(want) and gguf.rope_scaling.attention == 1.0


def test_deepseek_snapshots_the_decoder_does_not_run_are_refused() -> None:
    assert _hf().mla is not None
    with pytest.raises(DecoderUnsupported, match="'group_limited_greedy'"):
        _hf(topk_method="group_limited_greedy")


def _moe_names(*extra: str, drop: tuple[str, ...] = ()) -> list[str]:
    base = [
        "token_embd.weight",
        "output_norm.weight",
        "blk.0.attn_norm.weight",
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.0.attn_v.weight",
        "blk.0.attn_output.weight",
        "blk.0.post_attention_norm.weight",
        "blk.0.ffn_norm.weight",
        "blk.0.ffn_gate_inp.weight",
        "blk.0.ffn_gate_inp.bias",
        "blk.0.attn_sinks.weight",
        *(f"blk.0.ffn_{p}_exps.{k}" for p in ("gate", "up", "down") for k in ("weight", "bias")),
        *extra,
    ]
    return [n for n in base if n not in drop]


def _check(arch: str, names: list[str]) -> None:
    from nneditor.decoder.tensor_check import check_tensors

    meta = {
        "general.architecture": arch,
        f"{arch}.block_count": 1,
        f"{arch}.embedding_length": 64,
        f"{arch}.attention.head_count": 4,
        f"{arch}.vocab_size": 100,
        f"{arch}.expert_count": 4,
        f"{arch}.expert_used_count": 2,
    }
    check_tensors(from_gguf(meta, gguf_common(meta, names)))


@pytest.mark.parametrize(
    "drop", ["blk.0.attn_sinks.weight", "blk.0.ffn_gate_inp.bias", "blk.0.ffn_down_exps.bias"]
)
def test_a_gpt_oss_file_without_its_sinks_or_biases_is_refused(drop: str) -> None:
    _check("gpt-oss", _moe_names())  # complete: accepted
    with pytest.raises(DecoderUnsupported, match=drop.replace(".", r"\.")):
        _check("gpt-oss", _moe_names(drop=(drop,)))


def test_a_routed_layer_with_a_dense_feed_forward_beside_it_is_refused() -> None:
    with pytest.raises(DecoderUnsupported, match="routes to experts but also holds blk.0.ffn_up"):
        _check("gpt-oss", _moe_names("blk.0.ffn_up.weight"))
