"""The graph of a BART snapshot (BartForConditionalGeneration): its encoder as BERT's
post-norm stack, then the decoder's first step from its start token: the embedding with
position row 2 and a LayerNorm, then per layer self-attention, cross-attention to the
encoder's last hidden state and the feed-forward, each followed by a LayerNorm of its residual
sum; the head is the shared embedding plus the final logits bias. Value names are those the
NumPy decoder's forward pass emits (decoder/bart.py ``decode``)."""

from __future__ import annotations

from collections.abc import Callable

from nneditor.model.graph import Graph, ValueInfo
from nneditor.semantic.checkpoint_builder import CheckpointBuilder
from nneditor.semantic.checkpoint_t5 import split_decoder


def bart_graph(
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
    enc = b.embedding(top, "bart")
    for i in sorted(blocks):
        enc = b.decoder_block(i, blocks[i], enc, "bert", heads, heads)
    emb = top.get("token_embd.weight", "")
    y = b.node(
        "dec_embd",
        "Embedding",
        [],
        "dec.inp_embd",
        [emb],
        "embedding",
        "The decoder's start token (decoder_start_token_id) in the shared embedding; the "
        "decoder runs this one step.",
    )
    y = b.node(
        "dec_embd",
        "Add",
        [y],
        "dec.inp_embd_pos",
        [top.get("dec.position_embd.weight", "")],
        "embedding",
        "Plus the decoder's learned position, row 2 (its first).",
    )
    y = _norm(
        b, "dec_embd_norm", [y], "dec.inp_norm", top, "dec.token_embd_norm", "of the embedding"
    )
    for i in sorted(dec_layers):
        t, s = dec_layers[i], f"dec.blk.{i}"
        a = b.node(
            f"{s}/attn",
            "Attention",
            [y],
            f"{s}.attn_output",
            _parts(t, "attn_q", "attn_k", "attn_v", "attn_output"),
            "attention",
            "Causal self-attention over the decoder's tokens (here its start token alone) "
            "(from tensor names).",
        )
        y = _norm(
            b, f"{s}/attn_norm", [y, a], f"{s}.attn_norm", t, "attn_norm", "of the residual sum"
        )
        c = b.node(
            f"{s}/cross_attn",
            "CrossAttention",
            [y, enc],
            f"{s}.cross_attn_output",
            _parts(t, "cross_attn_q", "cross_attn_k", "cross_attn_v", "cross_attn_o"),
            "attention",
            "Cross-attention: queries from the decoder, keys and values from the encoder's last "
            "hidden state (from tensor names).",
        )
        y = _norm(
            b,
            f"{s}/cross_attn_norm",
            [y, c],
            f"{s}.cross_attn_norm",
            t,
            "cross_attn_norm",
            "of the residual sum",
        )
        f = b.node(
            f"{s}/ffn",
            "FeedForward",
            [y],
            f"{s}.ffn_output",
            _parts(t, "ffn_up", "ffn_down"),
            "ffn",
            "Feed-forward, GELU (from tensor names).",
        )
        y = _norm(b, f"{s}/ffn_norm", [y, f], f"{s}.output", t, "ffn_norm", "of the residual sum")
    if "output.bias" not in top:  # a BartModel: no head (BartForConditionalGeneration's
        return _finish(b, hidden, vocab)  # stores its final logits bias)
    b.node(
        "output",
        "LMHead",
        [y],
        "result_output",
        [top.get("output.weight") or emb, top.get("output.bias", "")],
        "head",
        "Vocabulary logits of the first output token: the shared embedding, plus the final "
        "logits bias (from tensor names).",
    )
    return _finish(b, hidden, vocab)


def _finish(b: CheckpointBuilder, hidden: int | None, vocab: int | None) -> Graph:
    g = b.finish()
    g.opsets = {}
    for node in g.nodes:  # the decoder's values have one position, the encoder's seq
        for out in node.outputs:
            one = out.startswith(("dec.", "result_"))
            width = vocab if out == "result_output" else hidden
            g.value_info[out] = ValueInfo(out, "float32", (1, 1 if one else "seq", width))
    g.outputs[0] = g.value_info[g.outputs[0].name]
    return g


def _parts(t: dict[str, str], *keys: str) -> list[str]:
    return [t[f"{k}.{kind}"] for k in keys for kind in ("weight", "bias") if f"{k}.{kind}" in t]


def _norm(
    b: CheckpointBuilder,
    scope: str,
    xs: list[str],
    out: str,
    t: dict[str, str],
    key: str,
    what: str,
) -> str:
    weights = [t.get(f"{key}.weight", ""), t.get(f"{key}.bias", "")]
    return b.node(scope, "LayerNorm", xs, out, weights, "norm", f"LayerNorm {what}.")
