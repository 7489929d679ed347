"""Whisper, CLIP vision, LLaVA and Qwen2/2.5/3-VL tracer: transformers' own modules are the
runtime.

Built from config.json, weights loaded exactly from safetensors (float32, CPU), one forward
pass; forward hooks publish each module's output under the synthesized graph's names
(nneditor/semantic/modality_graphs.py). Whisper runs the encoder once and the decoder once
over the given ids (no autoregressive transcription); CLIP runs the vision tower on the given
pixels. CLIP vision GGUFs (llama.cpp's clip architecture) run the same CLIP module, built from
the GGUF metadata with the tensors NNEditor decodes (nneditor/semantic/clip_gguf.py names
them). Automatic inputs are diagnostic values, never real audio or images.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.tracing.sdk import (
    TraceContext,
    TraceOutcome,
    TracePluginError,
    load_arrays_exactly,
    load_pretrained_exactly,
    load_weights_exactly,
)


def _hooks(pairs: list[tuple[Any, str]], capture: Callable[[str, Any], None]) -> list[Any]:
    def make(name: str) -> Callable[..., None]:
        def hook(_m: Any, _i: Any, out: Any) -> None:
            t = out[0] if isinstance(out, tuple) else out
            capture(name, t.detach().float().cpu().numpy())

        return hook

    return [module.register_forward_hook(make(name)) for module, name in pairs]


def _merge_hook(lm: Any, context: TraceContext) -> Any:
    """Capture ``inputs_embeds``: the language model's input, text embeddings with the image
    features merged in (a vision-language model's image/text merge)."""

    def merged(_m: Any, _args: Any, kwargs: Any) -> None:
        context.capture("inputs_embeds", kwargs["inputs_embeds"].detach().float().numpy())

    return lm.register_forward_pre_hook(merged, with_kwargs=True)


def _tensor(context: TraceContext, name: str) -> Any:
    import torch

    if name not in context.inputs:
        raise TracePluginError(f"the model needs the input {name!r}")
    return torch.from_numpy(np.ascontiguousarray(context.inputs[name]))


def _whisper(context: TraceContext, folder: Path) -> str:
    import torch
    import transformers as tf

    config = tf.WhisperConfig.from_pretrained(str(folder))
    model = tf.WhisperForConditionalGeneration(config).eval().float()
    load_weights_exactly(
        model, folder, "WhisperForConditionalGeneration", tied=("proj_out.weight",)
    )
    model.tie_weights()
    enc, dec = model.model.encoder, model.model.decoder
    pairs = [
        (enc.conv1, "encoder.conv1"),
        (enc.conv2, "encoder.conv2"),
        (enc.embed_positions, "encoder.embed_positions"),
        (enc.layer_norm, "encoder.layer_norm"),
        (dec.embed_tokens, "decoder.embed_tokens"),
        (dec.embed_positions, "decoder.embed_positions"),
        (dec.layer_norm, "decoder.layer_norm"),
    ]
    pairs += [(layer, f"encoder.layers.{i}") for i, layer in enumerate(enc.layers)]
    pairs += [(layer, f"decoder.layers.{i}") for i, layer in enumerate(dec.layers)]
    features = _tensor(context, "input_features").float()
    ids = _tensor(context, "decoder_input_ids").long()
    handles = _hooks(pairs, context.capture)
    try:
        with torch.no_grad():
            out = model(input_features=features, decoder_input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    context.capture("logits", out.logits.float().numpy())
    return "WhisperForConditionalGeneration"


def _clip_vision(context: TraceContext, folder: Path) -> str:
    import transformers as tf

    projected = any(str(n).endswith("visual_projection.weight") for n in context.document.tensors)
    cls = tf.CLIPVisionModelWithProjection if projected else tf.CLIPVisionModel
    # The library's own loader (still strict: missing, extra and mis-shaped weights refuse):
    # snapshots saved by transformers 4 name the tower's weights vision_model.*, version 5's
    # CLIPVisionModel has no such prefix, and from_pretrained maps one onto the other.
    model = load_pretrained_exactly(cls, folder)
    _clip_capture(context, model, projected)
    return cls.__name__


def _clip_gguf(context: TraceContext) -> str:
    """A CLIP vision GGUF (llama.cpp's clip architecture): the config from its metadata, its
    tensors decoded by NNEditor's readers (F32, F16 and the quantized types they decode) under
    transformers' names, then the snapshot's capture."""
    import transformers as tf

    from nneditor.semantic import clip_gguf

    doc = context.document
    fields, reason = clip_gguf.vision_config(doc)
    if fields is None:
        raise TracePluginError(reason)
    projected = clip_gguf.PROJECTION in doc.tensors
    cls = tf.CLIPVisionModelWithProjection if projected else tf.CLIPVisionModel
    model = cls(tf.CLIPVisionConfig(**fields)).eval().float()
    names = clip_gguf.transformers_names(doc, fields["num_hidden_layers"])
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    # transformers 5's CLIPVisionModel is the tower itself: its names have no vision_model.
    if not any(k.startswith("vision_model.") for k in shapes):
        names = {g: h.removeprefix("vision_model.") for g, h in names.items()}
    arrays = {
        names.get(stored, stored): _gguf_reader(doc.tensors[stored], shapes.get(names.get(stored)))
        for stored in doc.tensors
    }
    what = f"{cls.__name__} (from the GGUF metadata)"
    stored_names = {hf: stored for stored, hf in names.items()}
    load_arrays_exactly(model, arrays, what, "the GGUF", stored_names)
    _clip_capture(context, model, projected)
    return f"{cls.__name__} from GGUF"


def _gguf_reader(ref: Any, shape: tuple[int, ...] | None) -> Callable[[], np.ndarray]:
    """Reads one GGUF tensor (decoded to float). Converters differ in how they store the
    class embedding and the positions ([1, d] or [1, 1, d] for transformers' [d]); the same
    values in other unit dimensions are reshaped, anything else is left for the loader to
    refuse by name."""

    def read() -> np.ndarray:
        arr = np.asarray(ref.read())
        if shape is None or arr.shape == shape:
            return arr
        squeezed = [d for d in arr.shape if d != 1] == [d for d in shape if d != 1]
        return arr.reshape(shape) if squeezed else arr

    return read


def _residual(capture: Callable[[str, Any], None], i: int) -> Callable[..., None]:
    def hook(_m: Any, args: Any) -> None:
        capture(f"blk.{i}.attn_residual", args[0].detach().float().cpu().numpy())

    return hook


def _clip_capture(context: TraceContext, model: Any, projected: bool) -> None:
    """One forward pass of a transformers CLIP vision model on ``pixel_values``, published
    under the graph's names: a snapshot's checkpoint graph (the NumPy decoder's: inp_embd_pos,
    inp_norm, blk.N.output, pooler_output, image_embeds) or a GGUF's CLIP vision graph
    (embeddings, pre_layrnorm, encoder.layers.N, pooled_output, image_embeds and
    ``last_hidden_state``)."""
    import torch

    vm = getattr(model, "vision_model", model)  # transformers 5's CLIPVisionModel is the tower
    checkpoint = "inp_norm" in context.main_graph.value_info
    names = (
        ("inp_embd_pos", "inp_norm", "blk.{}.output", "pooler_output")
        if checkpoint
        else ("embeddings", "pre_layrnorm", "encoder.layers.{}", "pooled_output")
    )
    pairs = [(vm.embeddings, names[0]), (vm.pre_layrnorm, names[1])]
    pairs += [(layer, names[2].format(i)) for i, layer in enumerate(vm.encoder.layers)]
    pairs.append((vm.post_layernorm, names[3]))
    if checkpoint:  # every value of the decoder's graph: the patches and each block's parts
        pairs.append((vm.embeddings.patch_embedding, "inp_patches"))
        for i, layer in enumerate(vm.encoder.layers):
            parts = ("layer_norm1", "attn_norm"), ("self_attn", "attn_output")
            parts += ("layer_norm2", "ffn_norm"), ("mlp", "ffn_output")
            pairs += [(getattr(layer, m), f"blk.{i}.{v}") for m, v in parts]
    pixels = _tensor(context, "pixel_values").float()

    def capture(name: str, value: Any) -> None:
        if checkpoint and name == names[3]:  # a checkpoint graph's pooled row: [1, 1, d]
            value = value[:, None]
        if name == "inp_patches":  # the convolution's [1, d, rows, cols] as [1, patches, d]
            value = value.reshape(*value.shape[:2], -1).transpose(0, 2, 1)
        context.capture(name, value)

    handles = _hooks(pairs, capture)
    if checkpoint:  # the attention's residual sum is what layer_norm2 reads
        for i, layer in enumerate(vm.encoder.layers):
            handles.append(layer.layer_norm2.register_forward_pre_hook(_residual(capture, i)))
    try:
        with torch.no_grad():
            out = model(pixel_values=pixels)
    finally:
        for h in handles:
            h.remove()
    if projected:  # (one row of [1, 1, width] in a checkpoint graph)
        embeds = out.image_embeds.float().numpy()
        context.capture("image_embeds", embeds[:, None] if checkpoint else embeds)
    if "last_hidden_state" in context.main_graph.value_info:
        context.capture("last_hidden_state", out.last_hidden_state.float().numpy())


def _llava(context: TraceContext, folder: Path) -> str:
    import torch
    import transformers as tf

    config = tf.LlavaConfig.from_pretrained(str(folder))
    if not isinstance(config.vision_feature_layer, int):
        raise TracePluginError("several vision feature layers are not traced by this plugin")
    # LLaVA checkpoints keep legacy names that transformers maps itself on loading
    model = load_pretrained_exactly(tf.LlavaForConditionalGeneration, folder)
    inner = model.model
    vm = getattr(inner.vision_tower, "vision_model", inner.vision_tower)
    lm = inner.language_model
    pairs = [(vm.embeddings, "vision.embeddings"), (vm.pre_layrnorm, "vision.pre_layrnorm")]
    pairs += [(layer, f"vision.layers.{i}") for i, layer in enumerate(vm.encoder.layers)]
    pairs += [(inner.multi_modal_projector, "image_embeds"), (lm.embed_tokens, "text_embeds")]
    pairs += [(layer, f"language_model.layers.{i}") for i, layer in enumerate(lm.layers)]
    pairs.append((lm.norm, "language_model.norm"))
    handles = _hooks(pairs, context.capture)

    def projector_input(_m: Any, args: Any) -> None:  # the selected image features
        context.capture("image_features", args[0].detach().float().numpy())

    handles.append(inner.multi_modal_projector.register_forward_pre_hook(projector_input))
    handles.append(_merge_hook(lm, context))
    ids = _tensor(context, "input_ids").long()
    pixels = _tensor(context, "pixel_values").float()
    count = int((ids == config.image_token_id).sum())
    try:
        with torch.no_grad():
            out = model(input_ids=ids, pixel_values=pixels, use_cache=False)
    except ValueError as exc:  # e.g. placeholders and image features do not match
        raise TracePluginError(
            f"{exc} (the prompt holds {count} image placeholder tokens)"
        ) from None
    finally:
        for h in handles:
            h.remove()
    context.capture("logits", out.logits.float().numpy())
    return "LlavaForConditionalGeneration"


def _qwen_vl(context: TraceContext, folder: Path) -> str:
    """Qwen2-VL / Qwen2.5-VL / Qwen3-VL: vision blocks, the patch merger (and Qwen3-VL's
    DeepStack mergers), the image/text merge, the language model's blocks and logits;
    ``mm_token_type_ids`` (1 at image tokens) is derived from the prompt as the model's
    processor derives it."""
    import torch
    import transformers as tf

    name = {
        "qwen2_vl": "Qwen2VLForConditionalGeneration",
        "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
        "qwen3_vl": "Qwen3VLForConditionalGeneration",
        "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
    }[str(context.document.metadata["config"]["model_type"])]
    model = load_pretrained_exactly(getattr(tf, name), folder)
    inner = model.model
    vis, lm = inner.visual, inner.language_model
    pairs = [(vis.patch_embed, "visual.patch_embed"), (vis.merger, "image_embeds")]
    pairs += [(block, f"visual.blocks.{i}") for i, block in enumerate(vis.blocks)]
    pairs += [(lm.embed_tokens, "text_embeds"), (lm.norm, "language_model.norm")]
    pairs += [(layer, f"language_model.layers.{i}") for i, layer in enumerate(lm.layers)]
    handles = _hooks(pairs, context.capture)
    handles.append(_merge_hook(lm, context))
    # Qwen3-VL's DeepStack: each merger's features, and the hidden state after they are added
    # (what the next block, or the final norm, receives)
    stack = list(getattr(vis, "deepstack_merger_list", None) or [])
    handles += _hooks([(m, f"deepstack.{k}") for k, m in enumerate(stack)], context.capture)
    after = [*lm.layers[1:], lm.norm]
    for k in range(len(stack)):

        def injected(_m: Any, args: Any, k: int = k) -> None:
            value = args[0].detach().float().numpy()
            context.capture(f"language_model.layers.{k}.deepstack", value)

        handles.append(after[k].register_forward_pre_hook(injected))
    ids = _tensor(context, "input_ids").long()
    pixels = _tensor(context, "pixel_values").float()
    grid = _tensor(context, "image_grid_thw").long()
    image = int(model.config.image_token_id)
    count = int((ids == image).sum())
    try:
        with torch.no_grad():
            out = model(
                input_ids=ids,
                pixel_values=pixels,
                image_grid_thw=grid,
                mm_token_type_ids=(ids == image).long(),
                use_cache=False,
            )
    except (ValueError, RuntimeError) as exc:  # e.g. placeholders and features disagree
        raise TracePluginError(
            f"{exc} (the prompt holds {count} image placeholder tokens; the grid "
            f"{grid.tolist()} gives {int(grid.prod(-1).sum())} patches)"
        ) from None
    finally:
        for h in handles:
            h.remove()
    context.capture("logits", out.logits.float().numpy())
    return name


def trace(context: TraceContext) -> TraceOutcome:
    import torch
    import transformers

    doc = context.document
    if doc.format == "gguf":
        arch = str(doc.metadata.get("general.architecture") or "")
        if arch != "clip":
            raise TracePluginError(f"this tracer runs CLIP vision GGUFs, not {arch!r} ones")
        context.capture_inputs()
        what = _clip_gguf(context)
    else:
        model_type = str((doc.metadata.get("config") or {}).get("model_type") or "")
        runners = {
            "whisper": _whisper,
            "clip_vision_model": _clip_vision,
            "llava": _llava,
            "qwen2_vl": _qwen_vl,
            "qwen2_5_vl": _qwen_vl,
            "qwen3_vl": _qwen_vl,
            "qwen3_vl_moe": _qwen_vl,
        }
        if model_type not in runners:
            raise TracePluginError(
                f"this tracer runs Whisper, CLIP vision, LLaVA and Qwen2/2.5/3-VL, not {model_type!r}"
            )
        context.capture_inputs()
        what = runners[model_type](context, Path(doc.path))
    return TraceOutcome(
        provider="transformers",
        notes=(
            f"transformers {transformers.__version__} {what}, torch {torch.__version__}, "
            "float32 on CPU; one forward pass on the given inputs",
        ),
    )
