"""More architectures as torch.onnx.export writes them from tiny random transformers models:
windowed attention with cyclic shifts (Swin), depthwise convolutions with channel LayerNorm
(ConvNeXt), an efficient-attention encoder with a convolutional feed-forward and an MLP decoder
(SegFormer), a speech encoder fed a raw waveform of open length (wav2vec 2.0) and a
sequence-to-sequence text model with cross-attention (BART).

Seeded and small (a few hundred KB each); registered into zoo_generated's table by
:func:`register`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _export(model: Any, inputs: dict[str, Any], path: Path, dynamic: Any = None) -> None:
    import torch

    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (),
            str(path),
            kwargs=inputs,
            input_names=list(inputs),
            dynamo=False,
            opset_version=17,
            dynamic_axes=dynamic,
        )


def _image() -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    return {"pixel_values": torch.rand(1, 3, 64, 64)}


def _swin(path: Path) -> None:
    import transformers as tf

    inputs = _image()
    cfg = tf.SwinConfig(
        image_size=64,
        patch_size=4,
        embed_dim=16,
        depths=[1, 1],
        num_heads=[2, 2],
        window_size=4,
        num_labels=3,
    )
    _export(tf.SwinForImageClassification(cfg), inputs, path)


def _convnext(path: Path) -> None:
    import transformers as tf

    inputs = _image()
    cfg = tf.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, num_labels=3)
    _export(tf.ConvNextForImageClassification(cfg), inputs, path)


def _segformer(path: Path) -> None:
    import transformers as tf

    inputs = _image()
    cfg = tf.SegformerConfig(
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[2, 1],
        hidden_sizes=[16, 32],
        patch_sizes=[7, 3],
        strides=[4, 2],
        num_attention_heads=[1, 2],
        mlp_ratios=[2, 2],
        decoder_hidden_size=32,
        num_labels=3,
    )
    _export(tf.SegformerForSemanticSegmentation(cfg), inputs, path)


def _wav2vec2(path: Path) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 16),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        vocab_size=20,
    )
    inputs = {"input_values": torch.randn(1, 1600)}
    _export(tf.Wav2Vec2ForCTC(cfg), inputs, path, {"input_values": {1: "samples"}})


def _bart(path: Path) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.BartConfig(
        vocab_size=100,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        use_cache=False,
    )
    inputs = {
        "input_ids": torch.randint(3, 100, (1, 8)),
        "decoder_input_ids": torch.randint(3, 100, (1, 5)),
    }
    _export(tf.BartForConditionalGeneration(cfg), inputs, path)


def register(generator: Callable[..., Any]) -> None:
    tool = "torch.onnx.export"
    generator("swin.onnx", tool, "Swin: windowed attention with cyclic shifts, 2 stages")(_swin)
    generator("convnext.onnx", tool, "ConvNeXt: depthwise 7x7 convolutions, channel LayerNorm")(
        _convnext
    )
    generator("segformer.onnx", tool, "SegFormer: efficient attention, Mix-FFN, MLP decode head")(
        _segformer
    )
    generator("wav2vec2.onnx", tool, "wav2vec 2.0 CTC: a raw waveform of open length")(_wav2vec2)
    generator("bart.onnx", tool, "BART encoder-decoder with cross-attention, 2 + 2 layers")(_bart)
