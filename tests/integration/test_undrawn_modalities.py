"""Snapshots of models that do not read text tokens alone (SegFormer image classifiers, speech
recognizers other than wav2vec2 and HuBERT, such as data2vec-audio, text-and-image pairs) get
no graph from tensor names, with a sentence that names the family and what it works on,
instead of a made-up token transformer (every numbered stack chained after a token
embedding). Saved by transformers itself, tiny."""

from __future__ import annotations

import json

import pytest
from nneditor_cli import nneditor_cli

import nneditor

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")


def _segformer():  # noqa: ANN202
    config = tf.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
        num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2],
        decoder_hidden_size=16,
    )  # fmt: skip
    return tf.SegformerForImageClassification(config)


def _data2vec_audio():  # noqa: ANN202
    """A speech recognizer with wav2vec2's feature encoder that NNEditor does not lay out."""
    config = tf.Data2VecAudioConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2,
        conv_pos_kernel_size=3,
        vocab_size=12,
    )
    return tf.Data2VecAudioForCTC(config)


def _owlvit():  # noqa: ANN202
    """OWL-ViT: CLIP's two towers with box heads (CLIPModel itself is drawn: test_clip_pair)."""
    small = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1}
    config = tf.OwlViTConfig(
        text_config={**small, "num_attention_heads": 2, "vocab_size": 64},
        vision_config={**small, "num_attention_heads": 2, "image_size": 32, "patch_size": 16},
        projection_dim=8,
    )
    return tf.OwlViTForObjectDetection(config)


@pytest.mark.parametrize(
    ("make", "family", "works_on"),
    [
        (_segformer, "segformer checkpoints (SegformerForImageClassification)", "images"),
        (_data2vec_audio, "data2vec-audio checkpoints (Data2VecAudioForCTC)", "audio"),
        (_owlvit, "owlvit checkpoints (OwlViTForObjectDetection)", "images and text"),
    ],
)
def test_no_made_up_graph_for_models_of_images_or_audio(tmp_path, make, family, works_on):  # noqa: ANN001
    torch.manual_seed(0)
    make().save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is None
        why = doc.graph_unavailable_reason
        assert f"does not draw {family}" in why and f"works on {works_on}," in why
        assert not doc.capabilities.as_dict()["view_graph"]["available"]
        assert len(doc.tensors) > 5  # the weights stay listed and readable
        name = next(iter(doc.tensors))
        assert doc.tensors[name].read().size == doc.tensors[name].size
    report = json.loads(nneditor_cli("inspect", str(tmp_path), "--json").stdout)
    assert report["graph"] is None and report["graph_unavailable_reason"] == why
    assert report["hierarchy"] is not None  # the weights' name tree


def test_a_text_model_without_a_builder_is_still_drawn(tmp_path):  # noqa: ANN001
    """The generic graph stays for text families: ConvBERT (no builder of its own)."""
    config = tf.ConvBertConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, embedding_size=16,
    )  # fmt: skip
    torch.manual_seed(0)
    tf.ConvBertForMaskedLM(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is not None and doc.graph.inputs[0].name == "tokens"
