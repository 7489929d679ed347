"""Graphs synthesized for Whisper (speech) and CLIP vision towers from their config.json,
following transformers' modules, so the bundled modalities tracer (plugins/modalities)
publishes one capture per module output:

Whisper (``WhisperForConditionalGeneration``): inputs ``input_features`` [1, mels, frames]
and ``decoder_input_ids`` [1, seq]; values ``encoder.conv1`` and ``encoder.conv2`` (the
convolutions, before their GELU), ``encoder.embed_positions`` (the sinusoidal table),
``encoder.layers.{i}``, ``encoder.layer_norm``, ``decoder.embed_tokens``,
``decoder.embed_positions``, ``decoder.layers.{i}`` (reading the encoder output),
``decoder.layer_norm`` and ``logits``.

CLIP vision (``clip_vision_model``): input ``pixel_values`` [1, 3, size, size]; values
``embeddings`` (patches, class token, positions), ``pre_layrnorm``, ``encoder.layers.{i}``
(the last is the sequence output), ``pooled_output`` (post-LayerNorm class token) and, with a
projection, ``image_embeds``. It serves CLIP vision GGUFs (clip_gguf.py), which also publish
the sequence output as ``last_hidden_state``, a graph output of its own; a CLIP vision
snapshot draws the NumPy decoder's graph instead (decoder/clip_vision.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nneditor.inputs.patches import QWEN_VL_GRID, qwen_vl_image_tokens
from nneditor.model.document import Document
from nneditor.model.graph import Graph
from nneditor.semantic.graph_builder import Builder


def whisper_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str]:
    try:
        d = int(config["d_model"])
        mels = int(config.get("num_mel_bins", 80))
        src = int(config.get("max_source_positions", 1500))
        enc, dec = int(config["encoder_layers"]), int(config["decoder_layers"])
        vocab = int(config["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"config.json lacks a Whisper size ({exc})"
    b = Builder("whisper (from config.json)")
    b.input("input_features", (1, mels, 2 * src))
    b.input("decoder_input_ids", (1, "seq"), "int64")
    c1 = b.node(
        "encoder/conv1",
        "Conv",
        ["input_features"],
        "encoder.conv1",
        (1, d, 2 * src),
        "conv",
        "First convolution over the log-mel frames (before its GELU).",
    )
    c2 = b.node(
        "encoder/conv2",
        "Conv",
        [c1],
        "encoder.conv2",
        (1, d, src),
        "conv",
        "Second convolution, stride 2 (before its GELU): one vector per 20 ms.",
    )
    pos = b.node(
        "encoder/embed_positions",
        "Embedding",
        [],
        "encoder.embed_positions",
        (src, d),
        "embedding",
        "Sinusoidal positional embedding table of the encoder, added to the convolution output.",
    )
    x = c2
    for i in range(enc):
        inputs = [x, pos] if i == 0 else [x]
        x = b.node(
            f"encoder/layers.{i}",
            "TransformerEncoderLayer",
            inputs,
            f"encoder.layers.{i}",
            (1, src, d),
            "attention",
            "Encoder block: self-attention and feed-forward, pre-LayerNorm.",
        )
    memory = b.node(
        "encoder/layer_norm",
        "LayerNorm",
        [x],
        "encoder.layer_norm",
        (1, src, d),
        "norm",
        "Final encoder LayerNorm: the audio encoding the decoder attends to.",
    )
    table = [n for n in doc.tensors if n.endswith("decoder.embed_tokens.weight")][:1]
    tok = b.node(
        "decoder/embed_tokens",
        "Embedding",
        ["decoder_input_ids", *table],
        "decoder.embed_tokens",
        (1, "seq", d),
        "embedding",
        "Decoder token embedding.",
    )
    dpos = b.node(
        "decoder/embed_positions",
        "Embedding",
        ["decoder_input_ids"],
        "decoder.embed_positions",
        (1, "seq", d),
        "embedding",
        "Learned decoder positional embedding.",
    )
    x = tok
    for i in range(dec):
        inputs = [x, dpos, memory] if i == 0 else [x, memory]
        x = b.node(
            f"decoder/layers.{i}",
            "TransformerDecoderLayer",
            inputs,
            f"decoder.layers.{i}",
            (1, "seq", d),
            "attention",
            "Decoder block: causal self-attention, cross-attention to the audio "
            "encoding, feed-forward.",
        )
    x = b.node(
        "decoder/layer_norm",
        "LayerNorm",
        [x],
        "decoder.layer_norm",
        (1, "seq", d),
        "norm",
        "Final decoder LayerNorm.",
    )
    b.node(
        "proj_out",
        "LMHead",
        [x],
        "logits",
        (1, "seq", vocab),
        "head",
        "Output projection to the vocabulary (tied to the token embedding).",
    )
    return b.finish(doc, "logits"), ""


def clip_vision_graph(
    doc: Document,
    config: Mapping[str, Any],
    source: str = "config.json",
    sequence_output: bool = False,
) -> tuple[Graph | None, str]:
    """``config``: transformers' CLIPVisionConfig fields (from config.json, or read off GGUF
    metadata by clip_gguf.py: ``source`` names it); ``sequence_output`` adds the sequence
    output ``last_hidden_state`` as a graph output of its own."""
    vision = config.get("vision_config") if config.get("model_type") == "clip" else config
    if not isinstance(vision, Mapping):
        return None, f"{source} has no CLIP vision_config"
    try:
        d = int(vision["hidden_size"])
        size, patch = int(vision["image_size"]), int(vision["patch_size"])
        layers = int(vision["num_hidden_layers"])
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"{source} lacks a CLIP vision size ({exc})"
    b = Builder(f"clip vision (from {source})")
    b.input("pixel_values", (1, int(vision.get("num_channels", 3)), size, size))
    hidden = _clip_tower(
        b,
        "",
        "",
        "encoder.layers",
        "encoder/layers",
        size,
        patch,
        d,
        layers,
        last=not sequence_output,
    )
    x = hidden[-1]
    sequence = None
    if sequence_output:
        tokens = (size // patch) ** 2 + 1
        sequence = b.node(
            "last_hidden_state",
            "SequenceOutput",
            [x],
            "last_hidden_state",
            (1, tokens, d),
            "",  # the last block's output, named: no pattern of its own
            "The sequence output (last_hidden_state): every token after the last block, "
            "before the final LayerNorm, which only the class token goes through.",
        )
    pooled = b.node(
        "post_layernorm",
        "LayerNorm",
        [x],
        "pooled_output",
        (1, d),
        "norm",
        "The class token after the final LayerNorm: the pooled output.",
    )
    output = pooled
    proj = int(config.get("projection_dim") or vision.get("projection_dim") or 0)
    if any(n.endswith("visual_projection.weight") for n in doc.tensors) and proj:
        output = b.node(
            "visual_projection",
            "MatMul",
            [pooled],
            "image_embeds",
            (1, proj),
            "head",
            "Projection into the shared image-text embedding space.",
        )
    g = b.finish(doc, output)
    if sequence is not None:
        g.outputs.append(g.value_info[sequence])
    return g, ""


def _clip_tower(
    b: Builder,
    scope: str,
    prefix: str,
    layer_name: str,
    layer_scope: str,
    size: int,
    patch: int,
    d: int,
    layers: int,
    last: bool = False,
) -> list[str]:
    """A CLIP vision tower on ``pixel_values``; returns its hidden states as transformers
    numbers them: [pre-LayerNorm output, block 0, ..., block n-1]."""
    tokens = (size // patch) ** 2 + 1
    x = b.node(
        f"{scope}embeddings",
        "PatchEmbedding",
        ["pixel_values"],
        f"{prefix}embeddings",
        (1, tokens, d),
        "embedding",
        f"{patch}x{patch} patches, a class token and learned positions.",
    )
    x = b.node(
        f"{scope}pre_layrnorm",
        "LayerNorm",
        [x],
        f"{prefix}pre_layrnorm",
        (1, tokens, d),
        "norm",
        "LayerNorm before the vision encoder.",
    )
    hidden = [x]
    for i in range(layers):
        tail = "; its output is the sequence output (last_hidden_state)." if last else "."
        x = b.node(
            f"{layer_scope}.{i}",
            "TransformerEncoderLayer",
            [x],
            f"{layer_name}.{i}",
            (1, tokens, d),
            "attention",
            "Vision block: self-attention and MLP, pre-LayerNorm"
            + (tail if i == layers - 1 else "."),
        )
        hidden.append(x)
    return hidden


def image_token_count(config: Mapping[str, Any]) -> int:
    """Image placeholder tokens a LLaVA prompt holds: one per patch, plus the class token when
    the feature selection keeps it ("full")."""
    vision = config.get("vision_config") or {}
    patches = (int(vision.get("image_size", 336)) // int(vision.get("patch_size", 14))) ** 2
    return patches + (1 if config.get("vision_feature_select_strategy") == "full" else 0)


def llava_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str]:
    """LLaVA-style vision-language model: CLIP vision tower, feature selection, projector,
    image/text merge at the placeholder tokens, decoder language model, logits."""
    vision, text = config.get("vision_config"), config.get("text_config")
    if not isinstance(vision, Mapping) or not isinstance(text, Mapping):
        return None, "config.json lacks vision_config or text_config"
    layer = config.get("vision_feature_layer", -2)
    if not isinstance(layer, int):
        return None, "several vision feature layers (a list) are not laid out by NNEditor"
    try:
        dv, size, patch = (
            int(vision["hidden_size"]),
            int(vision["image_size"]),
            int(vision["patch_size"]),
        )
        v_layers = int(vision["num_hidden_layers"])
        dt, t_layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
        vocab = int(text["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"config.json lacks a LLaVA size ({exc})"
    n_image = image_token_count(config)
    chosen = layer % (v_layers + 1)  # an index into the tower's hidden states
    b = Builder("llava (from config.json)")
    b.input("pixel_values", (1, int(vision.get("num_channels", 3)), size, size))
    b.input("input_ids", (1, "seq"), "int64")
    hidden = _clip_tower(
        b,
        "vision_tower/",
        "vision.",
        "vision.layers",
        "vision_tower/layers",
        size,
        patch,
        dv,
        v_layers,
    )
    strategy = config.get("vision_feature_select_strategy", "default")
    source = hidden[chosen]
    feats = b.node(
        "feature_select",
        "FeatureSelect",
        [source],
        "image_features",
        (1, n_image, dv),
        "embedding",
        f"Feature selection: hidden state {layer} of the vision tower"
        + (", class token dropped" if strategy == "default" else "")
        + ".",
    )
    proj = b.node(
        "multi_modal_projector",
        "MLP",
        [feats],
        "image_embeds",
        (1, n_image, dt),
        "ffn",
        "Projector from vision features to the language model's width.",
    )
    _language_model(
        b,
        doc,
        proj,
        (dt, t_layers, vocab),
        "The projected image features replace the image placeholder tokens' embeddings.",
        "Language-model block: self-attention and feed-forward.",
    )
    return b.finish(doc, "logits"), ""


#: (name, patch side) of each Qwen-VL generation
_QWEN_VL = {
    "qwen2_vl": ("Qwen2-VL", 14),
    "qwen2_5_vl": ("Qwen2.5-VL", 14),
    "qwen3_vl": ("Qwen3-VL", 16),
    "qwen3_vl_moe": ("Qwen3-VL-MoE", 16),  # Qwen3-VL-30B-A3B, 235B-A22B
}


def qwen_vl_graph(doc: Document, config: Mapping[str, Any]) -> tuple[Graph | None, str]:
    """Qwen2-VL / Qwen2.5-VL / Qwen3-VL: a vision transformer over flattened patches, the
    patch merger (2 x 2 patches per token, projected to the language model's width), the
    image/text merge at the image placeholder tokens, the language model with multimodal RoPE,
    logits; Qwen3-VL's DeepStack also merges intermediate vision blocks and adds them to the
    image positions after the first language blocks."""
    vision = config.get("vision_config")
    text = config.get("text_config") or config
    if not isinstance(vision, Mapping) or not isinstance(text, Mapping):
        return None, "config.json lacks vision_config"
    model_type = str(config.get("model_type"))
    v2 = model_type == "qwen2_vl"
    kind, default_patch = _QWEN_VL[model_type]
    try:
        dv = int(vision["embed_dim"] if v2 else vision["hidden_size"])
        depth = int(vision["depth"])
        patch = int(vision.get("patch_size", default_patch))
        frames = int(vision.get("temporal_patch_size", 2))
        channels = int(vision.get("in_channels", 3))
        dt, t_layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
        vocab = int(text["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"config.json lacks a Qwen-VL size ({exc})"
    t, h, w = QWEN_VL_GRID
    rows, n_image = t * h * w, qwen_vl_image_tokens(config)
    b = Builder(f"{config.get('model_type')} (from config.json)")
    b.input("pixel_values", (rows, channels * frames * patch * patch))
    b.input("image_grid_thw", (1, 3), "int64")
    b.input("input_ids", (1, "seq"), "int64")
    x = b.node(
        "visual/patch_embed",
        "PatchEmbed",
        ["pixel_values", "image_grid_thw"],
        "visual.patch_embed",
        (rows, dv),
        "embedding",
        f"Patch embedding: each {frames}-frame {patch} x {patch} patch row projected "
        f"(a 3-D convolution) to width {dv}.",
    )
    full = set(vision.get("fullatt_block_indexes") or [])
    for i in range(depth):
        what = (
            f"attention within {vision.get('window_size', 112)}-pixel windows"
            if model_type == "qwen2_5_vl" and i not in full
            else "full attention"
        )
        x = b.node(
            f"visual/blocks.{i}",
            "VisionBlock",
            [x],
            f"visual.blocks.{i}",
            (rows, dv),
            "attention",
            f"Vision block {i}: {what} over the patches with 2-D rotary positions, then an MLP.",
        )
    image = b.node(
        "visual/merger",
        "PatchMerger",
        [x],
        "image_embeds",
        (n_image, dt),
        "ffn",
        "Patch merger: each 2 x 2 group of patches concatenated, normalised and projected to "
        f"the language model's width {dt} (one row per image token).",
    )
    stack = [int(k) for k in vision.get("deepstack_visual_indexes") or []]
    for k, idx in enumerate(stack):
        b.node(
            f"visual/deepstack_merger_list.{k}",
            "PatchMerger",
            [f"visual.blocks.{idx}"],
            f"deepstack.{k}",
            (n_image, dt),
            "ffn",
            f"DeepStack merger {k}: the output of vision block {idx} merged like the final one, "
            f"added to the image positions after language block {k}.",
        )

    def deepstack(i: int, x: str) -> str:
        if i >= len(stack):
            return x
        return b.node(
            f"language_model/deepstack.{i}",
            "DeepStackAdd",
            [x, f"deepstack.{i}", "input_ids"],
            f"language_model.layers.{i}.deepstack",
            (1, "seq", dt),
            "residual",
            f"DeepStack: vision features of block {stack[i]} added at the image positions.",
        )

    experts = text.get("num_experts") if model_type == "qwen3_vl_moe" else None
    ffn = (
        f"a feed-forward of {experts} experts, {text.get('num_experts_per_tok')} per token"
        if experts
        else "a feed-forward"
    )
    _language_model(
        b,
        doc,
        image,
        (dt, t_layers, vocab),
        "The merged image features replace the image placeholder tokens' embeddings.",
        f"Language-model block ({kind}): self-attention with multimodal RoPE (time, height and "
        f"width positions for image tokens) and {ffn}.",
        deepstack,
    )
    return b.finish(doc, "logits"), ""


def _language_model(
    b: Builder,
    doc: Document,
    image: str,
    sizes: tuple[int, int, int],
    merge_text: str,
    block_text: str,
    after_block: Callable[[int, str], str] | None = None,
) -> None:
    """The language side of a vision-language graph: prompt embedding, the image/text merge,
    the blocks (``after_block`` may add a node after each), the final norm and the logits.
    ``sizes``: (width, blocks, vocabulary)."""
    dt, t_layers, vocab = sizes
    table = [n for n in doc.tensors if n.endswith("embed_tokens.weight")][:1]
    emb = b.node(
        "language_model/embed_tokens",
        "Embedding",
        ["input_ids", *table],
        "text_embeds",
        (1, "seq", dt),
        "embedding",
        "Token embedding of the prompt.",
    )
    x = b.node(
        "merge",
        "ImageTextMerge",
        [emb, image, "input_ids"],
        "inputs_embeds",
        (1, "seq", dt),
        "embedding",
        merge_text,
    )
    for i in range(t_layers):
        x = b.node(
            f"language_model/layers.{i}",
            "DecoderLayer",
            [x],
            f"language_model.layers.{i}",
            (1, "seq", dt),
            "attention",
            block_text,
        )
        if after_block is not None:
            x = after_block(i, x)
    x = b.node(
        "language_model/norm",
        "RMSNorm",
        [x],
        "language_model.norm",
        (1, "seq", dt),
        "norm",
        "Final norm of the language model.",
    )
    b.node(
        "lm_head",
        "LMHead",
        [x],
        "logits",
        (1, "seq", vocab),
        "head",
        "Output projection to the vocabulary.",
    )
