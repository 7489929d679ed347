"""Gemma 4's blocks as nodes of the synthesized graph (checkpoint_graphs.py; the forward pass
is decoder/gemma4.py): Gemma 3's sandwich norms, per-layer embeddings entering every layer,
shared keys and values, each layer's output scale, the 26B-A4B's experts. Everything is read
off tensor names (and the query projection's width, which tells full-attention layers from
sliding ones). Gemma 3n's blocks, built of the same parts: checkpoint_gemma3n.py."""

from __future__ import annotations

from typing import Any

from nneditor.semantic.checkpoint_mixers import NodeMaker, attention_text

#: the per-layer embedding stream's values and its width (layers × per-layer width)
PLE_VALUE = "inp_per_layer"


class Gemma4Parts(NodeMaker):
    """Node builders mixed into checkpoint_builder's builder."""

    def _gemma4_experts(self, s: str, t: dict[str, str], x: str, mlp: str) -> str:
        """The 26B-A4B's routed experts beside the dense feed-forward ``mlp``: their sum,
        normalised, added to the dense output (itself normalised)."""

        def rms(scope: str, value: str, out: str, key: str, what: str) -> str:
            text = f"Normalization: RMSNorm {what} (from tensor names)."
            return self.node(
                f"{s}/{scope}", "RMSNorm", [value], out, [t.get(key, "")], "norm", text
            )

        mlp = rms(
            "ffn_post_norm_1",
            mlp,
            f"{s}.ffn_mlp",
            "post_ffw_norm_1.weight",
            "of the dense feed-forward's output",
        )
        router = [
            t.get(k, "")
            for k in ("ffn_gate_inp.weight", "ffn_gate_inp.scale", "ffn_down_exps.scale")
        ]
        weights = self.node(
            f"{s}/ffn_router",
            "Router",
            [x],
            f"{s}.ffn_moe_weights",
            router,
            "ffn",
            _experts_text(),
            width=self.rows(t.get("ffn_gate_inp.weight", "")),
        )
        h = rms("ffn_norm_2", x, f"{s}.ffn_norm_2", "pre_ffw_norm_2.weight", "before the experts")
        experts = [n for k, n in sorted(t.items()) if k.endswith("_exps.weight")]
        e = self.node(
            f"{s}/ffn_experts",
            "FeedForward",
            [h, weights],
            f"{s}.ffn_moe_output",
            experts,
            "ffn",
            "Routed experts, gated GELU, summed with the router's weights (from tensor names).",
            variant="mixture of experts",
        )
        e = rms(
            "ffn_post_norm_2", e, f"{s}.ffn_moe", "post_ffw_norm_2.weight", "of the experts' sum"
        )
        return self.node(
            f"{s}/ffn_sum",
            "Add",
            [mlp, e],
            f"{s}.ffn_output",
            [],
            "ffn",
            "The dense feed-forward and the experts, summed.",
        )

    def rms_node(
        self, s: str, t: dict[str, str], scope: str, value: str, out: str, key: str, what: str
    ) -> str:
        """An RMSNorm node of block ``s`` reading ``t[key]``."""
        text = f"Normalization: RMSNorm {what} (from tensor names)."
        return self.node(f"{s}/{scope}", "RMSNorm", [value], out, [t.get(key, "")], "norm", text)

    def shared_attention(
        self,
        s: str,
        t: dict[str, str],
        h: str,
        heads: int | None,
        producer: int | None,
        note: str = "",
        extra: list[str] | None = None,
    ) -> str:
        """Block ``s``'s attention on ``h``; a layer reusing ``producer``'s keys and values
        reads that layer's normalised input too."""
        weights = [
            n for k, n in sorted(t.items()) if k.startswith("attn_") and k != "attn_norm.weight"
        ]
        text, inputs = attention_text(heads, None), [h]
        if producer is not None:
            inputs.append(f"blk.{producer}.attn_norm")
            text += (
                f", reusing the keys and values layer {producer} computed (this layer has no "
                "key or value projection)"
            )
        return self.node(
            f"{s}/attn",
            "Attention",
            inputs,
            f"{s}.attn_output",
            [*weights, *(extra or [])],
            "attention",
            f"{text}{note} (from tensor names).",
            num_heads=heads,
        )

    def gemma4_inputs(self, top: dict[str, str], x: str) -> str | None:
        """The per-layer embeddings (E2B, E4B): a table lookup and a projection of the scaled
        embedding, summed; None for a model without them."""
        table = top.get("per_layer_token_embd.weight")
        if not table:
            return None
        width = self.rows(top.get("per_layer_model_proj.weight", ""))
        picked = self.node(
            "per_layer_token_embd",
            "Embedding",
            ["tokens"],
            "inp_per_layer_selected",
            [table],
            "embedding",
            "Per-layer embeddings: token ids look up every layer's slice of a second table, "
            "scaled by the square root of the slice width (from tensor names).",
            width=width,
        )
        proj = self.node(
            "per_layer_model_proj",
            "PerLayerProjection",
            [x],
            "per_layer_proj",
            [top.get("per_layer_model_proj.weight", ""), top.get("per_layer_proj_norm.weight", "")],
            "embedding",
            "The scaled embedding projected to every layer's slice (times 1/sqrt(hidden)), each "
            "slice RMS-normalised (from tensor names).",
            width=width,
        )
        return self.node(
            "per_layer_token_embd",
            "Add",
            [picked, proj],
            PLE_VALUE,
            [],
            "embedding",
            "Per-layer inputs: the looked-up and projected slices summed, times 1/sqrt(2).",
            width=width,
        )

    def gemma4_block(
        self,
        i: int,
        t: dict[str, str],
        x: str,
        heads: int | None,
        producer: int | None,
        ple: str | None,
        rope_factors: str = "",
    ) -> str:
        """One layer; ``producer``: the earlier layer whose keys and values it reuses;
        ``rope_factors``: the GGUF's rope_freqs, which full-attention layers read."""
        s = f"blk.{i}"

        def rms(scope: str, value: str, out: str, key: str, what: str) -> str:
            return self.rms_node(s, t, scope, value, out, key, what)

        h = rms("attn_norm", x, f"{s}.attn_norm", "attn_norm.weight", "before attention")
        note = ""
        if producer is None and "attn_v.weight" not in t:
            note += ", values taken from the key projection (no value projection)"
        if rope_factors:
            note += ", proportional RoPE on a quarter of each head (rope_freqs)"
        a = self.shared_attention(s, t, h, heads, producer, note, [rope_factors])
        a = rms(
            "attn_post_norm",
            a,
            f"{s}.attn_post_norm",
            "post_attention_norm.weight",
            "of the attention output",
        )
        x = self.node(
            s,
            "Add",
            [x, a],
            f"{s}.attn_residual",
            [],
            "residual",
            "Residual connection around attention.",
        )
        h = rms("ffn_norm", x, f"{s}.ffn_norm", "ffn_norm.weight", "before the feed-forward")
        ffn = [t[k] for k in ("ffn_gate.weight", "ffn_up.weight", "ffn_down.weight") if k in t]
        routed = "ffn_gate_inp.weight" in t
        f = self.node(
            f"{s}/ffn",
            "FeedForward",
            [h],
            f"{s}.ffn_mlp_output" if routed else f"{s}.ffn_output",
            ffn,
            "ffn",
            "Feed-forward, gated GELU (GeGLU)"
            + (", beside the experts" if routed else "")
            + " (from tensor names).",
            variant="gated (GeGLU)",
        )
        if routed:
            f = self._gemma4_experts(s, t, x, f)
        f = rms(
            "ffn_post_norm",
            f,
            f"{s}.ffn_post_norm",
            "post_ffw_norm.weight",
            "of the feed-forward output",
        )
        scale = t.get("layer_output_scale.weight")
        last = ple is None and not scale
        x = self.node(
            s,
            "Add",
            [x, f],
            f"{s}.output" if last else f"{s}.ffn_residual",
            [],
            "residual",
            "Residual connection around the feed-forward.",
        )
        if ple is not None:
            e = self.node(
                f"{s}/per_layer",
                "PerLayerInput",
                [x, ple],
                f"{s}.per_layer_proj",
                [t.get("inp_gate.weight", ""), t.get("proj.weight", "")],
                "ffn",
                f"Per-layer embedding: GELU of a gate projection times this layer's slice of "
                f"{PLE_VALUE}, projected back to the hidden width (from tensor names).",
            )
            e = rms(
                "per_layer_post_norm",
                e,
                f"{s}.per_layer_embd_out",
                "post_norm.weight",
                "of the per-layer embedding",
            )
            x = self.node(
                s,
                "Add",
                [x, e],
                f"{s}.output" if not scale else f"{s}.per_layer_residual",
                [],
                "residual",
                "Residual connection adding the per-layer embedding.",
            )
        if scale:
            x = self.node(
                f"{s}/layer_output_scale",
                "Mul",
                [x],
                f"{s}.output",
                [scale],
                "",
                "The layer's output times its learned scalar (layer_output_scale).",
            )
        return x


def _experts_text() -> str:
    return (
        "Router: a softmax over every expert of the residual (RMS-normalised without a weight, "
        "times the router's scale vector and 1/sqrt(hidden)); each token keeps its top ones, "
        "renormalised and times each expert's learned scale (from tensor names)."
    )


def full_layers(blocks: dict[int, dict[str, str]], rows: Any) -> set[int]:
    """The full-attention layers: those whose queries are the widest (wider heads), or every
    layer when all are alike."""
    widths = {i: rows(t.get("attn_q.weight", "")) or 0 for i, t in blocks.items()}
    widest = max(widths.values(), default=0)
    return {i for i, width in widths.items() if width == widest}


def producers(blocks: dict[int, dict[str, str]], rows: Any) -> dict[int, int]:
    """Layer -> the earlier layer whose keys and values it reuses: the last one with a key
    projection and a query projection of the same width (the same kind of layer)."""
    out: dict[int, int] = {}
    last: dict[int | None, int] = {}
    for i in sorted(blocks):
        t = blocks[i]
        width = rows(t.get("attn_q.weight", ""))
        if "attn_k.weight" in t:
            last[width] = i
        elif width in last:
            out[i] = last[width]
    return out
