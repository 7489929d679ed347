"""Zoo decoders that llama.cpp does not convert, as their releases ship them: OPT (facebook/opt-*,
Galactica), whose tokenizer is a GPT-2 vocab.json + merges.txt pair that puts ``</s>`` before
every text, GPT-Neo and GPT-J (EleutherAI's), with GPT-2's pair. The NumPy decoder runs them
(tests/integration/test_hf_only_decoders.py)."""

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
