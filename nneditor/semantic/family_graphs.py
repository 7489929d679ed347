"""Graphs synthesized for model families that are neither decoder stacks nor stored graphs:
diffusers' conditional UNet (Stable Diffusion 1.x/2.x and SDXL components); the dispatch to
Whisper and LLaVA (modality_graphs.py), to convolutional image classifiers
(checkpoint_convnets.py), to Swin Transformers (checkpoint_swin.py), to CTC speech
recognizers (checkpoint_speech.py) and to CLIP vision GGUFs (clip_gguf.py); CLIP vision
snapshots draw the NumPy decoder's graph (checkpoint_graphs.py).

The UNet graph follows ``UNet2DConditionModel.forward``: the timestep's sinusoidal projection
and MLP (plus SDXL's pooled-text/time-id embedding), ``conv_in``, the down blocks (each
publishing every skip tensor it hands to the up path), the mid block, the up blocks (each
taking its skips in reverse order) and the output head (GroupNorm, SiLU, conv). Value names:

    sample, timestep, encoder_hidden_states [, text_embeds, time_ids]     (inputs)
    time_embedding [, add_embedding], conv_in,
    down_blocks.{i}.res.{j}  (skip j of down block i; the last is the block's output)
    mid_block, up_blocks.{i}, conv_out                                    (noise prediction)

Shapes are exact for the config's ``sample_size`` (latent pixels) and a 77-token text
encoding; configurations this layout does not describe return a reason instead of a graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.inputs.patches import QWEN_VL_TYPES
from nneditor.model.document import Document
from nneditor.model.graph import Graph
from nneditor.semantic import modality_graphs
from nneditor.semantic.checkpoint_convnets import convnet_graph, is_convnet
from nneditor.semantic.checkpoint_speech import is_speech, speech_graph
from nneditor.semantic.checkpoint_swin import is_swin, swin_graph
from nneditor.semantic.graph_builder import Builder

TEXT_TOKENS = 77
_DOWN = {"CrossAttnDownBlock2D", "DownBlock2D"}
_UP = {"CrossAttnUpBlock2D", "UpBlock2D"}
_MID = {"UNetMidBlock2DCrossAttn"}


def is_unet(config: Mapping[str, Any]) -> bool:
    return config.get("_class_name") == "UNet2DConditionModel"


def unet_support(config: Mapping[str, Any]) -> str:
    """ "" when :func:`unet_graph` describes this config, else the reason."""
    down = list(config.get("down_block_types") or [])
    up = list(config.get("up_block_types") or [])
    bad = [t for t in down if t not in _DOWN] + [t for t in up if t not in _UP]
    if bad:
        return (
            f"UNet block type {bad[0]} is not laid out by NNEditor (it knows {sorted(_DOWN | _UP)})"
        )
    mid = config.get("mid_block_type") or "UNetMidBlock2DCrossAttn"
    if mid not in _MID:
        return f"UNet mid block {mid} is not laid out by NNEditor"
    if len(down) != len(up) or not down:
        return "the UNet's down and up paths differ in length"
    channels = list(config.get("block_out_channels") or [])
    if len(channels) != len(down):
        return "block_out_channels does not give one width per block"
    for key in ("class_embed_type", "encoder_hid_dim_type", "time_cond_proj_dim"):
        if config.get(key):
            return f"UNet option {key}={config[key]!r} is not laid out by NNEditor"
    if config.get("addition_embed_type") not in (None, "text_time"):
        return f"UNet addition embedding {config['addition_embed_type']!r} is not laid out"
    if not isinstance(config.get("layers_per_block", 2), int):
        return "per-block layers_per_block lists are not laid out by NNEditor"
    return ""


def unet_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str]:
    reason = unet_support(config)
    if reason:
        return None, f"{reason}; its weights stay inspectable in the tensor catalog"
    b = Builder(f"{config['_class_name']} (from config.json)")
    channels = [int(c) for c in config["block_out_channels"]]
    layers = int(config.get("layers_per_block", 2))
    size = int(config.get("sample_size") or 64)
    cin, cout = int(config.get("in_channels", 4)), int(config.get("out_channels", 4))
    cross = int(config.get("cross_attention_dim") or 768)
    temb = int(config.get("time_embedding_dim") or channels[0] * 4)
    b.input("sample", (1, cin, size, size))
    b.input("timestep", (1,), "int64")
    b.input("encoder_hidden_states", (1, TEXT_TOKENS, cross))
    t = b.node(
        "time_embedding",
        "TimestepEmbedding",
        ["timestep"],
        "time_embedding",
        (1, temb),
        "embedding",
        "Sinusoidal timestep projection and its MLP (from config.json).",
    )
    if config.get("addition_embed_type") == "text_time":
        time_dim = int(config.get("addition_time_embed_dim") or 256)
        pooled = int(config.get("projection_class_embeddings_input_dim") or 0) - 6 * time_dim
        b.input("text_embeds", (1, pooled))
        b.input("time_ids", (1, 6))
        add = b.node(
            "add_embedding",
            "TimestepEmbedding",
            ["text_embeds", "time_ids"],
            "add_embedding",
            (1, temb),
            "embedding",
            "SDXL conditioning: pooled text embedding and size/crop time ids, projected and "
            "added to the timestep embedding (from config.json).",
        )
        t = add  # the blocks read time_embedding + add_embedding; the edge shows the chain
    x = b.node("conv_in", "Conv", ["sample"], "conv_in", (1, channels[0], size, size), "conv", "")
    skips = [x]
    res = size
    for i, (kind, ch) in enumerate(zip(config["down_block_types"], channels, strict=True)):
        final = i == len(channels) - 1
        n = layers + (0 if final else 1)
        shapes: list[tuple[int, ...]] = [(1, ch, res, res)] * layers
        if not final:
            res //= 2
            shapes.append((1, ch, res, res))
        inputs = [x, t] + (["encoder_hidden_states"] if "CrossAttn" in kind else [])
        outs = [f"down_blocks.{i}.res.{j}" for j in range(n)]
        b.multi(
            f"down_blocks.{i}",
            kind,
            inputs,
            outs,
            shapes,
            "attention" if "CrossAttn" in kind else "conv",
            f"{kind}: {layers} ResNet layer(s)"
            + (" with cross-attention to the text encoding" if "CrossAttn" in kind else "")
            + ("" if final else " and a downsampler")
            + f"; publishes its {n} skip tensor(s), the last being its output.",
        )
        skips += outs
        x = outs[-1]
    x = b.node(
        "mid_block",
        "UNetMidBlock2DCrossAttn",
        [x, t, "encoder_hidden_states"],
        "mid_block",
        (1, channels[-1], res, res),
        "attention",
        "Mid block: ResNet, cross-attention transformer, ResNet (from config.json).",
    )
    rev = channels[::-1]
    for i, kind in enumerate(config["up_block_types"]):
        take = layers + 1
        used, skips = skips[-take:], skips[:-take]
        final = i == len(rev) - 1
        if not final:
            res *= 2
        inputs = [x, *reversed(used), t] + (
            ["encoder_hidden_states"] if "CrossAttn" in kind else []
        )
        x = b.node(
            f"up_blocks.{i}",
            kind,
            inputs,
            f"up_blocks.{i}",
            (1, rev[i], res, res),
            "attention" if "CrossAttn" in kind else "conv",
            f"{kind}: {take} ResNet layer(s), each concatenating one skip tensor"
            + (" with cross-attention" if "CrossAttn" in kind else "")
            + ("" if final else " and an upsampler")
            + ".",
        )
    b.node(
        "conv_out",
        "Conv",
        [x],
        "conv_out",
        (1, cout, size, size),
        "conv",
        "Output head: GroupNorm, SiLU and a convolution; the predicted noise (from config.json).",
    )
    return b.finish(doc, "conv_out"), ""


def gguf_family_graph(doc: Document) -> tuple[Graph | None, str] | None:
    """The graph of a GGUF that is not a decoder stack (a CLIP vision tower, llama.cpp's
    ``clip`` architecture), None for the others. A CLIP GGUF NNEditor does not lay out gets
    (None, the reason)."""
    from nneditor.semantic import clip_gguf  # gguf-py: a GGUF reader has imported it already

    if clip_gguf.is_clip(doc):
        return clip_gguf.graph(doc)
    return None


def family_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str] | None:
    """The graph of a known non-decoder family (UNet, Whisper, LLaVA, Qwen2-VL and
    Qwen2.5-VL, convolutional image classifiers, Swin, CTC speech recognizers), None when the
    config is none of them."""
    if is_unet(config):
        return unet_graph(doc, config)
    if is_convnet(config):  # ResNet, ConvNeXt; the other conv families' refusal
        return convnet_graph(doc, config)
    if is_speech(config):  # wav2vec2, HuBERT; WavLM's refusal
        return speech_graph(doc, config)
    if is_swin(config):  # Swin; Swinv2's refusal
        return swin_graph(doc, config)
    builders = {
        "whisper": modality_graphs.whisper_graph,
        "llava": modality_graphs.llava_graph,
        **{t: modality_graphs.qwen_vl_graph for t in QWEN_VL_TYPES},
    }
    build = builders.get(str(config.get("model_type") or ""))
    if build is None:
        return None
    graph, _why = build(doc, config)
    # a config these builders cannot read still gets the generic graph of its tensor names
    return (graph, "") if graph is not None else None
