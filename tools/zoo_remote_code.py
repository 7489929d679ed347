"""Zoo decoders whose releases run remote code (no transformers class of their own), written
in their releases' layout from a transformers model that computes the same thing, and
converted by llama.cpp.

- ``decoder-internlm2``: InternLM2 / InternLM2.5 (InternLM2ForCausalLM). Its modeling code is
  Llama's with its own names, each key/value head's queries, key and value packed into one
  ``attention.wqkv`` matrix, and dynamic NTK RoPE scaling. It is made from transformers'
  LlamaForCausalLM (the tests' reference: the same weights unpacked as InternLM2's code
  unpacks them) with a SentencePiece tokenizer.model, as the releases ship.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

INTERNLM2 = "decoder-internlm2"
#: the tiny model: 4 query heads over 2 key/value heads of 16; a context of 64 positions, past
#: which dynamic NTK stretches the base (the releases: 32768, factor 2 or 2.5)
INTERNLM2_CONFIG = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "dynamic", "factor": 2.0},
    "vocab_size": 320,  # the zoo's SentencePiece model's (InternLM2's converter reads no more)
    "tie_word_embeddings": False,
    "bos_token_id": 2,  # (that model's ids)
    "eos_token_id": 1,
    "pad_token_id": 0,
    "hidden_act": "silu",
    "bias": False,
}
#: transformers' Llama names -> InternLM2's (the layer's own part after ``model.layers.N.``)
_NAMES = {
    "self_attn.o_proj": "attention.wo",
    "mlp.gate_proj": "feed_forward.w1",
    "mlp.up_proj": "feed_forward.w3",
    "mlp.down_proj": "feed_forward.w2",
    "input_layernorm": "attention_norm",
    "post_attention_layernorm": "ffn_norm",
}


def llama_config(released: dict[str, Any]) -> dict[str, Any]:
    """The LlamaConfig keys of an InternLM2 config.json (its rope_scaling type renamed)."""
    keep = {k: v for k, v in released.items() if k in INTERNLM2_CONFIG and k != "bias"}
    scaling = dict(released.get("rope_scaling") or {})
    if scaling:
        keep["rope_scaling"] = {"rope_type": scaling.get("type", "dynamic"), **scaling}
    return keep


def pack_wqkv(q: Any, k: Any, v: Any, heads: int, kv_heads: int) -> Any:
    """[q; k; v] rows as InternLM2 stores them: per key/value head, its queries, key, value."""
    import torch

    width = q.shape[1]
    head = q.shape[0] // heads
    group = heads // kv_heads
    parts = (
        q.reshape(kv_heads, group, head, width),
        k.reshape(kv_heads, 1, head, width),
        v.reshape(kv_heads, 1, head, width),
    )
    return torch.cat(parts, dim=1).reshape(-1, width)


def _internlm2(path: Path, tokenizer_model: bytes) -> None:
    import torch
    import transformers as tf
    from safetensors.torch import save_file

    config = tf.LlamaConfig(**llama_config(INTERNLM2_CONFIG))
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # unit norms would hide a misplaced one
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    state = model.state_dict()
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    out = {
        "model.tok_embeddings.weight": state["model.embed_tokens.weight"],
        "model.norm.weight": state["model.norm.weight"],
        "output.weight": state["lm_head.weight"],
    }
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        q, k, v = (state[f"{p}self_attn.{x}_proj.weight"] for x in "qkv")
        out[f"{p}attention.wqkv.weight"] = pack_wqkv(q, k, v, heads, kv)
        for llama, own in _NAMES.items():
            out[f"{p}{own}.weight"] = state[f"{p}{llama}.weight"]
    path.mkdir(parents=True)
    save_file({k: t.contiguous() for k, t in out.items()}, str(path / "model.safetensors"))
    released = {
        "architectures": ["InternLM2ForCausalLM"],
        "model_type": "internlm2",
        **INTERNLM2_CONFIG,
        "torch_dtype": "float32",
    }
    (path / "config.json").write_text(json.dumps(released, indent=2))
    (path / "tokenizer.model").write_bytes(tokenizer_model)
    tokenizer_config = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>"}
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))


def register(
    generator: Callable[..., Any],
    generate: Callable[[str, Path], Path],
    convert: Callable[..., None],
    spm_model: Callable[[], bytes],
) -> None:
    generator(
        INTERNLM2,
        "safetensors (InternLM2's layout, from transformers' Llama)",
        "InternLM2 decoder as released: packed wqkv, dynamic NTK RoPE, tokenizer.model",
    )(lambda path: _internlm2(path, spm_model()))
    generator(
        f"{INTERNLM2}.gguf",
        "llama.cpp convert_hf_to_gguf.py",
        "InternLM2 decoder converted by llama.cpp (F32; q/k/v unpacked)",
    )(lambda path: convert(generate(INTERNLM2, path.parents[2]), path, "f32"))
