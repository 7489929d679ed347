"""Zoo BERT-family encoders: BERT, DistilBERT and RoBERTa saved with their masked-LM heads,
in the layouts their best-known releases have (bert-base-uncased, distilbert-base-uncased,
roberta-base): the encoder under a ``bert.``/``distilbert.``/``roberta.`` prefix, the head beside
it, a pooler and (BERT) a next-sentence head that the logits do not pass through; and MPNet as
sentence-transformers ships it. The NumPy decoder runs the encoders and the heads
(tests/integration/test_masked_lm.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_decoders import _wheel
from zoo_weights import perturbed

BERT_MLM = "encoder-bert-mlm"
DISTILBERT_MLM = "encoder-distilbert-mlm"
ROBERTA_MLM = "encoder-roberta-mlm"

_SIZES = {"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
_WORDS = [
    "the",
    "model",
    "reads",
    "every",
    "layer",
    "and",
    "writes",
    "its",
    "weights",
    "to",
    "a",
    "file",
    "of",
    "tensors",
]


def _wordpiece(path: Path) -> None:
    """The real bert-base-uncased WordPiece vocabulary (MiniLM's), as these releases ship it."""
    vocab_dir = _wheel("minilm")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (vocab_dir / name).is_file():
            shutil.copy(vocab_dir / name, path / name)


def _bert_snapshot(path: Path) -> None:
    """BertForPreTraining, stored as bert-base-uncased stores it: TensorFlow's LayerNorm names
    (gamma, beta), the decoder matrix written out beside the tied embedding."""
    import torch
    import transformers as tf
    from safetensors.torch import save_file

    config = tf.BertConfig(vocab_size=30522, hidden_size=64, **_SIZES)
    torch.manual_seed(0)
    model = perturbed(tf.BertForPreTraining(config).eval())
    state = {}
    for name, p in model.state_dict().items():
        if name.endswith("position_ids"):
            continue
        if ".LayerNorm." in name:
            name = name.replace(".weight", ".gamma").replace(".bias", ".beta")
        state[name] = p.detach().clone().contiguous()
    path.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    released = {**config.to_dict(), "architectures": ["BertForMaskedLM"], "model_type": "bert"}
    (path / "config.json").write_text(json.dumps(released, indent=1))
    _wordpiece(path)


def _distilbert_snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    config = tf.DistilBertConfig(vocab_size=30522, dim=64, n_layers=2, n_heads=4, hidden_dim=128)
    torch.manual_seed(0)
    model = perturbed(tf.DistilBertForMaskedLM(config).eval())
    model.save_pretrained(str(path))
    _wordpiece(path)


def _roberta_snapshot(path: Path) -> None:
    """RobertaForMaskedLM with a byte-level BPE trained here, RoBERTa's special tokens first."""
    import torch
    import transformers as tf
    from tokenizers import ByteLevelBPETokenizer

    path.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    lines = [" ".join(_WORDS[i:] + _WORDS[:i]) for i in range(len(_WORDS))]
    bpe.train_from_iterator(lines, vocab_size=400, min_frequency=1, special_tokens=special)
    bpe.save_model(str(path))  # vocab.json + merges.txt, as roberta-base ships them
    tok = tf.RobertaTokenizerFast(str(path / "vocab.json"), str(path / "merges.txt"))
    config = tf.RobertaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        max_position_embeddings=66,
        pad_token_id=1,
        type_vocab_size=1,
        **_SIZES,
    )
    torch.manual_seed(0)
    model = perturbed(tf.RobertaForMaskedLM(config).eval())
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))


ALBERT = "encoder-albert"
ELECTRA = "encoder-electra"


def _albert_snapshot(path: Path) -> None:
    """AlbertForPreTraining as albert-base-v2 ships it: one layer shared by the three, 32-wide
    embeddings projected to 64, the masked-LM head back down to 32 (tied), the sentence-order
    head beside it; a SentencePiece unigram vocabulary with ALBERT's special pieces."""
    import torch
    import transformers as tf
    from zoo_encoders import _unigram

    path.mkdir(parents=True, exist_ok=True)
    words = ["the", "model", "reads", "every", "layer", "weights", "écrit", "Paris", "is", "a"]
    model_file = path / "spiece.model"  # <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4
    specials = {"pad_id": 0, "unk_id": 1, "bos_id": -1, "eos_id": -1}
    model_file.write_bytes(
        _unigram(words, 4, **specials, user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"])
    )
    tok = tf.AlbertTokenizer.from_pretrained(str(path))
    config = tf.AlbertConfig(
        vocab_size=len(tok),
        embedding_size=32,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    perturbed(tf.AlbertForPreTraining(config).eval()).save_pretrained(str(path))
    tok.save_pretrained(str(path))


def _electra_snapshot(path: Path) -> None:
    """ElectraForPreTraining (the discriminator, as google/electra-small-discriminator): BERT's
    blocks after a projection of 32-wide embeddings to 64, the replaced-token head beside."""
    import torch
    import transformers as tf

    config = tf.ElectraConfig(vocab_size=30522, embedding_size=32, hidden_size=64, **_SIZES)
    torch.manual_seed(0)
    perturbed(tf.ElectraForPreTraining(config).eval()).save_pretrained(str(path))
    _wordpiece(path)


MPNET = "encoder-mpnet"


def _mpnet_snapshot(path: Path) -> None:
    """MPNetModel as sentence-transformers' all-mpnet-base-v2 ships it: the encoder at the
    root, RoBERTa's special tokens around bert-base-uncased's WordPiece vocabulary (30527
    ids), a pooling module beside it."""
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    words = (_wheel("minilm") / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab = ["<s>", "<pad>", "</s>", "<unk>", *words, "<mask>"]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = tf.MPNetTokenizerFast(str(path / "vocab.txt"))
    config = tf.MPNetConfig(
        vocab_size=len(vocab), hidden_size=64, max_position_embeddings=514, **_SIZES
    )
    torch.manual_seed(0)
    model = tf.MPNetModel(config).eval()
    with torch.no_grad():  # a flat table would hide the relative positions
        for name, p in model.named_parameters():
            if "relative_attention_bias" in name:
                p.add_(torch.randn_like(p))
    perturbed(model).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    (path / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
            ],
            indent=2,
        )
    )
    (path / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": 64, "pooling_mode_mean_tokens": True}
    (path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))


DEBERTA_V3 = "encoder-deberta-v3"


def _deberta_tokenizer(path: Path) -> Any:  # noqa: ANN401
    """A SentencePiece unigram spm.model with DeBERTa-v3's special pieces ([PAD] 0, [CLS] 1,
    [SEP] 2, [UNK] 3; [MASK] added after them) and transformers' tokenizer of it."""
    import transformers as tf
    from zoo_encoders import _unigram

    path.mkdir(parents=True, exist_ok=True)
    words = ["the", "model", "reads", "every", "layer", "weights", "écrit", "Paris", "is", "a"]
    pieces = {"pad_piece": "[PAD]", "bos_piece": "[CLS]", "eos_piece": "[SEP]"}
    (path / "spm.model").write_bytes(
        _unigram(words, 5, pad_id=0, bos_id=1, eos_id=2, unk_id=3, unk_piece="[UNK]", **pieces)
    )
    return tf.DebertaV2Tokenizer.from_pretrained(str(path))


def deberta_v3_config(vocab: int, **extra: Any) -> Any:  # noqa: ANN401
    """deberta-v3-base's settings, in small: no absolute positions, disentangled attention
    over 2 x 256 log-bucketed relative positions, a LayerNorm'd table shared by all layers."""
    import transformers as tf

    return tf.DebertaV2Config(
        vocab_size=vocab,
        hidden_size=64,
        layer_norm_eps=1e-7,
        relative_attention=True,
        position_buckets=256,
        max_relative_positions=-1,
        max_position_embeddings=512,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        type_vocab_size=0,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        **_SIZES,
        **extra,
    )


def sharpened(model: Any) -> Any:  # noqa: ANN401
    """``model`` with its queries and keys scaled up: attention as sharp as a trained one's,
    so that positions change the values."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("query_proj.weight", "key_proj.weight")):
                p.mul_(10)
    return model


def _deberta_v3_snapshot(path: Path) -> None:
    """DeBERTa-v3 as microsoft/deberta-v3-base ships it: the masked-LM head under
    lm_predictions and the replaced-token head (mask_predictions) beside it."""
    import torch
    import transformers as tf
    from safetensors.torch import load_file, save_file

    tok = _deberta_tokenizer(path)
    torch.manual_seed(0)
    model = tf.DebertaV2ForMaskedLM(deberta_v3_config(len(tok), legacy=False)).eval()
    perturbed(sharpened(model)).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    state = load_file(str(path / "model.safetensors"))
    side = {  # the replaced-token detector beside the generator's head, as released
        "mask_predictions.dense.weight": torch.randn(64, 64) * 0.02,
        "mask_predictions.dense.bias": torch.zeros(64),
        "mask_predictions.LayerNorm.weight": torch.ones(64),
        "mask_predictions.LayerNorm.bias": torch.zeros(64),
        "mask_predictions.classifier.weight": torch.randn(1, 64) * 0.02,
        "mask_predictions.classifier.bias": torch.zeros(1),
    }
    save_file({**state, **side}, str(path / "model.safetensors"), metadata={"format": "pt"})


ESM2 = "encoder-esm2"
#: facebook/esm2_*'s vocabulary: specials, the residues, then <mask>
_ESM_VOCAB = [
    "<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P",
    "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-", "<null_1>",
    "<mask>",
]  # fmt: skip


def _esm2_snapshot(path: Path) -> None:
    """EsmForMaskedLM as facebook/esm2_t6_8M_UR50D ships it: rotary positions, token dropout,
    the contact-prediction head beside the encoder, EsmTokenizer's vocab.txt (no
    tokenizer.json)."""
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(_ESM_VOCAB) + "\n", encoding="utf-8")
    tok = tf.EsmTokenizer(str(path / "vocab.txt"))
    config = tf.EsmConfig(
        vocab_size=len(_ESM_VOCAB),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=1026,
        position_embedding_type="rotary",
        token_dropout=True,
        emb_layer_norm_before=False,
        mask_token_id=32,
        pad_token_id=1,
        layer_norm_eps=1e-5,
    )
    torch.manual_seed(0)
    model = perturbed(tf.EsmForMaskedLM(config).eval())
    with torch.no_grad():  # sharp attention, as trained: the rotation then changes the values
        for name, p in model.named_parameters():
            if name.endswith(("self.query.weight", "self.key.weight")):
                p.mul_(10)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))


def register(generator: Callable[..., Any]) -> None:
    """Add the masked-language models to the zoo (snapshots only: llama.cpp's converter drops
    the heads, and its BERT conversion is in the zoo already)."""
    generator(
        BERT_MLM,
        "transformers BertForPreTraining, saved in bert-base-uncased's layout (gamma/beta)",
        "BERT with its masked-LM and next-sentence heads (as bert-base-uncased), tiny random "
        "weights, the real bert-base-uncased WordPiece vocabulary",
    )(_bert_snapshot)
    generator(
        DISTILBERT_MLM,
        "transformers save_pretrained (DistilBertForMaskedLM)",
        "DistilBERT with its masked-LM head (as distilbert-base-uncased), tiny random weights, "
        "the real WordPiece vocabulary",
    )(_distilbert_snapshot)
    generator(
        ROBERTA_MLM,
        "transformers save_pretrained (RobertaForMaskedLM) + a tokenizers byte-level BPE",
        "RoBERTa with its masked-LM head (as roberta-base), tiny random weights",
    )(_roberta_snapshot)
    generator(
        ALBERT,
        "transformers save_pretrained (AlbertForPreTraining) + sentencepiece unigram",
        "ALBERT with its masked-LM and sentence-order heads (as albert-base-v2: one shared "
        "layer, projected embeddings), tiny random weights",
    )(_albert_snapshot)
    generator(
        ELECTRA,
        "transformers save_pretrained (ElectraForPreTraining)",
        "ELECTRA discriminator (as google/electra-small-discriminator: projected embeddings), "
        "tiny random weights, the real WordPiece vocabulary",
    )(_electra_snapshot)
    generator(
        MPNET,
        "transformers save_pretrained (MPNetModel) in sentence-transformers' layout",
        "MPNet encoder (as all-mpnet-base-v2: BERT's blocks, T5's relative positions), tiny "
        "random weights, its WordPiece vocabulary with RoBERTa's special tokens",
    )(_mpnet_snapshot)
    generator(
        DEBERTA_V3,
        "transformers save_pretrained (DebertaV2ForMaskedLM) + sentencepiece unigram",
        "DeBERTa-v3 with its masked-LM and replaced-token heads (as microsoft/deberta-v3-base: "
        "disentangled relative attention, 256 position buckets), tiny random weights",
    )(_deberta_v3_snapshot)
    generator(
        ESM2,
        "transformers save_pretrained (EsmForMaskedLM) + EsmTokenizer's vocab.txt",
        "ESM-2 protein language model (as facebook/esm2_t6_8M_UR50D: pre-norm, rotary, token "
        "dropout, a contact head), tiny random weights, the real residue vocabulary",
    )(_esm2_snapshot)
