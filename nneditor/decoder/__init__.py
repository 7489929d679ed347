"""A NumPy forward pass for decoder-only language models stored as GGUF files or Hugging Face
snapshots — the tracer of checkpoints, which store weights and no graph.

:func:`decoder_config` reads what the pass needs from the document and refuses, with a
sentence, every checkpoint it would not compute exactly (mixtures of experts, unknown tensors,
undecodable ggml types, unimplemented RoPE scaling, towers of multimodal snapshots);
snapshots' PyTorch pickle shards are read through the restricted pickle reader;
:func:`run_forward` runs it, streaming every named value to a callback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported, Xielu
from nneditor.decoder.forward import run_forward
from nneditor.decoder.tensor_check import check_tensors

if TYPE_CHECKING:
    from nneditor.model.document import Document

__all__ = ["DecoderConfig", "DecoderUnsupported", "decoder_config", "run_forward"]


#: vision-language models whose text model llama.cpp converts under its own architecture name
#: (the vision tower goes to a separate mmproj file). With a text-only prompt M-RoPE's three
#: position rows are equal, which is exactly the plain (NeoX) rotation of the base family.
TEXT_OF_VL = {"qwen2vl": "qwen2", "qwen3vl": "qwen3", "qwen3vlmoe": "qwen3moe"}


def text_metadata(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` with a vision-language GGUF's keys under its text family's name."""
    arch = str(metadata.get("general.architecture") or "")
    base = TEXT_OF_VL.get(arch)
    if base is None:
        return metadata
    out = {
        (base + key[len(arch) :] if key.startswith(arch + ".") else key): value
        for key, value in metadata.items()
    }
    out["general.architecture"] = base
    return out


def _dequantized(
    config: Mapping[str, Any], names: list[str], doc: Document
) -> tuple[Mapping[str, Any], list[str]]:
    """A snapshot whose every quantized weight the reader decodes (MLX affine, FP8 with
    scales): the config without its quantization keys and the names without the parts the
    decoded matrices already apply; anything else unchanged (refused if quantized)."""
    from nneditor.artifacts.huggingface.decoded import PART_SUFFIXES, decoded_parts

    parts = decoded_parts(doc.tensors)
    left = [n for n in names if n.endswith(PART_SUFFIXES) and n not in parts]
    if not parts or left:
        return config, names
    plain = {k: v for k, v in config.items() if k not in ("quantization", "quantization_config")}
    return plain, [n for n in names if n not in parts]


def _xielu_tensors(cfg: DecoderConfig, doc: Document) -> tuple[Xielu, ...]:
    """Apertus' per-layer xIELU parameters from a snapshot's act_fn tensors."""
    from nneditor.decoder.config import XIELU_PARTS

    layers = []
    for i in range(cfg.n_layers):
        values = []
        for part in XIELU_PARTS:
            name = cfg.tensor(f"blk.{i}.ffn_act.{part}")
            if name is None:
                raise DecoderUnsupported(f"the snapshot lacks layer {i}'s xIELU {part} (act_fn)")
            try:
                value = np.asarray(doc.tensors[name].read(), np.float32).reshape(-1)
            except Exception as exc:
                raise DecoderUnsupported(f"tensor {name} could not be read: {exc}") from None
            if value.size != 1:
                raise DecoderUnsupported(
                    f"{name} holds {value.size} values; Apertus' xIELU takes one per layer"
                )
            values.append(float(value[0]))
        layers.append((values[0], values[1], values[2], values[3]))
    return tuple(layers)


def _with_pooling(cfg: DecoderConfig, doc: Document) -> DecoderConfig:
    """An encoder snapshot with sentence-transformers' modules.json: its sentence embedding
    after the last hidden state (sentence_pooling.py)."""
    from pathlib import Path

    from nneditor.semantic.sentence_pooling import read_pooling

    folder = Path(doc.path)
    pooling = read_pooling(folder if folder.is_dir() else folder.parent)
    if pooling is None:
        return cfg
    said = f"the sentence embedding is computed after the last hidden state: {pooling.describe()}"
    kept = tuple(n for n in cfg.notes if "sentence embedding" not in n)
    return dataclasses.replace(cfg, pooling=pooling, notes=(*kept, said))


def _decoder_classifier(config: Mapping[str, Any], cfg: DecoderConfig) -> DecoderConfig:
    """A decoder with a classification head (LlamaForSequenceClassification, reward models;
    ...ForTokenClassification): ``score`` over the final norm at the last token that is not
    padding (every token for token classification), as transformers reads it."""
    head = classifier_head(config, cfg.names)
    pad = config.get("pad_token_id")
    head = dataclasses.replace(head, pooling="last", pad_id=pad if isinstance(pad, int) else -1)
    return dataclasses.replace(cfg, classifier=head, notes=())


def decoder_config(doc: Document) -> DecoderConfig:
    """The forward-pass configuration of ``doc``, or :class:`DecoderUnsupported`."""
    from nneditor.decoder import (
        bart,
        clip_pair,
        clip_text,
        codegen,
        convnets,
        esm,
        falcon_h1,
        gemma3n,
        gemma4,
        gpt_neo,
        gptj,
        lfm2,
        mamba1,
        mamba2,
        modern_bert,
        opt,
        qwen35,
        speech,
        swin,
        t5,
        vit,
        xglm,
    )
    from nneditor.decoder.config_gguf import from_gguf, gguf_common
    from nneditor.decoder.config_hf import from_hf, hf_common
    from nneditor.semantic.checkpoint_convnets import is_convnet
    from nneditor.semantic.checkpoint_names import MTP_PREFIXES, text_part, with_aliases
    from nneditor.semantic.checkpoint_speech import is_speech
    from nneditor.semantic.checkpoint_swin import is_swin

    names = list(doc.tensors.keys())
    if doc.format == "gguf":
        meta = text_metadata(doc.metadata)
        shards = (doc.tree or {}).get("split") or []
        count = doc.metadata.get("split.count")
        if shards and isinstance(count, int) and len(shards) < count:
            there = ", ".join(str(s["shard"]) for s in shards)
            raise DecoderUnsupported(
                f"this model is split into {count} files and only shard(s) {there} could be "
                "opened; a trace needs every shard (see the note on the missing ones)"
            )
        common = gguf_common(meta, names)
        family = {
            lfm2.ARCH: lfm2.from_gguf,
            lfm2.ARCH_MOE: lfm2.from_gguf,
            mamba2.ARCH: mamba2.from_gguf,
            mamba1.ARCH: mamba1.from_gguf,
            mamba1.JAMBA: mamba1.jamba_from_gguf,
            mamba2.HYBRID: mamba2.hybrid_from_gguf,
            falcon_h1.ARCH: falcon_h1.from_gguf,
            gemma4.ARCH: gemma4.from_gguf,
            gemma3n.ARCH: gemma3n.from_gguf,
            modern_bert.ARCH: modern_bert.from_gguf,
            t5.ARCH: t5.from_gguf,
            t5.SEQ2SEQ: t5.seq2seq_from_gguf,
            mamba2.NEMOTRON_H: mamba2.nemotron_h_from_gguf,
            mamba2.NEMOTRON_H_MOE: mamba2.nemotron_h_from_gguf,
            **dict.fromkeys(qwen35.ARCHES, qwen35.from_gguf),
        }
        cfg = family.get(common["arch"], from_gguf)(meta, common)
        vl = str(doc.metadata.get("general.architecture") or "")
        if vl in TEXT_OF_VL:
            cfg = dataclasses.replace(cfg, text_of=vl)
    elif doc.format == "huggingface":
        weights = doc.metadata.get("weights") or {}
        if not str(weights.get("layout", "")).startswith(("safetensors", "pytorch")):
            raise DecoderUnsupported(
                "this snapshot has no weights the decoder reads (safetensors or PyTorch "
                "pytorch_model*.bin shards, the latter through the restricted pickle reader)"
            )
        config = with_aliases(doc.metadata.get("config") or {})
        if is_convnet(config) or is_swin(config):  # no transformer's fields of one width
            from pathlib import Path

            folder = Path(doc.path)
            folder = folder if folder.is_dir() else folder.parent
            if is_swin(config):  # (swin.py; ResNet, ConvNeXt: convnets.py)
                cfg = swin.from_hf(config, names, folder)
            else:
                cfg = convnets.from_hf(config, names, folder)
            _check_readable(doc, cfg)
            return cfg
        if is_speech(config):  # wav2vec2, HuBERT: a waveform's frames (speech.py)
            cfg = speech.from_hf(config, names)
            _check_readable(doc, cfg)
            return cfg
        config, names = _dequantized(config, names, doc)
        if clip_pair.is_pair(config):  # CLIPModel, SiglipModel: both towers (clip_pair.py)
            cfg = clip_pair.from_hf(config, names, hf_common)
            check_tensors(cfg)
            check_tensors(cfg.pair.text)
            _check_readable(doc, cfg)
            _check_readable(doc, cfg.pair.text)
            clip_pair.check_widths(cfg, {n: doc.tensors[n].shape for n in names})
            return cfg
        multimodal = str(config.get("model_type") or "")
        projection = multimodal == "clip_text_model" and clip_text.PROJECTION in names
        if projection:  # SDXL's second encoder: the pooled projection is not run (clip_text)
            names = [n for n in names if n != clip_text.PROJECTION]
        part = text_part(config, names)  # Gemma 4: its text decoder without the towers
        if part is not None:
            config, stored = part
            names = list(stored)
        common = hf_common(config, names)
        if part is not None:
            common["names"] = {key: stored[name] for key, name in common["names"].items()}
        hf_family = {
            lfm2.ARCH: lfm2.from_hf,
            lfm2.ARCH_MOE: lfm2.from_hf,
            mamba2.ARCH: mamba2.from_hf,
            mamba1.ARCH: mamba1.from_hf,
            mamba1.JAMBA: mamba1.jamba_from_hf,
            mamba2.HYBRID: mamba2.hybrid_from_hf,
            falcon_h1.ARCH: falcon_h1.from_hf,
            gemma4.ARCH: gemma4.from_hf,
            gemma3n.ARCH: gemma3n.from_hf,
            modern_bert.ARCH: modern_bert.from_hf,
            t5.ARCH: t5.from_hf,
            t5.SEQ2SEQ: t5.seq2seq_from_hf,
            bart.ARCH: bart.from_hf,
            bart.PRE_NORM: bart.from_hf,
            clip_text.ARCH: clip_text.from_hf,
            opt.ARCH: opt.from_hf,
            opt.BIOGPT: opt.from_hf,
            gpt_neo.ARCH: gpt_neo.from_hf,
            gptj.ARCH: gptj.from_hf,
            codegen.ARCH: codegen.from_hf,
            xglm.ARCH: xglm.from_hf,
            esm.ARCH: esm.from_hf,
            vit.ARCH: vit.from_hf,
            mamba2.NEMOTRON_H: mamba2.nemotron_h_from_hf,
            mamba2.NEMOTRON_H_MOE: mamba2.nemotron_h_from_hf,
            **dict.fromkeys(qwen35.ARCHES, qwen35.from_hf),
        }
        cfg = hf_family.get(common["arch"], from_hf)(config, common)
        if cfg.causal and cfg.classifier is None and "cls_out.weight" in cfg.names:
            cfg = _decoder_classifier(config, cfg)
        if not cfg.head and cfg.classifier is None and not cfg.decoder_layers:
            cfg = _with_pooling(cfg, doc)
        if part is not None:
            cfg = dataclasses.replace(cfg, text_of=multimodal)
        mtp = sum(1 for n in names if n.startswith(MTP_PREFIXES))
        if mtp:
            note = (
                f"the multi-token-prediction module ({mtp} tensors under mtp.) drafts later "
                "tokens and is not run: the next-token logits do not depend on it"
            )
            cfg = dataclasses.replace(cfg, notes=(*cfg.notes, note))
        if projection:
            note = "the pooled output's projection (text_projection) is not run"
            cfg = dataclasses.replace(cfg, notes=(*cfg.notes, note))
        if cfg.activation == "xielu":
            cfg = dataclasses.replace(cfg, xielu=_xielu_tensors(cfg, doc))
    else:
        raise DecoderUnsupported(
            f"the NumPy decoder runs GGUF files and Hugging Face snapshots, not {doc.format}"
        )
    check_tensors(cfg)
    if cfg.altup is not None:
        gemma3n.check_layers(cfg)
    elif cfg.gemma4 is not None:
        gemma4.check_layers(cfg)
    elif cfg.arch == mamba1.JAMBA:
        mamba1.check_jamba_layers(cfg)
    elif cfg.arch == lfm2.ARCH_MOE:
        lfm2.check_moe_layers(cfg)
    elif cfg.layer_kinds:
        family_needs = {
            lfm2.ARCH: lfm2.NEEDS,
            mamba2.ARCH: mamba2.NEEDS,
            mamba1.ARCH: mamba1.NEEDS,
            mamba2.NEMOTRON_H: mamba2.NEMOTRON_H_NEEDS,
            mamba2.NEMOTRON_H_MOE: mamba2.nemotron_h_moe_needs(cfg),
        }
        if cfg.arch == mamba2.HYBRID:
            family_needs[cfg.arch] = mamba2.hybrid_needs(cfg)
        if cfg.arch == falcon_h1.ARCH:
            family_needs[cfg.arch] = falcon_h1.needs(cfg)
        needs = family_needs.get(cfg.arch) or qwen35.needs(cfg)
        qwen35.check_layers(cfg, list(cfg.names), needs)
    _check_readable(doc, cfg)
    return cfg


def _check_readable(doc: Document, cfg: DecoderConfig) -> None:
    """Refuse a checkpoint with a tensor its loaders cannot decode."""
    for name in cfg.names.values():
        reason = getattr(doc.tensors[name].loader, "reason", None)
        if reason:
            raise DecoderUnsupported(f"tensor {name} cannot be decoded: {reason}")
