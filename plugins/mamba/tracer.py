"""Mamba / Mamba2 tracer: transformers' own implementation is the runtime.

The snapshot's safetensors weights are loaded into ``MambaForCausalLM`` or
``Mamba2ForCausalLM`` in float32 on CPU (never remote code, never pickle shards); the weights
must match the model's parameters exactly, or the run is refused with the names. One forward
pass over the prompt publishes, under the synthesized graph's names (docs/semantic.md):
``inp_embd``, ``blk.{i}.attn_norm`` / ``blk.{i}.attn_output`` (the mixer) / ``blk.{i}.output``,
``result_norm`` and ``result_output`` (logits). No cache is passed, so the recurrent state
starts at zero for every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nneditor.tracing.sdk import (
    TraceContext,
    TraceOutcome,
    TracePluginError,
    load_weights_exactly,
)

from .hooks import publish_output

CLASSES = {"mamba": "MambaForCausalLM", "mamba2": "Mamba2ForCausalLM"}


def _model(folder: Path, model_type: str) -> Any:
    import transformers as tf

    config = tf.AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    model = getattr(tf, CLASSES[model_type])(config).eval().float()
    tied = ("lm_head.weight",) if getattr(config, "tie_word_embeddings", False) else ()
    load_weights_exactly(model, folder, CLASSES[model_type], tied=tied)
    if tied:
        model.tie_weights()
    return model


def trace(context: TraceContext) -> TraceOutcome:
    import torch

    doc = context.document
    config = doc.metadata.get("config") or {}
    model_type = str(config.get("model_type") or "")
    if model_type not in CLASSES:
        raise TracePluginError(f"this tracer runs mamba and mamba2 snapshots, not {model_type!r}")
    if len(context.inputs) != 1:
        raise TracePluginError(f"one input of token ids is needed, given {sorted(context.inputs)}")
    (ids,) = context.inputs.values()
    model = _model(Path(doc.path), model_type)
    backbone = model.backbone
    handles = [publish_output(backbone.embeddings, "inp_embd", context.capture)]
    for i, layer in enumerate(backbone.layers):
        handles.append(publish_output(layer.norm, f"blk.{i}.attn_norm", context.capture))
        handles.append(publish_output(layer.mixer, f"blk.{i}.attn_output", context.capture))
        handles.append(publish_output(layer, f"blk.{i}.output", context.capture))
    handles.append(publish_output(backbone.norm_f, "result_norm", context.capture))
    context.capture_inputs()
    try:
        with torch.no_grad():
            out = model(torch.as_tensor(ids, dtype=torch.long), use_cache=False)
    finally:
        for h in handles:
            h.remove()
    context.capture("result_output", out.logits.float().numpy())
    import transformers

    return TraceOutcome(
        provider="transformers",
        notes=(
            f"transformers {transformers.__version__} {CLASSES[model_type]}, torch "
            f"{torch.__version__}, float32 on CPU; recurrent state fresh for this run",
        ),
    )
