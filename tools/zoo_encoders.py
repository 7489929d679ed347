"""Zoo encoders: embedding models written by transformers and converted by llama.cpp's own
converter (XLM-RoBERTa as bge-m3 and multilingual-e5 are, EmbeddingGemma, nomic-embed-text,
ModernBERT);
the NumPy decoder runs them as encoders (tests/integration/test_decoder_numerics.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_decoders import _COMMON, _SMOL, _spm_model, _wheel, convert


def _unigram(words: list[str], seed: int, **ids: int) -> bytes:
    """A 32-piece SentencePiece unigram model trained on seeded 10-word lines of ``words``
    (``ids``: the special pieces' ids, sentencepiece's defaults otherwise)."""
    import io
    import random

    import sentencepiece as spm

    rng = random.Random(seed)
    lines = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(300)]
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=32,
        model_type="unigram",
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
        **ids,
    )
    return out.getvalue()


#: an XLM-RoBERTa encoder (bge-m3, multilingual-e5): positions after the padding id, a
#: SentencePiece unigram vocabulary
XLMR = "encoder-xlm-roberta"


def xlmr_tokenizer(path: Path) -> Any:  # noqa: ANN401
    """XLM-R's SentencePiece model (<unk> 0, <s> 1, </s> 2) in ``path`` and transformers'
    tokenizer of it (fairseq's ids: spm's + 1, <mask> after them)."""
    import transformers as tf

    words = ["the", "model", "reads", "every", "layer", "weights", "écrit", "Gewicht", "层", "和"]
    path.mkdir(parents=True, exist_ok=True)
    (path / "sentencepiece.bpe.model").write_bytes(_unigram(words, 1))
    return tf.XLMRobertaTokenizer.from_pretrained(str(path))


def xlmr_config(vocab: int, **extra: Any) -> Any:  # noqa: ANN401
    import transformers as tf

    return tf.XLMRobertaConfig(
        vocab_size=vocab,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=66,
        type_vocab_size=1,
        pad_token_id=1,
        **extra,
    )


def _xlmr_snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    tok = xlmr_tokenizer(path)
    config = xlmr_config(len(tok))
    torch.manual_seed(0)
    model = tf.XLMRobertaModel(config).eval()
    with torch.no_grad():  # unit norms and zero biases would hide a missing weight
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))


#: an EmbeddingGemma encoder: Gemma 3's blocks attending both ways (windows half each way)
EMBEDDING_GEMMA = "encoder-embeddinggemma"


def _embedding_gemma(path: Path) -> None:
    import json

    import torch
    import transformers as tf

    window = 6  # 12 prompt positions: the local layers' windows cut both ways
    config = tf.Gemma3TextConfig(
        vocab_size=320,
        **{**_COMMON, "num_hidden_layers": 7},  # six local layers, a global one, a local one
        head_dim=16,
        query_pre_attn_scalar=16,
        sliding_window=window,
        use_bidirectional_attention=True,
    )
    torch.manual_seed(0)
    model = tf.Gemma3TextModel(config).eval()
    with torch.no_grad():  # unit norms would hide a missing or misplaced one
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(path))
    (path / "tokenizer.model").write_bytes(_spm_model())
    meta = path / "config.json"  # as released: transformers narrows the window when it loads
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "sliding_window": window}))


#: nomic-embed-text v1.5 as Nomic publishes it: its own config keys and tensor names
#: (Wqkv, fc11/fc12/fc2, norm1/norm2), which llama.cpp's converter reads; the keys transformers'
#: NomicBertModel reads stand beside them with the same sizes
NOMIC = "encoder-nomic-bert"
_NOMIC_NAMES = [
    (r"^layers\.(\d+)\.self_attn\.o_proj\.", r"encoder.layers.\1.attn.out_proj."),
    (r"^layers\.(\d+)\.mlp\.up_proj\.", r"encoder.layers.\1.mlp.fc11."),
    (r"^layers\.(\d+)\.mlp\.gate_proj\.", r"encoder.layers.\1.mlp.fc12."),
    (r"^layers\.(\d+)\.mlp\.down_proj\.", r"encoder.layers.\1.mlp.fc2."),
    (r"^layers\.(\d+)\.post_attention_layernorm\.", r"encoder.layers.\1.norm1."),
    (r"^layers\.(\d+)\.post_mlp_layernorm\.", r"encoder.layers.\1.norm2."),
    (r"^embeddings\.LayerNorm\.", "emb_ln."),
]


def _nomic_snapshot(path: Path) -> None:
    import re

    import torch
    import transformers as tf
    from safetensors.torch import save_file

    vocab_dir = _wheel("minilm")  # a real WordPiece vocabulary, as nomic-embed-text has
    sizes = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = tf.NomicBertConfig(
        vocab_size=30522,
        intermediate_size=128,
        rope_parameters={"rope_theta": 1000.0, "rope_type": "default"},
        **sizes,
    )
    torch.manual_seed(0)
    model = tf.NomicBertModel(config).eval()
    state: dict[str, Any] = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower():
                p.add_(torch.randn_like(p) * 0.1)
        params = dict(model.named_parameters())
    for i in range(config.num_hidden_layers):
        pre = f"layers.{i}.self_attn."
        qkv = [params.pop(f"{pre}{k}_proj.weight") for k in "qkv"]
        state[f"encoder.layers.{i}.attn.Wqkv.weight"] = torch.cat(qkv).detach().contiguous()
    for name, p in params.items():
        for pattern, repl in _NOMIC_NAMES:
            name = re.sub(pattern, repl, name)
        state[name] = p.detach().contiguous()
    path.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path / "model.safetensors"))
    nomic = {  # Nomic's keys (nomic-embed-text-v1.5's values where they are not sizes)
        "n_embd": 64,
        "n_layer": 2,
        "n_head": 4,
        "n_inner": 128,
        "n_positions": 8192,
        "max_trained_positions": 2048,
        "activation_function": "swiglu",
        "causal": False,
        "prenorm": False,
        "qkv_proj_bias": False,
        "mlp_fc1_bias": False,
        "mlp_fc2_bias": False,
        "rotary_emb_base": 1000,
        "rotary_emb_fraction": 1.0,
        "rotary_emb_interleaved": False,
        "rotary_emb_scale_base": None,
        "rotary_scaling_factor": None,
        "layer_norm_epsilon": 1e-12,
        "type_vocab_size": 2,
    }
    native = {k: v for k, v in config.to_dict().items() if k not in ("id2label", "label2id")}
    released = {
        **native,
        **nomic,
        "model_type": "nomic_bert",
        "architectures": ["NomicBertModel"],
    }
    (path / "config.json").write_text(json.dumps(released, indent=1))
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (vocab_dir / name).is_file():
            shutil.copy(vocab_dir / name, path / name)


#: a ModernBERT encoder (answerdotai/ModernBERT, and gte-, nomic- and Granite embedding R2 built on
#: it): pre-norm blocks without norm biases, a global layer every third (0, 3) with its own RoPE
#: base, windowed ones between (|i - j| <= local_attention / 2), a GeGLU feed-forward
MODERNBERT = "encoder-modernbert"
#: ModernBERT's special tokens (its tokenizer's, after the BPE vocabulary)
_MODERNBERT_SPECIAL = {
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "mask_token": "[MASK]",
}


def _modernbert_snapshot(path: Path) -> None:
    import torch
    import transformers as tf
    from testdata import ensure

    from nneditor.tokenize import load_tokenizer

    # ModernBERT's own BPE vocabulary is not at hand: SmolLM2's GPT-2 style one (a pre-tokenizer
    # llama.cpp's converter recognises) with ModernBERT's special tokens added after it
    plain = load_tokenizer(ensure(_SMOL)).encoder.plain  # type: ignore[attr-defined]
    plain.add_special_tokens(list(_MODERNBERT_SPECIAL.values()))  # in ModernBERT's order
    fast = tf.PreTrainedTokenizerFast(tokenizer_object=plain, **_MODERNBERT_SPECIAL)
    cls, sep = fast.cls_token_id, fast.sep_token_id
    config = tf.ModernBertConfig(
        vocab_size=len(fast),
        hidden_size=64,
        num_hidden_layers=6,  # global layers 0 and 3, windowed 1, 2, 4, 5
        num_attention_heads=4,
        intermediate_size=64,
        hidden_activation="gelu",  # exact, as ModernBERT's
        max_position_embeddings=128,
        norm_bias=False,
        local_attention=4,  # each way 2 of the 12 prompt positions: the global layers see more
        global_attn_every_n_layers=3,
        global_rope_theta=160000.0,
        local_rope_theta=10000.0,
        pad_token_id=fast.pad_token_id,
        bos_token_id=cls,  # as ModernBERT's config: [CLS] opens, [SEP] closes
        eos_token_id=sep,
        cls_token_id=cls,
        sep_token_id=sep,
    )
    torch.manual_seed(0)
    model = tf.ModernBertModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # unit norms would hide a missing or misplaced one
                p.add_(torch.randn_like(p) * 0.1)
            elif p.dim() == 2 and "tok_embeddings" not in name:
                # ModernBERT's initialisation (std 0.02, its output projections less) leaves
                # every block a fraction of a percent of the output: unit-variance projections
                # make each block, and attention beyond the window, move it
                p.normal_(0.0, p.shape[1] ** -0.5)
    model.save_pretrained(str(path))
    fast.save_pretrained(str(path))
    meta = path / "config.json"  # as ModernBERT's releases: a period and two bases, no
    released = json.loads(meta.read_text())  # per-layer types or RoPE table
    released.pop("layer_types", None)
    released.pop("rope_parameters", None)
    released.update(
        global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0
    )
    meta.write_text(json.dumps(released, indent=1))


#: a T5 v1.1 encoder (T5EncoderModel: the text encoder FLUX and SD3 read), gated GELU, 32
#: relative-position buckets, a SentencePiece unigram vocabulary with T5's ids and 100
#: sentinel tokens
T5 = "encoder-t5"
#: the same as UMT5 (UMT5EncoderModel: Wan 2.x's text encoder), each layer with its own table
UMT5 = "encoder-umt5"


def _t5_snapshot(path: Path, umt5: bool = False) -> None:
    import torch
    import transformers as tf

    words = ["a", "photo", "of", "the", "cat", "on", "red", "mountain", "under", "sky", "écrit"]
    path.mkdir(parents=True, exist_ok=True)
    # T5's spiece.model: <pad> 0, </s> 1, <unk> 2, no <s>
    (path / "spiece.model").write_bytes(_unigram(words, 2, pad_id=0, eos_id=1, unk_id=2, bos_id=-1))
    tok = tf.T5TokenizerFast.from_pretrained(str(path))  # (+100 sentinels <extra_id_N>)
    config = (tf.UMT5Config if umt5 else tf.T5Config)(
        vocab_size=len(tok),
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
    )
    torch.manual_seed(0)
    model = (tf.UMT5EncoderModel if umt5 else tf.T5EncoderModel)(config).eval()
    with torch.no_grad():  # unit norms would hide a missing one; a table wide enough to matter
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
            if "relative_attention_bias" in name:
                p.mul_(20.0)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))


#: CLIP's text encoder (CLIPTextModel: Stable Diffusion's and FLUX's clip_l), QuickGELU, with a
#: CLIP-style tokenizer.json (lowercased words ending in </w>, framed by start and end tokens)
CLIP_TEXT = "encoder-clip-text"


def _clip_tokenizer(path: Path) -> int:
    """A small byte-level BPE trained the way CLIP's tokenizer is built; returns its size."""
    import random

    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    rng = random.Random(4)
    words = ["a", "photo", "of", "the", "cat", "on", "red", "mountain", "dog's", "2024", "Sky!"]
    lines = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(400)]
    tok = Tokenizer(models.BPE(end_of_word_suffix="</w>", unk_token="<|endoftext|>"))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    words_re = r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(words_re), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    specials = ["<|startoftext|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        end_of_word_suffix="</w>",
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(lines, trainer)
    start, end = (tok.token_to_id(s) for s in specials)
    tok.post_processor = processors.RobertaProcessing(
        (specials[1], end), (specials[0], start), trim_offsets=False, add_prefix_space=False
    )
    tok.save(str(path / "tokenizer.json"))
    config = {"bos_token": specials[0], "eos_token": specials[1], "pad_token": specials[1]}
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return int(tok.get_vocab_size())


def _clip_text_snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    vocab = _clip_tokenizer(path)
    config = tf.CLIPTextConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=77,
        hidden_act="quick_gelu",
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    torch.manual_seed(0)
    model = tf.CLIPTextModel(config).eval()
    with torch.no_grad():  # unit norms and zero biases would hide a missing weight
        for name, p in model.named_parameters():
            if "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(path))


def register(generator: Callable[..., Any], generate: Callable[[str, Path], Path]) -> None:
    """Add the encoders (each a snapshot and its llama.cpp conversion) to the zoo."""
    generator(
        CLIP_TEXT,
        "transformers save_pretrained (CLIPTextModel) + a CLIP-style tokenizers BPE",
        "CLIP text encoder (as Stable Diffusion's and FLUX's clip_l), tiny random weights "
        "(snapshot only: llama.cpp does not convert CLIP's text side)",
    )(_clip_text_snapshot)
    generator(
        T5,
        "transformers save_pretrained (T5EncoderModel) + sentencepiece unigram",
        "T5 v1.1 encoder (as FLUX's and SD3's text encoder), tiny random weights",
    )(_t5_snapshot)
    generator(
        f"{T5}.gguf",
        "llama.cpp convert_hf_to_gguf.py",
        "the T5 encoder as llama.cpp converts it (t5encoder)",
    )(lambda path: convert(generate(T5, path.parents[2]), path, "f32"))
    generator(
        UMT5,
        "transformers save_pretrained (UMT5EncoderModel) + sentencepiece unigram",
        "UMT5 encoder (as Wan's text encoder: a relative-position table in every layer), tiny "
        "random weights (snapshot only: llama.cpp's converter takes T5 encoders)",
    )(lambda path: _t5_snapshot(path, umt5=True))
    generator(
        EMBEDDING_GEMMA,
        "transformers save_pretrained (Gemma3TextModel, use_bidirectional_attention)",
        "EmbeddingGemma encoder (as google/embeddinggemma-300m), tiny random weights",
    )(_embedding_gemma)
    generator(
        f"{EMBEDDING_GEMMA}.gguf",
        "llama.cpp convert_hf_to_gguf.py",
        "the EmbeddingGemma encoder as llama.cpp converts it (gemma-embedding)",
    )(lambda path: convert(generate(EMBEDDING_GEMMA, path.parents[2]), path, "f32"))
    generator(
        XLMR,
        "transformers save_pretrained + sentencepiece unigram",
        "XLM-RoBERTa encoder (as bge-m3 and multilingual-e5), tiny random weights",
    )(_xlmr_snapshot)
    generator(
        f"{XLMR}.gguf",
        "llama.cpp convert_hf_to_gguf.py",
        "the XLM-RoBERTa encoder as llama.cpp converts it (bert; its position table starts "
        "after the padding id)",
    )(lambda path: convert(generate(XLMR, path.parents[2]), path, "f32"))
    generator(
        NOMIC,
        "transformers NomicBertModel, saved as Nomic's own layout",
        "nomic-embed-text v1.5 encoder (Nomic's config keys and tensor names), tiny random "
        "weights, the real MiniLM WordPiece vocabulary",
    )(_nomic_snapshot)
    generator(
        f"{NOMIC}.gguf",
        "llama.cpp convert_hf_to_gguf.py",
        "the nomic-embed-text encoder as llama.cpp converts it (nomic-bert)",
    )(lambda path: convert(generate(NOMIC, path.parents[2]), path, "f32", raw_config=True))
    generator(
        MODERNBERT,
        "transformers save_pretrained (ModernBertModel), config.json as ModernBERT releases it",
        "ModernBERT encoder (global and windowed layers, GeGLU, bias-free LayerNorms), tiny random "
        "weights, SmolLM2's BPE vocabulary with ModernBERT's special tokens",
    )(_modernbert_snapshot)
    generator(
        f"{MODERNBERT}.gguf",
        "llama.cpp convert_hf_to_gguf.py",
        "the ModernBERT encoder as llama.cpp converts it (modern-bert)",
    )(lambda path: convert(generate(MODERNBERT, path.parents[2]), path, "f32"))
