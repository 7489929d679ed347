"""Graphs synthesized for checkpoints (GGUF files, Hugging Face snapshots) of known families.

A checkpoint stores weights, not topology; for decoder/encoder families the topology follows
from the architecture metadata and the tensor names. The graph built here is the one the UI
shows and that tracing publishes captures to. Value names follow llama.cpp's naming for every
family, so one scheme serves GGUF and Hugging Face alike (see docs/semantic.md):

    tokens → inp_embd → blk.{i}.attn_norm → blk.{i}.attn_output → blk.{i}.attn_residual
           → blk.{i}.ffn_norm → blk.{i}.ffn_output → blk.{i}.output → … → result_norm
           → result_output (logits)

Ops live in the ``nneditor`` domain (Embedding, RMSNorm, LayerNorm, Attention, GatedDeltaNet,
Mamba, FeedForward, Add, LMHead) and carry ``info["pattern"]`` so the semantic layer labels
them without guessing; their explanations say they come from metadata and tensor names.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nneditor.model.capabilities import Capability
from nneditor.model.document import Document
from nneditor.model.graph import Graph, Node, ValueInfo
from nneditor.semantic.checkpoint_gemma3n import Gemma3nParts
from nneditor.semantic.checkpoint_gemma4 import full_layers, producers
from nneditor.semantic.checkpoint_mixers import HybridMixers, attention_text
from nneditor.semantic.checkpoint_names import ffn_norm_value, with_weight_suffix

DOMAIN = "nneditor"
_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")
#: families whose LayerNorm has a weight but no bias (a bias-less norm is RMSNorm elsewhere)
_BIASLESS_LN = frozenset({"command-r", "cohere2", "olmo", "modern-bert"})


def open_with_graph(path: str | os.PathLike[str]) -> Document:
    """Open an artifact by its contents; a checkpoint gets its synthesized graph. What
    ``nneditor.open`` builds on, for the packages below the public API (the trace worker,
    tokenization), which must not import it."""
    from nneditor.artifacts.registry import open_document
    from nneditor.jobs.collector import paused_collection

    with paused_collection():  # the index built here lives as long as the document
        doc = open_document(Path(path))
        if doc.graph is None and doc.format in ("gguf", "huggingface"):
            attach_graph(doc)
    return doc


def attach_graph(doc: Document) -> bool:
    """Give a checkpoint its synthesized graph (or the reason it has none); True when it got
    one. ``nneditor.open`` and the trace worker both open checkpoints this way."""
    graph, reason = synthesize_graph(doc)
    if graph is None:
        if reason:  # the specific reason replaces the format's general one everywhere
            doc.graph_unavailable_reason = reason
            doc.capabilities = doc.capabilities.replaced(view_graph=Capability(False, reason))
        return False
    doc.graph = graph
    doc.graph_unavailable_reason = ""
    doc.capabilities = doc.capabilities.replaced(
        view_graph=Capability(
            True,
            "synthesized from the checkpoint's architecture metadata and tensor names; "
            "the file itself stores no topology",
        )
    )
    return True


def synthesize_graph(doc: Document) -> tuple[Graph | None, str]:
    """(graph, "") for a recognised checkpoint family, else (None, reason)."""
    if doc.format == "gguf":
        return _from_gguf(doc)
    if doc.format == "huggingface":
        return _from_hf(doc)
    return None, ""


# ------------------------------------------------------------------------------------ GGUF


def _meta_int(meta: Mapping[str, Any], key: str) -> int | None:
    v = meta.get(key)
    try:
        return int(v) if v is not None and not isinstance(v, (list, tuple)) else None
    except (TypeError, ValueError):
        return None


def _from_gguf(doc: Document) -> tuple[Graph | None, str]:
    from nneditor.semantic.family_graphs import gguf_family_graph

    family = gguf_family_graph(doc)  # e.g. a CLIP vision tower (no blk.N stack)
    if family is not None:
        return family
    meta = doc.metadata
    arch = str(meta.get("general.architecture", "") or "")
    names = list(doc.tensors.keys())
    blocks: dict[int, dict[str, str]] = {}
    top: dict[str, str] = {}
    for name in names:
        m = _BLK.match(name)
        if m:
            blocks.setdefault(int(m.group(1)), {})[m.group(2)] = name
        else:
            top[name] = name
    if not blocks:
        return None, (
            f"this GGUF ({arch or 'unknown architecture'}) has no blk.N.* tensors, so NNEditor "
            "cannot lay out a layer stack; its tensors are listed in the catalog"
        )
    heads = _meta_int(meta, f"{arch}.attention.head_count")
    kv = _meta_int(meta, f"{arch}.attention.head_count_kv")
    hidden = _meta_int(meta, f"{arch}.embedding_length")
    title = f"{arch or 'gguf'} (from GGUF metadata)"
    vocab = _head_rows(doc, top)
    parallel = bool(meta.get(f"{arch}.use_parallel_residual", arch == "gptneox"))
    g = _decoder_graph(title, arch, blocks, top, heads, kv, _rows_of(doc), hidden, vocab, parallel)
    used = set(g.initializers)
    unplaced = [n for n in names if n not in used]
    if unplaced:  # listed with the graph's weights, and said: never silently dropped
        g.initializers.extend(unplaced)
        more = f" and {len(unplaced) - 3} more" if len(unplaced) > 3 else ""
        doc.notes.append(
            f"the synthesized {arch or 'GGUF'} graph has no place for {len(unplaced)} tensors "
            f"({', '.join(unplaced[:3])}{more}); they are listed with the weights but no "
            "operator of the drawn graph reads them"
        )
    return g, ""


def _decoder_graph(
    title: str,
    arch: str,
    blocks: dict[int, dict[str, str]],
    top: dict[str, str],
    heads: int | None,
    kv: int | None,
    rows: Callable[[str], int | None] | None = None,
    hidden: int | None = None,
    vocab: int | None = None,
    parallel: bool = False,
) -> Graph:
    """The graph of a decoder stack; ``blocks``/``top`` map llama.cpp's names (``attn_q.weight``,
    ``token_embd.weight``) to the checkpoint's own tensor names."""
    b = _Builder(title, rows)
    b.parallel = parallel
    if arch == "falcon-h1":  # llama.cpp names its feed-forward norm without ".weight"
        blocks = {i: {with_weight_suffix(k): v for k, v in t.items()} for i, t in blocks.items()}
    if arch == "olmo":  # OLMo's LayerNorms have no weights: drawn where they apply all the same
        blocks = {
            i: {"attn_norm.weight": "", "ffn_norm.weight": "", **t} for i, t in blocks.items()
        }
        top = {"output_norm.weight": "", **top}
    if arch in ("lfm2", "lfm2moe") and "token_embd_norm.weight" in top:  # LFM2's last norm
        top = {**top, "output_norm.weight": top["token_embd_norm.weight"]}
        del top["token_embd_norm.weight"]
    x = b.embedding(top, arch)
    if arch == "gemma3n":
        ple_in = b.gemma4_inputs(top, x) or ""
        coefs = b.rows(blocks[min(blocks)].get("altup_predict_coef.weight", "")) or 16
        streams = math.isqrt(coefs) * hidden if hidden else None  # [n * n, n] coefficients
        x = b.altup_inputs(top, x, streams)
        shared = producers(blocks, b.rows)
        for i in sorted(blocks):
            x = b.gemma3n_block(i, blocks[i], x, heads, shared.get(i), ple_in, streams)
        x = b.altup_merge(top, x)
    elif arch == "gemma4":
        ple = b.gemma4_inputs(top, x)
        shared, full = producers(blocks, b.rows), full_layers(blocks, b.rows)
        factors = top.get("rope_freqs.weight", "")
        for i in sorted(blocks):
            rope = factors if i in full else ""
            x = b.gemma4_block(i, blocks[i], x, heads, shared.get(i), ple, rope)
    else:
        for i in sorted(blocks):
            x = b.decoder_block(i, blocks[i], x, arch, heads, kv)
    b.head(top, x, arch)
    g = b.finish()
    g.opsets = {}
    _value_types(g, hidden, vocab, b.widths)
    return g


def _rows_of(doc: Document) -> Callable[[str], int | None]:
    def rows(name: str) -> int | None:
        ref = doc.tensors.get(name)
        return int(ref.shape[0]) if ref is not None and ref.shape else None

    return rows


def _head_rows(doc: Document, top: dict[str, str]) -> int | None:
    name = top.get("output.weight") or top.get("token_embd.weight")
    ref = doc.tensors.get(name) if name else None
    return int(ref.shape[0]) if ref is not None and ref.shape else None


def _value_types(
    g: Graph, hidden: int | None, vocab: int | None, widths: Mapping[str, int] | None = None
) -> None:
    """float32 [1, seq, hidden] for every activation, [1, seq, vocab] for the logits, the
    node's own width where it differs (a recurrent mixer's inner values)."""
    for node in g.nodes:
        own = widths.get(node.outputs[0]) if node.outputs and widths else None
        for out in node.outputs:
            width = vocab if out == "result_output" else (own or hidden)
            g.value_info[out] = ValueInfo(out, "float32", (1, "seq", width))
    if g.outputs:
        g.outputs[0] = g.value_info.get(g.outputs[0].name, g.outputs[0])


#: tensor-name prefixes of a layer's mixer (attention, latent attention, recurrences); a layer
#: with none of them is a feed-forward layer of its own (Nemotron-H)
_MIXER_KEYS = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_kv_a", "ssm_", "shortconv")


class _Builder(HybridMixers, Gemma3nParts):
    def __init__(self, name: str, rows: Callable[[str], int | None] | None = None) -> None:
        self.graph = Graph(name)
        self.weights: list[str] = []
        self.widths: dict[str, int] = {}  # values whose width is not the hidden size
        #: GPT-NeoX blocks run attention and feed-forward in parallel (the file or config says)
        self.parallel = False
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
        if arch.startswith("gemma"):
            x = self.node(
                "token_embd",
                "Scale",
                [x],
                "inp_scaled",
                [],
                "embedding",
                "Gemma scales the embedding by the square root of the hidden size.",
            )
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
        if "token_types.weight" in top:  # BERT: segment embeddings (all segment 0 here)
            types = self.node(
                "token_types",
                "Embedding",
                ["tokens"],
                "inp_types",
                [top["token_types.weight"]],
                "embedding",
                "Token-type (segment) embedding, row 0 for a single segment (from tensor names).",
            )
            x = self.node("token_embd", "Add", [x, types], "inp_embd_types", [])
        if "token_embd_norm.weight" in top:
            x = self.layer_norm(
                "token_embd_norm",
                x,
                "inp_norm",
                top,
                "Normalization: LayerNorm of the summed embeddings (from tensor names).",
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
        if arch in ("phi2", "command-r", "cohere2", "falcon") or (
            arch == "gptneox" and self.parallel
        ):
            return self._parallel_ffn(s, t, x, h, a)
        # gemma-style: norms before and after each half; OLMo 2: after each half only
        post = "ffn_norm.weight" in t or arch in ("olmo2", "exaone4")
        if post and "post_attention_norm.weight" in t:
            a = self.node(
                f"{s}/attn_post_norm",
                norm_op,
                [a],
                f"{s}.attn_post_norm",
                [t["post_attention_norm.weight"]],
                "norm",
                f"Normalization: {norm_op} of the mixer output (from tensor names).",
            )
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
        # Phi-3 and Granite 4.0 snapshots keep gate and up in one matrix (Granite always gates)
        gated = any(k.startswith("ffn_gate") for k in t) or arch in ("phi3", "granite")
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
            f = self.node(
                f"{s}/ffn_post_norm",
                norm_op,
                [f],
                f"{s}.ffn_post_norm",
                [t["post_ffw_norm.weight"]],
                "norm",
                f"Normalization: {norm_op} of the feed-forward output (from tensor names).",
            )
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

    def head(self, top: dict[str, str], x: str, arch: str) -> None:
        if "output_norm.weight" not in top and "output.weight" not in top:
            return  # an encoder (BERT): the last block's output is the model's output
        norm = "LayerNorm" if "output_norm.bias" in top or arch in _BIASLESS_LN else "RMSNorm"
        x = self.node(
            "output_norm",
            norm,
            [x],
            "result_norm",
            [top.get("output_norm.weight", ""), top.get("output_norm.bias", "")],
            "norm",
            f"Final {norm} (from tensor names).",
        )
        w = top.get("output.weight") or top.get("token_embd.weight", "")
        tied = "output.weight" not in top
        text = (
            "Language-model head: projects to vocabulary logits"
            + (" using the tied token embedding" if tied else "")
            + " (from tensor names)."
        )
        bias = top.get("output.bias", "") if not tied else ""
        if arch in ("gemma-embedding", "modern-bert"):  # embedding models: the final norm's
            return  # output is their output
        self.node("output", "LMHead", [x], "result_output", [w, bias], "head", text)

    def finish(self) -> Graph:
        g = self.graph
        g.outputs.append(ValueInfo(g.nodes[-1].outputs[0], "float32", (1, "seq", None)))
        seen: dict[str, None] = {}
        for w in self.weights:
            seen[w] = None
        g.initializers = list(seen)
        return g


# ------------------------------------------------------------------------------------ HF

_HF_STACK = re.compile(
    r"^(?P<prefix>(?:[\w]+\.)*?(?:layers|layer|h|blocks|block))\.(?P<i>\d+)\.(?P<rest>.+)$"
)
_HF_MAP = [
    # (regex on the in-block rest, gguf-style key)
    (
        r"(input_layernorm|ln_1|layernorm_before|self_attn_layer_norm|norm)\.(weight|bias)$",
        "attn_norm.{1}",
    ),
    (
        r"(post_attention_layernorm|ln_2|layernorm_after|final_layer_norm)\.(weight|bias)$",
        "ffn_norm.{1}",
    ),
    (r"(self_attn|attn|attention|mixer|linear_attn|encoder_attn)\.(.+)$", "attn_{1}"),
    (r"(mlp|feed_forward|intermediate|output|fc1|fc2)\.(.+)$", "ffn_{0}_{1}"),
    (r"(fc1|fc2)\.(weight|bias)$", "ffn_{0}_{1}"),
]


def _from_hf(doc: Document) -> tuple[Graph | None, str]:
    if not len(doc.tensors):  # no weights: the snapshot's own reason says what to open
        return None, doc.graph_unavailable_reason
    config = doc.metadata.get("config") or {}
    from nneditor.semantic.family_graphs import family_graph

    family = family_graph(doc, config)
    if family is not None:
        return family
    model_type = str(config.get("model_type", "") or "")
    canonical = _hf_decoder(doc, config, model_type)
    if canonical is not None:
        return canonical, ""
    stacks: dict[str, dict[int, dict[str, str]]] = {}
    top: dict[str, str] = {}
    for name in doc.tensors:
        m = _HF_STACK.match(name)
        if not m:
            top[name] = name
            continue
        rest = m.group("rest")
        key = None
        for rx, fmt in _HF_MAP:
            mm = re.match(rx, rest)
            if mm:
                key = fmt.format(*mm.groups())
                break
        stacks.setdefault(m.group("prefix"), {}).setdefault(int(m.group("i")), {})[
            key or f"attn_other_{rest}"
        ] = name
    if not stacks:
        return None, (
            f"no numbered layer stack found in this {model_type or 'Hugging Face'} checkpoint's "
            "tensor names; without it NNEditor cannot synthesize a topology"
        )
    heads = config.get("num_attention_heads") or config.get("n_head")
    kv = config.get("num_key_value_heads") or heads
    b = _Builder(f"{model_type or 'model'} (from config.json and tensor names)")
    emb = next(
        (
            n
            for n in top
            if re.search(r"(embed_tokens|word_embeddings|wte|embeddings?)\.weight$", n)
        ),
        "",
    )
    b.graph.inputs.append(ValueInfo("tokens", "int64", (1, "seq")))
    x = b.node(
        "embeddings",
        "Embedding",
        ["tokens"],
        "inp_embd",
        [n for n in top if "embed" in n or n.endswith(("wte.weight", "wpe.weight"))] or [emb],
        "embedding",
        "Embedding layer(s) (from tensor names).",
    )
    for s_idx, (_prefix, blocks) in enumerate(
        sorted(stacks.items(), key=lambda kv_: _order(kv_[0]))
    ):
        for i in sorted(blocks):
            label = str(i) if len(stacks) == 1 else f"{s_idx}_{i}"
            x = b.decoder_block(label, blocks[i], x, model_type, heads, kv)
    rest = [n for n in top if n not in b.weights]
    head_w = next(
        (n for n in rest if re.search(r"(lm_head|proj_out|classifier|output)\.weight$", n)), ""
    )
    norm_w = [n for n in rest if re.search(r"(norm|ln_f|layernorm|layer_norm)\.(weight|bias)$", n)]
    x = b.node(
        "output_norm",
        "RMSNorm" if not any(n.endswith("bias") for n in norm_w) else "LayerNorm",
        [x],
        "result_norm",
        norm_w,
        "norm",
        "Final normalization (from tensor names).",
    )
    b.node(
        "output",
        "LMHead",
        [x],
        "result_output",
        [head_w or emb],
        "head",
        "Output head (from tensor names)" + ("" if head_w else "; tied to the embedding") + ".",
    )
    g = b.finish()
    other = [n for n in doc.tensors if n not in set(g.initializers)]
    if other:
        g.initializers.extend(other)
    return g, ""


def _hf_decoder(doc: Document, config: Mapping[str, Any], model_type: str) -> Graph | None:
    """A decoder snapshot whose tensors all have llama.cpp names: the same graph as the GGUF
    llama.cpp's converter makes of it (None when the names do not map)."""
    from nneditor.semantic.checkpoint_names import (
        canonical_names,
        layer_count,
        llama_cpp_arch,
        text_part,
    )

    part = text_part(config, doc.tensors.keys())  # Gemma 4: its text decoder, towers aside
    stored = {n: n for n in doc.tensors}
    if part is not None:
        config, stored = part
        model_type = str(config["model_type"])
    arch = llama_cpp_arch(model_type, config)
    layers = layer_count(config)
    if arch is None or not layers or isinstance(config.get("text_config"), dict):
        return None
    try:
        mapped, unplaced = canonical_names(arch, stored.keys(), layers)
    except Exception:  # gguf-py missing or its table for the arch broken: the generic path
        return None
    mapped = {key: stored[name] for key, name in mapped.items()}
    blocks: dict[int, dict[str, str]] = {}
    top: dict[str, str] = {}
    for key, name in mapped.items():
        m = _BLK.match(key)
        if m:
            blocks.setdefault(int(m.group(1)), {})[m.group(2)] = name
        else:
            top[key] = name
    if not blocks or "token_embd.weight" not in top:
        return None
    heads = config.get("num_attention_heads") or config.get("n_head") or config.get("n_heads")
    kv = config.get("num_key_value_heads") or heads
    title = f"{model_type} (from config.json and tensor names)"
    hidden = config.get("hidden_size") or config.get("n_embd") or config.get("d_model")  # (MPT)
    width = hidden if isinstance(hidden, int) else None
    vocab = _head_rows(doc, top)
    parallel = bool(config.get("use_parallel_residual", arch == "gptneox"))
    g = _decoder_graph(title, arch, blocks, top, heads, kv, _rows_of(doc), width, vocab, parallel)
    used = set(g.initializers)
    g.initializers.extend(n for n in doc.tensors if n not in used)  # unplaced stay listed
    towers = len(doc.tensors) - len(stored)
    if part is not None and towers:
        doc.notes.append(
            f"the graph is this {config['model_type']} release's text decoder; its image and "
            f"audio towers ({towers} tensor{'s' if towers != 1 else ''}) are listed with the "
            "weights but not drawn"
        )
    return g


def _order(prefix: str) -> tuple[int, str]:
    return (1 if "decoder" in prefix else 0, prefix)
