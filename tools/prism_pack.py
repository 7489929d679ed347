"""Prism-style ternary, Hadamard-folded qwen35 test models (test data only, not NNEditor).

PrismML publishes its Bonsai GGUFs, not its packer; this is our own, following the layouts in
../shared/spec/GGUF-NOTES.md, so the decoder can be checked against ``transformers``:

1. :func:`ternarize_snapshot` rewrites a Hugging Face qwen35 snapshot so every foldable matrix
   is exactly representable after the fold: for a weight row ``w``, ``z = H_B(s * w)`` is
   quantized to ``{-1, 0, +1} * d`` per 128-element block (``d`` rounded to float16, as the
   packings store it) and the row becomes ``s * H_B(z_q)``. transformers runs this snapshot
   as the float reference; llama.cpp's converter turns it into an F32 GGUF.
2. :func:`pack_gguf` folds that F32 GGUF (``z = H_B(s * w)`` again, now exactly ternary up to
   float32 rounding) and writes PQ2_0 or PTQ1_0 blocks plus the ``prism.hadamard.*`` keys.

The numbers the decoder computes from the packed file must equal transformers' on step 1.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np

BLOCK = 128  # Hadamard block and ggml block (PQ2_0, PTQ1_0: 128 values)
PQ2_0, PTQ1_0 = 142, 143
#: Hugging Face weights the fold covers (Bonsai folds every matrix except beta/alpha)
_HF_FOLDED = re.compile(
    r"(mlp\.(gate|up|down)_proj|linear_attn\.(in_proj_qkv|in_proj_z|out_proj)"
    r"|self_attn\.[qkvo]_proj|lm_head)\.weight$"
)
_GGUF_FOLDED = re.compile(
    r"(ffn_(gate|up|down)|attn_(qkv|gate|q|k|v|output)|ssm_out)\.weight$|^output\.weight$"
)


def fwht(x: np.ndarray) -> np.ndarray:
    """Normalised Walsh-Hadamard transform of each BLOCK slice of the last axis (float64)."""
    y = np.array(x, dtype=np.float64).reshape(-1, BLOCK)
    h = 1
    while h < BLOCK:
        v = y.reshape(-1, BLOCK // (2 * h), 2, h)
        a, b = v[:, :, 0, :].copy(), v[:, :, 1, :].copy()
        v[:, :, 0, :], v[:, :, 1, :] = a + b, a - b
        h *= 2
    return (y / np.sqrt(BLOCK)).reshape(x.shape)


def signs(width: int, seed: int = 11) -> np.ndarray:
    return np.where(np.random.default_rng([seed, width]).random(width) < 0.5, -1.0, 1.0)


def _quantize(z: np.ndarray, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Ternary codes and float16-representable scales per BLOCK values of each row: the scale
    is the mean magnitude (absmean, as BitNet-style ternary training uses), or for values that
    are already ternary (``exact``) their largest magnitude."""
    blocks = z.reshape(z.shape[0], -1, BLOCK)
    mag = np.abs(blocks)
    d = mag.max(axis=-1, keepdims=True) if exact else mag.mean(axis=-1, keepdims=True)
    d = np.where(d > 0, d, 1.0).astype(np.float16).astype(np.float64)
    q = np.clip(np.rint(blocks / d), -1, 1)
    return q.reshape(z.shape), d[..., 0]


def _ternary_row_space(w: np.ndarray) -> np.ndarray:
    """``s * H(q d)`` where ``q d`` is the ternary quantization of ``H(s * w)``."""
    s = signs(w.shape[1])
    q, d = _quantize(fwht(w * s))
    return fwht(q * np.repeat(d, BLOCK, axis=1)) * s


def _tiled_perm(nk: int, nv: int, hd: int) -> np.ndarray:
    """Index into the grouped order of each tiled position (llama.cpp's value-head order)."""
    rep = nv // nk
    return np.arange(nv * hd).reshape(nk, rep, hd).transpose(1, 0, 2).reshape(-1)


def ternarize_snapshot(src: Path, dst: Path, tied: bool, ssm_out_tiled: bool) -> None:
    """Copy ``src`` to ``dst`` with every folded matrix (and, when ``tied``, the embedding,
    which then also serves as the output head) replaced by its ternary-representable twin."""
    from safetensors.numpy import load_file, save_file

    config = json.loads((src / "config.json").read_text())
    weights = load_file(str(src / "model.safetensors"))
    nk, nv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    perm = _tiled_perm(nk, nv, config["linear_value_head_dim"])
    out: dict[str, np.ndarray] = {}
    for name, w in weights.items():
        w64 = w.astype(np.float64)
        if name == "lm_head.weight" and tied:
            continue
        if _HF_FOLDED.search(name) or (tied and name.endswith("embed_tokens.weight")):
            if ssm_out_tiled and name.endswith("linear_attn.out_proj.weight"):
                back = np.argsort(perm)
                w64 = _ternary_row_space(w64[:, perm])[:, back]
            else:
                w64 = _ternary_row_space(w64)
        out[name] = np.ascontiguousarray(w64, dtype=np.float32)  # save_file writes F order raw
    dst.mkdir(parents=True, exist_ok=True)
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    config["tie_word_embeddings"] = tied
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors") and f.is_file():
            shutil.copy(f, dst / f.name)


def _encode_trits(digits: np.ndarray) -> np.ndarray:
    """(..., 5) digits in {0, 1, 2} -> bytes whose fixed-point base-3 digits they are."""
    v = (digits * (3 ** np.arange(4, -1, -1))).sum(axis=-1)
    return ((v * 256 + 242) // 243).astype(np.uint8)


def pack_pq2_0(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Rows of ternary codes [rows, cols], scales [rows, cols/128] -> uint8 blocks."""
    codes = (q.reshape(-1, BLOCK) + 1).astype(np.uint8).reshape(-1, 32, 4)
    qs = (codes << np.array([0, 2, 4, 6], dtype=np.uint8)).sum(axis=-1).astype(np.uint8)
    half = d.reshape(-1).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return np.concatenate([half, qs], axis=1).reshape(q.shape[0], -1)


def pack_ptq1_0(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    t = (q.reshape(-1, BLOCK) + 1).astype(np.int64)
    qs_a = t[:, :80].reshape(-1, 5, 16).transpose(0, 2, 1)  # element 16n + m -> (m, n)
    qs_b = t[:, 80:120].reshape(-1, 5, 8).transpose(0, 2, 1)  # 80 + 8n + m
    qh = t[:, 120:].reshape(-1, 4, 2).transpose(0, 2, 1)  # 120 + 2n + h, four digits
    qh = np.concatenate([qh, np.zeros((*qh.shape[:2], 1), np.int64)], axis=-1)
    half = d.reshape(-1).astype(np.float16).view(np.uint8).reshape(-1, 2)
    parts = [_encode_trits(qs_a), _encode_trits(qs_b), _encode_trits(qh), half]
    return np.concatenate(parts, axis=1).reshape(q.shape[0], -1)


def pack_gguf(src: Path, dst: Path, qtype: int, version: int, v_grouped: bool) -> None:
    """Fold and pack an F32 qwen35 GGUF written by llama.cpp's converter from a ternarized
    snapshot. Version 2 ties the head: no output.weight, token_embd inversely folded."""
    import gguf

    reader = gguf.GGUFReader(str(src))
    arch = str(reader.fields["general.architecture"].contents())
    meta = {f.name: f.contents() for f in reader.fields.values()}
    nk, nv = int(meta[f"{arch}.ssm.group_count"]), int(meta[f"{arch}.ssm.time_step_rank"])
    hd = int(meta[f"{arch}.ssm.inner_size"]) // nv
    perm = _tiled_perm(nk, nv, hd)
    writer = gguf.GGUFWriter(str(dst), arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub)
    folded, inverse, widths = [], [], set()
    pack = pack_pq2_0 if qtype == PQ2_0 else pack_ptq1_0
    for t in reader.tensors:
        data = np.asarray(t.data).reshape([int(n) for n in reversed(t.shape)])
        name = t.name
        fold = bool(_GGUF_FOLDED.search(name))
        inv = version == 2 and name == "token_embd.weight"
        if not (fold or inv):
            writer.add_tensor(name, np.ascontiguousarray(data))
            continue
        w = data.astype(np.float64)
        if v_grouped and name.endswith("ssm_out.weight"):
            w = w[:, np.argsort(perm)]  # stored columns in grouped value-head order
        s = signs(w.shape[1])
        z = fwht(w * s)
        q, d = _quantize(z, exact=True)
        err = np.abs(z - q * np.repeat(d, BLOCK, axis=1)).max()
        if err > 1e-5 * max(float(np.abs(z).max()), 1e-30):
            raise ValueError(f"{name} is not ternary after the fold (error {err:.3g})")
        blocks = pack(q, d).view(np.int8).reshape(-1)  # int8: gguf-py skips its size table
        writer.add_tensor(name, blocks, raw_shape=data.shape, raw_dtype=qtype)  # type: ignore[arg-type]
        (inverse if inv else folded).append(name)
        widths.add(w.shape[1])
    p = "prism.hadamard."
    writer.add_uint32(p + "version", version)
    writer.add_uint32(p + "block_size", BLOCK)
    writer.add_string(p + "transform", "normalized-sylvester-walsh-hadamard")
    writer.add_string(p + "axis", "input-last-dimension")
    writer.add_string(p + "sign_mode", "explicit")
    ordered = sorted(widths)
    writer.add_array(p + "sign_widths", ordered)
    writer.add_array(p + "sign_values", [int(v) for w in ordered for v in signs(w)])
    writer.add_array(p + "weight_names", folded)
    if inverse:
        writer.add_array(p + "inverse_weight_names", inverse)
    writer.add_bool(p + "gdn_v_grouped", v_grouped)
    writer.add_bool(p + "tied_output", version == 2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
