"""The graph of an encoder-decoder T5 snapshot (T5ForConditionalGeneration: t5-small, FLAN-T5,
mT5, UMT5): the encoder stack as T5 encoders draw it, its output norm (``enc_output``), then
the decoder's first step from its start token: per layer self-attention, cross-attention to
the encoder's output and the feed-forward, each after an RMS norm with a residual; the
decoder's final norm and the vocabulary head. Value names are those the NumPy decoder's
forward pass emits (decoder/t5.py ``decode``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from nneditor.model.graph import Graph, ValueInfo
from nneditor.semantic.checkpoint_builder import CheckpointBuilder

_DEC = re.compile(r"^dec\.blk\.(\d+)\.(.+)$")


def split_decoder(top: dict[str, str]) -> tuple[dict[int, dict[str, str]], dict[str, str]]:
    """({decoder layer: {part: stored name}}, the other top-level names) of ``top``."""
    layers: dict[int, dict[str, str]] = {}
    rest: dict[str, str] = {}
    for key, name in top.items():
        m = _DEC.match(key)
        if m:
            layers.setdefault(int(m.group(1)), {})[m.group(2)] = name
        else:
            rest[key] = name
    return layers, rest


def seq2seq_graph(
    title: str,
    blocks: dict[int, dict[str, str]],
    top: dict[str, str],
    heads: int | None,
    rows: Callable[[str], int | None],
    hidden: int | None,
    vocab: int | None,
) -> Graph:
    dec_layers, top = split_decoder(top)
    b = CheckpointBuilder(title, rows)
    x = b.embedding(top, "t5encoder")
    for i in sorted(blocks):
        x = b.decoder_block(i, blocks[i], x, "t5encoder", heads, heads)
    enc = _rms(
        b,
        "enc_output_norm",
        x,
        "enc_output",
        top.get("output_norm.weight", ""),
        "the encoder's output",
    )
    y = b.node(
        "dec_embd",
        "Embedding",
        [],
        "dec.inp_embd",
        [top.get("token_embd.weight", "")],
        "embedding",
        "The decoder's start token (decoder_start_token_id) in the shared embedding; the "
        "decoder runs this one step.",
    )
    for i in sorted(dec_layers):
        y = _decoder_layer(b, i, dec_layers[i], y, enc)
    y = _rms(
        b,
        "dec_output_norm",
        y,
        "result_norm",
        top.get("dec.output_norm.weight", ""),
        "the decoder's output",
    )
    b.node(
        "output",
        "LMHead",
        [y],
        "result_output",
        [top.get("output.weight") or top.get("token_embd.weight", "")],
        "head",
        "Vocabulary logits of the first output token"
        + ("" if "output.weight" in top else " (the shared embedding, tied)")
        + " (from tensor names).",
    )
    return finish_seq2seq(b, hidden, vocab)


def finish_seq2seq(b: CheckpointBuilder, hidden: int | None, vocab: int | None) -> Graph:
    """The built graph with its value types: the decoder's values have one position, the
    encoder's seq."""
    g = b.finish()
    g.opsets = {}
    for node in g.nodes:
        for out in node.outputs:
            one = out.startswith(("dec.", "result_"))
            width = vocab if out == "result_output" else hidden
            g.value_info[out] = ValueInfo(out, "float32", (1, 1 if one else "seq", width))
    g.outputs[0] = g.value_info[g.outputs[0].name]
    return g


def _rms(b: CheckpointBuilder, scope: str, x: str, out: str, weight: str, what: str) -> str:
    return b.node(scope, "RMSNorm", [x], out, [weight], "norm", f"RMS norm of {what}.")


def _decoder_layer(b: CheckpointBuilder, i: int, t: dict[str, str], y: str, enc: str) -> str:
    s = f"dec.blk.{i}"

    def parts(*keys: str) -> list[str]:
        return [t[k] for k in keys if k in t]

    h = _rms(
        b, f"{s}/attn_norm", y, f"{s}.attn_norm", t.get("attn_norm.weight", ""), "the layer input"
    )
    a = b.node(
        f"{s}/attn",
        "Attention",
        [h],
        f"{s}.attn_output",
        parts(
            "attn_q.weight",
            "attn_k.weight",
            "attn_v.weight",
            "attn_output.weight",
            "attn_rel_b.weight",
        ),
        "attention",
        "Causal self-attention over the decoder's tokens (here its start token alone), with "
        "relative-position biases (from tensor names).",
    )
    y = b.node(s, "Add", [y, a], f"{s}.attn_residual", [], "residual", "Residual connection.")
    h = _rms(
        b,
        f"{s}/cross_attn_norm",
        y,
        f"{s}.cross_attn_norm",
        t.get("cross_attn_norm.weight", ""),
        "the residual",
    )
    c = b.node(
        f"{s}/cross_attn",
        "CrossAttention",
        [h, enc],
        f"{s}.cross_attn_output",
        parts(
            "cross_attn_q.weight",
            "cross_attn_k.weight",
            "cross_attn_v.weight",
            "cross_attn_o.weight",
        ),
        "attention",
        "Cross-attention: queries from the decoder, keys and values from the encoder's output; "
        "unscaled, no position bias (from tensor names).",
    )
    y = b.node(s, "Add", [y, c], f"{s}.cross_attn_residual", [], "residual", "Residual connection.")
    h = _rms(b, f"{s}/ffn_norm", y, f"{s}.ffn_norm", t.get("ffn_norm.weight", ""), "the residual")
    f = b.node(
        f"{s}/ffn",
        "FeedForward",
        [h],
        f"{s}.ffn_output",
        parts("ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"),
        "ffn",
        "Feed-forward (gated GELU in T5 1.1, ReLU in T5 1.0) (from tensor names).",
    )
    return b.node(s, "Add", [y, f], f"{s}.output", [], "residual", "Residual connection.")
