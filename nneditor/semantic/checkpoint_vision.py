"""The ends of CLIP's and SigLIP's vision towers in a checkpoint graph (decoder/clip_vision.py
runs them): after ViT's embedding and blocks, CLIP's pooled class token and its projection,
or SigLIP's normalised positions and its attention-pooling head. Their values hold one row:
``pooler_output``, ``image_embeds``, ``pool_attn``, ``pool_norm``."""

from __future__ import annotations

from collections.abc import Mapping

from nneditor.model.graph import Graph, ValueInfo
from nneditor.semantic.checkpoint_builder import CheckpointBuilder

_ONE_ROW = ("pool_attn", "pool_norm", "pooler_output", "image_embeds")


def tower_head(b: CheckpointBuilder, top: Mapping[str, str], x: str, tower: str) -> None:
    """The nodes after the last block: ``tower`` is "clip" or "siglip"."""
    if tower == "clip":
        x = b.node(
            "output_norm",
            "LayerNorm",
            [x],
            "pooler_output",
            [top.get("output_norm.weight", ""), top.get("output_norm.bias", "")],
            "norm",
            "post_layernorm over the class token alone: the pooled output (pooler_output; the "
            "last block's output is last_hidden_state) (from tensor names).",
        )
        if "image_proj.weight" in top:
            b.node(
                "image_proj",
                "MatMul",
                [x],
                "image_embeds",
                [top["image_proj.weight"]],
                "head",
                "visual_projection (no bias): the image embedding in the space CLIP shares with "
                "its text tower (from tensor names).",
                width=b.rows(top["image_proj.weight"]),
            )
        return
    x = b.layer_norm(
        "output_norm",
        x,
        "result_norm",
        top,
        "post_layernorm over every position: last_hidden_state (from tensor names).",
    )
    if "pool_probe.weight" not in top:
        return
    a = b.node(
        "pool_attn",
        "MultiHeadAttention",
        [x],
        "pool_attn",
        [
            top[f"pool_{k}"]
            for k in (
                "probe.weight",
                "attn_qkv.weight",
                "attn_qkv.bias",
                "attn_output.weight",
                "attn_output.bias",
            )
        ],  # fmt: skip
        "attention",
        "Attention pooling: one learned query (head.probe) attends over every position "
        "(torch.nn.MultiheadAttention) (from tensor names).",
    )
    h = b.node(
        "pool_norm",
        "LayerNorm",
        [a],
        "pool_norm",
        [top.get("pool_norm.weight", ""), top.get("pool_norm.bias", "")],
        "norm",
        "The pooling head's LayerNorm (from tensor names).",
    )
    b.node(
        "pool_ffn",
        "FeedForward",
        [h, a],
        "pooler_output",
        [
            top.get(f"pool_ffn_{k}", "")
            for k in ("up.weight", "up.bias", "down.weight", "down.bias")
        ],
        "ffn",
        "The pooling head's MLP, added to the attention's output: the pooled output "
        "(pooler_output) (from tensor names).",
    )


def one_row(g: Graph) -> None:
    """The pooled values hold one row ([1, 1, width])."""
    for name in _ONE_ROW:
        info = g.value_info.get(name)
        if info is not None and info.shape:
            g.value_info[name] = ValueInfo(name, info.dtype, (1, 1, info.shape[-1]))
    if g.outputs:
        g.outputs[0] = g.value_info.get(g.outputs[0].name, g.outputs[0])
