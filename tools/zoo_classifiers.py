"""Zoo encoder classifiers: the most-downloaded kinds of encoder checkpoint are fine-tuned
classifiers, not masked-language models: sentiment (distilbert-base-uncased-finetuned-sst-2-
english), natural-language inference and zero-shot classification (DeBERTa-v3 NLI models),
named entities (dslim/bert-base-NER). Each is written as transformers saves it, with its
labels and its tokenizer, tiny random weights. The NumPy decoder runs their heads
(tests/integration/test_classifiers.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo_mlm import _SIZES, _wordpiece
from zoo_weights import perturbed

SENTIMENT = "encoder-distilbert-sentiment"
NLI = "encoder-deberta-v3-nli"
NER = "encoder-bert-ner"
CROSS_ENCODER = "encoder-bert-cross-encoder"
RERANKER = "encoder-xlmr-reranker"
QA = "encoder-distilbert-squad"
VIT = "vision-vit"
DINOV2 = "vision-dinov2"

_NER_LABELS = ["O", "B-MISC", "I-MISC", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]


def _labelled(labels: list[str]) -> dict[str, Any]:
    return {
        "id2label": dict(enumerate(labels)),
        "label2id": {name: i for i, name in enumerate(labels)},
    }


def _sentiment_snapshot(path: Path) -> None:
    """DistilBertForSequenceClassification as the SST-2 release: NEGATIVE / POSITIVE, the
    first position through pre_classifier and ReLU."""
    import torch
    import transformers as tf

    config = tf.DistilBertConfig(
        vocab_size=30522,
        dim=64,
        n_layers=2,
        n_heads=4,
        hidden_dim=128,
        **_labelled(["NEGATIVE", "POSITIVE"]),
    )
    torch.manual_seed(0)
    perturbed(tf.DistilBertForSequenceClassification(config).eval()).save_pretrained(str(path))
    _wordpiece(path)


def _nli_snapshot(path: Path) -> None:
    """DebertaV2ForSequenceClassification as the DeBERTa-v3 NLI releases: entailment /
    neutral / contradiction, the first position through the ContextPooler (GELU)."""
    import torch
    import transformers as tf
    from zoo_mlm import _deberta_tokenizer, deberta_v3_config, sharpened

    tok = _deberta_tokenizer(path)
    config = deberta_v3_config(len(tok), **_labelled(["entailment", "neutral", "contradiction"]))
    torch.manual_seed(0)
    model = tf.DebertaV2ForSequenceClassification(config).eval()
    perturbed(sharpened(model)).save_pretrained(str(path))
    tok.save_pretrained(str(path))


def _ner_snapshot(path: Path) -> None:
    """BertForTokenClassification as dslim/bert-base-NER: nine BIO labels at every position
    (cased WordPiece there; the uncased vocabulary here)."""
    import torch
    import transformers as tf

    config = tf.BertConfig(vocab_size=30522, hidden_size=64, **_SIZES, **_labelled(_NER_LABELS))
    torch.manual_seed(0)
    perturbed(tf.BertForTokenClassification(config).eval()).save_pretrained(str(path))
    _wordpiece(path)


def _cross_encoder_snapshot(path: Path) -> None:
    """BertForSequenceClassification with one logit, as cross-encoder/ms-marco-MiniLM-L6-v2:
    a query and a passage read as a pair (the passage in segment 1), its relevance score."""
    import torch
    import transformers as tf

    config = tf.BertConfig(vocab_size=30522, hidden_size=64, num_labels=1, **_SIZES)
    torch.manual_seed(0)
    model = tf.BertForSequenceClassification(config).eval()
    with torch.no_grad():  # segment rows far apart and a head as large as trained ones
        model.bert.embeddings.token_type_embeddings.weight.mul_(20)
        model.classifier.weight.mul_(30)
    perturbed(model).save_pretrained(str(path))
    _wordpiece(path)


def _reranker_snapshot(path: Path) -> None:
    """XLMRobertaForSequenceClassification with one logit, as BAAI/bge-reranker-v2-m3: the
    first token through classifier.dense and tanh, then out_proj; XLM-R's SentencePiece
    vocabulary with fairseq's ids. llama.cpp converts it (rank pooling: cls, cls.output)."""
    import torch
    import transformers as tf
    from zoo_encoders import xlmr_config, xlmr_tokenizer

    tok = xlmr_tokenizer(path)
    config = xlmr_config(len(tok), num_labels=1)
    torch.manual_seed(0)
    model = perturbed(tf.XLMRobertaForSequenceClassification(config).eval())
    with torch.no_grad():  # a head as large as a fine-tune's
        model.classifier.out_proj.weight.mul_(30)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))


def _qa_snapshot(path: Path) -> None:
    """DistilBertForQuestionAnswering as distilbert-base-cased-distilled-squad: a start and an
    end logit per token (qa_outputs); the uncased WordPiece vocabulary here."""
    import torch
    import transformers as tf

    config = tf.DistilBertConfig(vocab_size=30522, dim=64, n_layers=2, n_heads=4, hidden_dim=128)
    torch.manual_seed(0)
    model = perturbed(tf.DistilBertForQuestionAnswering(config).eval())
    with torch.no_grad():  # confident starts and ends, as a fine-tune's
        model.qa_outputs.weight.mul_(40)
    model.save_pretrained(str(path))
    _wordpiece(path)


def _vit_snapshot(path: Path) -> None:
    """ViTForImageClassification as google/vit-base-patch16-224 ships it (transformers 4's
    names, as the release stores them), in small: 32x32 images in 8x8 patches, ten labels,
    its preprocessor_config.json."""
    import json

    import torch
    import transformers as tf
    from safetensors.torch import save_file

    labels = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead", "ray",
              "cock", "hen", "ostrich", "brambling"]  # fmt: skip
    config = tf.ViTConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        image_size=32,
        patch_size=8,
        **_labelled(labels),
    )
    torch.manual_seed(0)
    model = perturbed(tf.ViTForImageClassification(config).eval())
    model.save_pretrained(str(path))
    renames = {  # the release's (transformers 4) names
        "attention.q_proj": "attention.attention.query",
        "attention.k_proj": "attention.attention.key",
        "attention.v_proj": "attention.attention.value",
        "attention.o_proj": "attention.output.dense",
        "mlp.fc1": "intermediate.dense",
        "mlp.fc2": "output.dense",
    }
    state = {}
    for name, value in model.state_dict().items():
        name = name.replace("vit.layers.", "vit.encoder.layer.")
        for new, old in renames.items():
            name = name.replace(f".{new}.", f".{old}.")
        state[name] = value.contiguous()
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    processor = {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "image_processor_type": "ViTImageProcessor",
        "resample": 2,
        "rescale_factor": 1 / 255,
        "size": {"height": 32, "width": 32},
    }
    (path / "preprocessor_config.json").write_text(json.dumps(processor, indent=2))


def _dinov2_snapshot(path: Path) -> None:
    """Dinov2ForImageClassification as transformers writes it (the releases' names), in small:
    positions stored for 56x56 images in 14x14 patches (the releases': 518), an image
    processor that crops to 42x42 (theirs: 224), so the positions are interpolated; the layer
    scales, tokens, positions and head moved off their initialisation, as trained ones are."""
    import json

    import torch
    import transformers as tf

    labels = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead"]
    config = tf.Dinov2Config(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        mlp_ratio=2,
        image_size=56,
        patch_size=14,
        layerscale_value=0.5,
        **_labelled(labels),
    )
    torch.manual_seed(0)
    model = perturbed(tf.Dinov2ForImageClassification(config).eval())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("lambda1", "_token", "position_embeddings")) or "classifier" in name:
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(path))
    processor = {
        "crop_size": {"height": 42, "width": 42},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
        "image_processor_type": "BitImageProcessor",
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"shortest_edge": 48},
    }
    (path / "preprocessor_config.json").write_text(json.dumps(processor, indent=2))


def register(generator: Callable[..., Any], generate: Callable[[str, Path], Path]) -> None:
    """Add the classifiers to the zoo (snapshots, and llama.cpp's conversion of a reranker)."""
    from zoo_decoders import convert

    generator(
        SENTIMENT,
        "transformers save_pretrained (DistilBertForSequenceClassification)",
        "DistilBERT sentiment classifier (as distilbert-base-uncased-finetuned-sst-2-english: "
        "NEGATIVE / POSITIVE), tiny random weights, the real WordPiece vocabulary",
    )(_sentiment_snapshot)
    generator(
        NLI,
        "transformers save_pretrained (DebertaV2ForSequenceClassification) + sentencepiece",
        "DeBERTa-v3 NLI classifier (entailment / neutral / contradiction, as the zero-shot "
        "classification releases), tiny random weights",
    )(_nli_snapshot)
    generator(
        NER,
        "transformers save_pretrained (BertForTokenClassification)",
        "BERT named-entity tagger (as dslim/bert-base-NER: nine BIO labels per token), tiny "
        "random weights, the real WordPiece vocabulary",
    )(_ner_snapshot)
    generator(
        CROSS_ENCODER,
        "transformers save_pretrained (BertForSequenceClassification, one label)",
        "BERT cross-encoder (as cross-encoder/ms-marco-MiniLM-L6-v2: a query and a passage "
        "as a pair, one relevance logit), tiny random weights, the real WordPiece vocabulary",
    )(_cross_encoder_snapshot)
    generator(
        QA,
        "transformers save_pretrained (DistilBertForQuestionAnswering)",
        "DistilBERT extractive question answering (as distilbert-base-cased-distilled-squad: "
        "start and end logits per token), tiny random weights, the real WordPiece vocabulary",
    )(_qa_snapshot)
    generator(
        VIT,
        "transformers save_pretrained (ViTForImageClassification), the release's names",
        "Vision Transformer image classifier (as google/vit-base-patch16-224, in small: 32x32 "
        "images, 8x8 patches, ten ImageNet labels), tiny random weights",
    )(_vit_snapshot)
    generator(
        DINOV2,
        "transformers save_pretrained (Dinov2ForImageClassification)",
        "DINOv2 image classifier (as facebook/dinov2-* with a linear head, in small: positions "
        "for 56x56 images interpolated to the processor's 42x42 crop, layer scales, five "
        "labels), tiny random weights",
    )(_dinov2_snapshot)
    generator(
        RERANKER,
        "transformers save_pretrained (XLMRobertaForSequenceClassification, one label)",
        "XLM-R reranker (as BAAI/bge-reranker-v2-m3: one relevance logit from the first "
        "token through a dense layer and tanh), tiny random weights",
    )(_reranker_snapshot)
    generator(
        f"{RERANKER}.gguf",
        "llama.cpp convert_hf_to_gguf.py (f32)",
        "the XLM-R reranker as llama.cpp converts it: cls and cls.output for rank pooling",
    )(lambda path: convert(generate(RERANKER, path.parents[2]), path, "f32"))
