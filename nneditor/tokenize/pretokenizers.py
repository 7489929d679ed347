"""llama.cpp's pre-tokenizer rules for byte-level BPE vocabularies, by ``tokenizer.ggml.pre``.

A GGUF file names its pre-tokenizer (``tokenizer.ggml.pre``); llama.cpp (src/llama-vocab.cpp)
maps that name to a list of regular expressions applied one after another (each splits the
pieces the previous one left, keeping matched and unmatched text as separate pieces) and to a
few flags. The table holds the families NNEditor reproduces exactly; any other name is refused
with a sentence, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN35 = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
    + r"|\s+(?!\S)|\s+"
)

# Mistral's Tekken and OpenAI's o200k ("gpt-4o"), as llama.cpp writes them: a letter that is
# not a-z / not A-Z stands in for the upper- and lower-case classes its std::regex lacks
_UPPER = r"((?=[\p{L}])([^a-z]))"
_LOWER = r"((?=[\p{L}])([^A-Z]))"
_TEKKEN = (
    rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O = (
    rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTIONS}?"
    rf"|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*{_CONTRACTIONS}?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SEED_CODER = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+"
    + r"|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class PreTokenizer:
    family: str
    regexes: tuple[str, ...]
    ignore_merges: bool = False  # a piece that is a whole vocabulary entry is emitted as is
    add_bos: bool = False  # llama.cpp's default when the file has no add_bos_token


DEFAULT = PreTokenizer(
    "default",
    (r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"),
)
_FAMILIES = {
    "llama3": PreTokenizer("llama3", (_LLAMA3,), ignore_merges=True, add_bos=True),
    "dbrx": PreTokenizer("dbrx", (_LLAMA3,)),
    "chatglm4": PreTokenizer("chatglm4", (_LLAMA3,)),
    "gpt2": PreTokenizer("gpt2", (_GPT2,)),
    "starcoder": PreTokenizer("starcoder", (r"\p{N}", _GPT2)),
    "falcon": PreTokenizer("falcon", (r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]")),
    "qwen2": PreTokenizer("qwen2", (_QWEN2,)),
    "qwen35": PreTokenizer("qwen35", (_QWEN35,)),
    "tekken": PreTokenizer("tekken", (_TEKKEN,), ignore_merges=True, add_bos=True),
    "gpt-4o": PreTokenizer("gpt-4o", (_GPT4O,)),
    "seed-coder": PreTokenizer("seed-coder", (_SEED_CODER,)),
    "deepseek-coder": PreTokenizer(
        "deepseek-coder",
        ("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥ࠀ-一가-퟿]+", r"\p{N}"),
    ),
}
#: tokenizer.ggml.pre -> family (names llama.cpp accepts for each)
_NAMES = {
    **{
        n: "llama3"
        for n in (
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
        )
    },
    **{n: "dbrx" for n in ("dbrx", "smaug-bpe")},
    "chatglm-bpe": "chatglm4",
    **{
        n: "gpt2"
        for n in ("gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "gigachat", "exaone4")
    },
    **{
        n: "starcoder"
        for n in ("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva")
    },
    "falcon": "falcon",
    **{n: "qwen2" for n in ("qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez")},
    "tekken": "tekken",
    **{n: "gpt-4o" for n in ("gpt-4o", "llama4", "kanana2", "talkie")},
    "seed-coder": "seed-coder",
    "qwen35": "qwen35",
    "deepseek-coder": "deepseek-coder",
}


class UnknownPreTokenizer(ValueError):
    pass


def pre_tokenizer(name: str | None) -> PreTokenizer:
    """The rules llama.cpp applies for ``tokenizer.ggml.pre = name`` (missing: "default")."""
    if not name or name == "default":
        return DEFAULT
    family = _NAMES.get(name)
    if family is None:
        known = ", ".join(sorted(_NAMES))
        raise UnknownPreTokenizer(
            f"the vocabulary's pre-tokenizer {name!r} is not one NNEditor reproduces exactly "
            f"(supported: default, {known})"
        )
    return _FAMILIES[family]
