"""A GGUF writer holding the metadata of a Llama model of the given sizes (a plain token list
for a vocabulary), ready for its tensors: for tests that build their own decoder files."""

from __future__ import annotations

from pathlib import Path

import gguf


def llama_writer(
    path: Path, layers: int, hidden: int, ffn: int, heads: int, kv: int, vocab: int, context: int
) -> gguf.GGUFWriter:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(layers)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_context_length(context)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(vocab)])
    w.add_token_types([1] * vocab)
    return w
