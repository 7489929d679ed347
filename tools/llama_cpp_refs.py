#!/usr/bin/env python3
"""Capture llama.cpp's token ids for a multilingual text set, for every GGUF vocabulary the
tests use, into tests/data/llama_cpp_token_refs.json (the tests compare NNEditor's ids to it),
and llama.cpp's next-token choice at every position of a few prompts for the real quantized
GGUF into tests/data/llama_cpp_logit_refs.json (the NumPy decoder's top-1 must equal it).

Needs llama-cpp-python (builds from source in ~7 minutes on 2 cores; not a test dependency):
    pip install llama-cpp-python==0.3.36 && python3 tools/llama_cpp_refs.py [--logits]
Each text is tokenized twice: as llama.cpp does by default for the file (BOS per its flags,
special-token text as plain text) and with parse_special (``--special``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import testdata  # noqa: E402

TEXTS = [
    "Hello world",
    " leading space and  two  spaces",
    "The capital of France is Paris.",
    "北京是中国的首都。東京は日本の首都です。서울은 한국의 수도입니다.",
    "العربية: مرحبا بالعالم! كيف حالك؟",
    "Emoji 😀🚀🦙 and joined 👨\u200d👩\u200d👧\u200d👦 and flags 🇫🇷🇯🇵",
    "Combining: e\u0301 \u00e9 n\u0303 \u00f1 a\u0308\u0301 \u2126 \u210c \ufb01",
    "Digits 1 12 123 1234 12345 123456789 3.14159 1,000,000",
    "Whitespace runs:    \t\t tabs\tand\nnewlines\n\n three\n\n\ndone   ",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)  # code\n",
    "<|endoftext|><|im_start|>user\nhi<|im_end|>",
    "<s>[INST] special-token text </s> <unk> <|begin_of_text|>",
    "Ελληνικά, русский, עברית, हिन्दी, ไทย, Tiếng Việt",
    "'tis 'twas I'll you're we've she'd THEY'LL",
    "abc123def 12345x x1234567 ٣٤٥٦ 2² ½ 7२३४५",
    "",
]
VOCABS = [
    "gpt-2",
    "llama-bpe",
    "qwen2",
    "qwen35",
    "llama-spm",
    "phi-3",
    "starcoder",
    "command-r",
    "bert-bge",
    "gemma-4",
    "deepseek-llm",
    "nomic-bert-moe",  # a SentencePiece unigram (t5) vocabulary: XLM-RoBERTa's
]

#: pre-tokenizers llama.cpp ships no vocabulary for, applied to llama-bpe's vocabulary renamed
#: (tools/gguf_pre.py): "llama-bpe+tekken" and so on
PRE_VARIANTS = (
    "tekken", "gpt-4o", "lfm2", "seed-coder", "exaone4", "megrez", "deepseek-v3",
    "glm4", "jais-2", "viking", "spark2_5", "youtu", "ufakzeka", "bailingmoe", "laguna",
    "exaone-moe", "minicpm5", "granite-embed-multi-97m", "chameleon", "minimax-m2",
    "minerva-7b", "grok-2", "roberta-bpe", "tiny_aya", "superbpe", "afmoe",
)  # fmt: skip


def variant_file(folder: Path, name: str, dest: Path) -> Path:
    """The vocabulary file of ``name`` ("llama-bpe" or "llama-bpe+tekken") under ``folder``,
    a renamed copy written into ``dest`` for a variant."""
    from gguf_pre import with_pre

    base, _, pre = name.partition("+")
    src = folder / f"ggml-vocab-{base}.gguf"
    return with_pre(src, pre, dest / f"ggml-vocab-{base}-{pre}.gguf") if pre else src


def inp_texts(folder: Path, base: str) -> list[str]:
    raw = (folder / f"ggml-vocab-{base}.gguf.inp").read_bytes().decode("utf-8")
    return raw.split("\n__ggml_vocab_test__\n")


PROMPTS = [
    "The capital of France is",
    "def add(a, b):\n    return",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    "Le chat est sur la table, et le chien",
]


def logit_refs() -> dict[str, object]:
    """Per prompt: ids (llama.cpp's tokenization, special text parsed), and at every position
    (logits_all) llama.cpp's argmax and its 20 largest logits with their ids."""
    import numpy as np
    from llama_cpp import Llama

    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    path = testdata.ensure(name)
    llm = Llama(model_path=str(path), logits_all=True, n_ctx=256, verbose=False)
    cases = []
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        scores = np.array(llm.scores[: len(ids)])
        top = np.argsort(-scores, axis=-1)[:, :20]
        cases.append(
            {
                "text": text,
                "ids": ids,
                "top1": scores.argmax(-1).tolist(),
                "top20": top.tolist(),
                "top20_logits": np.round(np.take_along_axis(scores, top, -1), 4).tolist(),
            }
        )
    return {name: cases, "llama_cpp_python": "0.3.36"}


def main() -> int:
    from llama_cpp import Llama

    if "--logits" in sys.argv:
        dest = Path(__file__).resolve().parents[1] / "tests" / "data" / "llama_cpp_logit_refs.json"
        dest.write_text(json.dumps(logit_refs(), indent=1) + "\n", encoding="utf-8")
        print("wrote", dest)
        return 0

    out: dict[str, object] = {"texts": TEXTS, "llama_cpp_python": "0.3.36", "vocabs": {}}
    files = {v: testdata.ensure("llama.cpp-vocab") / f"ggml-vocab-{v}.gguf" for v in VOCABS}
    files["SmolLM2-135M-Instruct.Q4_1.gguf"] = testdata.ensure("SmolLM2-135M-Instruct.Q4_1.gguf")
    tmp = Path(tempfile.mkdtemp())
    folder = testdata.ensure("llama.cpp-vocab")
    for pre in PRE_VARIANTS:
        files[f"llama-bpe+{pre}"] = variant_file(folder, f"llama-bpe+{pre}", tmp)
    for name, path in files.items():
        llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
        plain = [llm.tokenize(t.encode(), add_bos=True, special=False) for t in TEXTS]
        special = [llm.tokenize(t.encode(), add_bos=True, special=True) for t in TEXTS]
        entry: dict[str, object] = {"plain": plain, "special": special}
        if "+" in name:  # and llama.cpp's own test texts for the vocabulary
            texts = inp_texts(folder, name.partition("+")[0])
            entry["inp"] = [llm.tokenize(t.encode(), add_bos=False, special=False) for t in texts]
        out["vocabs"][name] = entry  # type: ignore[index]
        print(name, "done")
    dest = Path(__file__).resolve().parents[1] / "tests" / "data" / "llama_cpp_token_refs.json"
    dest.write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print("wrote", dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
