#!/usr/bin/env python3
"""Tokenizer build and encode time for a 248k-token GGUF vocabulary, against the tokenizers
library loading the same tokenizer from a tokenizer.json, and llama.cpp (llama-cpp-python,
vocab only) when it is installed, measured in the same run.

The vocabulary is llama.cpp's Qwen3.5 test vocabulary (ggml-vocab-qwen35.gguf, 151,936
tokens) grown to 248,320 tokens — the size of Bonsai's — with valid extra merges (each new token
joins two existing ones), written as a vocab-only GGUF the way gguf-py writes one. The text is
1 MB of the multilingual reference strings (tests/data/llama_cpp_token_refs.json) repeated.

Targets (issue #16): vocabulary -> tokenizer <= 1 s; 1 MB of text -> ids <= 1 s.

Usage: python benchmarks/bench_tokenize.py [--repeat N] [--tokens N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import testdata  # noqa: E402

TARGET_TOKENS = 248_320
MB = 1 << 20


def grown_vocab(into: Path, size: int) -> Path:
    """ggml-vocab-qwen35.gguf with extra tokens and merges up to ``size`` tokens."""
    import gguf
    import numpy as np

    import nneditor

    src = testdata.ensure("llama.cpp-vocab") / "ggml-vocab-qwen35.gguf"
    with nneditor.open(src) as doc:
        md = doc.metadata
        tokens = list(md["tokenizer.ggml.tokens"])
        merges = list(md["tokenizer.ggml.merges"])
        types = [int(t) for t in md["tokenizer.ggml.token_type"]]
        keep = {
            k: md[k]
            for k in (
                "tokenizer.ggml.pre",
                "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.eos_token_id",
            )
            if k in md
        }
    normal = [t for t, ty in zip(tokens, types, strict=True) if ty == 1 and len(t) <= 6]
    have = set(tokens)
    rng = np.random.default_rng(0)
    first = next(i for i, ty in enumerate(types) if ty != 1)  # specials stay at the end
    extra_tokens: list[str] = []
    extra_merges: list[str] = []
    while len(tokens) + len(extra_tokens) < size:
        a, b = (normal[i] for i in rng.integers(0, len(normal), 2))
        if a + b in have or " " in a + b:
            continue
        have.add(a + b)
        extra_tokens.append(a + b)
        extra_merges.append(f"{a} {b}")
    all_tokens = tokens[:first] + extra_tokens + tokens[first:]
    all_types = types[:first] + [1] * len(extra_tokens) + types[first:]
    path = into / f"vocab-{size}.gguf"
    w = gguf.GGUFWriter(str(path), "qwen35")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(str(keep.get("tokenizer.ggml.pre", "qwen35")))
    w.add_token_list(all_tokens)
    w.add_token_types(all_types)
    w.add_token_merges(merges + extra_merges)
    shift = len(extra_tokens)
    for key, add in (
        ("tokenizer.ggml.bos_token_id", w.add_bos_token_id),
        ("tokenizer.ggml.eos_token_id", w.add_eos_token_id),
    ):
        if key in keep:
            i = int(keep[key])
            add(i + shift if i >= first else i)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@contextlib.contextmanager
def quiet_stderr():  # noqa: ANN201 - llama.cpp logs from C past verbose=False
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def best(fn, repeat: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=TARGET_TOKENS)
    args = ap.parse_args()

    from tokenizers import Tokenizer

    from nneditor.tokenize import load_tokenizer

    texts = json.loads((ROOT / "tests/data/llama_cpp_token_refs.json").read_text("utf-8"))["texts"]
    unit = "\n".join(t for t in texts if t)
    text = (unit * (MB // len(unit.encode()) + 1)).encode()[:MB].decode("utf-8", "ignore")

    with tempfile.TemporaryDirectory() as tmp:
        path = grown_vocab(Path(tmp), args.tokens)
        build = best(lambda: load_tokenizer(path), args.repeat)  # open + read + build
        tok = load_tokenizer(path)
        assert tok.vocab_size == args.tokens
        encode = best(lambda: tok.encode(text), args.repeat)
        n_ids = len(tok.encode(text))
        json_path = Path(tmp) / "tokenizer.json"
        json_path.write_text(tok.encoder.plain.to_str(), encoding="utf-8")  # type: ignore[attr-defined]
        ref_build = best(lambda: Tokenizer.from_file(str(json_path)), args.repeat)
        ref = Tokenizer.from_file(str(json_path))
        ref_encode = best(lambda: ref.encode(text, add_special_tokens=False), args.repeat)
        rows = [
            ("GGUF file -> tokenizer", build, ref_build, "tokenizers from_file"),
            ("1 MB -> ids", encode, ref_encode, "tokenizers encode"),
        ]
        try:
            from llama_cpp import Llama
        except ImportError:
            llama = None
        else:
            with quiet_stderr():
                llama = Llama(str(path), vocab_only=True, verbose=False)
                lc_build = best(
                    lambda: Llama(str(path), vocab_only=True, verbose=False), args.repeat
                )
            raw = text.encode()
            lc_encode = best(lambda: llama.tokenize(raw, add_bos=False), args.repeat)
            same = llama.tokenize(raw, add_bos=False) == tok.encoder.encode(text, False)
            rows += [
                ("GGUF file -> tokenizer", build, lc_build, "llama.cpp vocab_only load"),
                ("1 MB -> ids", encode, lc_encode, f"llama.cpp tokenize (ids equal: {same})"),
            ]

    print(
        f"vocabulary: {args.tokens:,} tokens; text: {len(text.encode()):,} bytes -> {n_ids:,} ids"
    )
    print(f"{'step':<26}{'nneditor s':>12}{'anchor s':>10}{'ratio':>8}  anchor")
    for step, ours, anchor, name in rows:
        print(f"{step:<26}{ours:>12.3f}{anchor:>10.3f}{ours / anchor:>8.2f}  {name}")
    print(
        f"targets: build {build:.3f} s <= 1 s: {build <= 1}; 1 MB {encode:.3f} s <= 1 s: "
        f"{encode <= 1}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
