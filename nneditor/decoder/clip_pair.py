"""CLIP's and SigLIP's two towers in one snapshot (CLIPModel: openai/clip-vit-*;
SiglipModel: google/siglip-*), run for zero-shot image classification: one image against
several text prompts.

The vision tower is clip_vision.py's (CLIP: its class token through post_layernorm and the
bias-free ``visual_projection``; SigLIP: the attention-pooling head). The text tower is the
CLIP text encoder of clip_text.py run once per prompt over ``input_ids`` [prompts, seq]:

- CLIP: causal attention, QuickGELU; the final norm's output is read at the end-of-text
  position (the first ``eos_token_id``; a config that states the old id 2 reads the largest
  id, which is the end-of-text token of CLIP's vocabulary) and projected by the bias-free
  ``text_projection``.
- SigLIP: attention over every position (no causal mask), GELU-tanh; the last position is
  read (its processor pads to 64 tokens) and projected by ``text_model.head`` (with a bias).

Both embeddings are divided by their norms; ``logits_per_image`` [1, prompts] is
``exp(logit_scale)`` times their cosine similarities (SigLIP adds ``logit_bias``). CLIP's
probabilities are their softmax over the prompts, SigLIP's the sigmoid of each.

Values are the towers' own names under ``vision.`` and ``text.`` (the text tower's stacked
over the prompts), then ``image_embeds`` [1, dim], ``text_embeds`` [prompts, dim] (both
normalised, as transformers returns them) and ``logits_per_image``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.decoder import clip_text, clip_vision
from nneditor.decoder.config import DecoderConfig
from nneditor.decoder.unsupported import DecoderUnsupported
from nneditor.semantic.names_vision import PAIRS, is_pair, pair_extras, split_pair

__all__ = ["PAIRS", "Pair", "forward", "from_hf", "is_pair"]

if TYPE_CHECKING:
    from nneditor.model.document import Document

F32 = np.float32
Emit = Callable[[str, np.ndarray], None]


@dataclasses.dataclass(frozen=True)
class Pair:
    """What the pair adds to its vision tower's configuration (``DecoderConfig.pair``)."""

    kind: str  # clip | siglip
    text: DecoderConfig
    scale: str  # logit_scale (stored name)
    bias: str  # logit_bias ("" for CLIP)
    projection: str  # the text tower's projection (CLIP's text_projection, SigLIP's head)
    projection_bias: str  # "" for CLIP
    eos_id: int  # CLIP: the end-of-text id pooled at (2: the largest id); SigLIP: -1 (last)

    def describe(self) -> str:
        pooled = "the last position" if self.kind == "siglip" else "the end-of-text position"
        return (
            f"beside its text tower ({self.text.n_layers} layers, hidden {self.text.hidden}, "
            f"read at {pooled} of each prompt), ending at logits_per_image [1, prompts]"
        )


def from_hf(
    config: Mapping[str, Any],
    names: Sequence[str],
    common_of: Callable[[Mapping[str, Any], list[str]], dict[str, Any]],
) -> DecoderConfig:
    """The vision tower's configuration with the text tower's in ``pair`` (``common_of``:
    config_hf.hf_common)."""
    kind = str(config["model_type"])
    scale, bias = "logit_scale", "logit_bias" if kind == "siglip" else ""
    projection = "text_model.head.weight" if kind == "siglip" else "text_projection.weight"
    projection_bias = "text_model.head.bias" if kind == "siglip" else ""
    vision, text, rest = split_pair(kind, names)
    extra = set(pair_extras(kind))
    lacking = sorted(extra - set(names))
    if lacking:
        raise DecoderUnsupported(
            f"this {PAIRS[kind]} snapshot lacks {lacking[0]}; without it the prompts' "
            "probabilities cannot be computed"
        )
    left = sorted(set(rest) - extra)
    if left:
        raise DecoderUnsupported(
            f"tensor {left[0]!r} is part of neither tower of this {PAIRS[kind]} snapshot; the "
            "NumPy decoder refuses rather than leave a weight out"
        )
    if kind == "clip" and "visual_projection.weight" not in names:
        raise DecoderUnsupported("this CLIPModel snapshot lacks visual_projection.weight")
    vconfig = {**config["vision_config"], "model_type": f"{kind}_vision_model"}
    vcfg = clip_vision.from_hf(vconfig, common_of(vconfig, vision))
    tconfig = dict(config["text_config"])
    act = str(
        tconfig.get("hidden_act") or ("quick_gelu" if kind == "clip" else "gelu_pytorch_tanh")
    )
    activation = {"quick_gelu": "quick_gelu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh"}
    if act not in activation:
        raise DecoderUnsupported(f"{PAIRS[kind]} text activation {act!r} is not implemented")
    tconfig.update(model_type="clip_text_model", hidden_act="gelu")  # (its names are CLIP's)
    tcfg = clip_text.from_hf(tconfig, common_of(tconfig, text))
    tcfg = dataclasses.replace(
        tcfg,
        activation=activation[act],
        causal=kind == "clip",
        norm_eps=float(tconfig.get("layer_norm_eps") or (1e-5 if kind == "clip" else 1e-6)),
        notes=(),
    )
    eos = config["text_config"].get("eos_token_id")
    pair = Pair(
        kind,
        tcfg,
        scale,
        bias,
        projection,
        projection_bias,
        int(eos) if kind == "clip" and isinstance(eos, int) else -1,
    )
    if kind == "clip" and pair.eos_id < 0:
        raise DecoderUnsupported(
            "this CLIPModel's text_config states no eos_token_id; the text tower is pooled there"
        )
    probs = "softmax over the prompts" if kind == "clip" else "sigmoid of each prompt's logit"
    notes = (
        f"the trace runs both towers: the image once, the text tower once per prompt "
        f"(input_ids [prompts, seq]); it ends at logits_per_image [1, prompts], whose {probs} "
        "gives each prompt's probability (nneditor predict)",
    )
    return dataclasses.replace(vcfg, pair=pair, notes=notes)


def check_widths(cfg: DecoderConfig, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """Refuse a pair whose towers embed into spaces of different widths (their cosine
    similarities could not be computed), before anything runs."""
    pair: Pair = cfg.pair
    text_width = shapes.get(pair.projection, (0,))[0]
    visual = shapes.get("visual_projection.weight") if pair.kind == "clip" else None
    image_width = visual[0] if visual else cfg.hidden
    if text_width != image_width:
        raise DecoderUnsupported(
            f"this {PAIRS[pair.kind]} snapshot's towers embed into different widths: the text "
            f"tower's {pair.projection} makes {text_width} values, the image tower "
            f"{image_width}; their similarities cannot be computed (check the snapshot's "
            "config.json, e.g. text_config.projection_size, against its weights)"
        )


def pooled_positions(pair: Pair, ids: np.ndarray) -> np.ndarray:
    """Each prompt's pooled position: SigLIP's last; CLIP's first end-of-text token (its
    largest id where the config states the old eos id 2)."""
    if pair.kind == "siglip":
        return np.full(ids.shape[0], ids.shape[1] - 1)
    if pair.eos_id == 2:
        return np.argmax(ids, axis=1)
    found = ids == pair.eos_id
    if not found.any(axis=1).all():
        row = int(np.flatnonzero(~found.any(axis=1))[0])
        raise DecoderUnsupported(
            f"prompt {row} holds no end-of-text token (id {pair.eos_id}), where CLIP's text "
            "tower is read; tokenize it with the snapshot's tokenizer (nneditor inputs --text)"
        )
    return np.argmax(found, axis=1)


def forward(
    doc: Document,
    cfg: DecoderConfig,
    pixels: np.ndarray,
    ids: np.ndarray | None,
    emit: Emit,
    run_tower: Callable[[DecoderConfig, np.ndarray, Emit], np.ndarray],
) -> np.ndarray:
    """Both towers (``run_tower``: forward.py's pass of one tower), the normalised
    embeddings and ``logits_per_image`` [1, prompts]."""
    pair: Pair = cfg.pair
    if ids is None:
        raise DecoderUnsupported(
            f"a {PAIRS[pair.kind]} trace takes input_ids (the prompts) beside pixel_values; "
            "give both (nneditor inputs --image pixel_values=FILE --text input_ids=TEXT)"
        )
    ids = np.asarray(ids)
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise DecoderUnsupported(f"input_ids must be [prompts, seq], given {list(ids.shape)}")
    ids = ids.astype(np.int64)
    image = run_tower(cfg, pixels, lambda n, v: emit(f"vision.{n}", v))
    image = image.reshape(1, -1).astype(F32)
    stacked: dict[str, list[np.ndarray]] = {}
    at = pooled_positions(pair, ids)
    pooled = []
    for row, pos in zip(ids, at, strict=True):
        x = run_tower(pair.text, row[None], lambda n, v: stacked.setdefault(n, []).append(v))
        pooled.append(x.reshape(ids.shape[1], -1)[int(pos)])
    for name, values in stacked.items():
        emit(f"text.{name}", np.concatenate(values, axis=0))
    text = np.stack(pooled).astype(F32)
    emit("text.pooler_output", text)
    text = (text @ _read(doc, pair.projection).T).astype(F32)
    if pair.projection_bias:
        text = (text + _read(doc, pair.projection_bias)).astype(F32)
    emit("text.text_embeds", text)
    image, text = _normalised(image), _normalised(text)
    emit("image_embeds", image)
    emit("text_embeds", text)
    logits = (image @ text.T) * _scale(_read(doc, pair.scale))
    if pair.bias:
        logits = logits + _read(doc, pair.bias).reshape(())
    logits = logits.astype(F32)
    emit("logits_per_image", logits)
    return logits


def _normalised(x: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm (the cosine similarity's)."""
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(F32)


def _scale(logit_scale: np.ndarray) -> float:
    """The temperature: the stored logit_scale is its logarithm."""
    return float(np.exp(logit_scale.reshape(())))


def _read(doc: Document, name: str) -> np.ndarray:
    return np.asarray(doc.tensors[name].read(), F32)
