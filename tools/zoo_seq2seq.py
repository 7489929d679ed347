"""Zoo encoder-decoder models as releases ship them: FLAN-T5 / T5 1.1 (gated GELU, an untied
head) and t5-small's T5 1.0 (ReLU, a head tied to the shared embedding whose input is scaled by
d_model^-0.5), and BART. The NumPy decoder runs the encoder and the decoder's first step
(tests/integration/test_t5_seq2seq.py, test_bart.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_encoders import _unigram

FLAN_T5 = "seq2seq-flan-t5"
T5_SMALL = "seq2seq-t5"


def _snapshot(path: Path, v1_1: bool) -> None:
    import torch
    import transformers as tf

    words = [
        "translate",
        "English",
        "to",
        "German",
        "the",
        "house",
        "is",
        "wonderful",
        "Das",
        "Haus",
    ]
    path.mkdir(parents=True, exist_ok=True)
    (path / "spiece.model").write_bytes(_unigram(words, 3, pad_id=0, eos_id=1, unk_id=2, bos_id=-1))
    tok = tf.T5TokenizerFast.from_pretrained(str(path))
    config = tf.T5Config(
        vocab_size=len(tok),
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        # FLAN-T5's decoder deeper than its encoder: the layer counts are read apart (llama.cpp's
        # converter cannot write such a model; the T5 1.0 one it converts has 2 and 2)
        num_decoder_layers=3 if v1_1 else 2,
        num_heads=4,
        feed_forward_proj="gated-gelu" if v1_1 else "relu",
        decoder_start_token_id=0,
    )
    torch.manual_seed(0)
    model = tf.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():  # unit norms would hide a missing one; a table wide enough to matter
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
            if "relative_attention_bias" in name:
                p.mul_(20.0)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    if v1_1:  # FLAN-T5's head is its own matrix (transformers 5 saves T5's head tied)
        from safetensors.torch import load_file, save_file

        state = load_file(str(path / "model.safetensors"))
        state["lm_head.weight"] = torch.randn_like(state["shared.weight"]) * 0.05
        save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    # config.json as the releases state it (transformers 4): T5 1.1 unties its head, T5 1.0
    # says nothing; neither states transformers 5's scale_decoder_outputs
    meta = path / "config.json"
    released = json.loads(meta.read_text())
    for key in ("tie_word_embeddings", "scale_decoder_outputs"):
        released.pop(key, None)
    if v1_1:
        released["tie_word_embeddings"] = False
    meta.write_text(json.dumps(released, indent=1))


BART = "seq2seq-bart"


def _bart_tokenizer(path: Path) -> Any:  # noqa: ANN401
    """A byte-level BPE with RoBERTa's special tokens, as facebook/bart-base ships one
    (vocab.json, merges.txt; its tokenizer.json once saved)."""
    import transformers as tf
    from tokenizers import ByteLevelBPETokenizer

    path.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    words = ["the", "house", "is", "wonderful", "summarize", "this", "article", "about", "Paris"]
    lines = [" ".join(words[i:] + words[:i]) + "." for i in range(len(words))]
    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator(lines, vocab_size=330, min_frequency=1, special_tokens=special)
    bpe.save_model(str(path))
    return tf.BartTokenizerFast(str(path / "vocab.json"), str(path / "merges.txt"))


def _bart_config(vocab: int, **extra: Any) -> Any:  # noqa: ANN401
    import transformers as tf

    return tf.BartConfig(
        vocab_size=vocab,
        d_model=64,
        encoder_layers=2,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=64,
        **extra,
    )


def _bart_snapshot(path: Path) -> None:
    """BartForConditionalGeneration as facebook/bart-base ships it: learned positions from
    row 2, post-norm layers, a decoder deeper than its encoder, a final logits bias."""
    import torch
    import transformers as tf
    from zoo_weights import perturbed

    tok = _bart_tokenizer(path)
    config = _bart_config(len(tok))
    torch.manual_seed(0)
    model = perturbed(tf.BartForConditionalGeneration(config).eval())
    with torch.no_grad():  # zeros as initialised: a bias left out would change nothing
        model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.5)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))


MARIAN = "seq2seq-marian"
NLLB = "seq2seq-nllb"


def _tiny(path: Path, kind: str) -> None:
    """A Marian (opus-mt: scaled embeddings, fixed sinusoids, SiLU, the padding id as decoder
    start) or an M2M100 (NLLB-200: pre-norm, fairseq sinusoids from the padding id, ReLU)
    translation model as transformers writes it; ids go in (their tokenizers are not read)."""
    import torch
    import transformers as tf
    from zoo_weights import perturbed

    sizes = {
        "vocab_size": 128,
        "d_model": 64,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 128,
        "decoder_ffn_dim": 128,
        "max_position_embeddings": 64,
        "scale_embedding": True,
    }
    if kind == "marian":
        config = tf.MarianConfig(
            **sizes, pad_token_id=127, decoder_start_token_id=127, activation_function="swish"
        )
        model_cls = tf.MarianMTModel
    else:
        config = tf.M2M100Config(**sizes)
        model_cls = tf.M2M100ForConditionalGeneration
    torch.manual_seed(0)
    model = perturbed(model_cls(config).eval())
    if hasattr(model, "final_logits_bias"):
        with torch.no_grad():
            model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.5)
    model.save_pretrained(str(path))


BART_MNLI = "seq2seq-bart-mnli"


def _bart_mnli_snapshot(path: Path) -> None:
    """BartForSequenceClassification as facebook/bart-large-mnli ships it (the default model of
    transformers' zero-shot-classification pipeline): contradiction / neutral / entailment
    read at the decoder's last </s>."""
    import torch
    import transformers as tf
    from zoo_weights import perturbed

    tok = _bart_tokenizer(path)
    labels = ["contradiction", "neutral", "entailment"]
    config = _bart_config(
        len(tok),
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
    )
    torch.manual_seed(0)
    model = perturbed(tf.BartForSequenceClassification(config).eval())
    with torch.no_grad():  # a head as large as a fine-tune's
        model.classification_head.out_proj.weight.mul_(30)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))


def register(generator: Callable[..., Any], generate: Callable[[str, Path], Path]) -> None:
    """Add the encoder-decoder T5s (snapshots, and llama.cpp's conversion of T5 1.0)."""
    from zoo_decoders import convert

    generator(
        FLAN_T5,
        "transformers save_pretrained (T5ForConditionalGeneration, T5 1.1) + sentencepiece unigram",
        "encoder-decoder T5 1.1 (as FLAN-T5: gated GELU, an untied head), tiny random weights, "
        "a decoder deeper than its encoder",
    )(lambda path: _snapshot(path, v1_1=True))
    generator(
        T5_SMALL,
        "transformers save_pretrained (T5ForConditionalGeneration, T5 1.0) + sentencepiece unigram",
        "encoder-decoder T5 1.0 (as t5-small: ReLU, a tied head fed d_model^-0.5 times the "
        "decoder's output), tiny random weights",
    )(lambda path: _snapshot(path, v1_1=False))
    generator(
        BART,
        "transformers save_pretrained (BartForConditionalGeneration) + a byte-level BPE",
        "BART encoder-decoder (as facebook/bart-base and bart-large-cnn: post-norm layers, "
        "learned positions from row 2, a final logits bias), tiny random weights",
    )(_bart_snapshot)
    generator(
        BART_MNLI,
        "transformers save_pretrained (BartForSequenceClassification) + a byte-level BPE",
        "BART NLI classifier (as facebook/bart-large-mnli, zero-shot classification's default: "
        "the decoder over the shifted prompt, the head at its last </s>), tiny random weights",
    )(_bart_mnli_snapshot)
    generator(
        MARIAN,
        "transformers save_pretrained (MarianMTModel)",
        "Marian translation model (as Helsinki-NLP/opus-mt-*), tiny random weights, no tokenizer",
    )(lambda path: _tiny(path, "marian"))
    generator(
        NLLB,
        "transformers save_pretrained (M2M100ForConditionalGeneration)",
        "M2M100 translation model (as NLLB-200 and m2m100_418M), tiny random weights, no tokenizer",
    )(lambda path: _tiny(path, "m2m_100"))
    generator(
        f"{T5_SMALL}.gguf",
        "llama.cpp convert_hf_to_gguf.py",
        "the T5 1.0 encoder-decoder as llama.cpp converts it (t5: no output.weight, the head tied)",
    )(lambda path: convert(generate(T5_SMALL, path.parents[2]), path, "f32"))
