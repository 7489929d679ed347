"""The mixers of hybrid checkpoints, as nodes of the synthesized graph (checkpoint_graphs.py):
qwen35's (and Qwen3-Next's) gated attention and Gated DeltaNet recurrence, LFM2's short
convolution; and the sentence describing an attention layer."""

from __future__ import annotations

from typing import Any


def attention_text(heads: int | None, kv: int | None) -> str:
    text = "Self-attention"
    if heads:
        text += f" with {heads} heads"
        if kv and kv < heads:
            text += f" and {kv} key/value heads (grouped-query)"
    return text


class NodeMaker:
    """What the family mixins build with; checkpoint_builder's builder provides both."""

    def node(
        self,
        scope: str,
        op: str,
        inputs: list[str],
        output: str,
        weights: list[str],
        pattern: str = "",
        explanation: str = "",
        **attrs: Any,
    ) -> str:
        raise NotImplementedError

    def rows(self, name: str) -> int | None:
        raise NotImplementedError


class HybridMixers(NodeMaker):
    """Node builders for the hybrid mixers; mixed into checkpoint_builder's builder."""

    def _gated_attention(
        self, s: str, t: dict[str, str], h: str, heads: int | None, kv: int | None
    ) -> str:
        """qwen35 full attention: the query projection also yields a sigmoid output gate."""
        keys = ("attn_q.weight", "attn_k.weight", "attn_v.weight")
        norms = ("attn_q_norm.weight", "attn_k_norm.weight")
        attrs = {"num_heads": heads, "kv_num_heads": kv} if heads else {}
        q = t.get("attn_q.weight")
        q_rows = self.rows(q or "")
        width = q_rows // 2 if q_rows else None
        gated = self.node(
            f"{s}/attn",
            "Attention",
            [h],
            f"{s}.attn_gated",
            [t.get(k, "") for k in (*keys, *norms)],
            "attention",
            f"{attention_text(heads, kv)}, q/k RMSNorm, partial RoPE and a per-head sigmoid "
            "output gate taken from the query projection (from qwen35 metadata and tensor "
            "names).",
            width=width,
            **attrs,
        )
        return self.node(
            f"{s}/attn",
            "MatMul",
            [gated],
            f"{s}.attn_output",
            [t.get("attn_output.weight", "")],
            "attention",
            "Attention output projection (from tensor names).",
        )

    def _recurrent_mixer(self, s: str, t: dict[str, str], h: str) -> str:
        """qwen35 Gated DeltaNet: projection + causal convolution, the delta-rule recurrence,
        the gated RMSNorm and the output projection, one node each."""
        scope = f"{s}/ssm"
        qkv = t.get("attn_qkv.weight", "") or t.get("ssm_in.weight", "")
        inner = self.rows(t.get("attn_gate.weight", ""))  # value heads x value width
        conv_width = self.rows(qkv)
        if "ssm_in.weight" in t:  # Qwen3-Next snapshots: q, k, v and z in one matrix
            ba, dv = self.rows(t.get("ssm_ba.weight", "")), self.rows(t.get("ssm_norm.weight", ""))
            inner = ba // 2 * dv if ba and dv else None  # beta and alpha: one row per value head
            conv_width = conv_width - inner if conv_width and inner else None
        conv = self.node(
            scope,
            "CausalConv1D",
            [h],
            f"{s}.ssm_conv",
            [qkv, t.get("ssm_conv1d.weight", "")],
            "recurrent",
            "Query/key/value projection, then a causal depthwise convolution over time and "
            "SiLU (from tensor names).",
            width=conv_width,
        )
        gate = t.get("attn_gate.weight", "")
        delta = self.node(
            scope,
            "GatedDeltaNet",
            [conv, h],
            f"{s}.ssm_delta",
            [
                t.get(k, "")
                for k in (
                    "ssm_beta.weight",
                    "ssm_alpha.weight",
                    "ssm_ba.weight",
                    "ssm_a",
                    "ssm_dt.bias",
                )
            ],
            "recurrent",
            "Gated DeltaNet recurrence: L2-normalised keys and queries, decay and write "
            "strength from the input, state fresh per prompt (from tensor names).",
            width=inner,
        )
        normed = self.node(
            scope,
            "GatedRMSNorm",
            [delta, h],
            f"{s}.ssm_gated_norm",
            [t.get("ssm_norm.weight", ""), gate],
            "recurrent",
            "Per-head RMSNorm gated by SiLU of the gate projection (from tensor names).",
            width=inner,
        )
        return self.node(
            scope,
            "MatMul",
            [normed],
            f"{s}.attn_output",
            [t.get("ssm_out.weight", "")],
            "recurrent",
            "Recurrent output projection (from tensor names).",
        )

    def _short_conv(self, s: str, t: dict[str, str], h: str) -> str:
        """LFM2's short convolution: the input projection into B, C and x, the causal
        convolution of B * x, then C times it through the output projection."""
        scope = f"{s}/shortconv"
        conv = self.node(
            scope,
            "CausalConv1D",
            [h],
            f"{s}.shortconv",
            [t.get("shortconv.in_proj.weight", ""), t.get("shortconv.conv.weight", "")],
            "conv",
            "Input projection into B, C and x, then a short causal depthwise convolution over "
            "time of B * x (from tensor names).",
        )
        return self.node(
            scope,
            "MatMul",
            [conv, h],
            f"{s}.attn_output",
            [t.get("shortconv.out_proj.weight", "")],
            "conv",
            "C gate times the convolution, then the output projection (from tensor names).",
        )
