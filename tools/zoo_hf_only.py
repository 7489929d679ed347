"""Zoo decoders that llama.cpp does not convert, as their releases ship them: OPT (facebook/opt-*,
Galactica), whose tokenizer is a GPT-2 vocab.json + merges.txt pair that puts ``</s>`` before
every text, GPT-Neo, GPT-J (EleutherAI's) and CodeGen (Salesforce's), with GPT-2's pair, XGLM
(facebook/xglm-*) with its SentencePiece model and the tokenizer.json transformers converts it
to. The NumPy decoder runs them (tests/integration/test_hf_only_decoders.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_weights import perturbed

OPT = "decoder-opt"

_WORDS = ["the", "model", "reads", "every", "layer", "and", "writes", "its", "weights", "Paris"]


def _opt_tokenizer(path: Path) -> int:
    """A byte-level BPE with fairseq's first ids (<s> 0, <pad> 1, </s> 2, <unk> 3), written as
    opt-125m's files are: vocab.json, merges.txt and a GPT2Tokenizer config with
    ``add_bos_token`` and ``</s>`` as its bos, eos and unk (no tokenizer.json). Returns the
    vocabulary size."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    lines = [" ".join(_WORDS[i:] + _WORDS[:i]) + "." for i in range(len(_WORDS))]
    special = ["<s>", "<pad>", "</s>", "<unk>"]
    bpe.train_from_iterator(lines, vocab_size=360, min_frequency=1, special_tokens=special)
    bpe.save_model(str(path))
    config = {  # opt-125m's tokenizer_config.json (its name_or_path left out)
        "tokenizer_class": "GPT2Tokenizer",
        "add_bos_token": True,
        "add_prefix_space": False,
        "bos_token": {"content": "</s>", "special": True, "__type": "AddedToken"},
        "eos_token": {"content": "</s>", "special": True, "__type": "AddedToken"},
        "unk_token": {"content": "</s>", "special": True, "__type": "AddedToken"},
        "pad_token": {"content": "<pad>", "special": True, "__type": "AddedToken"},
        "errors": "replace",
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    specials = {"bos_token": "</s>", "eos_token": "</s>", "unk_token": "</s>", "pad_token": "<pad>"}
    (path / "special_tokens_map.json").write_text(json.dumps(specials, indent=1))
    return int(bpe.get_vocab_size())


def _opt_snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    vocab = _opt_tokenizer(path)
    config = tf.OPTConfig(
        vocab_size=vocab,
        hidden_size=64,
        num_hidden_layers=2,
        ffn_dim=128,
        num_attention_heads=4,
        word_embed_proj_dim=64,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=2,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    perturbed(tf.OPTForCausalLM(config).eval()).save_pretrained(str(path))


GPT_NEO = "decoder-gpt-neo"
GPTJ = "decoder-gptj"


def _gpt2_pair(path: Path) -> int:
    """A byte-level BPE pair as GPT-2's own files (GPT-Neo's and GPT-J's releases ship them):
    vocab.json, merges.txt, ``<|endoftext|>`` as bos, eos and unk. Returns the vocabulary
    size."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    lines = [" ".join(_WORDS[i:] + _WORDS[:i]) + "." for i in range(len(_WORDS))]
    bpe.train_from_iterator(
        lines, vocab_size=330, min_frequency=1, special_tokens=["<|endoftext|>"]
    )
    bpe.save_model(str(path))
    end = {"content": "<|endoftext|>", "special": True, "__type": "AddedToken"}
    config = {
        "tokenizer_class": "GPT2Tokenizer",
        "add_prefix_space": False,
        "bos_token": end,
        "eos_token": end,
        "unk_token": end,
        "errors": "replace",
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return int(bpe.get_vocab_size())


def _gpt_neo_snapshot(path: Path) -> None:
    """GPT-Neo with global and local layers alternating (as gpt-neo-125m), its window (6)
    shorter than the tests' prompts."""
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    vocab = _gpt2_pair(path)
    config = tf.GPTNeoConfig(
        vocab_size=vocab,
        hidden_size=64,
        num_layers=4,
        num_heads=4,
        attention_types=[[["global", "local"], 2]],
        window_size=6,
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    perturbed(tf.GPTNeoForCausalLM(config).eval()).save_pretrained(str(path))


def _gptj_snapshot(path: Path) -> None:
    """GPT-J rotating a quarter of each head (as gpt-j-6b: 64 of 256), its head with a bias."""
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    vocab = _gpt2_pair(path)
    config = tf.GPTJConfig(
        vocab_size=vocab,
        n_embd=64,
        n_layer=2,
        n_head=4,
        rotary_dim=4,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    perturbed(tf.GPTJForCausalLM(config).eval()).save_pretrained(str(path))


CODEGEN = "decoder-codegen"
XGLM = "decoder-xglm"


def _codegen_snapshot(path: Path) -> None:
    """CodeGen as Salesforce/codegen-350M-mono is laid out: q/v/k fused in four groups of two
    heads each (codegen-350M: four of 64), half of each head rotated in adjacent pairs, a
    head with a bias."""
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    vocab = _gpt2_pair(path)
    config = tf.CodeGenConfig(
        vocab_size=vocab,
        n_embd=64,
        n_layer=2,
        n_head=8,
        rotary_dim=4,
        n_positions=64,
        n_ctx=64,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    perturbed(tf.CodeGenForCausalLM(config).eval()).save_pretrained(str(path))


def _xglm_tokenizer(path: Path) -> int:
    """XGLM's tokenizer files as facebook/xglm-564M ships them: a SentencePiece model
    (sentencepiece.bpe.model) and the tokenizer.json transformers' converter makes of it
    (fairseq's ids: <s> <pad> </s> <unk>, the pieces one above their SentencePiece ids, seven
    <madeupwordN> at the end; </s> before every text). Returns the vocabulary size."""
    import transformers as tf
    from transformers.convert_slow_tokenizer import XGLMConverter
    from zoo_encoders import _unigram

    words = [*_WORDS, "to", "Paris,", "écrit", "层"]  # (the tests' prompts, and more than English)
    model = path / "sentencepiece.bpe.model"  # SentencePiece's own ids: <unk> 0, <s> 1, </s> 2
    model.write_bytes(_unigram(words, 5))
    fairseq = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}

    class Slow:  # what the converter reads of the slow tokenizer transformers 5 no longer has
        vocab_file = str(model)

        @staticmethod
        def convert_tokens_to_ids(token: str) -> int:
            return fairseq[token]

    XGLMConverter(Slow()).converted().save(str(path / "tokenizer.json"))
    tok = tf.XGLMTokenizer.from_pretrained(str(path))
    tok.save_pretrained(str(path))  # its tokenizer_config.json
    return len(tok)


def _xglm_snapshot(path: Path) -> None:
    """XGLM as facebook/xglm-564M: scaled embeddings, fairseq's sinusoids from row 2, exact
    GELU, a final layer_norm, a head tied to the embedding."""
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    vocab = _xglm_tokenizer(path)
    config = tf.XGLMConfig(
        vocab_size=vocab,
        d_model=64,
        ffn_dim=128,
        num_layers=2,
        attention_heads=4,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    perturbed(tf.XGLMForCausalLM(config).eval()).save_pretrained(str(path))


def register(generator: Callable[..., Any]) -> None:
    """Add the decoders llama.cpp does not convert (snapshots only)."""
    generator(
        OPT,
        "transformers save_pretrained (OPTForCausalLM) + a tokenizers byte-level BPE pair",
        "OPT decoder (as facebook/opt-125m: positions from row 2, ReLU, tied head; its "
        "GPT-2 vocab.json + merges.txt put </s> before every text), tiny random weights",
    )(_opt_snapshot)
    generator(
        GPT_NEO,
        "transformers save_pretrained (GPTNeoForCausalLM) + a tokenizers byte-level BPE pair",
        "GPT-Neo decoder (as EleutherAI/gpt-neo-*: global and local layers alternating, "
        "unscaled scores), tiny random weights",
    )(_gpt_neo_snapshot)
    generator(
        GPTJ,
        "transformers save_pretrained (GPTJForCausalLM) + a tokenizers byte-level BPE pair",
        "GPT-J decoder (as EleutherAI/gpt-j-6b: parallel blocks, a quarter of each head "
        "rotated in adjacent pairs, a head with a bias), tiny random weights",
    )(_gptj_snapshot)
    generator(
        CODEGEN,
        "transformers save_pretrained (CodeGenForCausalLM) + a tokenizers byte-level BPE pair",
        "CodeGen decoder (as Salesforce/codegen-350M-mono: GPT-J's parallel blocks, q/v/k "
        "fused in four groups, half of each head rotated), tiny random weights",
    )(_codegen_snapshot)
    generator(
        XGLM,
        "transformers save_pretrained (XGLMForCausalLM) + a SentencePiece model and the "
        "tokenizer.json transformers converts it to",
        "XGLM decoder (as facebook/xglm-564M: scaled embeddings, fairseq's sinusoids from row "
        "2, a tied head; fairseq's token ids), tiny random weights",
    )(_xglm_snapshot)
