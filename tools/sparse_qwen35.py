"""A sparse GGUF in Ternary Bonsai 2 27B's layout (qwen35, Prism PQ2_0, Hadamard fold v1):
header, vocabulary and tensor catalog written with gguf-py, tensor data left as zeros by
``truncate`` so a 7 GB file costs no disk (benchmarks/bench_qwen35.py, the decoder's
address-space test). Facts: ../shared/spec/GGUF-NOTES.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np

VOCAB = 248_320
MERGES = 250_000


def _pieces(rng: np.random.Generator, n: int) -> list[str]:
    """Token-like strings over GPT-2's byte-level alphabet."""
    alphabet = [chr(c) for c in range(0x21, 0x7F)] + list("ĠĊĉéäöü中文字")
    lengths = rng.integers(1, 12, n)
    codes = rng.integers(0, len(alphabet), int(lengths.sum())).tolist()
    out, pos = [], 0
    for length in lengths.tolist():
        out.append("".join(alphabet[c] for c in codes[pos : pos + length]))
        pos += length
    return out


E, FFN, HEADS, KV, HD = 5120, 17408, 24, 4, 256
NK, NV, DK, DV, CONV = 16, 48, 128, 128, 4
PQ2_0, F32, F16 = 142, 0, 1
BLOCK_BYTES = {PQ2_0: (128, 34), F32: (1, 4), F16: (1, 2)}


def tensor_plan(
    n_layers: int, embd_type: int = PQ2_0
) -> list[tuple[str, tuple[int, ...], int, bool]]:
    """(name, numpy shape, ggml type, folded) in Bonsai 2 27B's layout (``embd_type`` F32
    makes a 5 GB embedding that a trace only looks rows up in)."""
    inner, qkv = NV * DV, 2 * NK * DK + NV * DV
    plan = [
        ("token_embd.weight", (VOCAB, E), embd_type, False),
        ("output_norm.weight", (E,), F32, False),
        ("output.weight", (VOCAB, E), PQ2_0, True),
    ]
    for i in range(n_layers):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (E,), F32, False),
            (b + "post_attention_norm.weight", (E,), F32, False),
            (b + "ffn_gate.weight", (FFN, E), PQ2_0, True),
            (b + "ffn_up.weight", (FFN, E), PQ2_0, True),
            (b + "ffn_down.weight", (E, FFN), PQ2_0, True),
        ]
        if (i + 1) % 4 == 0:
            plan += [
                (b + "attn_q.weight", (2 * HEADS * HD, E), PQ2_0, True),
                (b + "attn_q_norm.weight", (HD,), F32, False),
                (b + "attn_k.weight", (KV * HD, E), PQ2_0, True),
                (b + "attn_k_norm.weight", (HD,), F32, False),
                (b + "attn_v.weight", (KV * HD, E), PQ2_0, True),
                (b + "attn_output.weight", (E, HEADS * HD), PQ2_0, True),
            ]
        else:
            plan += [
                (b + "attn_qkv.weight", (qkv, E), PQ2_0, True),
                (b + "attn_gate.weight", (inner, E), PQ2_0, True),
                (b + "ssm_out.weight", (E, inner), PQ2_0, True),
                (b + "ssm_a", (NV,), F32, False),
                (b + "ssm_conv1d.weight", (qkv, CONV), F32, False),
                (b + "ssm_dt.bias", (NV,), F32, False),
                (b + "ssm_norm.weight", (DV,), F32, False),
                (b + "ssm_beta.weight", (NV, E), F16, False),
                (b + "ssm_alpha.weight", (NV, E), F16, False),
            ]
    return plan


def make_sparse(path: Path, n_layers: int, embd_type: int = PQ2_0) -> Path:
    import gguf

    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "qwen35")
    a = "qwen35."
    for key, value in {
        "block_count": n_layers,
        "embedding_length": E,
        "feed_forward_length": FFN,
        "context_length": 262144,
        "attention.head_count": HEADS,
        "attention.head_count_kv": KV,
        "attention.key_length": HD,
        "attention.value_length": HD,
        "rope.dimension_count": 64,
        "ssm.conv_kernel": CONV,
        "ssm.state_size": DK,
        "ssm.group_count": NK,
        "ssm.time_step_rank": NV,
        "ssm.inner_size": NV * DV,
        "full_attention_interval": 4,
    }.items():
        w.add_uint32(a + key, value)
    w.add_float32(a + "attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32(a + "rope.freq_base", 1e7)
    w.add_array(a + "rope.dimension_sections", [11, 11, 10, 0])
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "qwen35")
    w.add_array("tokenizer.ggml.tokens", _pieces(rng, VOCAB))
    w.add_array("tokenizer.ggml.token_type", [1] * VOCAB)
    left, right = _pieces(rng, MERGES), _pieces(rng, MERGES)
    w.add_array("tokenizer.ggml.merges", [f"{x} {y}" for x, y in zip(left, right, strict=True)])
    plan = tensor_plan(n_layers, embd_type)
    p = "prism.hadamard."
    w.add_uint32(p + "version", 1)
    w.add_uint32(p + "block_size", 1024)
    w.add_string(p + "transform", "normalized-sylvester-walsh-hadamard")
    w.add_string(p + "axis", "input-last-dimension")
    w.add_string(p + "sign_mode", "explicit")
    widths = [E, NV * DV, FFN]
    w.add_array(p + "sign_widths", widths)
    w.add_array(p + "sign_values", [int(v) for x in widths for v in rng.choice([-1, 1], x)])
    w.add_array(p + "weight_names", [name for name, _, _, folded in plan if folded])
    w.add_bool(p + "gdn_v_grouped", True)
    w.add_bool(p + "tied_output", False)
    total = 0
    for name, shape, tid, _ in plan:
        bs, ts = BLOCK_BYTES[tid]
        nbytes = int(np.prod(shape)) // bs * ts
        dtype = np.float16 if tid == F16 else (np.float32 if tid == F32 else np.int8)
        raw = None if tid in (F32, F16) else tid
        w.add_tensor_info(name, shape, np.dtype(dtype), nbytes, raw_dtype=raw)  # type: ignore[arg-type]
        total += -(-nbytes // w.data_alignment) * w.data_alignment
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    start = -(-path.stat().st_size // w.data_alignment) * w.data_alignment
    with open(path, "r+b") as fh:
        fh.truncate(start + total)
    return path
