"""Stable Diffusion UNet tracer: diffusers' ``UNet2DConditionModel`` is the runtime.

The UNet is built from the folder's config.json and its safetensors weights loaded exactly
(float32, CPU). One denoising step on the prepared inputs (latents ``sample``, ``timestep``,
``encoder_hidden_states``, and for SDXL ``text_embeds`` and ``time_ids``) publishes, under the
synthesized graph's names (nneditor/semantic/family_graphs.py): ``time_embedding``,
``add_embedding`` (SDXL), ``conv_in``, ``down_blocks.{i}.res.{j}`` (every skip tensor),
``mid_block``, ``up_blocks.{i}`` and ``conv_out`` (the predicted noise). The automatic inputs
are diagnostic values, not a prompt's text encoding or a sampler's latents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nneditor.tracing.sdk import (
    TraceContext,
    TraceOutcome,
    TracePluginError,
    load_weights_exactly,
)

SDXL_INPUTS = ("text_embeds", "time_ids")


def _hook(module: Any, publish: Any) -> Any:
    return module.register_forward_hook(lambda _m, _i, out: publish(out))


def _array(t: Any) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def trace(context: TraceContext) -> TraceOutcome:
    import diffusers
    import torch

    from nneditor.semantic.family_graphs import unet_support

    doc = context.document
    config = dict(doc.metadata.get("config") or {})
    if config.get("_class_name") != "UNet2DConditionModel":
        raise TracePluginError("this tracer runs diffusers UNet2DConditionModel folders")
    reason = unet_support(config)
    if reason:
        raise TracePluginError(reason)
    model = diffusers.UNet2DConditionModel.from_config(
        {k: v for k, v in config.items() if not k.startswith("_")}
    ).eval()
    load_weights_exactly(model, Path(doc.path), "UNet2DConditionModel")
    cap = context.capture
    handles = [
        _hook(model.time_embedding, lambda o: cap("time_embedding", _array(o))),
        _hook(model.conv_in, lambda o: cap("conv_in", _array(o))),
        _hook(model.mid_block, lambda o: cap("mid_block", _array(o))),
    ]
    if getattr(model, "add_embedding", None) is not None:
        handles.append(_hook(model.add_embedding, lambda o: cap("add_embedding", _array(o))))
    for i, block in enumerate(model.down_blocks):

        def down(out: Any, i: int = i) -> None:
            for j, res in enumerate(out[1]):
                cap(f"down_blocks.{i}.res.{j}", _array(res))

        handles.append(_hook(block, down))
    for i, block in enumerate(model.up_blocks):
        handles.append(_hook(block, lambda o, i=i: cap(f"up_blocks.{i}", _array(o))))
    inputs = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in context.inputs.items()}
    missing = [k for k in ("sample", "timestep", "encoder_hidden_states") if k not in inputs]
    added = None
    if config.get("addition_embed_type") == "text_time":
        missing += [k for k in SDXL_INPUTS if k not in inputs]
        if not missing:
            added = {k: inputs[k].float() for k in SDXL_INPUTS}
    if missing:
        raise TracePluginError(f"the UNet needs inputs {missing}")
    context.capture_inputs()
    try:
        with torch.no_grad():
            out = model(
                inputs["sample"].float(),
                inputs["timestep"],
                encoder_hidden_states=inputs["encoder_hidden_states"].float(),
                added_cond_kwargs=added,
            ).sample
    finally:
        for h in handles:
            h.remove()
    cap("conv_out", _array(out))
    return TraceOutcome(
        provider="diffusers",
        notes=(
            f"diffusers {diffusers.__version__} UNet2DConditionModel, torch {torch.__version__}, "
            "float32 on CPU; one denoising step on diagnostic inputs",
        ),
    )
