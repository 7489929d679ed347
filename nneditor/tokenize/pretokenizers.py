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

# DeepSeek LLM's letters are listed by range (Latin, Greek, Cyrillic, ... as its tokenizer.json
# has them); DeepSeek V3 splits CJK and digits first
_DEEPSEEK_LLM = (
    "[\r\n]",
    "\\s?[A-Za-z\xb5\xc0-\xd6\xd8-\xf6\xf8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
    "\\p{N}+",
)
_DEEPSEEK_V3 = (
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)

# Regular expressions of the rarer families, as llama.cpp (src/llama-vocab.cpp) writes them
_JAIS2 = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    + "".join(rf"|\s{{{n}}}(?!\S)" for n in (512, 256, 128, 64, 32, 16, 8, 4))
    + r"|\s{1,2}(?!\S)|\s{1}"
)
_BLOOM = " ?[^(\\s|.,!?…。，、।۔،)]+"
_SPARK2_5 = (
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}",
)
_UP_LETTERS = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_LOW_LETTERS = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_YOUTU = (
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    rf"[^\r\n\p{{L}}\p{{N}}]?{_UP_LETTERS}*{_LOW_LETTERS}+{_CONTRACTIONS}?"
    rf"|[^\r\n\p{{L}}\p{{N}}]?{_UP_LETTERS}+{_LOW_LETTERS}*{_CONTRACTIONS}?"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
_UFAKZEKA = r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_BAILINGMOE = (
    r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
)
_EXAONE_MOE = (
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?"
    + r"|\s*[\r\n]|\s+(?!\S)|\s+"
)
_MINICPM5 = (
    r"\p{N}{1,3}",
    _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
_UPPER_M = r"((?=[\p{L}\p{M}])([^a-z]))"
_LOWER_M = r"((?=[\p{L}\p{M}])([^A-Z]))"
_GRANITE_EMB_MULTI = (
    rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER_M}*{_LOWER_M}+{_CONTRACTIONS}?"
    rf"|[^\r\n\p{{L}}\p{{N}}]?{_UPPER_M}+{_LOWER_M}*{_CONTRACTIONS}?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# llama.cpp splits digit runs for Tiny Aya and AFMoE with its own code (unicode.cpp), not a
# regular expression: each run of \p{N} gives its leading 1-2 digits, then groups of three
# ("1314151" -> 1 314 151). This expression does the same within every maximal run.
_DIGIT_GROUPS = r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))"
_TINY_AYA = (
    _DIGIT_GROUPS,
    rf"[^\r\n\p{{L}}\p{{N}}]?{_UP_LETTERS}*{_LOW_LETTERS}+{_CONTRACTIONS}?"
    rf"|[^\r\n\p{{L}}\p{{N}}]?{_UP_LETTERS}+{_LOW_LETTERS}*{_CONTRACTIONS}?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# SuperBPE's second expression runs through std::regex (ECMAScript: \d is [0-9])
_SUPERBPE = (r"\p{N}+", r"(?=([0-9]{3})+(?![0-9]))")
# AFMoE (Arcee's Trinity): its CJK and Asian-script ranges exactly as llama.cpp writes them
# (U+8C48 and U+0E40 start two of them), then DeepSeek V3's main expression
_AFMOE = (
    _DIGIT_GROUPS,
    "[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f"
    "\u2f00-\u2fdf\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f"
    "\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+",
    _DEEPSEEK_V3[2],
)
_CHAMELEON = (
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    _GPT2,
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
    "glm4": PreTokenizer("glm4", (_LLAMA3,), ignore_merges=True),
    "gpt2": PreTokenizer("gpt2", (_GPT2,)),
    "starcoder": PreTokenizer("starcoder", (r"\p{N}", _GPT2)),
    "falcon": PreTokenizer("falcon", (r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]")),
    # BLOOM, Poro, GPT-3 Finnish: a piece runs to the next space or punctuation mark
    "bloom": PreTokenizer("bloom", (_BLOOM,)),
    "qwen2": PreTokenizer("qwen2", (_QWEN2,)),
    "qwen35": PreTokenizer("qwen35", (_QWEN35,)),
    "tekken": PreTokenizer("tekken", (_TEKKEN,), ignore_merges=True, add_bos=True),
    "gpt-4o": PreTokenizer("gpt-4o", (_GPT4O,)),
    "seed-coder": PreTokenizer("seed-coder", (_SEED_CODER,)),
    "deepseek-llm": PreTokenizer("deepseek-llm", _DEEPSEEK_LLM),
    "deepseek-v3": PreTokenizer("deepseek-v3", _DEEPSEEK_V3),
    "jais-2": PreTokenizer("jais-2", (_JAIS2,)),
    "viking": PreTokenizer("viking", (_BLOOM, r"\p{N}")),
    "spark2_5": PreTokenizer("spark2_5", _SPARK2_5),
    "youtu": PreTokenizer("youtu", _YOUTU, ignore_merges=True),
    "ufakzeka": PreTokenizer("ufakzeka", (_UFAKZEKA,)),
    "bailingmoe": PreTokenizer("bailingmoe", (_BAILINGMOE,)),
    "laguna": PreTokenizer("laguna", ("[^\n]+|[\n]+", _QWEN2)),
    "exaone-moe": PreTokenizer("exaone-moe", (_EXAONE_MOE,)),
    "minicpm5": PreTokenizer("minicpm5", _MINICPM5, ignore_merges=True),
    "granite-embed-multi-97m": PreTokenizer(
        "granite-embed-multi-97m", (_GRANITE_EMB_MULTI,), ignore_merges=True
    ),
    "chameleon": PreTokenizer("chameleon", _CHAMELEON, add_bos=True),
    "tiny_aya": PreTokenizer("tiny_aya", _TINY_AYA),
    "superbpe": PreTokenizer("superbpe", _SUPERBPE),
    "afmoe": PreTokenizer("afmoe", _AFMOE),
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
    # llama-vocab.cpp: one type, CHATGLM4; GLM-4 and GLM-5 also ignore merges
    "chatglm-bpe": "chatglm4",
    **{n: "glm4" for n in ("glm4", "glm5")},
    **{
        n: "gpt2"
        for n in (
            "gpt-2",
            "phi-2",
            "mpt",
            "olmo",
            "jais",
            "trillion",
            "gigachat",
            "exaone4",
            "jina-es",
            "jina-de",
            "jina-v2-es",
            "jina-v2-de",
            "a.x-4.0",
            "mellum",
            "modern-bert",
            "granite-docling",
            # llama.cpp also sets add_sep for these three, which its BPE tokenizer never reads
            "jina-v1-en",
            "jina-v2-code",
            "roberta-bpe",
        )
    },  # fmt: skip
    **{
        n: "starcoder"
        for n in (
            "starcoder",
            "refact",
            "command-r",
            "smollm",
            "codeshell",
            "exaone",
            "minerva-7b",
            "mellum2",
        )  # fmt: skip
    },
    "falcon": "falcon",
    **{n: "bloom" for n in ("bloom", "poro-chat", "gpt3-finnish")},
    **{
        n: "qwen2"
        for n in (
            "qwen2",
            "deepseek-r1-qwen",
            "stablelm2",
            "hunyuan",
            "megrez",
            "kormo",
            "f2llmv2",
            "solar-open",
            "grok-2",  # Grok 2's expression is Qwen2's, written out again
        )
    },  # fmt: skip
    "tekken": "tekken",
    **{n: "gpt-4o" for n in ("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2")},
    **{
        n: n
        for n in (
            "jais-2",
            "viking",
            "spark2_5",
            "youtu",
            "ufakzeka",
            "laguna",
            "exaone-moe",
            "minicpm5",
            "granite-embed-multi-97m",
            "chameleon",
        )
    },  # fmt: skip
    **{n: "bailingmoe" for n in ("bailingmoe", "bailingmoe2", "llada-moe")},
    **{n: "tiny_aya" for n in ("tiny_aya", "cohere2moe")},
    "superbpe": "superbpe",
    "afmoe": "afmoe",
    "seed-coder": "seed-coder",
    "deepseek-llm": "deepseek-llm",
    **{n: "deepseek-v3" for n in ("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4")},
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
