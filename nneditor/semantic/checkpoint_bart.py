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
from nneditor.semantic.checkpoint_t5 import finish_seq2seq, split_decoder


def bart_graph(
    title: str,
    blocks: dict[int, dict[str, str]],
    top: dict[str, str],
    heads: int | None,
    rows: Callable[[str], int | None],
    hidden: int | None,
    vocab: int | None,
    scaled: bool = False,
    pre_norm: bool = False,
    head: bool = True,
    norm_first: bool = False,
) -> Graph:
    """``scaled``: embeddings times sqrt(d_model) (Marian's, mBART's, M2M100's); ``pre_norm``:
    mBART's and M2M100's layers, normalising first, each stack ending in a norm; ``head``:
    whether the snapshot has its vocabulary head (a BartModel has none); ``norm_first``: the
    decoder normalises its embedding before adding its position (BlenderbotSmall)."""
    dec_layers, top = split_decoder(top)
    b = CheckpointBuilder(title, rows)
    b.graph.inputs.append(ValueInfo("tokens", "int64", (1, "seq")))
    enc = _embedding(b, "", ["tokens"], top, scaled, "the prompt's tokens")
    for i in sorted(blocks):
        enc = b.decoder_block(i, blocks[i], enc, "bert", heads, heads)
    if pre_norm:
        enc = _norm(b, "enc_output_norm", [enc], "enc_output", top, "output_norm", "at the end")
    emb = top.get("token_embd.weight", "")
    classifier = "cls_out.weight" in top  # BartForSequenceClassification
    start = "the decoder's start token (decoder_start_token_id); the decoder runs this one step"
    if classifier:
        start = "the prompt shifted right behind the decoder's start token"
    y = _embedding(b, "dec.", ["tokens"] if classifier else [], top, scaled, start, norm_first)
    layer = _pre_norm_layer if pre_norm else _post_norm_layer
    for i in sorted(dec_layers):
        y = layer(b, f"dec.blk.{i}", dec_layers[i], y, enc)
    if pre_norm:
        y = _norm(b, "dec_output_norm", [y], "result_norm", top, "dec.output_norm", "at the end")
    if classifier:
        return _classifier(b, top, y, hidden, vocab)
    if not head:  # a BartModel: no head (BartForConditionalGeneration stores its final
        return finish_seq2seq(b, hidden, vocab)  # logits bias)
    bias = " plus the final logits bias" if "output.bias" in top else ""
    b.node(
        "output",
        "LMHead",
        [y],
        "result_output",
        [top.get("output.weight") or emb, top.get("output.bias", "")],
        "head",
        f"Vocabulary logits of the first output token: the shared embedding{bias} (from "
        "tensor names).",
    )
    return finish_seq2seq(b, hidden, vocab)


def _classifier(
    b: CheckpointBuilder, top: dict[str, str], y: str, hidden: int | None, labels: int | None
) -> Graph:
    """BartForSequenceClassification's head: the decoder's state at the prompt's last </s>
    through a dense layer and tanh, then one logit per label."""
    x = b.node(
        "cls_pool",
        "Linear",
        [y],
        "cls_pooled",
        [top.get("cls_pool.weight", ""), top.get("cls_pool.bias", "")],
        "head",
        "Classification head: the decoder's state at the prompt's last </s> through a dense "
        "layer and tanh (from tensor names).",
    )
    b.node(
        "cls_out",
        "Linear",
        [x],
        "result_output",
        [top.get("cls_out.weight", ""), top.get("cls_out.bias", "")],
        "head",
        "Classification head: one logit per label (from tensor names).",
    )
    g = finish_seq2seq(b, hidden, labels)
    for name, info in list(g.value_info.items()):  # the decoder reads every position here
        if name.startswith("dec.") and info.shape:
            g.value_info[name] = ValueInfo(name, info.dtype, (1, "seq", info.shape[-1]))
    g.value_info["cls_pooled"] = ValueInfo("cls_pooled", "float32", (1, 1, hidden))
    return g


_SELF = (
    "Causal self-attention over the decoder's tokens (here its start token alone) (from "
    "tensor names)."
)
_CROSS = (
    "Cross-attention: queries from the decoder, keys and values from the encoder's output "
    "(from tensor names)."
)


def _post_norm_layer(b: CheckpointBuilder, s: str, t: dict[str, str], y: str, enc: str) -> str:
    """BART's and Marian's: each half's output added to its input, then normalised."""
    attn = _parts(t, "attn_q", "attn_k", "attn_v", "attn_output")
    a = b.node(f"{s}/attn", "Attention", [y], f"{s}.attn_output", attn, "attention", _SELF)
    sums = "of the residual sum"
    y = _norm(b, f"{s}/attn_norm", [y, a], f"{s}.attn_norm", t, "attn_norm", sums)
    cross = _parts(t, "cross_attn_q", "cross_attn_k", "cross_attn_v", "cross_attn_o")
    c = b.node(
        f"{s}/cross_attn",
        "CrossAttention",
        [y, enc],
        f"{s}.cross_attn_output",
        cross,
        "attention",
        _CROSS,
    )
    y = _norm(b, f"{s}/cross_attn_norm", [y, c], f"{s}.cross_attn_norm", t, "cross_attn_norm", sums)
    ffn = _parts(t, "ffn_up", "ffn_down")
    f = b.node(f"{s}/ffn", "FeedForward", [y], f"{s}.ffn_output", ffn, "ffn", "Feed-forward.")
    return _norm(b, f"{s}/ffn_norm", [y, f], f"{s}.output", t, "ffn_norm", sums)


def _pre_norm_layer(b: CheckpointBuilder, s: str, t: dict[str, str], y: str, enc: str) -> str:
    """mBART's and M2M100's: each half reads a norm of its input; its output is added."""
    h = _norm(b, f"{s}/attn_norm", [y], f"{s}.attn_norm", t, "attn_norm", "of the input")
    attn = _parts(t, "attn_q", "attn_k", "attn_v", "attn_output")
    a = b.node(f"{s}/attn", "Attention", [h], f"{s}.attn_output", attn, "attention", _SELF)
    y = b.node(s, "Add", [y, a], f"{s}.attn_residual", [], "residual", "Residual connection.")
    h = _norm(
        b,
        f"{s}/cross_attn_norm",
        [y],
        f"{s}.cross_attn_norm",
        t,
        "cross_attn_norm",
        "of the residual",
    )
    cross = _parts(t, "cross_attn_q", "cross_attn_k", "cross_attn_v", "cross_attn_o")
    c = b.node(
        f"{s}/cross_attn",
        "CrossAttention",
        [h, enc],
        f"{s}.cross_attn_output",
        cross,
        "attention",
        _CROSS,
    )
    y = b.node(s, "Add", [y, c], f"{s}.cross_attn_residual", [], "residual", "Residual connection.")
    h = _norm(b, f"{s}/ffn_norm", [y], f"{s}.ffn_norm", t, "ffn_norm", "of the residual")
    ffn = _parts(t, "ffn_up", "ffn_down")
    f = b.node(f"{s}/ffn", "FeedForward", [h], f"{s}.ffn_output", ffn, "ffn", "Feed-forward.")
    return b.node(s, "Add", [y, f], f"{s}.output", [], "residual", "Residual connection.")


def _embedding(
    b: CheckpointBuilder,
    pre: str,
    xs: list[str],
    top: dict[str, str],
    scaled: bool,
    what: str,
    norm_first: bool = False,
) -> str:
    """The encoder's (``pre`` "") or the decoder's ("dec.") embedding: the shared table, the
    scale, the positions (a stored table: BART's read from row 2; else Marian's sinusoids
    from 0), BART's LayerNorm (``norm_first``: before the positions are added)."""
    scope = pre.replace(".", "_")
    x = b.node(
        f"{scope}token_embd",
        "Embedding",
        xs,
        f"{pre}inp_embd",
        [top.get("token_embd.weight", "")],
        "embedding",
        f"Embedding of {what}: rows of the shared table (from tensor names).",
    )
    if scaled and not norm_first:  # (BlenderbotSmall's decoder does not scale)
        text = "Scaled by the square root of d_model."
        x = b.node(f"{scope}token_embd", "Scale", [x], f"{pre}inp_scaled", [], "embedding", text)
    key = f"{pre}token_embd_norm"
    if norm_first and f"{key}.weight" in top:
        x = _norm(b, f"{scope}embd_norm", [x], f"{pre}inp_norm", top, key, "of the embedding")
    table = top.get(f"{pre}position_embd.weight", "")
    where = "a learned table" if table else "fixed sinusoids"
    if not pre:  # the encoder's own value of the positions, then the sum
        pos = b.node(
            "position_embd",
            "Embedding" if table else "Sinusoids",
            ["tokens"],
            "inp_pos",
            [table],
            "embedding",
            f"Position embedding: {where} (from tensor names).",
        )
        x = b.node("token_embd", "Add", [x, pos], "inp_embd_pos", [], "embedding", "Sum.")
    else:
        which = "positions" if xs else "first position"
        text = f"Plus the decoder's {which}: {where} (from tensor names)."
        x = b.node(f"{scope}embd", "Add", [x], f"{pre}inp_embd_pos", [table], "embedding", text)
    if f"{key}.weight" in top and not norm_first:
        x = _norm(b, f"{scope}embd_norm", [x], f"{pre}inp_norm", top, key, "of the embedding")
    return x


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
