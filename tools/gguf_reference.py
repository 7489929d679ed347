"""transformers' LlamaForCausalLM holding a GGUF's weights as gguf-py dequantizes them — the
independent fp32 reference the decoder tests and benchmarks compare NNEditor with.

gguf-py reads and dequantizes every tensor (not NNEditor's reader); the q/k rows are put back
in Hugging Face order, undoing the permutation llama.cpp's converter applies to Llama.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

_HF = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Inverse of llama.cpp's ``LlamaModel.permute`` of q/k projection rows."""
    return (
        w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def llama_state(gguf_path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(LlamaConfig keywords, Hugging Face state dict in float32) of a llama GGUF."""
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))
    meta = {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("tok")}
    heads = int(meta["llama.attention.head_count"])
    kv = int(meta["llama.attention.head_count_kv"])
    tensors = {t.name: t for t in reader.tensors}

    def weight(name: str) -> np.ndarray:
        t = tensors[name]
        arr = gguf.quants.dequantize(t.data, t.tensor_type)
        shape = list(reversed(t.shape.tolist()))
        return np.array(arr, np.float32, copy=True).reshape(shape)  # writable, off the map

    state = {
        "model.embed_tokens.weight": weight("token_embd.weight"),
        "model.norm.weight": weight("output_norm.weight"),
    }
    if "output.weight" in tensors:
        state["lm_head.weight"] = weight("output.weight")
    for name in tensors:
        parts = name.split(".")
        if parts[0] != "blk":
            continue
        w = weight(name)
        if parts[2] in ("attn_q", "attn_k"):
            w = unpermute(w, heads if parts[2] == "attn_q" else kv)
        state[f"model.layers.{parts[1]}.{_HF[parts[2]]}.weight"] = np.ascontiguousarray(w)
    vocab, hidden = state["model.embed_tokens.weight"].shape
    config = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": int(meta["llama.feed_forward_length"]),
        "num_hidden_layers": int(meta["llama.block_count"]),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "rms_norm_eps": float(meta["llama.attention.layer_norm_rms_epsilon"]),
        "rope_theta": float(meta.get("llama.rope.freq_base", 10000.0)),
        "tie_word_embeddings": "output.weight" not in tensors,
        "max_position_embeddings": 2048,
    }
    return config, state


def llama_model(gguf_path: Path) -> Any:
    """An fp32 LlamaForCausalLM (eval mode) with the GGUF's dequantized weights."""
    import torch
    import transformers as tf

    config, state = llama_state(gguf_path)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(**config)).eval()
    tensors = {k: torch.from_numpy(v) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if unexpected or any("lm_head" not in m for m in missing):
        raise ValueError(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
    if config["tie_word_embeddings"]:
        model.tie_weights()
    return model


def llama_snapshot(gguf_path: Path, out: Path) -> Path:
    """An fp32 safetensors snapshot of the GGUF's weights (what a transformers user loads)."""
    import transformers as tf
    from safetensors.numpy import save_file

    config, state = llama_state(gguf_path)
    tf.LlamaConfig(**config).save_pretrained(str(out))
    save_file(state, str(out / "model.safetensors"))
    return out
