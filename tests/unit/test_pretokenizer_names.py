"""tokenizer.ggml.pre names resolve to the families llama.cpp's llama-vocab.cpp gives them."""

from __future__ import annotations

import pytest

from nneditor.tokenize.pretokenizers import UnknownPreTokenizer, pre_tokenizer


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("glm4", "glm4"),  # GLM-4-0414's converter writes "glm4"; llama.cpp: CHATGLM4 ...
        ("glm5", "glm4"),
        ("chatglm-bpe", "chatglm4"),
        ("llama-bpe", "llama3"),
        ("smollm", "starcoder"),
        ("qwen2", "qwen2"),
    ],
)
def test_names_resolve_to_llama_cpps_families(name: str, family: str) -> None:
    assert pre_tokenizer(name).family == family


def test_glm4_adds_no_bos_as_llama_cpp_clears_it() -> None:
    assert pre_tokenizer("glm4").add_bos is False


def test_glm4_is_chatglm4s_expression_with_merges_ignored() -> None:
    """... with ignore_merges for glm4 and glm5 only (llama-vocab.cpp)."""
    glm4, chatglm = pre_tokenizer("glm4"), pre_tokenizer("chatglm-bpe")
    assert glm4.regexes == chatglm.regexes
    assert glm4.ignore_merges and not chatglm.ignore_merges


def test_an_unknown_name_is_refused() -> None:
    with pytest.raises(UnknownPreTokenizer):
        pre_tokenizer("no-such-pre")


def test_bloom_pieces_run_to_the_next_space_or_punctuation_mark() -> None:
    """llama.cpp's BLOOM rule: text up to a space or punctuation, a leading space kept;
    punctuation between the pieces stands alone."""
    from tokenizers import Regex, pre_tokenizers

    rules = pre_tokenizer("bloom")
    assert rules.family == "bloom" and pre_tokenizer("poro-chat").family == "bloom"
    split = pre_tokenizers.Split(Regex(rules.regexes[0]), behavior="isolated")
    pieces = [p for p, _ in split.pre_tokenize_str("Hello, world! ça va？ 東京。")]
    assert pieces == ["Hello", ",", " world", "!", " ça", " va？", " 東京", "。"]
