"""The node builder of graphs synthesized for checkpoints (checkpoint_graphs.py decides what
to build from metadata and tensor names).

Ops live in the ``nneditor`` domain (Embedding, RMSNorm, LayerNorm, Attention, GatedDeltaNet,
Mamba, FeedForward, Add, LMHead) and carry ``info["pattern"]`` so the semantic layer labels
them without guessing; their explanations say they come from metadata and tensor names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.semantic.checkpoint_gemma3n import Gemma3nParts
from nneditor.semantic.checkpoint_mixers import HybridMixers, attention_text
from nneditor.semantic.checkpoint_names import ffn_norm_value
from nneditor.semantic.graph_builder import DOMAIN
from nneditor.semantic.sentence_pooling import SentencePooling

#: families whose LayerNorm has a weight but no bias (a bias-less norm is RMSNorm elsewhere)
_BIASLESS_LN = frozenset({"command-r", "cohere2", "olmo", "modern-bert"})


#: families that scale their embeddings by sqrt(hidden) (Gemma's too), as they are named
_SCALED_EMBEDDING = {"biogpt": "BioGPT", "xglm": "XGLM"}

#: tensor-name prefixes of a layer's mixer (attention, latent attention, recurrences); a layer
#: with none of them is a feed-forward layer of its own (Nemotron-H)
_MIXER_KEYS = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_kv_a", "ssm_", "shortconv")


class CheckpointBuilder(HybridMixers, Gemma3nParts):
    """Builds a checkpoint's graph node by node (decoder blocks, embeddings, head)."""

    def __init__(self, name: str, rows: Callable[[str], int | None] | None = None) -> None:
        self.graph = Graph(name)
        self.weights: list[str] = []
        self.widths: dict[str, int] = {}  # values whose width is not the hidden size
        #: GPT-NeoX blocks run attention and feed-forward in parallel (the file or config says)
        self.parallel = False
        #: a GGUF's RoPE frequency factors (rope_freqs: Llama 3's scaling), which every attention
        #: layer reads except the ``unrotated`` ones (Llama 4's NoPE layers)
        self.rope_factors = ""
        self.unrotated: frozenset[int] = frozenset()
        #: ESM's token dropout: the mask token's embedding zeroed, the others scaled
        self.token_dropout = False
        self._rows = rows

    def rows(self, name: str) -> int | None:
        """A weight's first (output) dimension, when the checkpoint says."""
        return self._rows(name) if self._rows and name else None

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
        weights = [w for w in weights if w]
        self.weights.extend(weights)
        width = attrs.pop("width", None)
        if width:
            self.widths[output] = int(width)
        node = Node(
            len(self.graph.nodes),
            f"/{scope}/{op}",
            op,
            DOMAIN,
            tuple([*inputs, *weights]),
            (output,),
            attrs=dict(attrs),
            info={"pattern": pattern, "explanation": explanation} if pattern else None,
        )
        self.graph.nodes.append(node)
        return output

    def vision_embedding(
        self, top: dict[str, str], channels: int, size: int, patch: int, grid: int = 0
    ) -> str:
        """A vision transformer's input: the image's patches projected, the class token first,
        the learned positions added (decoder/vit.py ``embed``); ``grid``: DINOv2's stored
        position grid, resized to the image's."""
        self.graph.inputs.append(ValueInfo("pixel_values", "float32", (1, channels, size, size)))
        x = self.node(
            "patch_embd",
            "Conv",
            ["pixel_values"],
            "inp_patches",
            [top.get("patch_embd.weight", ""), top.get("patch_embd.bias", "")],
            "embedding",
            f"Patch embedding: each {patch}x{patch} patch of the image projected to the hidden "
            "size (a convolution whose stride is its kernel) (from tensor names).",
        )
        x = self.node(
            "patch_pos",
            "Add",
            [x],
            "inp_embd_pos",
            [
                top.get("cls_token.weight", ""),
                top.get("dist_token.weight", ""),
                top.get("patch_pos.weight", ""),
            ],
            "embedding",
            ("The class token first" if "cls_token.weight" in top else "No class token")
            + (" and DeiT's distillation token" if "dist_token.weight" in top else "")
            + (
                ", then the learned position table added"
                if "patch_pos.weight" in top
                else ", no position table (BEiT: positions enter each attention as a bias)"
            )
            + (
                f" (stored for {grid}x{grid} patches, resized bicubically to the image's patch "
                "grid as transformers' interpolate_pos_encoding does)"
                if grid
                else ""
            )
            + " (from tensor names).",
        )
        if "token_embd_norm.weight" not in top:
            return x
        return self.layer_norm(  # CLIP's pre_layrnorm
            "token_embd_norm", x, "inp_norm", top, "LayerNorm before the blocks (pre_layrnorm)."
        )

    def embedding(self, top: dict[str, str], arch: str = "") -> str:
        self.graph.inputs.append(ValueInfo("tokens", "int64", (1, "seq")))
        emb = top.get("token_embd.weight")
        x = self.node(
            "token_embd",
            "Embedding",
            ["tokens"],
            "inp_embd",
            [emb or ""],
            "embedding",
            f"Embedding: token ids look up rows of {emb or 'token_embd.weight'} (from tensor "
            "names).",
        )
        if self.token_dropout:
            x = self.node(
                "token_embd",
                "Scale",
                [x, "tokens"],
                "inp_dropout_scaled",
                [],
                "embedding",
                "ESM's token dropout: the mask token's embedding zeroed, the others scaled by "
                "(1 - 0.12) / (1 - the prompt's share of mask tokens), as in training.",
            )
        if "token_embd_in_proj.weight" in top:  # OPT-350m
            x = self.node(
                "token_embd_in_proj",
                "Linear",
                [x],
                "inp_in_proj",
                [top["token_embd_in_proj.weight"]],
                "embedding",
                "Projection of the narrower embeddings to the hidden size (from tensor names).",
            )
        if arch.startswith("gemma") or arch in _SCALED_EMBEDDING:
            x = self.node(
                "token_embd",
                "Scale",
                [x],
                "inp_scaled",
                [],
                "embedding",
                f"{_SCALED_EMBEDDING.get(arch, 'Gemma')} scales the embedding by the square "
                "root of the hidden size.",
            )
        if arch == "xglm":  # fixed positions: no table is stored
            pos = self.node(
                "position_embd",
                "Sinusoids",
                ["tokens"],
                "inp_pos",
                [],
                "embedding",
                "Position embedding: fixed sinusoids in fairseq's layout (sines, then cosines), "
                "read from row 2 (XGLM; no table is stored).",
            )
            x = self.node("token_embd", "Add", [x, pos], "inp_embd_pos", [])
        if "position_embd.weight" in top:
            pos = self.node(
                "position_embd",
                "Embedding",
                ["tokens"],
                "inp_pos",
                [top["position_embd.weight"]],
                "embedding",
                "Learned position embedding (from tensor names).",
            )
            x = self.node("token_embd", "Add", [x, pos], "inp_embd_pos", [])
        if "token_types.weight" in top:  # BERT: segment embeddings
            pairs = (self.rows(top["token_types.weight"]) or 1) > 1
            if pairs:  # a second text's tokens read row 1 (sentence pairs, cross-encoders)
                self.graph.inputs.append(ValueInfo("token_types", "int64", (1, "seq")))
            types = self.node(
                "token_types",
                "Embedding",
                ["token_types" if pairs else "tokens"],
                "inp_types",
                [top["token_types.weight"]],
                "embedding",
                "Token-type (segment) embedding: "
                + (
                    "each token's segment row (0: the first text, 1: a pair's second)"
                    if pairs
                    else "row 0, its only one"
                )
                + " (from tensor names).",
            )
            x = self.node("token_embd", "Add", [x, types], "inp_embd_types", [])
        if "task_types.weight" in top:  # ERNIE (use_task_id): transformers' default, task 0
            task = self.node(
                "task_types",
                "Embedding",
                ["tokens"],
                "inp_task_types",
                [top["task_types.weight"]],
                "embedding",
                "Task-type embedding (ERNIE): row 0, the task type transformers assumes when "
                "none is given, added to every token (from tensor names).",
            )
            x = self.node("token_embd", "Add", [x, task], "inp_embd_task_types", [])
        if "token_embd_norm.weight" in top:
            x = self.layer_norm(
                "token_embd_norm",
                x,
                "inp_norm",
                top,
                "Normalization: LayerNorm of the summed embeddings (from tensor names).",
            )
        if "token_embd_proj.weight" in top:  # ALBERT, ELECTRA
            x = self.node(
                "token_embd_proj",
                "Linear",
                [x],
                "inp_proj",
                [top["token_embd_proj.weight"], top.get("token_embd_proj.bias", "")],
                "embedding",
                "Projection of the narrower embeddings to the hidden size (from tensor names).",
            )
        return x

    def decoder_block(
        self, i: int | str, t: dict[str, str], x: str, arch: str, heads: int | None, kv: int | None
    ) -> str:
        s = f"blk.{i}"
        norm_op = "LayerNorm" if "attn_norm.bias" in t or arch in _BIASLESS_LN else "RMSNorm"
        h = x
        if "attn_norm.weight" in t:
            h = self.node(
                f"{s}/attn_norm",
                norm_op,
                [x],
                f"{s}.attn_norm",
                [t["attn_norm.weight"], t.get("attn_norm.bias", "")],
                "norm",
                f"Normalization: {norm_op} before the mixer (from tensor names).",
            )
        ha = h
        if "attn_norm_2.weight" in t:  # Falcon-40B: attention's own norm of the block input
            ha = self.layer_norm(
                f"{s}/attn_norm_2",
                x,
                f"{s}.attn_norm_2",
                t,
                "Normalization: LayerNorm of the block input for attention; attn_norm feeds the "
                "feed-forward (from tensor names).",
            )
        if not any(k.startswith(_MIXER_KEYS) for k in t):  # Nemotron-H: a feed-forward layer
            ffn = [n for k, n in sorted(t.items()) if k.startswith("ffn_") and "norm" not in k]
            act = "ReLU²" if arch.startswith("nemotron_h") else "GELU"
            if "ffn_gate_inp.weight" in t:
                act = f"mixture of {act} experts"
            routed, ffn = self._router(s, t, h, ffn)
            f = self._ffn(
                s, routed, ffn, act, f"Feed-forward, {act}, as the whole layer (from tensor names)."
            )
            return self.node(
                s,
                "Add",
                [x, f],
                f"{s}.output",
                [],
                "residual",
                "Residual connection around the feed-forward.",
            )
        recurrent = "attn_gate.weight" in t or "ssm_in.weight" in t
        if arch in ("qwen35", "qwen35moe", "qwen3next") and recurrent:
            a = self._recurrent_mixer(s, t, h)
        elif arch in ("qwen35", "qwen35moe", "qwen3next"):
            a = self._gated_attention(s, t, h, heads, kv)
        elif "shortconv.in_proj.weight" in t:
            a = self._short_conv(s, t, h)
        elif arch == "falcon-h1":
            a = self._side_by_side(s, t, h, heads, kv)
        else:
            a = self._mixer(s, t, ha, arch, heads, kv)
        if arch in ("phi2", "gptj", "codegen", "command-r", "cohere2", "falcon") or (
            arch == "gptneox" and self.parallel
        ):
            return self._parallel_ffn(s, t, x, h, a)
        # gemma-style: norms before and after each half; OLMo 2: after each half only
        post = "ffn_norm.weight" in t or arch in ("olmo2", "exaone4")
        if post and "post_attention_norm.weight" in t:
            a = self._post_norm(s, "attn", a, t["post_attention_norm.weight"], norm_op, "mixer")
        if "ls1.weight" in t:
            a = self._layer_scale(s, "attn", a, t["ls1.weight"], "attention")
        x = self.node(
            s,
            "Add",
            [x, a],
            f"{s}.attn_residual",
            [],
            "residual",
            "Residual connection around the mixer.",
        )
        if "attn_output_norm.weight" in t:  # BERT's post-norm: after the residual add
            x = self.layer_norm(
                f"{s}/attn_output_norm",
                x,
                f"{s}.attn_output_norm",
                t,
                "Normalization: LayerNorm after the attention residual (post-norm, from "
                "tensor names).",
            )
        ffn = [n for k, n in sorted(t.items()) if k.startswith("ffn_") and "norm" not in k]
        if not ffn:
            return self._rename_last(x, f"{s}.output")
        norm_key = next(
            (k for k in ("ffn_norm.weight", "post_attention_norm.weight") if k in t and not post),
            "ffn_norm.weight" if "ffn_norm.weight" in t else "",
        )
        h = x
        if norm_key:
            h = self.node(
                f"{s}/ffn_norm",
                norm_op,
                [x],
                ffn_norm_value(arch, s),
                [t[norm_key], t.get(norm_key.replace("weight", "bias"), "")],
                "norm",
                f"Normalization: {norm_op} before the feed-forward (from tensor names).",
            )
        # Phi-3 and Granite 4.0 snapshots keep gate and up in one matrix (Granite always gates),
        # and so does DINOv2's SwiGLU feed-forward (mlp.weights_in; its GELU one is mlp.fc1)
        gated = any(k.startswith("ffn_gate") for k in t) or arch in ("phi3", "granite")
        gated = gated or t.get("ffn_up.weight", "").endswith("mlp.weights_in.weight")
        moe = any(k.startswith("ffn_gate_inp") for k in t)
        plain = {"arcee": "ReLU²", "nemotron": "ReLU²", "jais2": "ReLU²", "apertus": "xIELU"}.get(
            arch, "GELU"
        )
        glu = "gated (GeGLU)" if arch == "modern-bert" else "gated (SwiGLU)"
        gated = gated or arch == "modern-bert"  # its up projection holds [input; gate]
        variant = "mixture of experts" if moe else (glu if gated else plain)
        routed, ffn = self._router(s, t, h, ffn)
        f = self._ffn(s, routed, ffn, variant, f"Feed-forward, {variant} (from tensor names).")
        if post and "post_ffw_norm.weight" in t:
            f = self._post_norm(s, "ffn", f, t["post_ffw_norm.weight"], norm_op, "feed-forward")
        if "ls2.weight" in t:
            f = self._layer_scale(s, "ffn", f, t["ls2.weight"], "feed-forward")
        post_ln = "layer_output_norm.weight" in t
        y = self.node(
            s,
            "Add",
            [x, f],
            f"{s}.ffn_residual" if post_ln else f"{s}.output",
            [],
            "residual",
            "Residual connection around the feed-forward.",
        )
        if not post_ln:
            return y
        return self.layer_norm(
            f"{s}/layer_output_norm",
            y,
            f"{s}.output",
            t,
            "Normalization: LayerNorm after the feed-forward residual (post-norm, from tensor "
            "names).",
        )

    def layer_norm(self, scope: str, x: str, out: str, t: Mapping[str, str], text: str) -> str:
        """A LayerNorm node reading ``<key>.weight`` (and ``.bias`` when stored) of ``t``,
        where the key is the scope's last part (``blk.0/attn_output_norm`` ->
        ``attn_output_norm``)."""
        key = scope.rsplit("/", 1)[-1]
        weights = [t[f"{key}.weight"], t.get(f"{key}.bias", "")]
        return self.node(scope, "LayerNorm", [x], out, weights, "norm", text)

    def _router(
        self, s: str, t: dict[str, str], h: str, ffn: list[str]
    ) -> tuple[list[str], list[str]]:
        """A mixture's router node, whose weights feed the experts' sum: (the feed-forward's
        inputs, its weights without the router's); ([h], ffn) for a dense feed-forward."""
        if "ffn_gate_inp.weight" not in t:
            return [h], ffn
        router = t["ffn_gate_inp.weight"]
        router_bias = t.get("ffn_gate_inp.bias", "")  # gpt-oss
        selection = t.get("exp_probs_b.bias", "")  # DeepSeek-V3, GLM-4.5, LFM2-MoE, ...
        steer = (
            " A selection bias is added to the scores to choose the experts, not to weigh them."
            if selection
            else ""
        )
        weights = self.node(
            f"{s}/ffn_router",
            "Router",
            [h],
            f"{s}.ffn_moe_weights",
            [router, router_bias, selection],
            "ffn",
            "Router: scores every expert (a softmax, or a sigmoid, as the family does); each "
            "token keeps its top ones (the others weigh 0) and the feed-forward sums those "
            f"experts' outputs with these weights (from tensor names).{steer}",
            width=self.rows(router),
        )
        return [h, weights], [n for n in ffn if n not in (router, router_bias)]

    def _ffn(self, s: str, h: str | list[str], weights: list[str], variant: str, text: str) -> str:
        out = f"{s}.ffn_output"
        inputs = [h] if isinstance(h, str) else h
        return self.node(
            f"{s}/ffn", "FeedForward", inputs, out, weights, "ffn", text, variant=variant
        )

    def _parallel_ffn(self, s: str, t: dict[str, str], x: str, h: str, a: str) -> str:
        """Phi-2: the feed-forward reads the same norm as attention; GPT-NeoX: its own norm of
        the block input. Both join the residual."""
        ffn = [n for k, n in sorted(t.items()) if k.startswith("ffn_") and "norm" not in k]
        act = "SwiGLU" if "ffn_gate.weight" in t else "GELU"  # Command-R gates, Phi-2 does not
        text = (
            f"Feed-forward, {act}, in parallel with attention on the same norm (from tensor names)."
        )
        if "ffn_norm.weight" in t:
            h = self.layer_norm(
                f"{s}/ffn_norm",
                x,
                f"{s}.ffn_norm",
                t,
                "Normalization: LayerNorm of the block input for the feed-forward (from tensor "
                "names).",
            )
            text = f"Feed-forward, {act}, in parallel with attention (from tensor names)."
        f = self._ffn(s, h, ffn, act, text)
        return self.node(
            s,
            "Add",
            [x, a, f],
            f"{s}.output",
            [],
            "residual",
            "Residual connection: input + attention + feed-forward (parallel block).",
        )

    def _post_norm(self, s: str, part: str, x: str, weight: str, op: str, what: str) -> str:
        """Gemma-style norm of a half's output (``part``: attn or ffn)."""
        return self.node(
            f"{s}/{part}_post_norm",
            op,
            [x],
            f"{s}.{part}_post_norm",
            [weight],
            "norm",
            f"Normalization: {op} of the {what} output (from tensor names).",
        )

    def _layer_scale(self, s: str, part: str, x: str, weight: str, what: str) -> str:
        """DINOv2's layer scale of a half's output (``part``: attn or ffn)."""
        return self.node(
            f"{s}/{part}_layer_scale",
            "Mul",
            [x],
            f"{s}.{part}_scaled",
            [weight],
            "residual",
            f"Layer scale: the {what} output multiplied by a learned vector before the "
            "residual add (DINOv2's layer_scale, BEiT's lambda; from tensor names).",
        )

    def _mixer(
        self, s: str, t: dict[str, str], h: str, arch: str, heads: int | None, kv: int | None
    ) -> str:
        mixer_w = [
            n
            for k, n in sorted(t.items())
            if k.startswith(("attn_", "ssm_")) and not k.startswith("attn_norm")
        ]
        if any(k.startswith("ssm_in") for k in t):
            op, pat = "Mamba", "recurrent"
            text = (
                "Mamba-2 state-space mixer (multi-head, scalar decay per head)"
                if arch == "mamba2"
                else "Selective state-space (Mamba) mixer"
            )
        elif any(k.startswith("ssm_") for k in t):
            op, pat, text = (
                "GatedDeltaNet",
                "recurrent",
                "Gated DeltaNet linear-attention recurrence",
            )
        elif "attn_kv_a_mqa.weight" in t:  # DeepSeek: llama.cpp states one key/value head
            op, pat = "Attention", "attention"
            text = (
                f"Multi-head latent attention (MLA){f' with {heads} heads' if heads else ''}: "
                "keys and values expanded per head from one compressed latent per position"
            )
        else:
            op, pat, text = "Attention", "attention", attention_text(heads, kv)
            layer = s.split(".")[-1]
            rotated = not (layer.isdigit() and int(layer) in self.unrotated)
            if self.rope_factors and rotated:
                mixer_w.append(self.rope_factors)
                text += ", positions rotated with the file's frequency factors (rope_freqs)"
            if "attn_rel_b.weight" in t or "attn_rel_pos_b.weight" in t:  # BEiT
                text += (
                    ", a learned relative-position bias (BEiT's table read through the patch "
                    "window's index) added to its scores"
                )
            if "attn_rel_embd.weight" in t:
                text += (
                    ", disentangled (DeBERTa): content-to-position and position-to-content "
                    "scores from the shared relative-position table (normalised), projected by "
                    "this layer's query and key"
                )
        attrs = {"num_heads": heads, "kv_num_heads": kv} if op == "Attention" and heads else {}
        return self.node(
            f"{s}/attn",
            op,
            [h],
            f"{s}.attn_output",
            mixer_w,
            pat,
            f"{text} (from {arch or 'GGUF'} metadata and tensor names).",
            **attrs,
        )

    def _side_by_side(
        self, s: str, t: dict[str, str], h: str, heads: int | None, kv: int | None
    ) -> str:
        """Falcon-H1: attention and a Mamba-2 mixer read the same norm; their sum is the
        layer's mixer output."""
        att = [n for k, n in sorted(t.items()) if k.startswith("attn_") and k != "attn_norm.weight"]
        ssm = [n for k, n in sorted(t.items()) if k.startswith("ssm_")]
        attrs = {"num_heads": heads, "kv_num_heads": kv} if heads else {}
        a = self.node(
            f"{s}/attn",
            "Attention",
            [h],
            f"{s}.attn_only",
            att,
            "attention",
            f"{attention_text(heads, kv)}, beside the Mamba-2 mixer (from tensor names).",
            **attrs,
        )
        m = self.node(
            f"{s}/ssm",
            "Mamba",
            [h],
            f"{s}.ssm_output",
            ssm,
            "recurrent",
            "Mamba-2 state-space mixer beside attention, on the same norm (from tensor names).",
        )
        return self.node(
            f"{s}/mixers",
            "Add",
            [a, m],
            f"{s}.attn_output",
            [],
            "",
            "Sum of the attention and Mamba-2 outputs (Falcon-H1 runs them side by side).",
        )

    def _rename_last(self, value: str, new: str) -> str:
        node = self.graph.nodes[-1]
        node.outputs = (new,)
        return new

    def head(self, top: dict[str, str], x: str, arch: str, headless: bool = False) -> None:
        headed = "mlm_dense.weight" in top or "cls_out.weight" in top
        if headed and "output_norm.weight" in top:  # the final norm, then a head
            encoder = arch in ("bert", "modern-bert", "esm", "vit")  # (else a decoder's)
            norm = "LayerNorm" if "output_norm.bias" in top or encoder else "RMSNorm"
            x = self.node(
                "output_norm",
                norm,
                [x],
                "enc_output" if encoder else "result_norm",
                [top["output_norm.weight"], top.get("output_norm.bias", "")],
                "norm",
                f"Final {norm}, before the classification or masked-LM head (from tensor names).",
            )
        if "mlm_dense.weight" in top:
            self._mlm_head(top, x)
            return
        if "cls_out.weight" in top:
            self._classifier_head(top, x)
            return
        if "output_norm.weight" not in top and "output.weight" not in top and arch != "opt":
            return  # an encoder (BERT): the last block's output is the model's output
        if arch == "vit":  # ViTModel: its final LayerNorm is its last hidden state
            self.layer_norm("output_norm", x, "result_norm", top, "Final LayerNorm.")
            return
        norm = "LayerNorm" if "output_norm.bias" in top or arch in _BIASLESS_LN else "RMSNorm"
        if "output_norm.weight" in top or arch != "opt":  # (OPT-350m has no final norm)
            x = self.node(
                "output_norm",
                norm,
                [x],
                "result_norm",
                [top.get("output_norm.weight", ""), top.get("output_norm.bias", "")],
                "norm",
                f"Final {norm} (from tensor names).",
            )
        if "output_proj.weight" in top:  # OPT-350m: back to the embeddings' width
            x = self.node(
                "output_proj",
                "Linear",
                [x],
                "result_proj",
                [top["output_proj.weight"]],
                "head",
                "Projection back to the embeddings' width before the tied head (from tensor "
                "names).",
            )
        w = top.get("output.weight") or top.get("token_embd.weight", "")
        tied = "output.weight" not in top
        text = (
            "Language-model head: projects to vocabulary logits"
            + (" using the tied token embedding" if tied else "")
            + " (from tensor names)."
        )
        bias = top.get("output.bias", "") if not tied else ""
        if headless or arch in ("gemma-embedding", "modern-bert", "t5encoder", "clip-text", "bert"):
            return  # embedders, text encoders (pre-LayerNorm BERTs), base models: the final
            # norm's output is theirs
        self.node("output", "LMHead", [x], "result_output", [w, bias], "head", text)

    def sentence_pooling(self, pooling: SentencePooling) -> None:
        """sentence-transformers' Pooling (and Normalize) after the last value drawn."""
        x = self.graph.nodes[-1].outputs[0]
        x = self.node(
            "sentence_pool",
            "Pooling",
            [x],
            "sentence_pooled",
            [],
            "head",
            f"Sentence embedding: {pooling.describe()} (from modules.json).",
            mode=pooling.mode,
        )
        if pooling.normalize:
            self.node(
                "sentence_normalize",
                "Normalize",
                [x],
                "sentence_embedding",
                [],
                "head",
                "The sentence embedding at unit length (sentence-transformers' Normalize).",
            )

    def _classifier_head(self, top: dict[str, str], x: str) -> None:
        """A sequence-classification head (the first position through a pooling layer) or a
        token-classification one (every position), to one logit per label."""
        if "cls_pool.weight" in top:
            normed = "cls_norm.weight" in top  # ModernBERT's: dense, activation, LayerNorm
            read = (
                "the encoder's output (for a sequence pooled: its first position or the mean, "
                "as classifier_pooling says; every position for tokens)"
                if normed
                else "the first position ([CLS])"
            )
            x = self.node(
                "cls_pool",
                "Linear",
                [x],
                "cls_pooled",
                [
                    top["cls_pool.weight"],
                    top.get("cls_pool.bias", ""),
                    top.get("cls_norm.weight", ""),
                    top.get("cls_norm.bias", ""),
                ],
                "head",
                f"Classification head: {read} through a dense layer and its activation"
                + (", then a LayerNorm" if normed else "")
                + " (from tensor names).",
            )
        elif "cls_norm.weight" in top:  # BEiT: the patches' mean through the pooler's norm
            x = self.node(
                "cls_pool",
                "LayerNorm",
                [x],
                "cls_pooled",
                [top["cls_norm.weight"], top.get("cls_norm.bias", "")],
                "head",
                "Classification head: the mean of the patch tokens (the class token left out) "
                "through the pooler's LayerNorm (BEiT's use_mean_pooling, from tensor names).",
            )
        if "dist_out.weight" in top:  # DeiT with its teacher's head: two heads averaged
            self.node(
                "cls_out",
                "Linear",
                [x],
                "result_output",
                [
                    top["cls_out.weight"],
                    top.get("cls_out.bias", ""),
                    top["dist_out.weight"],
                    top.get("dist_out.bias", ""),
                ],
                "head",
                "Classification head: the class token's and the distillation token's logits, "
                "averaged (from tensor names).",
            )
            return
        self.node(
            "cls_out",
            "Linear",
            [x],
            "result_output",
            [top["cls_out.weight"], top.get("cls_out.bias", "")],
            "head",
            "Classification head: one logit per label (from tensor names).",
        )

    def _mlm_head(self, top: dict[str, str], x: str) -> None:
        """BERT's, RoBERTa's and DistilBERT's masked-language-model head."""
        x = self.node(
            "mlm_dense",
            "Linear",
            [x],
            "mlm_dense",
            [top["mlm_dense.weight"], top.get("mlm_dense.bias", "")],
            "head",
            "Masked-LM head: a dense layer and GELU over every position (from tensor names).",
        )
        x = self.layer_norm(
            "mlm_norm", x, "result_norm", top, "Masked-LM head: LayerNorm (from tensor names)."
        )
        tied = "output.weight" not in top
        self.node(
            "output",
            "LMHead",
            [x],
            "result_output",
            [top.get("output.weight") or top["token_embd.weight"], top.get("output.bias", "")],
            "head",
            "Masked-LM head: projects every position to vocabulary logits"
            + (" using the tied token embedding" if tied else "")
            + ", plus a bias (from tensor names).",
        )

    def finish(self) -> Graph:
        g = self.graph
        g.outputs.append(ValueInfo(g.nodes[-1].outputs[0], "float32", (1, "seq", None)))
        seen: dict[str, None] = {}
        for w in self.weights:
            seen[w] = None
        g.initializers = list(seen)
        return g
