"""Gemma 3n's blocks as nodes of the synthesized graph (checkpoint_graphs.py; the forward pass
is decoder/gemma3n.py): Gemma 4's attention and per-layer embeddings (checkpoint_gemma4.py)
inside AltUp's streams, whose values hold every stream side by side (width streams × hidden),
and the LAuReL branch. Everything is read off tensor names."""

from __future__ import annotations

from nneditor.semantic.checkpoint_gemma4 import PLE_VALUE, Gemma4Parts


class Gemma3nParts(Gemma4Parts):
    """Node builders mixed into checkpoint_builder's builder."""

    def altup_inputs(self, top: dict[str, str], x: str, width: int | None) -> str:
        """Gemma 3n: the embedding and its projections, the streams side by side."""
        return self.node(
            "altup_proj",
            "AltUpProjection",
            [x],
            "inp_stacked",
            _stream_weights(top, "altup_proj"),
            "embedding",
            "AltUp: the scaled embedding and its projections (each rescaled to the embedding's "
            "root-mean-square) as the streams every layer updates (from tensor names).",
            width=width,
        )

    def altup_merge(self, top: dict[str, str], x: str) -> str:
        return self.node(
            "altup_unembd_proj",
            "AltUpMerge",
            [x],
            "altup_unembd",
            _stream_weights(top, "altup_unembd_proj"),
            "",
            "AltUp: the other streams projected back (rescaled to the active stream's "
            "root-mean-square) and every stream averaged (from tensor names).",
        )

    def gemma3n_block(
        self,
        i: int,
        t: dict[str, str],
        x: str,
        heads: int | None,
        producer: int | None,
        ple: str,
        width: int | None,
    ) -> str:
        """One Gemma 3n layer on the AltUp streams ``x`` (``width``: streams × hidden)."""
        s = f"blk.{i}"

        def rms(scope: str, value: str, out: str, key: str, what: str) -> str:
            return self.rms_node(s, t, scope, value, out, key, what)

        router = [t.get("altup_router.weight", ""), t.get("altup_router_norm.weight", "")]
        pred = self.node(
            f"{s}/altup_predict",
            "AltUpPredict",
            [x],
            f"{s}.predictions",
            [*router, t.get("altup_predict_coef.weight", "")],
            "",
            "AltUp prediction: every stream plus a mix of all of them, with coefficients from "
            "the active stream's router (from tensor names).",
            width=width,
        )
        h = rms("attn_norm", pred, f"{s}.attn_norm", "attn_norm.weight", "of the active stream")
        laurel = self.node(
            f"{s}/laurel",
            "LAuReL",
            [h],
            f"{s}.laurel_out",
            [
                t.get(k, "")
                for k in ("laurel_l.weight", "laurel_r.weight", "laurel_post_norm.weight")
            ],
            "",
            "LAuReL: the normalised input plus a normalised low-rank projection of it (from "
            "tensor names).",
        )
        a = self.shared_attention(s, t, h, heads, producer)
        a = rms(
            "attn_post_norm",
            a,
            f"{s}.attn_post_norm",
            "post_attention_norm.weight",
            "of the attention output",
        )
        x2 = self.node(
            s,
            "Add",
            [pred, a, laurel],
            f"{s}.attn_laurel",
            [],
            "residual",
            "The active stream plus attention plus LAuReL, times 1/sqrt(2).",
        )
        h = rms("ffn_norm", x2, f"{s}.ffn_norm", "ffn_norm.weight", "before the feed-forward")
        f = self.node(
            f"{s}/ffn",
            "FeedForward",
            [h],
            f"{s}.ffn_output",
            [t[k] for k in ("ffn_gate.weight", "ffn_up.weight", "ffn_down.weight") if k in t],
            "ffn",
            "Feed-forward, gated GELU (GeGLU); on the first layers the gate keeps only values "
            "above its mean plus a multiple of its standard deviation (from tensor names).",
            variant="gated (GeGLU)",
        )
        f = rms(
            "ffn_post_norm",
            f,
            f"{s}.ffn_post_norm",
            "post_ffw_norm.weight",
            "of the feed-forward output",
        )
        out = self.node(
            s,
            "Add",
            [x2, f],
            f"{s}.attn_ffw_laurel_gated",
            [],
            "residual",
            "Residual connection around the feed-forward.",
        )
        corrected = self.node(
            f"{s}/altup_correct",
            "AltUpCorrect",
            [pred, out],
            f"{s}.corrected",
            [*router, t.get("altup_correct_coef.weight", "")],
            "",
            "AltUp correction: every stream's prediction plus the block's innovation (its "
            "output minus the active prediction) times 1 + coefficients from the router.",
            width=width,
        )
        e = self.node(
            f"{s}/per_layer",
            "PerLayerInput",
            [corrected, ple],
            f"{s}.per_layer_proj",
            [
                t.get(k, "")
                for k in ("altup_correct_scale.weight", "inp_gate.weight", "proj.weight")
            ],
            "ffn",
            f"Per-layer embedding: the corrected active stream times a learned scale, GELU of its "
            f"gate projection times this layer's slice of {PLE_VALUE}, projected back (from "
            "tensor names).",
        )
        e = rms(
            "per_layer_post_norm",
            e,
            f"{s}.per_layer_embd_out",
            "post_norm.weight",
            "of the per-layer embedding",
        )
        return self.node(
            s,
            "Add",
            [corrected, e],
            f"{s}.output",
            [],
            "residual",
            "The per-layer embedding added to every stream but the active one.",
            width=width,
        )


def _stream_weights(top: dict[str, str], base: str) -> list[str]:
    """AltUp's projections: the stacked tensor (GGUF) or one per stream (snapshots)."""
    if f"{base}.weight" in top:
        return [top[f"{base}.weight"]]
    return [top[k] for k in sorted(top) if k.startswith(f"{base}.")]
