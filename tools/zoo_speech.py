"""Zoo CTC speech recognizer: Wav2Vec2ForCTC as facebook/wav2vec2-base-960h ships it (the
feature encoder's GroupNorm on its first convolution, convolutions without bias, post-norm
encoder layers, the positional convolution's weight norm stored as weight_g / weight_v), in
small: four convolutions of 16 channels (kernels 10, 3, 3, 2; strides 5, 2, 2, 2), two encoder
layers of hidden size 32, a positional convolution of kernel 16 in 4 groups; with the release's
character vocabulary (vocab.json, 32 entries), tokenizer_config.json, special_tokens_map.json
and preprocessor_config.json (16 kHz, do_normalize). Written by transformers, tiny random
weights moved off their initialisation (norms, biases, the weight norm's magnitudes, a CTC head
wide enough that the frames disagree). The NumPy decoder runs it
(tests/integration/test_speech_ctc.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "speech-wav2vec2"
#: facebook/wav2vec2-base-960h's vocab.json: the CTC blank (<pad>) first, the word delimiter
#: |, then the letters by their frequency in LibriSpeech's transcripts
VOCAB = ["<pad>", "<s>", "</s>", "<unk>", "|", *"ETAONIHSRDLUMWCFGYPBVK'XJQZ"]
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
TOKENIZER = {
    **SPECIAL,
    "do_lower_case": False,
    "return_attention_mask": False,
    "do_normalize": True,
}
PROCESSOR = {
    "do_normalize": True,
    "feature_size": 1,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": False,
    "sampling_rate": 16000,
}
#: the release's weight-norm names (torch's weight_norm before its parametrization)
OLD_NAMES = {
    "parametrizations.weight.original0": "weight_g",
    "parametrizations.weight.original1": "weight_v",
}


def _moved(model: Any) -> Any:  # noqa: ANN401
    """``model`` with norms, biases and the weight norm's magnitudes moved off their
    initialisation and a CTC head of unit-scale weights (seeded by the caller)."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias") or name.endswith("original0"):
                p.add_(torch.randn_like(p) * 0.2)
        model.lm_head.weight.copy_(torch.randn_like(model.lm_head.weight))
    return model


def _old_weight_norm(path: Path) -> None:
    """The safetensors file with the positional convolution's weight norm under the names
    the release stores (weight_g, weight_v)."""
    from safetensors.numpy import load_file, save_file

    file = path / "model.safetensors"
    tensors = load_file(str(file))
    renamed = {}
    for name, value in tensors.items():
        for new, old in OLD_NAMES.items():
            name = name.replace(new, old)
        renamed[name] = value
    save_file(renamed, str(file), metadata={"format": "pt"})


def _wav2vec2_snapshot(path: Path) -> None:
    import torch
    import transformers as tf

    config = tf.Wav2Vec2Config(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        conv_dim=(16, 16, 16, 16),
        conv_kernel=(10, 3, 3, 2),
        conv_stride=(5, 2, 2, 2),
        conv_bias=False,
        feat_extract_norm="group",
        do_stable_layer_norm=False,
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        ctc_loss_reduction="sum",
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    model = _moved(tf.Wav2Vec2ForCTC(config).eval())
    model.save_pretrained(str(path))
    _old_weight_norm(path)
    files = {
        "vocab.json": {token: i for i, token in enumerate(VOCAB)},
        "tokenizer_config.json": TOKENIZER,
        "special_tokens_map.json": SPECIAL,
        "preprocessor_config.json": PROCESSOR,
    }
    for name, content in files.items():
        (path / name).write_text(json.dumps(content, indent=2))


def register(generator: Callable[..., Any]) -> None:
    generator(
        NAME,
        "transformers save_pretrained (Wav2Vec2ForCTC)",
        "wav2vec2 CTC speech recognizer (as facebook/wav2vec2-base-960h, in small: four "
        "feature convolutions with GroupNorm on the first, two post-norm layers of hidden 32, "
        "the weight norm stored as weight_g/weight_v, the release's 32-character vocabulary "
        "and 16 kHz processor), tiny random weights moved off their initialisation",
    )(_wav2vec2_snapshot)
